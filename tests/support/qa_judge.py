"""A free-form QA run judged by the built-in ``equivalence_judge`` against ``reverify judge-serve``: its data, its
config and the real CLI run on it, for the end-to-end tests of the judge."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.cli import read_jsonl, run_reverify, write_jsonl
from tests.support.judge_serve import LocalJudge

KEY = "sk-e2e-QmV5Rm9yVGVzdHM-distinctive-7731"
KEY_ENV = "E2E_JUDGE_API_KEY"  # what the equivalence_judge block reads
JUDGE_KEY_ENV = "E2E_LOCAL_JUDGE_KEY"  # what the local judge model requires
AGENT = "qa_simple_agent"
ROLLOUTS_PER_TASK = 2

# (question, expected answer, the two rollouts' answers, their rewards under the local judge's rule)
QA: list[tuple[str, str, tuple[str, str], tuple[float, float]]] = [
    ("What is half of one?", "1/2", ("0.5", "The answer is \\boxed{\\frac{1}{2}}"), (1.0, 1.0)),
    ("What is the capital of France?", "Paris", ("paris.", "London"), (1.0, 0.0)),
    ("How many legs does a spider have?", "8", ("eight", "It has 8 legs"), (0.0, 0.0)),
    ("Which planet is the largest?", "Jupiter", ("Saturn", "\\text{Jupiter}"), (0.0, 1.0)),
    ("At what temperature does water boil at sea level, in Celsius?", "100", ("100 °C", "212"), (1.0, 0.0)),
    ("LOCAL-JUDGE:GARBAGE What is 1+1?", "2", ("2", "2"), (0.0, 0.0)),  # the judge answers without a verdict
]
ROWS = len(QA) * ROLLOUTS_PER_TASK
NO_VERDICT_TASK = 5  # the question the local judge answers without a verdict (per copy of QA: task % len(QA))
NO_VERDICT_ROWS = ROLLOUTS_PER_TASK


@dataclass
class Transcript:
    """Everything the key must never appear in: the directories runs wrote to and every process output."""

    roots: list[Path] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


def qa_dataset(directory: Path, copies: int = 1) -> tuple[Path, Path]:
    """NeMo Gym files of a free-form QA run: materialized inputs (task-major) and rollouts (reversed); ``copies``
    times the questions, as tasks of their own."""
    inputs, rollouts = [], []
    for task, (question, expected, answers, _) in enumerate(QA * copies):
        for rollout, answer in enumerate(answers):
            key = {"_ng_task_index": task, "_ng_rollout_index": rollout}
            inputs.append(
                {
                    "responses_create_params": {"input": [{"role": "user", "content": question}]},
                    "question": question,
                    "expected_answer": expected,
                    "uuid": f"qa-{task}",
                    "agent_ref": {"type": "responses_api_agents", "name": AGENT},
                    **key,
                }
            )
            rollouts.append(
                {"response": response(answer, task, rollout), "reward": 0.5, **key, "agent_ref": {"name": AGENT}}
            )
    return (
        write_jsonl(directory / "rollouts_materialized_inputs.jsonl", inputs),
        write_jsonl(directory / "rollouts.jsonl", reversed(rollouts)),
    )


def response(answer: str, task: int, rollout: int) -> dict[str, Any]:
    text = {"type": "output_text", "text": answer, "annotations": []}
    return {
        "id": f"resp_{task}_{rollout}",
        "object": "response",
        "status": "completed",
        "output": [
            {"id": "rs_1", "type": "reasoning", "summary": []},
            {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "content": [text]},
        ],
        "usage": {"input_tokens": 20, "output_tokens": 5, "total_tokens": 25},
    }


def judge_config(directory: Path, judge: LocalJudge) -> Path:
    path = directory / "judge.yaml"
    path.write_text(
        "judge:\n"
        "  resources_servers:\n"
        "    equivalence_judge:\n"
        f"      judge_base_url: {judge.url}/v1\n"
        f"      api_key_env: {KEY_ENV}\n"
        "      max_attempts: 3\n"
        "      retry_base_wait_s: 0.01\n"
        "      retry_max_wait_s: 0.05\n"
        "      timeout_s: 10\n"
        "      domain: knowledge\n"
    )
    return path


@dataclass
class Run:
    result: subprocess.CompletedProcess[str]
    output: Path

    @property
    def rows(self) -> list[dict[str, Any]]:
        return read_jsonl(self.output) if self.output.exists() else []

    @property
    def failures(self) -> list[dict[str, Any]]:
        return read_jsonl(self.output.with_name(f"{self.output.stem}_failures.jsonl"))


def reverify(
    directory: Path,
    judge: LocalJudge,
    transcript: Transcript,
    *extra: str,
    rollouts: Path | None = None,
    copies: int = 1,
    config: Path | None = None,
) -> Run:
    inputs, dataset_rollouts = qa_dataset(directory, copies)
    rollouts = rollouts or dataset_rollouts
    output = directory / "out" / "reverified.jsonl"
    result = run_reverify(
        "run",
        "--config",
        config or judge_config(directory, judge),
        "--inputs",
        inputs,
        "--rollouts",
        rollouts,
        "--output",
        output,
        *extra,
        home=directory / "dagster_home",
    )
    transcript.roots.append(directory)
    transcript.outputs += [result.stdout, result.stderr]
    return Run(result, output)


def keys(rows: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(row["_ng_task_index"], row["_ng_rollout_index"]) for row in rows]


def expected_rewards() -> dict[tuple[int, int], float]:
    return {(task, r): rewards[r] for task, (*_, rewards) in enumerate(QA) for r in range(ROLLOUTS_PER_TASK)}


JUDGE_CALLS_LINE = re.compile(
    r"^Judge calls: (?P<calls>\d+) made(?: \((?P<input>[\d,]+) input, (?P<output>[\d,]+) output tokens\))?"
    r"(?:, (?P<hits>\d+) answered by the judge-call cache \((?P<cache>[^)]+)\)| \(the judge-call cache is off\))$",
    re.MULTILINE,
)


@dataclass(frozen=True)
class JudgeCallsLine:
    calls: int
    hits: int | None  # None: the cache was off
    input_tokens: int
    output_tokens: int
    cache: Path | None


def judge_calls_line(stdout: str) -> JudgeCallsLine:
    """The summary's ``Judge calls:`` line, read back; fails the test when it is missing or malformed."""
    found = JUDGE_CALLS_LINE.search(stdout)
    assert found is not None, stdout

    def number(name: str) -> int:
        return int((found.group(name) or "0").replace(",", ""))

    hits = None if found.group("hits") is None else number("hits")
    cache = None if found.group("cache") is None else Path(found.group("cache"))
    return JudgeCallsLine(number("calls"), hits, number("input"), number("output"), cache)
