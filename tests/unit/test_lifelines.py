"""Children that must not outlive their caller: the key scans and the servers, whatever kills the caller."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from reverify_assets.config.topology import ServerBlock
from reverify_assets.processes.child_python import child_environment
from reverify_assets.verifier.launcher import prestarted_servers
from tests.support.process_tree import descendants, kill_all, survivors

CALLER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from reverify_assets.keys.scan_process import ScanProcess

    fifo, scratch = Path(sys.argv[1]), Path(sys.argv[2])
    scan = ScanProcess("rollouts", fifo, None, scratch / "rollouts.keys", scratch=scratch)
    print("started", flush=True)
    time.sleep(600)
    """
)


def test_a_key_scan_whose_caller_is_killed_removes_its_scratch_folder_and_exits(tmp_path: Path) -> None:
    # A FIFO nobody writes to: the scan waits on it for ever, as a scan of a big file runs long after its caller.
    fifo, scratch = tmp_path / "rollouts.jsonl", tmp_path / "start-up"
    os.mkfifo(fifo)
    scratch.mkdir()
    (scratch / "materialized_inputs.parquet").write_bytes(b"what the caller wrote there")
    caller = subprocess.Popen(
        [sys.executable, "-c", CALLER, str(fifo), str(scratch)],
        stdout=subprocess.PIPE,
        text=True,
        env=child_environment(),
    )
    assert caller.stdout is not None and caller.stdout.readline() == "started\n"
    scans = descendants(caller.pid)
    try:
        assert [scan.command.split()[3] for scan in scans] == ["reverify_assets.keys.scan_process"]
        caller.kill()
        caller.wait()
        assert survivors(scans, within=2) == []
        assert not scratch.exists()
    finally:
        kill_all(scans)


def test_built_in_servers_start_outside_the_callers_process_group() -> None:
    """A terminal's Ctrl-C goes to its whole foreground group: one that reached a starting server read as a server
    that failed to start. The caller stops its servers itself."""
    with prestarted_servers([ServerBlock("mcqa", "mcqa", {})], judge_cache=None) as pool:
        child = pool.idle[0]
        assert os.getpgid(child.process.pid) == child.process.pid != os.getpgid(0)
