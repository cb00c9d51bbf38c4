"""``reverify run --dry-run``: what a run would verify and what its judge calls would cost, before spending.

Read only: the run's own indexes of its inputs, its rollouts (or, for ``--judge-failed-only``, the source
sidecar) and, with ``--resume``, its output and sidecar, with the same skip rules the run applies. It writes
nothing, not even the Dagster home, and starts no server.

Judge calls are counted per row from the judge's own rules where the judge is built in: a row whose answer is
too long costs none, every other row one, and a row may cost a second (``check_twice_swap``, or the whole text
judged again after a per-record regex), so the census gives a range. Its prompt tokens are those of the request
the judge server would send (``servers.judge.server.judge_request``). NeMo Gym's judge servers (a server whose
block names a model server) are counted at one call a row, two with ``check_twice_swap``, their prompts
estimated from the row's question, expected answer and response text (their templates are not ours to render).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from reverify_assets.budget.token_estimate import TokenCounter
from reverify_assets.config.implementations import runs_builtin
from reverify_assets.config.topology import ServerBlock
from reverify_assets.files.jsonl import iter_jsonl
from reverify_assets.files.names import RunFiles, source_failures_path, unsafe_path
from reverify_assets.keys.rollout_identity import allows_prompt_mismatch
from reverify_assets.keys.rollout_keys import RolloutKey, row_key
from reverify_assets.recovery.judge_failures import RECOVERABLE_CLASSES, index_judge_failures
from reverify_assets.resume.settled_keys import max_attempts_from, read_cache, skip_counts
from reverify_assets.rows.result_routing import FAILURE_CLASS_FIELD
from reverify_assets.run.options import RunOptions
from reverify_assets.run.preparation import VerifierSetup, index_inputs, index_rollouts, join_and_route
from reverify_assets.run.row_source import PairReader
from reverify_assets.servers.judge.config import EquivalenceJudgeConfig
from reverify_assets.servers.judge.prompt import last_assistant_text, last_user_text
from reverify_assets.servers.judge.server import first_judgement, judge_request, may_judge_twice, parse_request
from reverify_assets.servers.protocol import BadVerifyRequest
from reverify_assets.servers.registry import validate_builtin_block

BUILTIN_JUDGE = "equivalence_judge"
PLAN_READ = ("task", "rollout", "input_offset", "input_line", "rollout_offset", "rollout_line", "server")


@dataclass
class JudgeSpend:
    """One judge server's calls and prompt tokens over the rows to verify: the least and the most."""

    estimated_from_rows: bool  # a NeMo Gym judge: its prompts estimated, not rendered
    calls: int = 0
    calls_at_most: int = 0
    prompt_tokens: int = 0
    prompt_tokens_at_most: int = 0
    rows_refused: int = 0  # rows it would answer HTTP 422 (a missing field): no call


@dataclass
class Census:
    to_verify: Counter[tuple[str, str]] = field(default_factory=Counter)  # (server, agent) -> rows
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows, in the order the run applies them
    judges: dict[str, JudgeSpend] = field(default_factory=dict)
    token_method: str = ""

    @property
    def rows(self) -> int:
        return self.to_verify.total()


def take_census(options: RunOptions, setup: VerifierSetup) -> Census:
    census = Census(token_method=(tokens := TokenCounter()).method)
    inputs = index_inputs(options.inputs_file)
    if options.judge_failed_only:
        source = source_failures_path(options.rollouts_file)
        failures = index_judge_failures(source, limit=options.limit)
        census.skipped["not a judge failure"] = _keys_not_recoverable(source)
        rows_source = source
    else:
        failures = index_rollouts(options.rollouts_file, limit=options.limit)
        rows_source = options.rollouts_file
    plan = join_and_route(inputs, failures, setup.topology, check_prompts=not allows_prompt_mismatch(setup.config))
    if options.resume or options.append:
        plan = _unsettled(plan, options, census)
    judges = {name: block for name, block in setup.topology.servers.items() if _is_judge(block, setup.config)}
    judge_configs = {name: _builtin_judge_config(block) for name, block in judges.items()}
    census.judges = {name: JudgeSpend(estimated_from_rows=judge_configs[name] is None) for name in judges}
    with PairReader(options.inputs_file, rows_source) as pairs:
        for task, rollout, input_offset, input_line, rollout_offset, rollout_line, server in plan.select(
            PLAN_READ
        ).iter_rows():
            key: RolloutKey = (task, rollout)
            payload = pairs.read(key, (input_offset, input_line), (rollout_offset, rollout_line)).payload
            census.to_verify[(server, _agent(payload))] += 1
            if server in judges:
                _count_judge_calls(census.judges[server], judges[server], judge_configs[server], payload, tokens)
    return census


