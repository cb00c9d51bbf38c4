"""Synthetic free-form QA rollouts in NeMo Gym's file formats, for the LLM-judge flow (``equivalence_judge``).

Writes the pair `gym eval run` leaves behind for a short-answer QA environment graded by an equivalence
judge (docs/nemo-gym-contract.md §2.1, §2.2): `rollouts_materialized_inputs.jsonl` in dispatch order and
`rollouts.jsonl` in a seeded completion order. Questions have short exact answers of many kinds (integers,
fractions, quantities with units, percentages, capitals, chemical symbols, years, dates, weekdays), and the
rollouts answer them in the forms real models produce (`\\boxed{\\frac{1}{2}}`, `Answer: 0.5`, `12cm`,
"The answer is 42.", an empty message, ...), right or wrong, so the judge has real work to do.

Each rollout stores what the original verifier gave it: the `equivalence_judge` server with its default
config asking the local judge model (`reverify judge-serve`), i.e. the same prompt, the reply of
`reverify_assets.local_judge.verdict_rule` and the reward read from that reply. Re-verifying the files
against a healthy local judge therefore reproduces every stored reward.

Every row is a pure function of the spec and its `(task index, rollout index)` key, so both files are
streamed (memory is constant in the number of rows) and byte-identical for a given seed.

This module is the driver: it judges each response and streams the rows and files. The question kinds live in
``qa_questions`` (their facts in ``qa_tables``, number forms in ``qa_numbers``) and the way a rollout phrases its
answer in ``qa_answers``.

    python -m reverify_assets.synthetic.qa_rollouts --tasks 50 --rollouts-per-task 4 --seed 11 --out DIR
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reverify_assets.local_judge.verdict_rule import verdict_reply
from reverify_assets.servers.judge.config import EquivalenceJudgeConfig
from reverify_assets.servers.judge.prompt import fill_prompt, judge_messages, last_assistant_text
from reverify_assets.servers.judge.verdict import parse_verdict
from reverify_assets.synthetic.mcqa_rollouts import INPUTS_FILE_NAME, ROLLOUTS_FILE_NAME, SyntheticSpec
from reverify_assets.synthetic.nemo_gym_rows import (
    RESULT_TYPE,
    Row,
    agent_ref,
    completion_order,
    positive_int,
    responses_create_params,
    write_jsonl_atomically,
)
from reverify_assets.synthetic.qa_answers import make_response
from reverify_assets.synthetic.qa_questions import QATask, make_task

__all__ = [
    "DEFAULT_AGENT_NAME",
    "INPUTS_FILE_NAME",
    "ROLLOUTS_FILE_NAME",
    "QASpec",
    "iter_input_rows",
    "iter_rollout_rows",
    "main",
    "write_qa_dataset",
]

DEFAULT_AGENT_NAME: Final = "qa_simple_agent"


@dataclass(frozen=True)
class QASpec(SyntheticSpec):
    agent_name: str = DEFAULT_AGENT_NAME


# --- constants ----------------------------------------------------------------------------------------------

_ENVIRONMENT_SERVER: Final = "qa_environment_server"
# The judge the original run used: the equivalence_judge server's defaults (configs/judge.yaml changes only
# where it points and how it retries, none of which reaches a stored row).
_JUDGE: Final = EquivalenceJudgeConfig()


def _judge(task: QATask, response: Row) -> tuple[float, str | None, list[Row]]:
    """(reward, extracted_answer, judge_evaluations) as the equivalence_judge server gives them by default.

    The same steps as EquivalenceJudgeServer._grade with the default config and no regex: the candidate is the
    last assistant message (or the extraction-failure text), the judge's reply is the local judge model's
    rule, and the reward is what parse_verdict reads from that reply.
    """
    extracted = last_assistant_text(response) or None
    generated = extracted if extracted is not None else _JUDGE.msg_extraction_failure
    prompt = fill_prompt(
        _JUDGE.prompt_template, question=task.question, expected_answer=task.expected_answer, generated_answer=generated
    )
    request = {
        "model": _JUDGE.judge_model,
        "messages": judge_messages(_JUDGE.judge_system_message, prompt),
        **_JUDGE.sampling_params(),
    }
    reply = verdict_reply(prompt)
    verdict = parse_verdict(reply, equal_label=_JUDGE.judge_equal_label, not_equal_label=_JUDGE.judge_not_equal_label)
    evaluation: Row = {"responses_create_params": request, "response": reply, "verdict_label": verdict.label}
    if verdict.issues:
        evaluation["judgement_parsing_issues"] = list(verdict.issues)
    return (1.0 if verdict.equal else 0.0), extracted, [evaluation]


def _rollout_row(spec: SyntheticSpec, task: QATask, rollout: int) -> Row:
    response = make_response(spec.seed, task, rollout, task.index * spec.rollouts_per_task + rollout)
    reward, extracted, evaluations = _judge(task, response)
    # The equivalence_judge server's /verify response, then the stamps collection adds.
    return {
        "responses_create_params": responses_create_params(task.prompt),
        "response": response,
        "reward": reward,
        "mask_sample": False,
        "failure_kind": None,
        "failure_reason": None,
        "expected_answer": task.expected_answer,
        "extracted_answer": extracted,
        "judge_evaluations": evaluations,
        "_ng_task_index": task.index,
        "_ng_rollout_index": rollout,
        "agent_ref": agent_ref(spec.agent_name),
        "_ng_environment_server": _ENVIRONMENT_SERVER,
        "_ng_result_type": RESULT_TYPE,
    }


# --- rows and files -----------------------------------------------------------------------------------------


def iter_input_rows(spec: SyntheticSpec) -> Iterator[Row]:
    """`rollouts_materialized_inputs.jsonl` rows in dispatch order: t0r0, t0r1, ..., t1r0, ..."""
    ref = agent_ref(spec.agent_name)
    for t in range(spec.tasks):
        task = make_task(spec.seed, t)
        base: Row = {
            "responses_create_params": {"input": [{"role": "user", "content": task.prompt}]},
            "question": task.question,
            "expected_answer": task.expected_answer,
            "uuid": task.uuid,
            "agent_ref": ref,
        }
        for r in range(spec.rollouts_per_task):
            yield {**base, "_ng_task_index": t, "_ng_rollout_index": r}


def iter_rollout_rows(spec: SyntheticSpec) -> Iterator[Row]:
    """`rollouts.jsonl` rows in a seeded completion order (every key exactly once)."""
    k = spec.rollouts_per_task
    for key in completion_order(spec.rows, spec.seed):
        t, r = divmod(key, k)
        # Rebuilt per rollout (cheap, deterministic) rather than cached: in a shuffled order a cache of
        # tasks would have to hold nearly all of them.
        yield _rollout_row(spec, make_task(spec.seed, t), r)


def write_qa_dataset(out_dir: Path, spec: SyntheticSpec) -> tuple[Path, Path]:
    """Write both files of a synthetic QA run into `out_dir`; return (inputs_path, rollouts_path)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    inputs_path = out_dir / INPUTS_FILE_NAME
    rollouts_path = out_dir / ROLLOUTS_FILE_NAME
    write_jsonl_atomically(inputs_path, iter_input_rows(spec))
    write_jsonl_atomically(rollouts_path, iter_rollout_rows(spec))
    return inputs_path, rollouts_path


