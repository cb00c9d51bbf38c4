"""Where `reverify run` spends its start-up, and how fast it reports a mistake (issue 5, item 4).

Target: the first /verify request leaves within 2 s of the command starting (Dagster import and server start
included), and an error in the flags, the config or an input file is reported in under 2 s.

For ``--repeat`` runs of ``reverify run`` on the given files (a fresh DAGSTER_HOME each) it prints, as
seconds after the command started:

* the built-in server's process first seen and its socket first seen listening (``/proc``, polled every
  10 ms: the child's own fds matched against the LISTEN rows of its ``/proc/<pid>/net/tcp*``);
* the output file created and first grown: the first /verify *answered* (``output_watch.py``), a few
  milliseconds after the first request left;
* Dagster's own record: the run's start and every step's start and end (``dagster_steps.py``'s events).

One more run, the probe, runs the same command in a Python process that first starts a thread polling
``sys.modules`` every 10 ms, to time the imports: the interpreter up (the probe's first line), the CLI module
imported, and Dagster's layer imported (``reverify_assets.defs.materialization`` executed to its end). The
probe costs the run a little; its other figures are printed too but only the plain runs are the headline.

By default a run is killed once its first row is written: start-up is the subject, and
the rest of a 100k run takes 20 s. ``--full`` lets every run finish.

Then Dagster alone (``dagster_floor.py``, unless ``--no-floor``): as many fresh interpreters running four empty
assets shaped like the run's, and when the fourth step began: the floor under the first request, and what the
command adds above it.

Then the error paths, each timed from command start to exit (non-zero expected) with the message printed:
a misspelt flag, a bad config value, a missing --inputs file, malformed JSON at line 3 of the inputs and a
duplicate key at the end of the rollouts (copies of the given files, in the work directory).

Every run holds the benchmark lock (``bench_lock.py``) and waits for a quiet machine. Prints, asserts nothing.

    .venv/bin/python benchmarks/startup_profile.py --data DIR | --inputs F --rollouts F
        [--config configs/mcqa.yaml] [++override ...] [--concurrency 64] [--repeat 3] [--full]
        [--skip-errors] [--no-probe] [--no-floor] [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from bench_lock import exclusive
from dagster_floor import measure_floor, median_floor, print_floor
from dagster_steps import RunWindows, read_run_windows
from output_watch import OutputWatcher
from process_memory import machine_cpu_seconds, wait_until_quiet

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = REPO / "configs" / "mcqa.yaml"
DEFAULT_OVERRIDES = ("++mcqa.resources_servers.mcqa.grading_mode=lenient_boxed",)
SERVER_MODULE_MARK = "reverify_assets.servers"  # in the command line of every built-in server process
TARGET_S = 2.0
_PROC = Path("/proc")
# The probe's markers: a module name and an attribute its body defines last-ish, i.e. "executed to its end".
PROBE_MARKS = (
    ("CLI imported", "reverify_assets.cli.main", "main"),
    ("Dagster layer imported", "reverify_assets.defs.materialization", "materialize_rescoring"),
)


# --- measuring one run from outside ---------------------------------------------------------------------------


def _descendants(root: int) -> list[int]:
    """Every process below ``root`` (this kernel has no /proc/<pid>/task/<tid>/children: walk the ppids)."""
    parents: dict[int, list[int]] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _listening(pid: int) -> bool:
    """Whether ``pid`` holds a TCP socket in state LISTEN."""
    try:
        inodes = {
            link[len("socket:[") : -1]
            for fd in (_PROC / str(pid) / "fd").iterdir()
            if (link := os.readlink(fd)).startswith("socket:[")
        }
        for table in ("tcp", "tcp6"):
            for row in (_PROC / str(pid) / "net" / table).read_text().splitlines()[1:]:
                cols = row.split()
                if cols[3] == "0A" and cols[9] in inodes:
                    return True
    except OSError:
        pass
    return False


@dataclass
class ServerSeen:
    pid: int
    spawned: float  # perf_counter when first seen running the server module
    listening: float | None = None


class ServerWatch:
    """Polls the CLI's process tree every ``interval_s`` for built-in server processes and their listen sockets."""

    def __init__(self, root: int, interval_s: float = 0.01) -> None:
        self.root = root
        self.interval_s = interval_s
        self.servers: dict[int, ServerSeen] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="server-watch", daemon=True)

    def __enter__(self) -> ServerWatch:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.perf_counter()
            for pid in _descendants(self.root):
                if pid not in self.servers:
                    try:
                        command = (_PROC / str(pid) / "cmdline").read_bytes()
                    except OSError:
                        continue
                    if SERVER_MODULE_MARK.encode() in command:
                        self.servers[pid] = ServerSeen(pid, now)
            for seen in self.servers.values():
                if seen.listening is None and _listening(seen.pid):
                    seen.listening = now
            self._stop.wait(self.interval_s)

    @property
    def first(self) -> ServerSeen | None:
        """The verify step's server (a later one is the aggregate step's)."""
        return min(self.servers.values(), key=lambda seen: seen.spawned, default=None)