def _unsettled(plan: pl.DataFrame, options: RunOptions, census: Census) -> pl.DataFrame:
    """The plan less what ``--resume`` would skip, each reason counted as the run counts it."""
    files = RunFiles.for_output(unsafe_path(options.output_file) if _resumes_unsafe(options) else options.output_file)
    status = read_cache(files.output, files.sidecar, max_attempts_from(options.max_attempts))
    (done, terminal, maxed), rest = skip_counts(status, plan)
    census.skipped["already in the output"] = done
    census.skipped["a terminal failure in the sidecar"] = terminal
    census.skipped[f"failed {status.max_attempts} times or more"] = maxed
    return rest


def _resumes_unsafe(options: RunOptions) -> bool:
    """With --force, a server not declared stateless writes ``unsafe_`` files: those are what a resume reads."""
    return options.force and not options.judge_failed_only and unsafe_path(options.output_file).exists()


def _keys_not_recoverable(sidecar: Path) -> int:
    """Keys of the source sidecar that recovery leaves alone: none of their rows is a judge failure."""
    recoverable: set[RolloutKey] = set()
    others: set[RolloutKey] = set()
    for entry in iter_jsonl(sidecar):
        key = row_key(entry.row, sidecar, entry.line_no)
        (recoverable if entry.row.get(FAILURE_CLASS_FIELD) in RECOVERABLE_CLASSES else others).add(key)
    return len(others - recoverable)


def _is_judge(block: ServerBlock, config: Mapping[str, Any]) -> bool:
    if block.url:
        return block.type == BUILTIN_JUDGE
    return (runs_builtin(block) and block.type == BUILTIN_JUDGE) or bool(block.referenced_models(config))


def _builtin_judge_config(block: ServerBlock) -> EquivalenceJudgeConfig | None:
    if block.type != BUILTIN_JUDGE or not (block.url or runs_builtin(block)):
        return None
    config = validate_builtin_block(block)
    assert isinstance(config, EquivalenceJudgeConfig)
    return config


def _agent(payload: Mapping[str, Any]) -> str:
    agent = payload.get("agent_ref")
    name = agent.get("name") if isinstance(agent, Mapping) else None
    return str(name) if name is not None else "(no agent_ref)"


def _count_judge_calls(
    spend: JudgeSpend,
    block: ServerBlock,
    config: EquivalenceJudgeConfig | None,
    payload: dict[str, Any],
    tokens: TokenCounter,
) -> None:
    if config is None:
        prompt_tokens = tokens.count("\n".join(_row_texts(payload)))
        _add(spend, prompt_tokens, prompt_tokens if block.fields.get("check_twice_swap") is True else None)
        return
    try:
        request = parse_request(payload)
    except BadVerifyRequest:
        spend.rows_refused += 1
        return
    first = first_judgement(config, request)
    if isinstance(first, str):  # graded without a call
        return
    expected, question = request.expected_answer, first.question

    def prompt_tokens(expected_answer: str, generated_answer: str) -> int:
        messages = judge_request(config, question, expected_answer, generated_answer)["messages"]
        return sum(tokens.count(message["content"]) for message in messages)

    # The second call the row may need, as the server would send it: the answers swapped, or the whole text.
    seconds = []
    if config.check_twice_swap:
        seconds.append(prompt_tokens(first.generated, expected))
    if may_judge_twice(config, request):
        seconds.append(prompt_tokens(expected, first.answer_text or config.msg_extraction_failure))
    _add(spend, prompt_tokens(expected, first.generated), max(seconds, default=None))


def _add(spend: JudgeSpend, prompt_tokens: int, second_call_tokens: int | None) -> None:
    spend.calls += 1
    spend.prompt_tokens += prompt_tokens
    spend.calls_at_most += 1 if second_call_tokens is None else 2
    spend.prompt_tokens_at_most += prompt_tokens + (second_call_tokens or 0)


def _row_texts(payload: Mapping[str, Any]) -> list[str]:
    """What a judge's prompt is mostly made of: the question, the expected answer, the response's answer."""
    texts = [last_user_text(payload.get("responses_create_params"))]
    for name in ("question", "expected_answer"):
        if isinstance(payload.get(name), str):
            texts.append(payload[name])
    response = payload.get("response")
    if isinstance(response, Mapping):
        texts.append(last_assistant_text(response))
    return texts
