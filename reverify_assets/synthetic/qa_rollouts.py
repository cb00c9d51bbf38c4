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

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reverify_assets.local_judge.verdict_rule import verdict_reply
from reverify_assets.servers.judge.config import EquivalenceJudgeConfig
from reverify_assets.servers.judge.prompt import fill_prompt, judge_messages, last_assistant_text
from reverify_assets.servers.judge.verdict import parse_verdict
from reverify_assets.synthetic.mcqa_rollouts import SyntheticSpec
from reverify_assets.synthetic.nemo_gym_rows import (
    INPUTS_FILE_NAME,
    RESULT_TYPE,
    ROLLOUTS_FILE_NAME,
    Row,
    agent_ref,
    generator_main,
    in_completion_order,
    in_dispatch_order,
    responses_create_params,
    write_dataset,
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


def iter_input_rows(spec: QASpec) -> Iterator[Row]:
    """`rollouts_materialized_inputs.jsonl` rows in dispatch order: t0r0, t0r1, ..., t1r0, ..."""
    ref = agent_ref(spec.agent_name)

    def task_fields(index: int) -> Row:
        task = make_task(spec.seed, index)
        return {
            "responses_create_params": {"input": [{"role": "user", "content": task.prompt}]},
            "question": task.question,
            "expected_answer": task.expected_answer,
            "uuid": task.uuid,
            "agent_ref": ref,
        }

    return in_dispatch_order(spec, task_fields)


def iter_rollout_rows(spec: QASpec) -> Iterator[Row]:
    """`rollouts.jsonl` rows in a seeded completion order (every key exactly once)."""
    return in_completion_order(spec, lambda task, rollout: _rollout_row(spec, make_task(spec.seed, task), rollout))


def write_qa_dataset(out_dir: Path, spec: QASpec) -> tuple[Path, Path]:
    """Write both files of a synthetic free-form QA run into `out_dir`; return (inputs_path, rollouts_path)."""
    return write_dataset(out_dir, iter_input_rows(spec), iter_rollout_rows(spec))


# --- command line -------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    return generator_main(
        argv,
        module="reverify_assets.synthetic.qa_rollouts",
        what="free-form QA run",
        default_agent=DEFAULT_AGENT_NAME,
        make_spec=QASpec,
        write=write_qa_dataset,
    )


if __name__ == "__main__":
    sys.exit(main())
