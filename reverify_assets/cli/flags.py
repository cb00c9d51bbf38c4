"""A command's flags as a pydantic model: the parser's options derived from its fields, and the parsed
options read back into the model.

``cli.main.COMMANDS`` names each command's model. ``run``'s and ``aggregate``'s are in ``run.options``, because
Dagster's run config shares them; ``probe`` and ``noise`` share ``cli.sample_flags``; every other command's is in
its own module. A field is a flag when it has a description (``run.options.flag``): that is the option's help.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, TypeVar, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from reverify_assets.errors import UsageError

Options = TypeVar("Options", bound=BaseModel)


def add_flags(command: argparse.ArgumentParser, model: type[BaseModel], only: Sequence[str] | None = None) -> None:
    """One option for each field of ``model`` that has a description (``run.options.flag``), or of those
    named in ``only``: named for the field (or its ``option``), its help the description, its value checked by
    the model when the command builds it (``parsed_options``)."""
    for name, field in model.model_fields.items():
        if field.description is None or (only is not None and name not in only):
            continue
        extra = _extra(field)
        kind = field.annotation
        settings: dict[str, Any] = {"help": field.description}
        if "metavar" in extra:
            settings["metavar"] = extra["metavar"]
        if extra.get("positional"):
            command.add_argument(name, **settings)
            continue
        settings["dest"] = name
        if kind is bool:
            settings["action"] = "store_true"
        elif get_origin(kind) is list:
            settings |= {"action": "append", "required": field.is_required()}
            settings |= {} if field.is_required() else {"default": []}  # argparse copies it before appending
        else:
            number = next((t for t in (int, float) if kind in (t, t | None)), None)
            settings |= {"type": number} if number else {}
            settings |= {"required": True} if field.is_required() else {"default": field.default}
        command.add_argument(*_option_names(name, field), **settings)


def parsed_options(args: argparse.Namespace, model: type[Options], **given: Any) -> Options:
    """``model`` from the options ``add_flags`` gave the parser, and the values in ``given`` (what is no flag).
    A value the model refuses is a usage error that names its option."""
    parsed = {name: getattr(args, name) for name in model.model_fields if hasattr(args, name)}
    try:
        return model(**(parsed | given))
    except ValidationError as exc:
        problems = "; ".join(f"{_named(model, error['loc'])}: {error['msg']}" for error in exc.errors())
        raise UsageError(f"reverify {args.command}: {problems}") from exc


def _named(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    field = model.model_fields.get(str(loc[0])) if loc else None
    if field is None:
        return ".".join(map(str, loc)) or "the options"
    return _option_names(str(loc[0]), field)[0]


def _option_names(name: str, field: FieldInfo) -> list[str]:
    extra = _extra(field)
    if extra.get("positional"):
        return [name]
    return [
        str(extra.get("option") or f"--{name.replace('_', '-')}"),
        *([str(extra["short"])] if "short" in extra else []),
    ]


def _extra(field: FieldInfo) -> dict[str, Any]:
    return field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
