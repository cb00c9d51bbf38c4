"""Pieces every synthetic NeMo Gym generator shares: seeded draws, the completion order, row shapes, files.

Split out of ``mcqa_rollouts`` so that a second generator (``qa_rollouts``) reuses them instead of copying
them. Nothing here knows about a particular environment: the shapes are those of any `gym eval run` output
(docs/nemo-gym-contract.md §2.1, §2.2), with key orders copied from real NeMo Gym files
(tests/data/conformance/mcqa). Everything is a pure function of its arguments, so the generators built on
it stay byte-identical per seed and can stream.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from random import Random
from typing import Any, Final, Protocol, TypeVar

import orjson

__all__ = [
    "CHAT_TEMPLATE_TOKENS",
    "EPOCH",
    "MODEL",
    "RESULT_TYPE",
    "Row",
    "agent_ref",
    "approx_tokens",
    "between",
    "completion_order",
    "derived_seed",
    "distinct",
    "message_item",
    "pick",
    "positive_int",
    "reasoning_item",
    "response_object",
    "responses_create_params",
    "write_jsonl_atomically",
]

Row = dict[str, Any]
T = TypeVar("T")

# Names as they appear in real NeMo Gym output.
MODEL: Final = "synthetic-policy-1"
RESULT_TYPE: Final = "legacy_agent"
# Created-at timestamps start here (Oct 2025, like the conformance files) so runs look like one session.
EPOCH: Final = 1_760_000_000.0
# Tokens a chat template adds around the user turn; usage counts them, the stored prompt does not show them.
CHAT_TEMPLATE_TOKENS: Final = 14


# --- seeded draws -------------------------------------------------------------------------------------------
# random.choice/sample/randint go through a getrandbits rejection loop (about 1 µs per draw, most of a
# generator's time); scaling one random() float is several times faster, and its bias (below 2**-50) does
# not matter for synthetic data. They also only use random(), whose output is fixed per seed.


def pick(rng: Random, seq: Sequence[T]) -> T:
    return seq[int(rng.random() * len(seq))]


def distinct(rng: Random, seq: Sequence[T], k: int) -> list[T]:
    pool = list(seq)
    return [pool.pop(int(rng.random() * len(pool))) for _ in range(k)]


def between(rng: Random, low: int, high: int) -> int:
    """A uniform integer in [low, high], both included."""
    return low + int(rng.random() * (high - low + 1))


def derived_seed(*parts: object) -> int:
    # blake2b, not hash(): Python salts str hashes per process, and the files must be byte-identical.
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def approx_tokens(text: str) -> int:
    # About four characters per token for English prose with BPE tokenizers.
    return (len(text) + 3) // 4


# --- completion order ---------------------------------------------------------------------------------------

_M64: Final = (1 << 64) - 1
_FEISTEL_ROUNDS: Final = 6


def completion_order(n: int, seed: int) -> Iterator[int]:
    """Yield a seeded pseudo-random permutation of range(n), one index at a time, in O(1) memory.

    random.shuffle would need all n keys in memory. A balanced Feistel network is a bijection on
    [0, 4**half) for any round function; re-encrypting values that land outside [0, n) ("cycle walking")
    restricts it to a bijection on [0, n), at under 4 encryptions per index on average.
    """
    half = max(1, ((n - 1).bit_length() + 1) // 2)
    mask = (1 << half) - 1
    digest = hashlib.blake2b(f"{seed}/completion-order".encode(), digest_size=8 * _FEISTEL_ROUNDS).digest()
    keys = [int.from_bytes(digest[8 * i : 8 * i + 8], "little") for i in range(_FEISTEL_ROUNDS)]

    def encrypt(x: int) -> int:
        left, right = x >> half, x & mask
        for key in keys:
            # splitmix64's finaliser: every input bit reaches the low bits kept by the mask.
            f = ((right ^ key) * 0x9E3779B97F4A7C15) & _M64
            f = ((f ^ (f >> 30)) * 0xBF58476D1CE4E5B9) & _M64
            f = ((f ^ (f >> 27)) * 0x94D049BB133111EB) & _M64
            left, right = right, left ^ ((f ^ (f >> 31)) & mask)
        return (left << half) | right

    for i in range(n):
        x = encrypt(i)
        while x >= n:
            x = encrypt(x)
        yield x


# --- row shapes ---------------------------------------------------------------------------------------------


def agent_ref(name: str) -> Row:
    return {"type": "responses_api_agents", "name": name}


def responses_create_params(prompt: str) -> Row:
    """The shape the agent echoes back into a rollout: every Responses-create field, unset ones as null."""
    return {
        "background": None,
        "include": None,
        "input": [{"content": prompt, "role": "user", "type": "message"}],
        "instructions": None,
        "max_output_tokens": None,
        "max_tool_calls": None,
        "metadata": None,
        "model": None,
        "parallel_tool_calls": None,
        "previous_response_id": None,
        "prompt": None,
        "reasoning": None,
        "service_tier": None,
        "store": None,
        "temperature": None,
        "text": None,
        "tool_choice": None,
        "tools": [],
        "top_logprobs": None,
        "top_p": None,
        "truncation": None,
        "user": "",
        "stream": None,
    }


def reasoning_item(item_id: str, summary: str) -> Row:
    return {
        "id": item_id,
        "summary": [{"text": summary, "type": "summary_text"}],
        "type": "reasoning",
        "encrypted_content": None,
        "content": None,
    }


def message_item(item_id: str, text: str) -> Row:
    return {
        "id": item_id,
        "content": [{"annotations": [], "text": text, "type": "output_text", "logprobs": []}],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    }


def response_object(
    response_id: str,
    created_at: float,
    output: list[Row],
    *,
    input_tokens: int,
    output_tokens: int,
    reasoning_tokens: int,
) -> Row:
    """A completed Responses API response as the policy model server returns it."""
    return {
        "id": response_id,
        "created_at": created_at,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "model": MODEL,
        "object": "response",
        "output": output,
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "background": False,
        "max_output_tokens": None,
        "max_tool_calls": None,
        "previous_response_id": None,
        "prompt": None,
        "reasoning": {"effort": None, "generate_summary": None, "summary": None},
        "service_tier": "default",
        "status": "completed",
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "top_logprobs": 0,
        "truncation": "disabled",
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": input_tokens + output_tokens,
        },
        "user": None,
        "prompt_cache_key": None,
        "safety_identifier": None,
        "store": True,
    }


# --- files and command line ---------------------------------------------------------------------------------


def write_jsonl_atomically(path: Path, rows: Iterable[Row]) -> tuple[int, int]:
    """Write `rows` to `path` via a temporary file in the same directory; return (rows, bytes)."""
    tmp_name = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # Not tempfile.mkstemp: its files are 0600, and these are data files others read (the umask applies).
    fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    count = 0
    size = 0
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as out:
            for row in rows:
                line = orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)
                out.write(line)
                count += 1
                size += len(line)
        # Same directory, so the rename is atomic: readers see the old file or the whole new one.
        os.replace(tmp_name, path)
    except BaseException:
        tmp_name.unlink(missing_ok=True)
        raise
    return count, size


def positive_int(value: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {number}")
    return number


def finished_response(
    rng: Random, hex_id: str, prompt: str, output: list[Row], text: str, reasoning_tokens: int, dispatch_index: int
) -> Row:
    """The response object around a rollout's output items, with usage and a creation time.

    Draws from ``rng`` last, once: callers depend on the order of their own draws before it.
    """
    input_tokens = approx_tokens(prompt) + CHAT_TEMPLATE_TOKENS
    # +1: the end-of-turn token is generated even when the visible text is empty.
    output_tokens = approx_tokens(text) + reasoning_tokens + 1
    # Dispatch is task-major at a steady rate; each response starts a little after its dispatch.
    created_at = round(EPOCH + dispatch_index * 0.02 + rng.uniform(0.0, 30.0), 1)
    return response_object(
        f"resp_{hex_id}",
        created_at,
        output,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        reasoning_tokens=reasoning_tokens,
    )


INPUTS_FILE_NAME: Final = "rollouts_materialized_inputs.jsonl"
ROLLOUTS_FILE_NAME: Final = "rollouts.jsonl"


class DatasetSpec(Protocol):
    tasks: int
    rollouts_per_task: int
    seed: int
    agent_name: str

    @property
    def rows(self) -> int: ...


S = TypeVar("S", bound=DatasetSpec)


def in_dispatch_order(spec: DatasetSpec, task_fields: Callable[[int], Row]) -> Iterator[Row]:
    """`rollouts_materialized_inputs.jsonl` rows in dispatch order: t0r0, t0r1, ..., t1r0, ...; ``task_fields(task)``
    gives the fields every rollout of a task shares."""
    for task in range(spec.tasks):
        shared = task_fields(task)
        for rollout in range(spec.rollouts_per_task):
            yield {**shared, "_ng_task_index": task, "_ng_rollout_index": rollout}


def in_completion_order(spec: DatasetSpec, rollout_row: Callable[[int, int], Row]) -> Iterator[Row]:
    """`rollouts.jsonl` rows in a seeded completion order (every key exactly once). ``rollout_row(task, rollout)``
    rebuilds each (cheap, deterministic) rather than caching tasks: in a shuffled order a cache of tasks would
    have to hold nearly all of them."""
    for key in completion_order(spec.rows, spec.seed):
        yield rollout_row(*divmod(key, spec.rollouts_per_task))


def write_dataset(out_dir: Path, input_rows: Iterable[Row], rollout_rows: Iterable[Row]) -> tuple[Path, Path]:
    """Both files of a run into ``out_dir``: (inputs_path, rollouts_path)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    inputs_path, rollouts_path = out_dir / INPUTS_FILE_NAME, out_dir / ROLLOUTS_FILE_NAME
    write_jsonl_atomically(inputs_path, input_rows)
    write_jsonl_atomically(rollouts_path, rollout_rows)
    return inputs_path, rollouts_path


