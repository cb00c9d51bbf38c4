"""A NeMo Gym server's metrics with NeMo Gym's maths done here: only its own hooks are run by the server.

``/aggregate_metrics`` of 10,000 rows costs NeMo Gym's server about 6 s of CPU, nearly all of it the reward profile
that :class:`MetricsAccumulator` computes bit for bit as the rows stream past. What it cannot compute is what the
server's hooks (``compute_metrics``, ``compute_repeat_metrics``, ``get_key_metrics``) make of the rows, so those are
asked of the server through the routes our bootstrap adds (``gym.server_bootstrap``): the rows are streamed to it as
the CLI reads them, so that it parses them on its core while the CLI computes on its own, and its answers come
back when the rows end. A hook the server does not override is NeMo Gym's default, which the accumulator has: a
server with none of its own is sent nothing.

The hooks are called synchronously, from inside the accumulator, as NeMo Gym's route calls them: plain blocking
HTTP to a server on this machine, without a time limit once connected (a hook may take long over a big run), as
``/aggregate_metrics`` is asked.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from reverify_assets.errors import ReverifyError
from reverify_assets.metrics.accumulator import MetricsAccumulator
from reverify_assets.metrics.hooks import Row, StreamingHook
from reverify_assets.metrics.names import ROLLOUT_INDEX
from reverify_assets.verifier.client import AggregateMetricsFailed

ROUTE = "/reverify_metrics"
HOOKS = ("compute_metrics", "get_key_metrics", "compute_repeat_metrics")  # the order NeMo Gym calls them in
# The server runs a repeat's hook with the rows, in /compute, and get_key_metrics after: NeMo Gym calls them the other
# way round, which a server that overrides both could tell (by state it keeps on itself). It is asked
# /aggregate_metrics instead (finance_agent_v2 alone, of the bundled servers).
OUT_OF_ORDER = frozenset({"get_key_metrics", "compute_repeat_metrics"})
ROW_HOOKS = frozenset({"compute_metrics", "compute_repeat_metrics"})  # those that read the rows
CONNECT_TIMEOUT_S = 30.0
SEND_BYTES = 1 << 20


@dataclass(frozen=True)
class ServerHooks:
    """The hooks a server overrides, at ``url``."""

    server: str
    url: str
    overridden: frozenset[str]

    def in_order(self) -> list[str]:
        return [hook for hook in HOOKS if hook in self.overridden]

    def reads_rows(self) -> bool:
        return bool(self.overridden & ROW_HOOKS)

    def accumulator(self, rows: RowsToServer | None) -> MetricsAccumulator:
        """An accumulator whose maths are ours and whose hooks are the server's; ``rows``: the group's rows on their
        way to the server (None when no hook reads them)."""
        if self.reads_rows() and rows is None:
            raise ValueError(f"{self.server}'s hooks read the rows: they must be sent")
        return MetricsAccumulator(
            compute_metrics=StreamingHook(lambda: _ComputedByServer(rows))
            if rows is not None and "compute_metrics" in self.overridden
            else None,
            compute_repeat_metrics=_RepeatMetrics(rows)
            if rows is not None and "compute_repeat_metrics" in self.overridden
            else None,
            get_key_metrics=self._key_metrics if "get_key_metrics" in self.overridden else None,
        )

    def _key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        status, payload = _post(self, "key_metrics", json.dumps(agent_metrics).encode())
        reply = _reply(self, "key_metrics", status, payload)
        # As the hook left them: inside NeMo Gym's route it may change them.
        agent_metrics.clear()
        agent_metrics.update(_mapping(reply.get("agent_metrics"), self, "get_key_metrics"))
        return _mapping(reply.get("key_metrics"), self, "get_key_metrics")


class RowsToServer:
    """A group's rows streamed to the server's ``/reverify_metrics_compute`` (chunked, as the CLI reads them), and
    its hooks' answers once they end."""

    def __init__(self, hooks: ServerHooks) -> None:
        self.hooks = hooks
        self._connection = _connected(hooks, "compute")
        self._buffer = bytearray()
        self._answers: dict[str, Any] | None = None
        self._failure: ReverifyError | None = None  # once failed, the same answer: the connection is gone
        try:
            self._connection.putrequest("POST", _path(hooks, "compute"))
            self._connection.putheader("Content-Type", "application/x-ndjson")
            self._connection.putheader("Transfer-Encoding", "chunked")
            self._connection.endheaders()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise _unreachable(hooks, "compute", exc) from exc

    def add(self, line: bytes) -> None:
        """One row, as a JSON line."""
        self._buffer += line
        if len(self._buffer) >= SEND_BYTES:
            self._send_chunk()

    def answers(self) -> dict[str, Any]:
        """The hooks' answers: the rows end with the first call."""
        if self._failure is not None:
            raise self._failure
        if self._answers is None:
            try:
                if self._buffer:
                    self._send_chunk()
                self._connection.send(b"0\r\n\r\n")
                reply = self._connection.getresponse()
                status, payload = reply.status, reply.read()
                self._answers = _reply(self.hooks, "compute", status, payload)
            except (OSError, http.client.HTTPException) as exc:
                self._failure = self._failed(exc)
                raise self._failure from exc
            except ReverifyError as exc:
                self._failure = exc
                raise
            finally:
                self.close()
        return self._answers

    def answer(self, hook: str) -> Any:
        answers = self.answers()
        if hook not in answers:
            raise AggregateMetricsFailed(self.hooks.server, f"{self.hooks.url}{ROUTE}_compute", f"no {hook} answer")
        return answers[hook]

    def close(self) -> None:
        self._connection.close()

    def _send_chunk(self) -> None:
        if self._failure is not None:
            raise self._failure
        try:
            self._connection.send(b"%x\r\n%b\r\n" % (len(self._buffer), self._buffer))
        except (OSError, http.client.HTTPException) as exc:
            self._failure = self._failed(exc)
            raise self._failure from exc
        self._buffer.clear()

    def _failed(self, exc: Exception) -> ReverifyError:
        """What the server said when it stopped reading (a refusal, its own error), else what the socket said."""
        try:
            reply = self._connection.getresponse()
            return AggregateMetricsFailed(
                self.hooks.server, f"{self.hooks.url}{ROUTE}_compute", f"HTTP {reply.status}: {_text(reply.read())}"
            )
        except (OSError, http.client.HTTPException):
            return _unreachable(self.hooks, "compute", exc)
        finally:
            self.close()


