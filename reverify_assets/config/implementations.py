"""Which server answers a block: one of ours, or one of NeMo Gym's own (``implementation: nemo_gym``).

Only the names: the layers that start servers (``verifier.launcher``) decide with them without importing the
servers themselves (``servers.registry`` builds a built-in one).
"""

from __future__ import annotations

from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ConfigError

BUILTIN_TYPES = frozenset({"mcqa", "equivalence_judge"})

IMPLEMENTATION_FIELD = "implementation"
IMPLEMENTATIONS = ("builtin", "nemo_gym")


def runs_builtin(block: ServerBlock) -> bool:
    """Served by this package: a built-in type, unless the block asks for NeMo Gym's own server instead
    (``implementation: nemo_gym``)."""
    return block.type in BUILTIN_TYPES and block.fields.get(IMPLEMENTATION_FIELD) != "nemo_gym"


def check_implementation(block: ServerBlock) -> None:
    implementation = block.fields.get(IMPLEMENTATION_FIELD)
    if implementation is None:
        return
    if implementation not in IMPLEMENTATIONS:
        raise ConfigError(
            f"config: {block.named(IMPLEMENTATION_FIELD)} is {implementation!r}; it is one of {list(IMPLEMENTATIONS)}",
            key=block.config_key(IMPLEMENTATION_FIELD),
            source=block.set_by(IMPLEMENTATION_FIELD),
        )
    if implementation == "builtin" and block.type not in BUILTIN_TYPES:
        raise ConfigError(
            f"config: {block.named(IMPLEMENTATION_FIELD)} is 'builtin', but {block.type!r} is not built in "
            f"(built in: {sorted(BUILTIN_TYPES)})",
            key=block.config_key(IMPLEMENTATION_FIELD),
            source=block.set_by(IMPLEMENTATION_FIELD),
        )