def generator_main(
    argv: Sequence[str] | None,
    *,
    module: str,
    what: str,
    default_agent: str,
    make_spec: Callable[..., S],
    write: Callable[[Path, S], tuple[Path, Path]],
) -> int:
    """The command line of a generator module: writes one dataset and says how big and how fast."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=f"Write a synthetic NeMo Gym {what}: {INPUTS_FILE_NAME} and {ROLLOUTS_FILE_NAME}.",
    )
    parser.add_argument("--tasks", type=positive_int, required=True, help="distinct questions")
    parser.add_argument("--rollouts-per-task", type=positive_int, default=4, help="rollouts per question")
    parser.add_argument("--seed", type=int, default=0, help="same seed, byte-identical files")
    parser.add_argument("--agent-name", default=default_agent, help="agent_ref.name of every row")
    parser.add_argument("--out", type=Path, required=True, help="output directory (created if missing)")
    args = parser.parse_args(argv)
    spec = make_spec(
        tasks=args.tasks, rollouts_per_task=args.rollouts_per_task, seed=args.seed, agent_name=args.agent_name
    )
    started = time.perf_counter()
    try:
        paths = write(args.out, spec)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - started
    for path in paths:
        print(f"wrote {path}: {spec.rows} rows, {path.stat().st_size} bytes")
    print(f"{spec.rows} rollouts of {spec.tasks} tasks in {elapsed:.2f} s ({spec.rows / elapsed:.0f} rows/s)")
    return 0
