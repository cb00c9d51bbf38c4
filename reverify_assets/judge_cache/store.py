"""The judge-call cache: what a judge answered to an exact request, so that asking again costs nothing.

Content-addressed: the key is a SHA-256 of the endpoint and the request body as sent (the model, the rendered
messages and every sampling parameter), in canonical JSON. The API key is not part of it, and nothing secret is
stored: the replies kept are those the caller redacted. What is kept is the judge's raw answer, not a verdict:
the verdict parser runs on every hit, so a change to the parser or to the labels it reads applies to cached
replies without a call (which is why the parser's version need not be in the key).

One SQLite file (``judge_cache.sqlite`` in the Dagster home, or ``$REVERIFY_JUDGE_CACHE``; ``off`` disables it),
in WAL mode so that concurrent runs and server copies read while one writes; a write waits for another's
rather than failing. Entries are never evicted: delete the file to start afresh.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from reverify_assets.errors import OutputError
from reverify_assets.files.dagster_home import dagster_home

JUDGE_CACHE_ENV = "REVERIFY_JUDGE_CACHE"
CACHE_OFF = "off"
CACHE_FILE_NAME = "judge_cache.sqlite"
# Another process's write holds the file for milliseconds; this much waiting means something is wrong.
BUSY_TIMEOUT_S = 60.0
_TABLE = "judge_replies_v1"  # a new layout gets a new table, never a misread of an old one

log = logging.getLogger("reverify")


def judge_cache_path() -> Path | None:
    """Where the user keeps the cache (``$REVERIFY_JUDGE_CACHE``, else the Dagster home), or None when they turned
    it off there. A command reads it once and hands the answer to what it starts: ``--no-judge-cache``, a recovery
    and the probe's passes run without it whatever this says."""
    chosen = os.environ.get(JUDGE_CACHE_ENV)
    if chosen == CACHE_OFF:
        return None
    return Path(chosen).expanduser().resolve() if chosen else dagster_home() / CACHE_FILE_NAME


def request_key(kind: str, url: str, body: Mapping[str, Any]) -> bytes:
    """``kind`` keeps apart replies stored in different forms (a parsed reply, a raw HTTP body)."""
    material = orjson.dumps({"kind": kind, "url": url, "body": body}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(material).digest()


class JudgeCallCache:
    def __init__(self, path: Path, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL stays consistent; a power cut may lose the newest
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {_TABLE} (key BLOB PRIMARY KEY, reply BLOB NOT NULL, "
                "stored_at REAL NOT NULL) WITHOUT ROWID"
            )
        except (sqlite3.Error, OSError) as exc:
            raise OutputError(
                f"the judge-call cache {path} cannot be used ({exc}): delete it, point {JUDGE_CACHE_ENV} "
                "elsewhere, or run with --no-judge-cache",
                path=path,
            ) from None
        self._writes_failed = False

    def __enter__(self) -> JudgeCallCache:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def get(self, key: bytes) -> bytes | None:
        try:
            found = self._db.execute(f"SELECT reply FROM {_TABLE} WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            log.warning("reverify: the judge-call cache %s could not be read (%s): the judge is asked", self.path, exc)
            return None
        return None if found is None else bytes(found[0])

    def put(self, key: bytes, reply: bytes) -> None:
        """A reply that cannot be stored (a full disk) is still the caller's answer: warned about once, not raised."""
        try:
            self._db.execute(
                f"INSERT OR REPLACE INTO {_TABLE} (key, reply, stored_at) VALUES (?, ?, ?)", (key, reply, time.time())
            )
        except sqlite3.Error as exc:
            if not self._writes_failed:
                log.warning("reverify: the judge-call cache %s could not be written (%s)", self.path, exc)
            self._writes_failed = True