@dataclass
class StartupRun:
    label: str
    exit_code: int
    started: float  # perf_counter
    started_unix: float
    ended: float
    server_spawned: float | None
    server_listening: float | None
    output_created: float | None
    first_row: float | None
    windows: RunWindows | None
    step_starts: dict[str, float]  # unix; steps still running when the run was stopped have no end
    machine_busy_s: float  # CPU seconds all cores spent busy during the run, its own processes included
    probe: dict[str, float] = field(default_factory=dict)  # probe mark -> unix time

    def rel(self, moment: float | None) -> float | None:
        return None if moment is None else moment - self.started

    def rel_unix(self, moment: float | None) -> float | None:
        return None if moment is None else moment - self.started_unix


def read_step_starts(dagster_home: Path) -> dict[str, float]:
    """STEP_START of every step, ended or not (``read_run_windows`` keeps only the ended ones)."""
    import dagster as dg  # after the measurement: half a second the harness pays only then

    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        records = instance.get_run_records()
        if len(records) != 1:
            return {}
        entries = instance.all_logs(records[0].dagster_run.run_id, of_type={dg.DagsterEventType.STEP_START})
        return {entry.step_key: entry.timestamp for entry in entries if entry.step_key}


@contextmanager
def measuring(what: str) -> Iterator[None]:
    with exclusive(what):
        wait_until_quiet()
        yield


def reverify_command(reverify: str, args: argparse.Namespace, inputs: Path, rollouts: Path, output: Path) -> list[str]:
    configs = [token for config in args.config for token in ("--config", str(config))]
    return [
        reverify, "run", *configs, "--inputs", str(inputs), "--rollouts", str(rollouts), "--output", str(output),
        "--concurrency", str(args.concurrency), *args.overrides,
    ]  # fmt: skip


def run_once(command_tail: Sequence[str], prefix: Sequence[str], work: Path, label: str, full: bool) -> StartupRun:
    """``prefix + command_tail`` with a fresh DAGSTER_HOME in ``work``; ``command_tail`` holds ``--output``."""
    dagster_home = work / "dagster_home"
    dagster_home.mkdir(parents=True)
    output = Path(command_tail[list(command_tail).index("--output") + 1])
    sidecar = output.with_name(f"{output.stem}_failures.jsonl")
    probe_file = work / "probe.txt"
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home), "STARTUP_PROBE_OUT": str(probe_file)}
    with (
        measuring(f"reverify run ({label})"),
        open(work / "stderr.txt", "wb") as err,
        OutputWatcher([output, sidecar]) as watcher,
    ):
        busy_before = machine_cpu_seconds()[0]
        started, started_unix = time.perf_counter(), time.time()
        process = subprocess.Popen([*prefix, *command_tail], stdout=subprocess.DEVNULL, stderr=err, env=env)
        try:
            with ServerWatch(process.pid) as servers:
                while process.poll() is None:
                    if not full and watcher.first_row_at is not None:
                        # Not SIGINT: Dagster holds Ctrl-C back during a step. Its servers die with their stdin
                        # pipe, Dagster's log tailers with their orphan watchers; the instance is thrown away.
                        process.kill()
                        process.wait()
                        break
                    time.sleep(0.005)
                ended = time.perf_counter()
                busy = machine_cpu_seconds()[0] - busy_before
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
    probe = {}
    if probe_file.exists():
        for line in probe_file.read_text().splitlines():
            name, _, moment = line.rpartition(" ")
            probe[name] = float(moment)
    return StartupRun(
        label=label,
        exit_code=process.returncode,
        started=started,
        started_unix=started_unix,
        ended=ended,
        server_spawned=servers.first.spawned if servers.first else None,
        server_listening=servers.first.listening if servers.first else None,
        output_created=watcher.created_at,
        first_row=watcher.first_row_at,
        windows=read_run_windows(dagster_home),
        step_starts=read_step_starts(dagster_home),
        machine_busy_s=busy,
        probe=probe,
    )


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:5.2f}"


