"""A short, stable hash of the verifier configuration that scored a row."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import orjson

from reverify_assets.config.topology import RESOURCES_SERVERS, ServerBlock

# Fields that say where a server runs or how patiently it is called, not how it grades: changing them
# must not make results stale. (A judge's base URL and model stay in: another judge is another grader.)
PLACEMENT_FIELDS = frozenset(
    {
        "url",
        "port",
        "host",
        "max_attempts",
        "retry_base_wait_s",
        "retry_max_wait_s",
        "timeout_s",
        "judge_endpoint_max_concurrency",
        # How many copies of a server run, and how long one may take to start.
        "replicas",
        "startup_timeout_s",
        # A NeMo Gym model server's (responses_api_models/openai_model): its key and how often it retries.
        "openai_api_key",
        "max_http_attempts",
        "max_concurrent_requests",
    }
)


def verifier_config_hash(blocks: Iterable[ServerBlock]) -> str:
    canonical = [
        {
            "instance": block.instance,
            "type": block.type,
            "fields": {k: v for k, v in block.fields.items() if k not in PLACEMENT_FIELDS},
        }
        # A resources server block hashes as it always did: old results keep their config hash.
        | ({"kind": block.kind} if block.kind != RESOURCES_SERVERS else {})
        for block in sorted(blocks, key=lambda b: (b.kind, b.instance))
    ]
    return hashlib.sha256(orjson.dumps(canonical, option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]
