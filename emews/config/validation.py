"""Turning pydantic validation errors into one ConfigError a person can act on."""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Callable
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from emews.core.errors import ConfigError, KeyedValueError, brief, did_you_mean


def _model_at(model: type[BaseModel], loc: list[str]) -> type[BaseModel] | None:
    """Follow ``loc`` through nested models (dict values, unions) to the model that holds it."""
    current: Any = model
    for part in loc:
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part)
            if field is None:
                return None
            current = field.annotation
        current = _unwrap(current, part)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any, part: str) -> Any:
    origin = get_origin(annotation)
    if origin is dict:
        return get_args(annotation)[1]
    if origin in (Union, types.UnionType):
        models = [a for a in get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        tagged = [m for m in models if getattr(m.model_fields.get("type"), "default", None) == part]
        return tagged[0] if tagged else (models[0] if len(models) == 1 else annotation)
    return annotation


def config_error(
    exc: ValidationError,
    model: type[BaseModel] | None,
    file: str | Callable[[str | None], str | tuple[str | None, str]],
    prefix: tuple[str, ...] = (),
    skip: int = 0,
) -> ConfigError:
    """Every error of ``exc`` as one ConfigError: the first, and the others in its ``more``.

    Unknown keys are reported first, each with the closest allowed key ("did you mean"); a required
    key reported missing beside an unknown key that is its misspelling is left out (one mistake,
    one line), and the members of a union that all refused a value are one line. ``prefix`` is
    prepended to the key and the first ``skip`` parts of pydantic's location dropped (a union's tag)
    when ``exc`` came from validating a sub-part. ``file`` names the file, or finds it from the key
    (a site merged from several files and overrides), with the key as the user typed it. A validator
    that raised :class:`~emews.core.errors.KeyedValueError` supplies its own message, allowed values and key.
    """
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    errors = _without_echoes(errors, skip, model)
    found = [_problem(group, model, file, prefix, skip) for group in _union_groups(errors, model, skip)]
    first, *more = found
    return ConfigError(first.message, file=first.file, key=first.key, allowed=first.allowed, more=more)


def _without_echoes(errors: list[Any], skip: int, model: type[BaseModel] | None) -> list[Any]:
    """``errors`` less each "missing" key that an unknown key beside it misspells (``lowr``/``lower``)
    or names as another tool does (``high``/``upper``: the model's ``other_names``)."""
    unknown = [[str(p) for p in e["loc"]][skip:] for e in errors if e["type"] == "extra_forbidden"]

    def echo(err: Any) -> bool:
        loc = [str(p) for p in err["loc"]][skip:]
        return err["type"] == "missing" and any(
            u[:-1] == loc[:-1]
            and (
                difflib.get_close_matches(loc[-1], [u[-1]], n=1, cutoff=0.6)
                or _other_names(model, u[:-1]).get(u[-1]) == loc[-1]
            )
            for u in unknown
        )

    return [e for e in errors if not echo(e)]


def _other_names(model: type[BaseModel] | None, loc: list[str]) -> dict[str, str]:
    """Another tool's name of a key -> this one's, for the model at ``loc`` (its ``other_names``)."""
    holder = _model_at(model, loc) if model is not None else None
    return dict(getattr(holder, "other_names", None) or {})


def _union_groups(errors: list[Any], model: type[BaseModel] | None, skip: int) -> list[list[Any]]:
    """The errors grouped by value: the members of a plain union that each refused the same value
    (``task.ranks``: not an int, not a str) are one group; any other error is a group of its own."""
    groups: dict[tuple[str, ...], list[Any]] = {}
    for err in errors:
        loc = tuple(str(p) for p in err["loc"])[skip:]
        tagged = model is not None and len(loc) >= 2 and _is_union_member(model, list(loc))
        groups.setdefault(loc[:-1] + ("|",) if tagged else loc + (str(len(groups)),), []).append(err)
    return list(groups.values())


def _is_union_member(model: type[BaseModel], loc: list[str]) -> bool:
    holder = _model_at(model, loc[:-2])
    field = holder.model_fields.get(loc[-2]) if holder is not None else None
    return field is not None and get_origin(field.annotation) in (Union, types.UnionType)


def _problem(
    group: list[Any],
    model: type[BaseModel] | None,
    file: str | Callable[[str | None], str | tuple[str | None, str]],
    prefix: tuple[str, ...],
    skip: int,
) -> ConfigError:
    """One ConfigError for one error (or for the members of a union that all refused one value)."""
    err = group[0]
    loc = [str(p) for p in err["loc"]][skip:]
    if len(group) > 1:
        loc = loc[:-1]
    key = ".".join([*prefix, *loc]) or None
    ctx = err.get("ctx") or {}
    allowed = None
    inner = ctx.get("error")
    if isinstance(inner, KeyedValueError):
        key, message, allowed = inner.key or key, inner.message, inner.allowed
    elif err["type"] == "extra_forbidden":
        holder = _model_at(model, loc[:-1]) if model is not None else None
        other = _other_names(model, loc[:-1]).get(loc[-1])
        hint = f"; did you mean {other!r}?" if other else did_you_mean(loc[-1], holder.model_fields) if holder else ""
        message = f"unknown key {loc[-1]!r}" + hint
        allowed = ", ".join(holder.model_fields) if holder else None
    elif err["type"] == "union_tag_invalid":
        key = f"{key}.{ctx.get('discriminator', 'type').strip(chr(39))}" if key else key
        allowed = str(ctx.get("expected_tags") or "") or None
        message = f"invalid value {brief(ctx.get('tag'))}" + did_you_mean(ctx.get("tag"), _quoted(allowed))
    elif err["type"] in ("literal_error", "enum"):
        allowed = str(ctx.get("expected") or ctx.get("expected_tags") or "") or None
        message = f"invalid value {brief(err['input'])}" + did_you_mean(err["input"], _quoted(allowed))
    elif err["type"] == "missing":
        message = "required key is missing"
    elif len(group) == 1 and err["type"] in _BOUNDS:  # "Input should be greater than 0": and what was given
        bound = next(iter(ctx.values()), None)
        shown = f"{bound:g}" if isinstance(bound, (int, float)) and not isinstance(bound, bool) else brief(bound)
        message = f"must be {_BOUNDS[err['type']]} {shown}, not {brief(err['input'])}"
    elif len(group) == 1 and err["type"] in _KINDS:  # pydantic's "Input should be a valid ..." in plain words
        message = f"must be {_KINDS[err['type']]}, not {_said(err['input'])}"
        holder = _model_at(model, loc) if model is not None and err["type"] == "model_type" else None
        allowed = f"a mapping with the keys {', '.join(holder.model_fields)}" if holder else None
    else:
        messages = [str(e["msg"]).removeprefix("Value error, ") for e in group]
        message = messages[0] + "".join(f" or {m.removeprefix('Input should be ')}" for m in messages[1:])
    found = file(key) if callable(file) else file
    where, key = found if isinstance(found, tuple) else (found, key)  # a site key a --set gave: as typed
    return ConfigError(message, file=where, key=key, allowed=allowed)


#: pydantic's bound errors (their ``ctx`` holds the bound) as a comparison
_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}

#: what a value of pydantic's error type should have been, in the words of a YAML file
_KINDS = {
    "model_type": "a mapping (key: value)",
    "dict_type": "a mapping (key: value)",
    "list_type": "a list ([a, b], or one '- item' a line)",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "text",
}


def _said(value: Any) -> str:
    """A value as the file gave it: its type and a short ``repr`` (``str '20'``, ``float 2.5``)."""
    return f"{type(value).__name__} {brief(value)}"


def _quoted(text: str | None) -> list[str]:
    """The quoted names in pydantic's ``'a', 'b' or 'c'``."""
    return re.findall(r"'([^']*)'", text or "")
