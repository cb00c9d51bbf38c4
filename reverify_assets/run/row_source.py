"""Reads joined (input, rollout) pairs back by byte offset and builds their verify payloads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from reverify_assets.errors import ReadError
from reverify_assets.files.jsonl import pread_line, read_row_at
from reverify_assets.keys.rollout_keys import RolloutKey, check_indexed_key
from reverify_assets.rows.payload import build_verify_payload
from reverify_assets.rows.row_fields import is_masked, numeric_reward


@dataclass(frozen=True, slots=True)
class ReadPair:
    payload: dict[str, Any]  # the /verify request
    stored_reward: float | None  # the reward the original run stored on the rollout row (None: no number)
    stored_masked: bool  # the rollout row is masked (``mask_sample``)


class PairReader:
    def __init__(self, inputs: Path, rollouts: Path) -> None:
        self.inputs_path, self.rollouts_path = inputs, rollouts
        self._inputs = open(inputs, "rb")
        self._rollouts = open(rollouts, "rb")
        self._last_input_offset = -1
        self._last_input = b""

    def read(self, key: RolloutKey, input_at: tuple[int, int], rollout_at: tuple[int, int]) -> ReadPair:
        """``*_at`` are (byte offset, line number) pairs from the join plan. The rollout row is parsed here
        anyway, so its stored reward comes with the payload for nothing."""
        input_row = read_row_at(self._inputs, input_at[0], self.inputs_path, input_at[1])
        rollout_row = read_row_at(self._rollouts, rollout_at[0], self.rollouts_path, rollout_at[1])
        for path, line, row in (
            (self.inputs_path, input_at[1], input_row),
            (self.rollouts_path, rollout_at[1], rollout_row),
        ):
            # Else one row's input would be paired with another's response.
            check_indexed_key(row, path, line, key)
        payload = build_verify_payload(input_row, rollout_row, key)
        return ReadPair(payload, numeric_reward(rollout_row), is_masked(rollout_row))

    def read_lines(self, input_at: tuple[int, int], rollout_at: tuple[int, int]) -> tuple[bytes, bytes]:
        """The two stored lines as they are, unparsed and unchecked: for a server that checks them itself.

        Rows come in key order, so a task's rollouts follow each other and share one input line: it is read once.
        """
        if input_at[0] != self._last_input_offset:
            try:
                self._last_input = pread_line(self._inputs.fileno(), input_at[0])
            except OSError as exc:
                raise ReadError(self.inputs_path, exc) from exc
            self._last_input_offset = input_at[0]
        try:
            return self._last_input, pread_line(self._rollouts.fileno(), rollout_at[0])
        except OSError as exc:
            raise ReadError(self.rollouts_path, exc) from exc

    def close(self) -> None:
        self._inputs.close()
        self._rollouts.close()

    def __enter__(self) -> PairReader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
