"""The two files `gym eval reverify` takes, made from a NeMo Gym server's example data (for `nemo_gym_census.py`).

As `/work/shared/conformance/nemo_gym_servers/README.md` describes: the server's
`data/example_rollouts_materialized_inputs.jsonl` as it is, else its `example.jsonl` rows with `_ng_task_index` /
`_ng_rollout_index` and the agent_ref the rollouts carry; the rollouts its `example_rollouts.jsonl` keyed to them
(their own keys, else by prompt, else by position). A server whose data cannot make them raises `Unusable`, saying
what is missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from reverify_assets.synthetic.nemo_gym_rows import write_jsonl_atomically

INPUTS, ROLLOUTS = "rollouts_materialized_inputs.jsonl", "rollouts.jsonl"


class Unusable(Exception):
    """The server's example data cannot make the two files; the message says what is missing."""


@dataclass
class Prepared:
    inputs: Path
    rollouts: Path
    how: str


class Task(NamedTuple):
    task: Any  # _ng_task_index (example.jsonl has none: its line)
    rollout: Any
    prompt: str
    agent_ref: Any


class Answer(NamedTuple):
    task: Any  # None when the rollout carries no key
    rollout: Any
    prompt: str
    agent_ref: Any
    has_response: bool


def jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                shown = line.strip()[:60].decode(errors="replace")
                raise Unusable(f"data/{path.name} line {number} is not JSON: {shown!r}") from None
            if not isinstance(row, dict):
                raise Unusable(f"data/{path.name} line {number} is not a JSON object")
            yield row


def prompt_of(row: dict[str, Any]) -> str:
    """The prompt's roles and text only: a rollout's copy of it carries fields the task's lacks (`type`, `detail`)."""

    def text(content: Any) -> Any:
        if isinstance(content, list):
            return [text(p.get("text") or p.get("image_url") or p.get("content")) if isinstance(p, dict) else p
                    for p in content]  # fmt: skip
        return content if isinstance(content, str | None) else json.dumps(content, sort_keys=True)

    given = (row.get("responses_create_params") or {}).get("input")
    messages = [{"role": "user", "content": given}] if isinstance(given, str) else given or []
    shape = [(m.get("role"), text(m.get("content"))) for m in messages if isinstance(m, dict)]
    return hashlib.sha256(json.dumps(shape).encode()).hexdigest()


def pair(tasks: list[Task], answers: list[Answer], shipped: bool) -> tuple[list[int], str]:
    """The input row (its position) each rollout answers, and how that was decided."""
    if all(a.task is not None for a in answers):  # NeMo Gym's collection keyed them: trusted
        index = {(t.task, t.rollout): p for p, t in reversed(list(enumerate(tasks)))}
        positions = []
        for a in answers:
            found = index.get((a.task, a.rollout or 0))
            if found is None and not shipped and isinstance(a.task, int) and 0 <= a.task < len(tasks):
                found = a.task  # a second rollout of an example.jsonl line
            if found is None:
                raise Unusable(f"a rollout is keyed ({a.task}, {a.rollout}), which no input row is")
            positions.append(found)
        return positions, "rollouts keyed as shipped"
    if all(i < len(tasks) and tasks[i].prompt == a.prompt for i, a in enumerate(answers)):
        return list(range(len(answers))), "rollouts keyed by position (prompts agree)"
    by_prompt: dict[str, list[int]] = {}
    for position, t in enumerate(tasks):
        by_prompt.setdefault(t.prompt, []).append(position)
    if all(a.prompt in by_prompt for a in answers):
        taken: set[int] = set()
        positions = []
        for a in answers:  # the first input row of that prompt not answered yet, else its first again
            candidates = by_prompt[a.prompt]
            positions.append(next((p for p in candidates if p not in taken), candidates[0]))
            taken.add(positions[-1])
        return positions, "rollouts keyed by prompt"
    if len(answers) <= len(tasks):  # still a fair comparison of the two tools, on rows that disagree
        unmatched = sum(1 for i, a in enumerate(answers) if tasks[i].prompt != a.prompt)
        return list(range(len(answers))), f"rollouts keyed by position ({unmatched} prompts are not their task's)"
    raise Unusable(f"{len(answers)} rollouts for {len(tasks)} tasks, and prompts that do not pair them")