def print_run(run: StartupRun) -> None:
    stopped = " (killed after its first row)" if run.exit_code == -signal.SIGKILL else ""
    print(f"\n--- {run.label}: exit {run.exit_code}{stopped}; seconds after the command started ---")
    for name, moment in run.probe.items():
        print(f"  {name:<44} {fmt(run.rel_unix(moment))}")
    print(f"  {'server process first seen':<44} {fmt(run.rel(run.server_spawned))}")
    print(f"  {'server listening':<44} {fmt(run.rel(run.server_listening))}")
    if run.windows is not None:
        print(f"  {'Dagster run started':<44} {fmt(run.rel_unix(run.windows.run_start))}")
    for step, start in run.step_starts.items():
        end = run.windows.steps.get(step, (None, None))[1] if run.windows else None
        span = "" if end is None else f" → {fmt(run.rel_unix(end))} ({end - start:.2f} s)"
        print(f"  {'step ' + step:<44} {fmt(run.rel_unix(start))}{span}")
    print(f"  {'output file created':<44} {fmt(run.rel(run.output_created))}")
    print(f"  {'first /verify answered (first row written)':<44} {fmt(run.rel(run.first_row))}")
    print(f"  {'command ended':<44} {fmt(run.rel(run.ended))}")
    print(f"  (the machine's CPUs were busy {run.machine_busy_s:.1f} s in all, this run's processes included)")


# --- the import probe -----------------------------------------------------------------------------------------


def probe_main(argv: Sequence[str]) -> int:
    """Run the CLI in this process while a thread notes when the import markers complete."""
    out = Path(os.environ["STARTUP_PROBE_OUT"])
    with out.open("w") as fh:
        fh.write(f"interpreter up (probe's first line) {time.time()}\n")
    pending = list(PROBE_MARKS)

    def watch() -> None:
        while pending:
            for mark in list(pending):
                name, module, attribute = mark
                if hasattr(sys.modules.get(module), attribute):
                    with out.open("a") as fh:
                        fh.write(f"{name} {time.time()}\n")
                    pending.remove(mark)
            time.sleep(0.01)

    threading.Thread(target=watch, daemon=True).start()
    from reverify_assets.cli.main import main

    return main(list(argv))


# --- error paths ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorCase:
    name: str
    command: list[str]


def bad_copies(inputs: Path, rollouts: Path, work: Path) -> tuple[Path, Path]:
    """Inputs with malformed JSON at line 3; rollouts with their first line repeated at the end."""
    malformed = work / "inputs_bad_line3.jsonl"
    with inputs.open("rb") as src, malformed.open("wb") as dst:
        for line_no, line in enumerate(src, start=1):
            dst.write(b'{"_ng_task_index": 0, "broken\n' if line_no == 3 else line)
    duplicated = work / "rollouts_duplicate_key.jsonl"
    shutil.copyfile(rollouts, duplicated)
    with rollouts.open("rb") as src:
        first = src.readline()
    with duplicated.open("ab") as dst:
        dst.write(first)
    return malformed, duplicated


def error_cases(reverify: str, args: argparse.Namespace, inputs: Path, rollouts: Path, work: Path) -> list[ErrorCase]:
    malformed, duplicated = bad_copies(inputs, rollouts, work)

    def run(name: str, inputs_: Path = inputs, rollouts_: Path = rollouts, extra: Sequence[str] = ()) -> ErrorCase:
        output = work / name.replace(" ", "_") / "reverified.jsonl"
        return ErrorCase(name, [*reverify_command(reverify, args, inputs_, rollouts_, output), *extra])

    misspelt = run("bad flag")
    misspelt.command[misspelt.command.index("--concurrency")] = "--concurency"
    return [
        misspelt,
        run("bad config value", extra=["++mcqa.resources_servers.mcqa.grading_mode=bogus"]),
        run("missing --inputs file", inputs_=work / "no_such_inputs.jsonl"),
        run("malformed JSON, inputs line 3", inputs_=malformed),
        run("duplicate key, last rollouts line", rollouts_=duplicated),
    ]


