"""Which verifier configs scored a side's rows, and the rule that a comparison needs one per side.

A side scored by two configs (a resumed run after a config edit, a recovery merged onto other rows)
compares nothing in particular, so it is refused unless the user says otherwise, and then reported.
Rows without ``reverify_provenance`` were scored before reverify ("original"): one such side is fine.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from reverify_assets.errors import StateError
from reverify_assets.rows.result_routing import ORIGINAL_CONFIG

ORIGINAL = ORIGINAL_CONFIG


class MixedConfigsError(StateError):
    """A side mixes rows of several verifier configs and ``--allow-mixed-configs`` was not given."""

    def __init__(self, message: str, *, role: str, path: Path, configs: Counter[str]) -> None:
        super().__init__(message, path=path)
        self.role, self.configs = role, configs


def describe_configs(configs: Counter[str]) -> str:
    return ", ".join(f"{label} ({rows} rows)" for label, rows in configs.most_common())


def config_warnings(sides: dict[str, tuple[Path, Counter[str]]], *, allow_mixed: bool) -> list[str]:
    """Warnings for the report; raises :class:`MixedConfigsError` on a mixed side unless ``allow_mixed``."""
    warnings = []
    for role, (path, configs) in sides.items():
        if len(configs) <= 1:
            continue
        message = f"{path} ({role}) mixes rows of {len(configs)} verifier configs: {describe_configs(configs)}"
        if not allow_mixed:
            raise MixedConfigsError(
                f"{message}; pass --allow-mixed-configs to compare it anyway", role=role, path=path, configs=configs
            )
        warnings.append(f"{message}; compared anyway (--allow-mixed-configs)")
    (_, baseline), (_, candidate) = sides.values()
    if len(baseline) == len(candidate) == 1 and baseline.keys() == candidate.keys() != {ORIGINAL}:
        warnings.append(
            f"both sides were scored by the same verifier config ({next(iter(baseline))}): "
            "any difference is the verifier's nondeterminism"
        )
    return warnings
