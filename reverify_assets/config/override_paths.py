"""An override must land in a server block the config files declare: a misspelt path would add a new one.

``++mcqq.resources_servers.mcqa.grading_mode=x`` merges fine and grades as if it were not there, so each
override's first three segments (instance, server kind, type) are checked against the merged files. Deeper
segments are a server's fields, which ``known_fields`` checks where the server is built in.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import get_close_matches

from omegaconf import DictConfig, OmegaConf

from reverify_assets.config.sources import ConfigSources
from reverify_assets.errors import ConfigError

# The mapping-valued knobs of NeMo Gym 0.7.0's NEMO_GYM_RESERVED_TOP_LEVEL_KEYS (nemo_gym/global_config.py;
# the others hold scalars or lists): `++head_server.port=...` is NeMo Gym's, not a misspelt server.
NEMO_GYM_MAPPING_KNOBS = frozenset({"head_server", "telemetry", "token_id_capture", "environment_server_routes"})
# Ours, checked by their own models (a misspelt field there is refused by name).
JUDGE_PRICES_KEY = "judge_prices"  # a top-level block: budget.prices reads it
OUR_MAPPING_KNOBS = frozenset({JUDGE_PRICES_KEY})
# Instance, server kind (resources_servers, responses_api_agents, ...) and the block's type.
DECLARED_DEPTH = 3


def check_override_paths(config: DictConfig, overrides: Sequence[str], sources: ConfigSources) -> None:
    """Raises naming every override whose path leaves what ``config`` declares, with the closest name and the
    files that declare it (``sources``: of ``config``)."""
    found = [
        (override, problem) for override in overrides if (problem := _problem(config, override, sources)) is not None
    ]
    problems = [problem for _, problem in found]
    if problems:
        shown = found[0][0].partition("=")[0]  # the first override at fault, as typed, without its value
        raise ConfigError("config: " + "; ".join(problems), key=shown.lstrip("+"), source=shown)


def _problem(config: DictConfig, override: str, sources: ConfigSources) -> str | None:
    shown = override.partition("=")[0]  # the value is left out: it may be a key pasted by mistake
    path = shown.lstrip("+").split(".")
    if len(path) == 1 or path[0] in NEMO_GYM_MAPPING_KNOBS | OUR_MAPPING_KNOBS:
        return None  # ++force=true, ++merge_shards=false: a top-level knob
    node = config
    for depth, segment in enumerate(path[:DECLARED_DEPTH]):
        # At the top, only mappings are server blocks: a scalar there is a knob, and has no segments below it.
        declared = [key for key in map(str, node) if depth > 0 or _may_be_mapping(node, key)]
        if segment not in declared:
            holds = f"`{'.'.join(path[:depth])}` holds" if depth else "declared"
            return (
                f"override `{shown}` names `{'.'.join(path[: depth + 1])}`, which no --config file declares"
                f"{_hint(path[:depth], segment, declared, holds, sources)}"
            )
        if not _may_be_mapping(node, segment) or OmegaConf.is_interpolation(node, segment):
            return None  # below a plain value or an interpolation there is nothing declared to compare with
        node = node[segment]
    return None


def _may_be_mapping(node: DictConfig, key: str) -> bool:
    # An interpolation's target is known only once resolved, which may fail: it is given the benefit of the doubt.
    return OmegaConf.is_interpolation(node, key) or isinstance(node.get(key), DictConfig)


def _hint(above: list[str], segment: str, declared: list[str], holds: str, sources: ConfigSources) -> str:
    close = get_close_matches(segment, declared, n=1)
    if close:
        return f" (did you mean {sources.name([*above, close[0]])}?)"
    if not declared:
        return ""
    return f" ({holds}: {', '.join(f'`{name}`' for name in sorted(declared))})"
