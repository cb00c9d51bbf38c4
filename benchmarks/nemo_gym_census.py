"""A census of NeMo Gym's own resources servers: does `reverify run` give what `gym eval reverify` gives on each?

For each server folder of an installed NeMo Gym (`resources_servers/<name>/`):

1. The two files `gym eval reverify` takes, from the server's example data (`nemo_gym_examples.py`). Without usable
   rows the server is "no usable example data", saying what is missing.
2. `reverify run` with the server's shipped `configs/<name>.yaml` (else its first `configs/*.yaml`) from NeMo Gym's
   folder, a fresh DAGSTER_HOME, and `--force` again when it says the server is not declared stateless.
3. `gym eval reverify` on the same files, `--force` as ours needed it (or as it asks), given the config's
   resources-server blocks only (`gym_config.yaml` beside the files): a shipped config's agent names a
   `policy_model` the file does not define, which `gym` refuses before starting, while ours ignores an agent block's
   other fields. For the run only, the server's `.venv` is a symlink to the venv ours started the server from (NeMo
   Gym would build one with `uv`, which needs internet); a `.venv` already there is left alone.
4. A classification: matches (rows by key without our `reverify_provenance`, the failures sidecars' keys, the
   aggregate metrics section by section without our `coverage` / `provenance` and any `perf_summary`), rows differ,
   metrics differ, we fail, NeMo Gym itself fails here, needs an external service (a table of patterns over what
   both said, with the evidence and the config's words), or requirements do not install here.

One JSON line per server goes to `<work>/census.jsonl` as it is decided (`--resume` skips those already there); at
the end a markdown table is printed and written to `<work>/census.md`. Every tool run holds the benchmark lock
(`bench_lock.py`). All servers take over an hour.

    .venv/bin/python benchmarks/nemo_gym_census.py [--servers circle_count mcqa ...] [--work DIR] [--resume]
        [--timeout-s 600] [--gym ~/.cache/reverify-assets/nemo-gym-0.7.0/bin/gym]
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from bench_lock import exclusive
from judge_recovery import reverify_executable
from nemo_gym_examples import Prepared, Unusable, prepare
from nemo_gym_run import nemo_gym_root

from reverify_assets.gym.server_python import READY_MARKER, default_cache, server_requirements
from reverify_assets.synthetic.nemo_gym_rows import positive_int

DEFAULT_GYM = Path.home() / ".cache" / "reverify-assets" / "nemo-gym-0.7.0" / "bin" / "gym"
MATCHES, ROWS_DIFFER, METRICS_DIFFER = "matches", "rows differ", "metrics differ"
WE_FAIL, GYM_FAILS, EXTERNAL = "we fail", "NeMo Gym itself fails here", "needs an external service"
REQUIREMENTS, NO_DATA = "requirements do not install here", "no usable example data"
CENSUS_ERROR = "census error (this script's)"
STARTED = re.compile(r"reverify: starting NeMo Gym's \S+ server for '[^']*': (\S+)")
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b(: .*)?$")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
NOT_FOR_GYM = ("responses_api_agents", "environment_servers", "responses_api_models")  # they run the policy
DROPPED_METRICS = {"coverage", "provenance", "perf_summary"}  # ours only, or gym's timing: not the verifier's answer
ABSENT = object()  # a field a row lacks, which is not null
# `unit_tests_time_taken`, `verification_time`, `grading_time_s`, `execution time`, `latency_ms`...
TIMING = re.compile(r"(^|_)time(_s|_ms|_taken)?$|execution.?time|elapsed|duration|latency", re.IGNORECASE)
UNSET = re.compile(r"cannot resolve interpolation: Interpolation key '([^']+)' not found")
UNROUTED = "cannot find a resources server for row"

# What a server needs that this machine lacks, by the words its errors (or, as support, its config) use.
EXTERNAL_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern, re.IGNORECASE))
    for label, pattern in (
        ("judge model", r"judge_model_server|judge[_ ]model|JudgeError|judge_failed"),
        ("model server", r"responses_api_models/'[^']+'|\bmodel_server\b|policy_model|openai_model|vllm_model"),
        ("API key", r"api[_-]?key|_API_KEY|\bUnauthorized\b|\b401\b|authentication"),
        ("network / web", r"Cannot connect to host|Connection refused|Name or service not known|Could not resolve"
                          r"|Temporary failure in name resolution|Network is unreachable|Max retries exceeded"),
        ("remote URL", r"https?://(?!127\.0\.0\.1|localhost|0\.0\.0\.0)[\w.-]+\.[a-z]{2,}"),
        ("Hugging Face Hub", r"huggingface\.co|HF_TOKEN|LocalEntryNotFoundError|OfflineModeIsEnabled|hf_hub"),
        ("code sandbox", r"sandbox|\be2b\b|piston|judge0"),
        ("container runtime", r"\bdocker\b|podman|apptainer|singularity"),
        ("database", r"postgres|mysql|mongodb|redis|sqlalchemy\.exc"),
        ("GPU", r"\bCUDA\b|nvidia-smi|\bGPUs?\b|torch\.cuda"),
        ("search API", r"tavily|serp(er|api)|bing_search|exa_api|brave_search"),
    )
)  # fmt: skip


@dataclass
class Run:
    command: list[str]
    exit: int | None  # None: timed out
    seconds: float
    log: str
    error: str | None = None
    forced: bool = False
    venv: str | None = None  # ours: the venv it started the server from; gym: the one lent to it
    output: str | None = None


@dataclass
class Result:
    server: str
    classification: str
    detail: str
    config: str | None = None
    inputs: str | None = None
    ours: dict[str, Any] | None = None
    gym: dict[str, Any] | None = None
    evidence: list[str] = field(default_factory=list)
    date: str = field(default_factory=lambda: datetime.datetime.now().isoformat(timespec="seconds"))


# ---------------------------------------------------------------- configs


def shipped_config(folder: Path) -> Path | None:
    own = folder / "configs" / f"{folder.name}.yaml"
    return own if own.is_file() else next(iter(sorted((folder / "configs").glob("*.yaml"))), None)


def agent_name(config: dict[str, Any], server: str) -> str:
    """The agent block routing to one of the config's servers: what `gym eval run` names in agent_ref."""
    for instance, block in config.items():
        agents = block.get("responses_api_agents") if isinstance(block, dict) else None
        for impl in (agents or {}).values():
            if isinstance(impl, dict) and (impl.get("resources_server") or {}).get("name") in config:
                return instance
    return f"{server}_simple_agent"


