"""``reverify judge-serve`` in the background for a test module, switched between behaviours through /control."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tests.support.cli import REVERIFY

START_LIMIT_S = 60


@dataclass
class LocalJudge:
    url: str
    process: subprocess.Popen[bytes]
    logs: list[Path]

    def _call(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else orjson.dumps(body)
        request = urllib.request.Request(f"{self.url}{path}", data=data, method="GET" if body is None else "POST")
        with urllib.request.urlopen(request, timeout=10) as reply:
            return orjson.loads(reply.read())

    def control(self, **knobs: Any) -> dict[str, Any]:
        defaults = {
            "fail_status": 503,
            "fail_share": 0.0,
            "flip_share": 0.0,
            "outage": None,
            "latency_ms": 0,
            "seed": 0,
            "rate_limit_rps": None,
        }
        return self._call("/control", defaults | knobs | {"reset_stats": True})

    def stats(self) -> dict[str, Any]:
        return self._call("/stats")


@contextmanager
def judge_serve(logs_dir: Path, *flags: str, env: Mapping[str, str] | None = None) -> Iterator[LocalJudge]:
    """``reverify judge-serve --port 0 FLAGS`` until the block ends; its output goes to ``logs_dir``."""
    stdout, stderr = logs_dir / "stdout.txt", logs_dir / "stderr.txt"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            [REVERIFY, "judge-serve", "--port", "0", *flags], stdout=out, stderr=err, env={**os.environ, **(env or {})}
        )
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while not (found := re.search(r"judge model listening on (http://127\.0\.0\.1:\d+)", stdout.read_text())):
            assert process.poll() is None and time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.05)
        yield LocalJudge(found.group(1), process, [stdout, stderr])
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0, stderr.read_text()
    assert "judge model stopped" in stdout.read_text()