def prepare(folder: Path, agent: str, dest: Path) -> Prepared:
    data = folder / "data"
    shipped = (data / "example_rollouts_materialized_inputs.jsonl").is_file()
    tasks_file = data / ("example_rollouts_materialized_inputs.jsonl" if shipped else "example.jsonl")
    rollouts_file = data / "example_rollouts.jsonl"
    for needed in (tasks_file, rollouts_file):
        if not needed.is_file():
            raise Unusable(f"no data/{needed.name}")
    # A pass each for what pairing needs; the rows are streamed again when the files are written.
    tasks = [
        Task(row.get("_ng_task_index", n), row.get("_ng_rollout_index", 0), prompt_of(row), row.get("agent_ref"))
        for n, row in enumerate(jsonl(tasks_file))
    ]
    answers = [
        Answer(r.get("_ng_task_index"), r.get("_ng_rollout_index"), prompt_of(r), r.get("agent_ref"), "response" in r)
        for r in jsonl(rollouts_file)
    ]
    if not tasks or not answers:
        raise Unusable(f"data/{(rollouts_file if tasks else tasks_file).name} has no rows")
    if not any(a.has_response for a in answers):
        raise Unusable("data/example_rollouts.jsonl: no row has a `response`")
    positions, how = pair(tasks, answers, shipped)
    keys: list[tuple[Any, Any, Any]] = []  # _ng_task_index, _ng_rollout_index, agent_ref of each rollout
    answered: dict[int, int] = {}
    for position, a in zip(positions, answers, strict=True):
        t = tasks[position]
        # A shipped input row is one rollout already; an example.jsonl line gets rollouts 0, 1, ... as answered.
        rollout = a.rollout if a.rollout is not None else t.rollout if shipped else answered.get(position, 0)
        answered[position] = answered.get(position, 0) + 1
        keys.append((t.task, rollout, a.agent_ref or t.agent_ref or {"name": agent}))
    if len({(t, r) for t, r, _ in keys}) != len(keys):
        raise Unusable("two rollouts would get the same key")
    dest.mkdir(parents=True, exist_ok=True)
    inputs, rollouts = dest / INPUTS, dest / ROLLOUTS
    if shipped:
        shutil.copyfile(tasks_file, inputs.with_name(f".{INPUTS}.tmp"))
        os.replace(inputs.with_name(f".{INPUTS}.tmp"), inputs)
    else:  # one input row per rollout, as collection materializes them
        wanted: dict[int, list[tuple[Any, Any, Any]]] = {}
        for position, key in zip(positions, keys, strict=True):
            wanted.setdefault(position, []).append(key)
        write_jsonl_atomically(inputs, (
            {**row, "agent_ref": row.get("agent_ref", agent_ref), "_ng_task_index": t, "_ng_rollout_index": r}
            for position, row in enumerate(jsonl(tasks_file))
            for t, r, agent_ref in sorted(wanted.get(position, []), key=lambda key: key[1])
        ))  # fmt: skip
    write_jsonl_atomically(rollouts, (
        {**row, "_ng_task_index": t, "_ng_rollout_index": r, "agent_ref": row.get("agent_ref", agent_ref)}
        for row, (t, r, agent_ref) in zip(jsonl(rollouts_file), keys, strict=True)
    ))  # fmt: skip
    source = "shipped materialized inputs" if shipped else "example.jsonl + keys"
    return Prepared(inputs, rollouts, f"{len(keys)} rows: {source}; {how}")