def gym_config(config: dict[str, Any], dest: Path) -> Path:
    kept = {k: v for k, v in config.items() if not (isinstance(v, dict) and any(t in v for t in NOT_FOR_GYM))}
    path = dest / "gym_config.yaml"
    path.with_name(f".{path.name}.tmp").write_text(yaml.safe_dump(kept, sort_keys=False))
    os.replace(path.with_name(f".{path.name}.tmp"), path)
    return path


# ---------------------------------------------------------------- running the tools


def kill_session(session: int) -> None:
    """Every process of the session we started: `gym` leaves its server behind, and Ray may leave more."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(session, signal.SIGKILL)
    for stat in Path("/proc").glob("[0-9]*/stat"):  # those that left the group but not the session
        with suppress(OSError, ValueError, IndexError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == session:
                os.kill(int(stat.parent.name), signal.SIGKILL)


def run_tool(command: list[str], cwd: Path, env: dict[str, str], log: Path, timeout_s: float) -> Run:
    print(f"  $ (cd {cwd} && {' '.join(command)})", flush=True)
    with exclusive(f"{Path(command[0]).name} {command[1]}"), log.open("wb") as sink:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
        try:
            code: int | None = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:  # on Ctrl-C too: a session of its own gets no SIGINT from the terminal
            kill_session(process.pid)
            process.wait()
    run = Run(command, code, round(time.perf_counter() - started, 1), str(log))
    if code is None:
        run.error = f"timed out after {timeout_s:.0f} s"
    elif code != 0:
        run.error = error_line(read(log))
    return run


def read(log: Path | str) -> str:
    return ANSI.sub("", Path(log).read_text(errors="replace"))


def error_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if said := next((line for line in lines if line.startswith(("reverify: error:", "Error:", "error:"))), None):
        return said
    if raised := [line for line in lines if EXCEPTION_LINE.match(line)]:
        return raised[-1]  # a traceback's last line: what finally went wrong
    return next((line for line in lines if re.search(r"\berror\b", line, re.IGNORECASE)), lines[-1] if lines else "")


def output_of(folder: Path) -> str | None:
    return next((str(p) for p in (folder / "unsafe_out.jsonl", folder / "out.jsonl") if p.is_file()), None)


def run_ours(config: str, data: Prepared, work: Path, root: Path, gym_python: Path, timeout_s: float) -> Run:
    out, log = work / "ours", work / "ours.log"
    # The census pairs some servers' example rollouts with their example rows by position or by line number,
    # which the join's identity check refuses (see docs/rollout-identity.md): gym eval reverify scores such pairs,
    # and the census compares us with it on the same pairs.
    command = [reverify_executable(), "run", "--config", config, "--inputs", str(data.inputs),
               "--rollouts", str(data.rollouts), "--output", str(out / "out.jsonl"),
               "--allow-prompt-mismatch"]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="census-dagster-") as home:
        env = {**os.environ, "REVERIFY_NEMO_GYM_PYTHON": str(gym_python), "DAGSTER_HOME": home}
        run = run_tool(command, root, env, log, timeout_s)
        if run.exit not in (0, None) and "--force" in read(log):
            shutil.rmtree(out, ignore_errors=True)
            log.rename(work / "ours-unforced.log")
            run = run_tool([*command, "--force"], root, env, log, timeout_s)
            run.forced = True
    started = STARTED.search(read(log))
    run.venv = str(Path(started.group(1)).parent.parent) if started else None
    run.output = output_of(out)
    return run


def venv_to_lend(folder: Path, ours: Run, gym_python: Path) -> Path | None:
    """The venv `reverify run` started the server from; when it started none (a server built into ours, or it
    failed before), NeMo Gym's own if the server needs nothing more, else one ours built for it before."""
    if ours.venv:
        return Path(ours.venv)
    try:
        if not server_requirements(folder):
            return gym_python.parent.parent
    except Exception:  # an unreadable pyproject.toml: nothing to lend
        return None
    built = sorted(default_cache().joinpath("server-venvs").glob(f"{folder.name}-*/{READY_MARKER}"))
    return built[-1].parent if built else None


