"""A NeMo Gym server's metrics with NeMo Gym's maths done here: only its own hooks are run by the server.

``/aggregate_metrics`` of 10,000 rows costs NeMo Gym's server about 6 s of CPU, nearly all of it the reward profile
that :class:`MetricsAccumulator` computes bit for bit as the rows stream past. What it cannot compute is what the
server's hooks (``compute_metrics``, ``compute_repeat_metrics``, ``get_key_metrics``) make of the rows, so each is
asked of the server through the ``/reverify_metrics`` route our bootstrap adds (``gym.server_bootstrap``), the rows
read by the server from the file the CLI spools them to. A hook the server does not override is NeMo Gym's default,
which the accumulator has: a server with none of its own is never asked anything.

The hooks are called synchronously, from inside the accumulator, as NeMo Gym's route calls them; the requests are
plain blocking HTTP to a server on this machine, without a time limit once connected (a hook may take long over a
big run), as ``/aggregate_metrics`` is asked.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from reverify_assets.errors import ReverifyError
from reverify_assets.metrics.accumulator import MetricsAccumulator
from reverify_assets.metrics.hooks import Row, StreamingHook
from reverify_assets.metrics.names import ROLLOUT_INDEX
from reverify_assets.verifier.client import AggregateMetricsFailed

ROUTE = "/reverify_metrics"
# The NeMo Gym whose metrics maths the accumulator reproduces; another's server is asked /aggregate_metrics.
REPRODUCED_NEMO_GYM = "0.7.0"
HOOKS = ("compute_metrics", "get_key_metrics", "compute_repeat_metrics")  # the order NeMo Gym calls them in
CONNECT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ServerHooks:
    """The hooks a server overrides, at ``url``; each asked of it over the rows of the JSONL file ``rows``."""

    server: str
    url: str
    overridden: frozenset[str]

    def accumulator(self, rows: Path) -> MetricsAccumulator:
        """An accumulator whose maths are ours and whose hooks are the server's, over the rows of ``rows`` (complete
        by the time the answer is made)."""
        return MetricsAccumulator(
            compute_metrics=StreamingHook(lambda: _ComputedByServer(self, rows))
            if "compute_metrics" in self.overridden
            else None,
            compute_repeat_metrics=_RepeatMetrics(self, rows) if "compute_repeat_metrics" in self.overridden else None,
            get_key_metrics=self._key_metrics if "get_key_metrics" in self.overridden else None,
        )

    def in_order(self) -> list[str]:
        return [hook for hook in HOOKS if hook in self.overridden]

    def _key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        reply = self.call({"hook": "get_key_metrics", "agent_metrics": agent_metrics})
        # As the hook left them: inside NeMo Gym's route it may change them.
        changed = _mapping(reply.get("agent_metrics"), self, "get_key_metrics")
        agent_metrics.clear()
        agent_metrics.update(changed)
        return _mapping(reply["answer"], self, "get_key_metrics")

    def call(self, body: Mapping[str, Any]) -> dict[str, Any]:
        status, payload = _request(self.url, "POST", json.dumps(body).encode())
        where = f"{self.url}{ROUTE} ({body['hook']})"
        if status != 200:
            raise AggregateMetricsFailed(self.server, where, f"HTTP {status}: {_text(payload)}")
        try:
            reply = json.loads(payload)  # NaN and infinities as the hook gave them
        except ValueError as exc:
            raise AggregateMetricsFailed(self.server, where, f"the reply is not JSON: {exc}") from exc
        if not isinstance(reply, dict) or "answer" not in reply:
            raise AggregateMetricsFailed(self.server, where, f"the reply has no answer: {_text(payload)}")
        return reply


class _ComputedByServer:
    """``compute_metrics`` as a reducer that keeps nothing: the server reads the rows from the spool."""

    def __init__(self, hooks: ServerHooks, rows: Path) -> None:
        self._hooks, self._rows = hooks, rows

    def add_task(self, rollouts: Sequence[Row]) -> None:
        pass

    def finish(self) -> dict[str, Any]:
        answer = self._hooks.call({"hook": "compute_metrics", "rows": str(self._rows)})["answer"]
        return _mapping(answer, self._hooks, "compute_metrics")


class _RepeatMetrics:
    """``compute_repeat_metrics`` of the repeat whose tasks it is given, computed by the server from the spool."""

    def __init__(self, hooks: ServerHooks, rows: Path) -> None:
        self._hooks, self._rows = hooks, rows

    def __call__(self, tasks: Sequence[Sequence[Row]]) -> dict[str, Any]:
        rollout_index = tasks[0][0].get(ROLLOUT_INDEX, 0)
        body = {"hook": "compute_repeat_metrics", "rows": str(self._rows), "rollout_index": rollout_index}
        return _mapping(self._hooks.call(body)["answer"], self._hooks, "compute_repeat_metrics")


def server_hooks(server: str, url: str) -> ServerHooks | None:
    """The hooks of the server at ``url``; None when it must be asked ``/aggregate_metrics`` instead: it answers that
    with code of its own, is another NeMo Gym's, or lacks our route (a server of several workers)."""
    status, payload = _request(url, "GET")
    if status in (404, 405):
        return None
    try:
        reply = json.loads(payload) if status == 200 else None
    except ValueError:
        reply = None
    if not isinstance(reply, dict) or not isinstance(reply.get("overridden"), list):
        raise AggregateMetricsFailed(
            server, f"{url}{ROUTE}", f"HTTP {status}: {payload[:500].decode(errors='replace')}"
        )
    if reply.get("nemo_gym") != REPRODUCED_NEMO_GYM:
        return None
    return ServerHooks(server, url, frozenset(reply["overridden"]) & set(HOOKS))


def _request(url: str, method: str, body: bytes | None = None) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=CONNECT_TIMEOUT_S)
    try:
        connection.connect()
        assert connection.sock is not None
        connection.sock.settimeout(None)  # connected: a hook may take as long as it takes
        headers = {"Content-Type": "application/json"} if body is not None else {}
        connection.request(method, f"{parts.path.rstrip('/')}{ROUTE}", body=body, headers=headers)
        reply = connection.getresponse()
        return reply.status, reply.read()
    except OSError as exc:
        raise ReverifyError(f"resources server at {url}: {method} {ROUTE}: {exc}") from exc
    finally:
        connection.close()


def _mapping(value: Any, hooks: ServerHooks, hook: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise AggregateMetricsFailed(
            hooks.server, f"{hooks.url}{ROUTE}", f"{hook} gave {type(value).__name__}, not a dict"
        )
    return value


def _text(payload: bytes) -> str:
    return payload[:500].decode(errors="replace")