# --- command line -------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reverify_assets.synthetic.qa_rollouts",
        description=f"Write a synthetic NeMo Gym free-form QA run: {INPUTS_FILE_NAME} and {ROLLOUTS_FILE_NAME}.",
    )
    parser.add_argument("--tasks", type=positive_int, required=True, help="distinct questions")
    parser.add_argument("--rollouts-per-task", type=positive_int, default=4, help="rollouts per question")
    parser.add_argument("--seed", type=int, default=0, help="same seed, byte-identical files")
    parser.add_argument("--agent-name", default=DEFAULT_AGENT_NAME, help="agent_ref.name of every row")
    parser.add_argument("--out", type=Path, required=True, help="output directory (created if missing)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    spec = QASpec(
        tasks=args.tasks, rollouts_per_task=args.rollouts_per_task, seed=args.seed, agent_name=args.agent_name
    )
    started = time.perf_counter()
    try:
        inputs_path, rollouts_path = write_qa_dataset(args.out, spec)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - started
    for path in (inputs_path, rollouts_path):
        print(f"wrote {path}: {spec.rows} rows, {path.stat().st_size} bytes")
    print(f"{spec.rows} rollouts of {spec.tasks} tasks in {elapsed:.2f} s ({spec.rows / elapsed:.0f} rows/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