@contextmanager
def lent_venv(folder: Path, venv: Path | None) -> Iterator[str | None]:
    """`<server>/.venv` -> venv for the `with` block only: removed on failure and Ctrl-C too."""
    link, lock = folder / ".venv", folder / ".venv.setup.lock"
    if link.exists() or link.is_symlink():  # somebody's (a benchmark may be using it): never ours to remove
        yield f"its own .venv ({link.resolve()})"
        return
    if venv is None:
        yield None
        return
    had_lock = lock.exists()
    link.symlink_to(venv, target_is_directory=True)
    try:
        yield str(venv)
    finally:
        if link.is_symlink() and link.readlink() == venv:
            link.unlink()
        if not had_lock:
            lock.unlink(missing_ok=True)


def run_gym(gym: Path, config: Path, data: Prepared, work: Path, root: Path, force: bool, timeout_s: float) -> Run:
    out, log = work / "gym", work / "gym.log"
    # Rich wraps a message at 80 columns when not on a terminal: a message on one line is what gets quoted.
    env = {**os.environ, "COLUMNS": "1000", "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("DAGSTER_HOME", None)

    def attempt(forced: bool) -> Run:
        shutil.rmtree(out, ignore_errors=True)
        command = [str(gym), "eval", "reverify", "--config", str(config), "--inputs", str(data.inputs),
                   "--rollouts", str(data.rollouts), "--output", str(out / "out.jsonl"), "++skip_venv_if_present=true",
                   f"hydra.run.dir={out / 'hydra'}", *(["--force"] if forced else [])]  # fmt: skip
        run = run_tool(command, root, env, log, timeout_s)
        run.forced = forced
        return run

    run = attempt(force)
    if run.exit not in (0, None) and not force and "force=true" in read(log):
        log.rename(work / "gym-unforced.log")
        run = attempt(True)
    run.output = output_of(out)
    return run


# ---------------------------------------------------------------- comparing and classifying


def without_timings(value: Any, masked: set[str]) -> Any:
    """``value`` with every number under a timing's name (`unit_tests_time_taken`, `execution time`) replaced:
    each tool measured its own. The names replaced are added to ``masked``."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if TIMING.search(str(key)) and isinstance(item, int | float) and not isinstance(item, bool):
                masked.add(str(key))
                out[key] = "<timing>"
            else:
                out[key] = without_timings(item, masked)
        return out
    if isinstance(value, list):
        return [without_timings(item, masked) for item in value]
    return value


def canonical(value: Any) -> str:
    return "<absent>" if value is ABSENT else json.dumps(value, sort_keys=True)  # json, not orjson: NaN is equal


def keyed(path: Path | str | None) -> dict[tuple[Any, Any], dict[str, Any]]:
    """An output's rows by key, without our provenance field (example data: a few rows)."""
    rows: dict[tuple[Any, Any], dict[str, Any]] = {}
    if path and Path(path).is_file():
        with Path(path).open("rb") as fh:
            for line in filter(bytes.strip, fh):
                row = json.loads(line)
                row.pop("reverify_provenance", None)
                rows[(row.get("_ng_task_index"), row.get("_ng_rollout_index"))] = row
    return rows


def sidecar(output: Path | str) -> Path:
    return Path(output).with_name(f"{Path(output).stem}_failures.jsonl")


def metrics(output: Path, ours: bool) -> dict[str, dict[str, Any]] | None:
    path = output.with_name(f"{output.stem}_aggregate_metrics.json")
    if not path.is_file():
        return None
    drop = DROPPED_METRICS if ours else {"perf_summary"}
    return {
        str((e.get("agent_ref") or {}).get("name") or canonical(e.get("agent_ref"))): {
            k: v for k, v in e.items() if k not in drop
        }
        for e in json.loads(path.read_text())
    }


def first_difference(a: Any, b: Any, path: str = "") -> str:
    """Where two parsed values first differ: `responses_create_params.tool_choice: ours absent, gym "auto"`."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in [*a, *(k for k in b if k not in a)]:
            if canonical(a.get(k, ABSENT)) != canonical(b.get(k, ABSENT)):
                return first_difference(a.get(k, ABSENT), b.get(k, ABSENT), f"{path}.{k}" if path else k)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if canonical(x) != canonical(y):
                return first_difference(x, y, f"{path}[{i}]")
    shown = ["absent" if v is ABSENT else json.dumps(v)[:40] for v in (a, b)]
    return f"{path}: ours {shown[0]}, gym {shown[1]}"


def compare(ours: Path, theirs: Path) -> tuple[str, str]:
    mine, gyms = keyed(ours), keyed(theirs)
    problems: list[str] = []
    timings: set[str] = set()  # measured by each tool: never equal, and not the verifier's answer
    for key in mine.keys() & gyms.keys():
        masked: set[str] = set()
        a, b = without_timings(mine[key], masked), without_timings(gyms[key], masked)
        if canonical(mine[key]) != canonical(gyms[key]):
            timings |= masked
        mine[key], gyms[key] = a, b
    if only := sorted(set(mine) ^ set(gyms), key=str):
        problems.append(f"keys in one output only: {only[:5]}")
    differing: dict[str, list[tuple[Any, Any]]] = {}  # the fields that differ -> the keys where they do
    for key in sorted(set(mine) & set(gyms), key=str):
        a, b = mine[key], gyms[key]
        if fields := [
            k for k in sorted(a.keys() | b.keys()) if canonical(a.get(k, ABSENT)) != canonical(b.get(k, ABSENT))
        ]:
            differing.setdefault(", ".join(fields), []).append(key)
    for fields, keys in differing.items():
        problems.append(
            f"{len(keys)} rows differ in {fields} (e.g. {keys[0]} {first_difference(mine[keys[0]], gyms[keys[0]])})"
        )
    failed_mine, failed_gyms = keyed(sidecar(ours)), keyed(sidecar(theirs))
    if set(failed_mine) != set(failed_gyms):
        problems.append(
            f"failures sidecar keys: ours {sorted(failed_mine, key=str)}, gym {sorted(failed_gyms, key=str)}"
        )
    m_mine, m_gyms = metrics(ours, True), metrics(theirs, False)
    sections: list[str] = []
    if (m_mine is None) != (m_gyms is None):
        sections.append(f"only {'ours' if m_gyms is None else 'gym'} wrote a metrics file")
    elif m_mine is not None and m_gyms is not None:
        for agent in sorted(m_mine.keys() | m_gyms.keys()):
            # Statistics of a timing (`mean/unit_tests_time_taken`) differ as the timings do.
            a, b = without_timings(m_mine.get(agent, {}), set()), without_timings(m_gyms.get(agent, {}), set())
            sections += [
                f"{agent}: {s}" for s in sorted(a.keys() | b.keys()) if canonical(a.get(s)) != canonical(b.get(s))
            ]
    means = [
        math.fsum(r["reward"] if isinstance(r.get("reward"), int | float) else 0.0 for r in rows.values()) / len(rows)
        if rows else None
        for rows in (mine, gyms)
    ]  # fmt: skip
    scored = f"{len(mine)} rows, mean reward {means[0]} (gym {means[1]}), {len(failed_mine)} in the failures sidecar"
    if problems:
        metrics_said = f"metrics differ: {', '.join(sections)}" if sections else "metrics equal"
        return ROWS_DIFFER, "; ".join([*problems, scored, metrics_said])
    if timings:
        scored += f" (timings each tool measured left out: {', '.join(sorted(timings))})"
    if sections:
        return METRICS_DIFFER, f"{'; '.join(sections)}; {scored}"
    return MATCHES, f"{scored}; metrics sections equal"


def evidence(texts: dict[str, str]) -> list[str]:
    """`label (where: the line)` for each pattern of the table a text matches."""
    found = []
    for where, text in texts.items():
        for label, pattern in EXTERNAL_PATTERNS:
            if (line := next((x.strip() for x in text.splitlines() if pattern.search(x)), None)) is not None:
                found.append(f"{label} ({where}: {line[:160]})")
    return found


def failure_text(run: Run | None) -> str:
    """What a run said when it failed, or the errors of its failures sidecar when it scored no row."""
    if run is None:
        return ""
    if run.exit != 0:
        return "\n".join([run.error or "", *read(run.log).splitlines()[-40:]])
    if run.output and not keyed(run.output):
        return "\n".join(
            str(row.get("_ng_failure_judge_error") or row.get("failure_reason") or row.get("_ng_failure_class"))
            for row in keyed(sidecar(run.output)).values()
        )
    return ""


def classify(result: Result, ours: Run, gym: Run | None, gym_config_text: str) -> Result:
    result.ours, result.gym = asdict(ours), asdict(gym) if gym else None
    if ours.error and (unset := UNSET.search(ours.error)):
        # The shipped config asks the user for a value (a simulator image, an API key, a judge's URL): NeMo Gym's
        # OmegaConf stops at it alike.
        result.classification = EXTERNAL
        result.detail = f"the config leaves `{unset.group(1)}` to the user; ours: {ours.error[:200]}"
        return result
    if ours.error and "cannot build a Python for NeMo Gym's" in (text := read(ours.log)):
        lines = text.splitlines()
        # What pip could not reach says more than its own summary (a git URL, when there is no internet here).
        pip = next((line.strip() for line in lines if "Could not resolve host" in line), None)
        pip = pip or next((line for line in lines if line.startswith("ERROR:")), ours.error)
        result.classification, result.detail = REQUIREMENTS, pip
        return result
    said = {"ours": failure_text(ours), "gym": failure_text(gym)}
    # Neither scored a row, and what they said names something this machine lacks. The config's words back that
    # up but never decide alone (a description may say "GPU").
    if all(said.values()) and (found := evidence(said)):
        labels = ", ".join(sorted({item.split(" (", 1)[0] for item in found}))
        result.classification, result.detail = EXTERNAL, f"{labels}; {found[0].split(' (', 1)[1][:-1]}"
        result.evidence = found + evidence({"config": gym_config_text})
    elif gym is None:
        why = "NeMo Gym not run: no venv to lend it (it would build one with uv, which needs internet)"
        result.classification = WE_FAIL if ours.error else GYM_FAILS
        result.detail = f"{ours.error}; {why}" if ours.error else why
    elif gym.exit != 0 or not gym.output:
        also = f"; ours failed too: {ours.error}" if ours.error else ""
        result.classification, result.detail = GYM_FAILS, f"{gym.error or 'exit 0, no output file'}{also}"
    elif ours.exit != 0 or not ours.output:
        result.classification, result.detail = WE_FAIL, ours.error or "exit 0, no output file"
    else:
        result.classification, result.detail = compare(Path(ours.output), Path(gym.output))
        result.detail += " (--force: not declared stateless)" if ours.forced else ""
    return result


# ---------------------------------------------------------------- the census


def census_one(name: str, root: Path, gym: Path, work: Path, timeout_s: float) -> Result:
    folder, gym_python = root / "resources_servers" / name, gym.parent / "python"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    config_path = shipped_config(folder)
    if config_path is None:
        return Result(name, NO_DATA, "no configs/*.yaml")
    result = Result(name, "", "", config=str(config_path.relative_to(root)))
    try:
        config = yaml.safe_load(config_path.read_text()) or {}
        prepared = prepare(folder, agent_name(config, name), work / "data")
    except Unusable as exc:
        result.classification, result.detail = NO_DATA, str(exc)
        return result
    result.inputs = prepared.how
    ours = run_ours(str(result.config), prepared, work, root, gym_python, timeout_s)
    reduced = gym_config(config, work)
    if ours.error and (UNROUTED in ours.error or UNSET.search(ours.error)):
        # The shipped config's agent blocks do not name the agent the example rows carry (NeMo Gym routes rows the
        # same way and fails alike), or leave a value of theirs to the user (an API key the agent needs): both
        # then run with the resources-server blocks only, where every row goes to the one server.
        why = "its agents are not the rows'" if UNROUTED in ours.error else "its agent blocks leave a value unset"
        (work / "ours.log").rename(work / "ours-shipped-config.log")
        shutil.rmtree(work / "ours", ignore_errors=True)
        ours = run_ours(str(reduced), prepared, work, root, gym_python, timeout_s)
        result.config = f"{result.config}, resources-server blocks only ({why})"
    with lent_venv(folder, venv_to_lend(folder, ours, gym_python)) as lent:
        gym_run = None
        if lent is not None:  # without one NeMo Gym would only fail at building it
            gym_run = run_gym(gym, reduced, prepared, work, root, ours.forced, timeout_s)
            gym_run.venv = lent
    return classify(result, ours, gym_run, reduced.read_text())


def load_results(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    with path.open() as fh:
        return {row["server"]: row for row in map(json.loads, filter(str.strip, fh))}  # a server's last line wins


def ours_went(row: dict[str, Any]) -> str:
    """Where NeMo Gym failed and ours ran: what ours made of the rows."""
    ours = row.get("ours") or {}
    if row["classification"] != GYM_FAILS or ours.get("exit") != 0 or not ours.get("output"):
        return ""
    scored, failed = keyed(ours["output"]), keyed(sidecar(ours["output"]))
    classes = sorted({str(r.get("_ng_failure_class")) for r in failed.values()})
    return f"; ours ran: {len(scored)} rows scored, {len(failed)} failed ({', '.join(classes) or 'none'})"


def table(results: Sequence[dict[str, Any]], version: str) -> str:
    counts: dict[str, int] = {}
    for row in results:
        counts[row["classification"]] = counts.get(row["classification"], 0) + 1
    tally = ", ".join(f"{n} {name}" for name, n in sorted(counts.items(), key=lambda item: -item[1]))
    lines = [f"{datetime.date.today().isoformat()}, NeMo Gym {version}, {len(results)} servers: {tally}", "",
             "| server | classification | detail |", "| --- | --- | --- |"]  # fmt: skip
    for row in sorted(results, key=lambda r: r["server"]):
        detail = " ".join(f"{row['detail']}{ours_went(row)}".split()).replace("|", "\\|")
        lines.append(f"| `{row['server']}` | {row['classification']} | {detail[:400]} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", nargs="+", metavar="NAME", help="these servers only (default: every one)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/nemo-gym-census"), help="files and results here")
    parser.add_argument("--timeout-s", type=positive_int, default=600, help="per tool run (default 600)")
    parser.add_argument("--gym", type=Path, default=DEFAULT_GYM, help=f"NeMo Gym's `gym` (default {DEFAULT_GYM})")
    parser.add_argument("--resume", action="store_true", help="skip the servers already in <work>/census.jsonl")
    args = parser.parse_args(argv)
    gym = args.gym.expanduser()
    root = nemo_gym_root(gym)
    every = sorted(p.name for p in (root / "resources_servers").iterdir()
                   if p.is_dir() and not p.name.startswith(("_", ".")))  # fmt: skip
    if unknown := [n for n in args.servers or [] if n not in every]:
        close = {n: difflib.get_close_matches(n, every, n=1) for n in unknown}
        parser.error("unknown servers: " + ", ".join(f"{n} (closest: {c[0] if c else '-'})" for n, c in close.items()))
    wanted = args.servers or every
    args.work.mkdir(parents=True, exist_ok=True)
    results_path = args.work / "census.jsonl"
    if results_path.exists() and not args.resume:
        parser.error(f"{results_path} exists: pass --resume to continue it, or another --work")
    done = load_results(results_path)
    version = subprocess.run(
        [str(gym.parent / "python"), "-c", "import importlib.metadata as m; print(m.version('nemo-gym'))"],
        capture_output=True, text=True, check=False,
    ).stdout.strip() or "unknown"  # fmt: skip
    print(f"NeMo Gym {version} in {root}; {len(wanted)} servers; results in {results_path}", flush=True)

    def stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # a SIGTERM unwinds as Ctrl-C does: symlink removed, sessions killed

    signal.signal(signal.SIGTERM, stop)
    try:
        with results_path.open("a") as sink:
            for number, name in enumerate(wanted, 1):
                if name in done:
                    continue
                print(f"[{number}/{len(wanted)}] {name}", flush=True)
                try:
                    result = census_one(name, root, gym, args.work / "servers" / name, args.timeout_s)
                except Exception as exc:  # one server's surprise must not end an hour's census
                    traceback.print_exc()
                    result = Result(name, CENSUS_ERROR, f"{type(exc).__name__}: {exc}")
                print(f"  -> {result.classification}: {result.detail}", flush=True)
                for item in result.evidence:
                    print(f"     evidence: {item}", flush=True)
                sink.write(json.dumps(asdict(result)) + "\n")
                sink.flush()
                os.fsync(sink.fileno())
                done[name] = asdict(result)
    except KeyboardInterrupt:
        print(f"\ninterrupted; what was decided is in {results_path} (--resume continues)", file=sys.stderr)
        return 130
    text = table([done[n] for n in wanted if n in done], version)
    (args.work / ".census.md.tmp").write_text(text)
    os.replace(args.work / ".census.md.tmp", args.work / "census.md")
    print(f"\n{text}\n(also in {args.work / 'census.md'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