class _ComputedByServer:
    """``compute_metrics`` as a reducer that keeps nothing: the server has the rows."""

    def __init__(self, rows: RowsToServer) -> None:
        self._rows = rows

    def add_task(self, rollouts: Sequence[Row]) -> None:
        pass

    def finish(self) -> dict[str, Any]:
        return _mapping(self._rows.answer("compute_metrics"), self._rows.hooks, "compute_metrics")


class _RepeatMetrics:
    """``compute_repeat_metrics`` of the repeat whose tasks it is given, as the server computed it."""

    def __init__(self, rows: RowsToServer) -> None:
        self._rows = rows

    def __call__(self, tasks: Sequence[Sequence[Row]]) -> dict[str, Any]:
        rollout_index = tasks[0][0].get(ROLLOUT_INDEX, 0)
        for repeat, answer in self._rows.answer("compute_repeat_metrics"):
            if repeat == rollout_index:
                return _mapping(answer, self._rows.hooks, "compute_repeat_metrics")
        hooks = self._rows.hooks
        raise AggregateMetricsFailed(hooks.server, f"{hooks.url}{ROUTE}_compute", f"no repeat {rollout_index!r}")


def server_hooks(server: str, url: str) -> ServerHooks | None:
    """The hooks of the server at ``url``; None when it must be asked ``/aggregate_metrics`` instead: it answers that
    with code of its own, is another NeMo Gym's, lacks our route (a server of several workers), or overrides hooks
    we would call out of NeMo Gym's order (``OUT_OF_ORDER``)."""
    unasked = ServerHooks(server, url, frozenset())
    connection = _connected(unasked, "")
    try:
        connection.request("GET", _path(unasked, ""))
        reply = connection.getresponse()
        status, payload = reply.status, reply.read()
    except (OSError, http.client.HTTPException) as exc:
        raise _unreachable(unasked, "", exc) from exc
    finally:
        connection.close()
    if status in (404, 405):
        return None
    try:
        answer = json.loads(payload) if status == 200 else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("overridden"), list):
        raise AggregateMetricsFailed(server, f"GET {url}{ROUTE}", f"HTTP {status}: {_text(payload)}")
    overridden = frozenset(answer["overridden"]) & set(HOOKS)
    return None if OUT_OF_ORDER <= overridden else ServerHooks(server, url, overridden)


def _path(hooks: ServerHooks, route: str) -> str:
    return f"{urlsplit(hooks.url).path.rstrip('/')}{ROUTE}{'_' if route else ''}{route}"


def _connected(hooks: ServerHooks, route: str) -> http.client.HTTPConnection:
    parts = urlsplit(hooks.url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=CONNECT_TIMEOUT_S)
    try:
        connection.connect()
    except OSError as exc:
        raise _unreachable(hooks, route, exc) from exc
    assert connection.sock is not None
    connection.sock.settimeout(None)  # connected: a hook may take as long as it takes
    return connection


def _post(hooks: ServerHooks, route: str, body: bytes) -> tuple[int, bytes]:
    connection = _connected(hooks, route)
    try:
        connection.request("POST", _path(hooks, route), body, {"Content-Type": "application/json"})
        reply = connection.getresponse()
        return reply.status, reply.read()
    except (OSError, http.client.HTTPException) as exc:
        raise _unreachable(hooks, route, exc) from exc
    finally:
        connection.close()


def _reply(hooks: ServerHooks, route: str, status: int, payload: bytes) -> dict[str, Any]:
    where = f"{hooks.url}{ROUTE}_{route}"
    if status != 200:
        raise AggregateMetricsFailed(hooks.server, where, f"HTTP {status}: {_text(payload)}")
    try:
        reply = json.loads(payload)  # NaN and infinities as the hook gave them
    except ValueError as exc:
        raise AggregateMetricsFailed(hooks.server, where, f"the reply is not JSON: {exc}") from exc
    if not isinstance(reply, dict):
        raise AggregateMetricsFailed(hooks.server, where, f"the reply is not a JSON object: {_text(payload)}")
    return reply


def _unreachable(hooks: ServerHooks, route: str, exc: Exception) -> ReverifyError:
    where = f"{hooks.url.rstrip('/')}{ROUTE}{'_' if route else ''}{route}"
    return AggregateMetricsFailed(hooks.server, where, f"the connection failed: {exc!r}")


def _mapping(value: Any, hooks: ServerHooks, hook: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        reason = f"{hook} gave {type(value).__name__}, not a dict"
        raise AggregateMetricsFailed(hooks.server, f"{hooks.url}{ROUTE}", reason)
    return value


def _text(payload: bytes) -> str:
    return payload[:500].decode(errors="replace")