def time_error(case: ErrorCase, work: Path) -> tuple[float, int, str]:
    dagster_home = work / f"dagster_home_{case.name.replace(' ', '_')}"
    dagster_home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    with measuring(case.name):
        started = time.perf_counter()
        done = subprocess.run(case.command, capture_output=True, text=True, env=env)
        elapsed = time.perf_counter() - started
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return elapsed, done.returncode, lines[-1] if lines else "(no message)"


# --- driver ---------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="a directory with rollouts_materialized_inputs.jsonl, rollouts.jsonl")
    parser.add_argument("--inputs", type=Path)
    parser.add_argument("--rollouts", type=Path)
    parser.add_argument("--config", type=Path, action="append", help=f"default {DEFAULT_CONFIG.relative_to(REPO)}")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="plain runs (the probe run comes on top)")
    parser.add_argument("--full", action="store_true", help="let every run finish instead of stopping at row 1")
    parser.add_argument("--skip-errors", action="store_true", help="time only the start-up, not the error paths")
    parser.add_argument("--no-probe", action="store_true", help="skip the import probe run")
    parser.add_argument("--no-floor", action="store_true", help="skip the runs of Dagster alone (dagster_floor.py)")
    parser.add_argument("--work", type=Path, help="keep the files here (default: a temporary directory, removed)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["--probe"]:
        return probe_main(raw[1:])
    overrides = [token for token in raw if token.startswith("+")]
    parser = build_parser()
    args = parser.parse_args([token for token in raw if not token.startswith("+")])
    args.overrides = overrides or list(DEFAULT_OVERRIDES)
    args.config = args.config or [DEFAULT_CONFIG]
    if args.data is not None:
        args.inputs = args.inputs or args.data / "rollouts_materialized_inputs.jsonl"
        args.rollouts = args.rollouts or args.data / "rollouts.jsonl"
    if args.inputs is None or args.rollouts is None:
        parser.error("give --data DIR, or --inputs and --rollouts")
    work = args.work or Path(tempfile.mkdtemp(prefix="reverify_startup_"))
    work.mkdir(parents=True, exist_ok=True)
    reverify = str(Path(sys.executable).parent / "reverify")
    megabytes = (args.inputs.stat().st_size / 1e6, args.rollouts.stat().st_size / 1e6)
    print(f"{os.cpu_count()} CPUs; inputs {megabytes[0]:,.0f} MB, rollouts {megabytes[1]:,.0f} MB; work {work}")

    runs: list[StartupRun] = []
    plain = [reverify]
    probe = [sys.executable, str(Path(__file__).resolve()), "--probe"]
    plan = [(f"run {i + 1}", plain) for i in range(args.repeat)] + ([] if args.no_probe else [("probe", probe)])
    for index, (label, prefix) in enumerate(plan):
        run_dir = work / f"run-{index}"
        tail = reverify_command(reverify, args, args.inputs, args.rollouts, run_dir / "out" / "reverified.jsonl")[1:]
        run = run_once(tail, prefix, run_dir, label, args.full)
        print_run(run)
        runs.append(run)

    firsts = [first for run in runs if run.label != "probe" and (first := run.rel(run.first_row)) is not None]
    if firsts:
        print(
            f"\nfirst /verify answered: median {statistics.median(firsts):.2f} s, min {min(firsts):.2f} s, "
            f"max {max(firsts):.2f} s over {len(firsts)} runs (target < {TARGET_S:.0f} s)"
        )
    if not args.no_floor:
        with measuring("Dagster's floor"):
            floor_runs = measure_floor(work, args.repeat)
        print_floor(floor_runs)
        if firsts:
            floor = median_floor(floor_runs)
            print(f"  the command's first answer comes {statistics.median(firsts) - floor:.2f} s after that (medians)")
    if not args.skip_errors:
        print("\n| error | exit | seconds | message |")
        print("|-------|------|---------|---------|")
        for case in error_cases(reverify, args, args.inputs, args.rollouts, work):
            elapsed, code, message = time_error(case, work)
            print(f"| {case.name} | {code} | {elapsed:.2f} | {message[:160]} |", flush=True)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
