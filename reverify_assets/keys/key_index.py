"""Key-only indexes of JSONL files and the join of rollouts to their materialized inputs.

An index holds five integers per row (key, byte offset, line number, the prompt's fingerprint), never the row
itself, so joining and sorting a million rows costs tens of megabytes; rows are read back one seek at a time.
The join refuses a rollout whose prompt is not its input row's (``rollout_identity``).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import numpy as np
import polars as pl

from reverify_assets.errors import InputError
from reverify_assets.files.jsonl import JsonlLine, iter_jsonl
from reverify_assets.keys.key_columns import KeyColumns
from reverify_assets.keys.rollout_identity import NO_TEXT, USER_SHIFT, prompt_fingerprint
from reverify_assets.keys.rollout_keys import RolloutKey, describe_key, row_key
from reverify_assets.keys.rollout_mismatch import (
    SHOWN_MISMATCHES,
    PromptSide,
    confirmed_mismatches,
    prompt_mismatch_error,
)
from reverify_assets.keys.sorted_keys import (
    KEY_COLUMNS,
    ROW_NUMBER_DTYPE,
    duplicated_keys,
    is_sorted,
    packed_keys,
    positions_in,
    surely_unique_keys,
)

INDEX_SCHEMA = {"task": pl.Int64, "rollout": pl.Int64, "offset": pl.Int64, "line": pl.Int64}
PLAN_COLUMNS = ("task", "rollout", "input_offset", "input_line", "rollout_offset", "rollout_line")
PROMPT_COLUMN = "prompt"  # each row's prompt_fingerprint: in the indexes the scans make, not in every index


@dataclass(frozen=True)
class KeyIndex:
    path: Path
    frame: pl.DataFrame  # task, rollout, offset, line; in file order (the prefetched rollouts: in key order)

    @property
    def rows(self) -> int:
        return self.frame.height


RowCheck = Callable[[JsonlLine, RolloutKey], None]


def scan_keys(
    path: Path,
    *,
    check: RowCheck | None = None,
    limit: int | None = None,
    reject_duplicates: bool = True,
    with_prompts: bool = False,
) -> KeyIndex:
    """Index a JSONL file by key; ``check`` sees each parsed row (to validate it) before it is dropped;
    ``with_prompts``: with each row's prompt fingerprint (``rollout_identity``) in ``PROMPT_COLUMN``.

    ``reject_duplicates=False`` keeps every copy, for callers that report duplicates instead of failing.
    """
    tasks, rollouts, offsets, lines, prompts = array("q"), array("q"), array("q"), array("q"), array("q")
    # islice: the line after the limit is not even read (a fault there is not this scan's to report).
    for entry in islice(iter_jsonl(path), limit):
        key = row_key(entry.row, path, entry.line_no)
        if check is not None:
            check(entry, key)
        tasks.append(key[0])
        rollouts.append(key[1])
        offsets.append(entry.offset)
        lines.append(entry.line_no)
        if with_prompts:
            prompts.append(prompt_fingerprint(entry.row))
    frame = pl.DataFrame({"task": tasks, "rollout": rollouts, "offset": offsets, "line": lines}, schema=INDEX_SCHEMA)
    if with_prompts:
        frame = frame.with_columns(pl.Series(PROMPT_COLUMN, prompts, dtype=pl.Int64))
    index = KeyIndex(path, frame)
    if reject_duplicates:
        reject_duplicate_keys(index)
    return index


def key_index_of(path: Path, columns: KeyColumns, *, reject_duplicates: bool = True) -> KeyIndex:
    """The key index of ``path`` from its ``scan_key_columns`` columns (``scan_keys``'s, had it scanned it)."""
    index = KeyIndex(path, key_frame(columns))
    if reject_duplicates:
        reject_duplicate_keys(index)
    return index


def key_frame(columns: KeyColumns) -> pl.DataFrame:
    values = (
        np.frombuffer(columns.tasks, dtype=np.int64),
        np.frombuffer(columns.rollouts, dtype=np.int64),
        np.frombuffer(columns.offsets, dtype=np.int64),
        np.arange(1, columns.rows + 1, dtype=np.int64),  # every line is a row (the fast scan refuses blank lines)
    )
    frame = pl.DataFrame(dict(zip(INDEX_SCHEMA, values, strict=True)), schema=INDEX_SCHEMA)
    if columns.prompts is None:
        return frame
    return frame.with_columns(pl.Series(PROMPT_COLUMN, np.frombuffer(columns.prompts, dtype=np.int64)))


def reject_duplicate_keys(index: KeyIndex) -> None:
    if surely_unique_keys(index.frame):
        return
    duplicates = duplicated_keys(index.frame)
    if duplicates.is_empty():  # keys too far apart to pack, and unique
        return
    duplicated = index.frame.join(duplicates, on=KEY_COLUMNS, how="semi")
    first = duplicated.sort("line").row(0, named=True)
    key = (first["task"], first["rollout"])
    at_lines = duplicated.filter((pl.col("task") == key[0]) & (pl.col("rollout") == key[1]))["line"]
    others = duplicates.height - 1
    more = f" ({others} more duplicated keys)" if others else ""
    raise InputError(
        f"{index.path}: duplicate key {describe_key(key)} at lines {', '.join(str(n) for n in sorted(at_lines))}{more}",
        path=index.path,
        line=first["line"],
        key=describe_key(key),
    )


def join_rollouts_to_inputs(inputs: KeyIndex, rollouts: KeyIndex, *, check_prompts: bool = True) -> pl.DataFrame:
    """Pair every rollout with its input row, sorted by key; each key is in ``inputs`` once at most.

    Columns: task, rollout, input_offset, input_line, rollout_offset, rollout_line, then any further
    columns the inputs index carries. Each column of the plan is gathered once, straight from the two
    indexes, by row numbers found on packed keys: at a million rows, sorting both indexes first and
    then putting the plan together held about 50 MB more at the peak.

    ``check_prompts``: refuse pairs whose prompts differ, where both indexes hold the prompts' fingerprints.
    """
    compared = check_prompts and PROMPT_COLUMN in inputs.frame.columns and PROMPT_COLUMN in rollouts.frame.columns
    extra_columns = [name for name in inputs.frame.columns if name not in INDEX_SCHEMA and name != PROMPT_COLUMN]
    wanted = rollouts.frame.rename({"offset": "rollout_offset", "line": "rollout_line"})
    known = inputs.frame.rename({"offset": "input_offset", "line": "input_line"})
    input_prompts, rollout_prompts = (["input_prompt"], ["rollout_prompt"]) if compared else ([], [])
    if compared:
        wanted = wanted.rename({PROMPT_COLUMN: "rollout_prompt"})
        known = known.rename({PROMPT_COLUMN: "input_prompt"})
    input_columns = [*extra_columns, *input_prompts]
    packed = packed_keys([known, wanted])
    if packed is None:
        plan = _hash_join(known, wanted, rollouts, inputs.path, input_columns, rollout_prompts)
    else:
        plan = _packed_join(known, wanted, rollouts, inputs.path, packed, input_columns, rollout_prompts)
    if compared:
        _reject_other_prompts(plan, inputs.path, rollouts.path)
        plan = plan.drop("rollout_prompt", "input_prompt")
    return plan


def _packed_join(
    known: pl.DataFrame,
    wanted: pl.DataFrame,
    rollouts: KeyIndex,
    inputs_path: Path,
    packed: list[np.ndarray],
    input_columns: list[str],
    rollout_columns: list[str],
) -> pl.DataFrame:
    known_keys, wanted_keys = packed
    packed.clear()  # else the two arrays outlive the `del`s below: 16 MB at a million rows, at the join's peak
    # Indexes already in key order (materialized inputs as NeMo Gym writes them, the prefetched rollouts) are
    # searched and taken as they are.
    known_order = None if is_sorted(known_keys) else np.argsort(known_keys, kind="stable")
    at, found = positions_in(known_keys if known_order is None else known_keys[known_order], wanted_keys)
    del known_keys
    if not found.all():
        _reject_missing(wanted.filter(pl.Series(~found)), rollouts.path, inputs_path)
    plan_order = None if is_sorted(wanted_keys) else np.argsort(wanted_keys, kind="stable")
    del wanted_keys
    input_rows = at if plan_order is None else at[plan_order]
    if known_order is not None:
        input_rows = known_order[input_rows]
    del at, known_order
    # As polars' own row numbers: gathering by an int64 numpy array converts it on the way, 4 MB more.
    rows = pl.Series(input_rows.astype(ROW_NUMBER_DTYPE))
    del input_rows
    matched = known.select("input_offset", "input_line", *input_columns)[rows]
    del rows
    ordered = wanted.select("task", "rollout", "rollout_offset", "rollout_line", *rollout_columns)
    if plan_order is not None:
        ordered = ordered[plan_order]
    return pl.concat([ordered, matched], how="horizontal").select(*PLAN_COLUMNS, *input_columns, *rollout_columns)


def _hash_join(
    known: pl.DataFrame,
    wanted: pl.DataFrame,
    rollouts: KeyIndex,
    inputs_path: Path,
    input_columns: list[str],
    rollout_columns: list[str],
) -> pl.DataFrame:
    """The join for keys too far apart to pack into one integer; polars' hash join costs more memory."""
    missing = wanted.join(known, on=KEY_COLUMNS, how="anti")
    if not missing.is_empty():
        _reject_missing(missing, rollouts.path, inputs_path)
    return (
        wanted.join(known, on=KEY_COLUMNS, how="inner")
        .select(*PLAN_COLUMNS, *input_columns, *rollout_columns)
        .sort(KEY_COLUMNS)
    )


def mismatched_prompts(
    pairs: pl.DataFrame, expected: str, found: str, *, whole: bool = False, either: bool = False
) -> pl.DataFrame:
    """The rows of ``pairs`` whose fingerprints (``rollout_identity``) in columns ``expected`` (an input row's)
    and ``found`` (its rollout's) are not of one prompt, both known: the same prompt through the first user
    message, or where the input row has none (an environment that writes the user's turn at rollout time: user
    simulators, text games), the same messages before it. ``either``: where either has none (two scorings, of
    which one may be the rollouts themselves). ``whole``: the same fingerprint."""
    expected_column, found_column = pl.col(expected), pl.col(found)
    split = 1 << USER_SHIFT  # the fingerprints are never negative: // and % split them
    if whole:
        same = expected_column == found_column
    else:
        no_user = expected_column % split == 0
        if either:
            no_user = no_user | (found_column % split == 0)
        same = (
            pl.when(no_user)
            .then(expected_column // split == found_column // split)
            .otherwise(expected_column == found_column)
        )
    known = (expected_column != NO_TEXT) & (found_column != NO_TEXT)
    return pairs.filter(~same & known)


RECHECKED = 1000  # mismatched pairs read again before the count is trusted


def _reject_other_prompts(plan: pl.DataFrame, inputs_path: Path, rollouts_path: Path) -> None:
    """Raises when a pair's prompts differ (a row without a prompt is not compared). The first mismatches are
    read again and fingerprinted row by row; should one of them turn out the same prompt (see
    ``rollout_identity.confirmed_mismatches``), every one is."""
    mismatched = mismatched_prompts(plan, "input_prompt", "rollout_prompt").sort("rollout_line")
    if mismatched.is_empty():
        return
    sides = PromptSide("inputs", inputs_path, "input"), PromptSide("rollouts", rollouts_path, "rollout")
    checked = mismatched.head(RECHECKED).to_dicts()
    confirmed = confirmed_mismatches(checked, *sides)
    if len(confirmed) < len(checked) < mismatched.height:
        confirmed = confirmed_mismatches(mismatched.to_dicts(), *sides)
        count = len(confirmed)
    else:
        count = mismatched.height - (len(checked) - len(confirmed))
    if not confirmed:
        return
    raise prompt_mismatch_error(
        f"{count} of {plan.height} rollouts in {rollouts_path} were not produced from the row of the same key in "
        f"the materialized inputs {inputs_path}: their prompts (responses_create_params.input) differ. Most "
        "likely the two files come from different datasets or runs: pass the inputs the rollouts were collected "
        "from.",
        confirmed[:SHOWN_MISMATCHES],
        *sides,
    )


def _reject_missing(missing: pl.DataFrame, rollouts_path: Path, inputs_path: Path) -> None:
    first = missing.sort("rollout_line").row(0, named=True)
    others = missing.height - 1
    more = f" ({others} more rollouts have no input row)" if others else ""
    raise InputError(
        f"{rollouts_path}:{first['rollout_line']}: rollout {describe_key((first['task'], first['rollout']))} "
        f"has no matching row in the materialized inputs {inputs_path}{more}",
        path=rollouts_path,
        line=first["rollout_line"],
        key=describe_key((first["task"], first["rollout"])),
    )
