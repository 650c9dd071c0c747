"""Turning pydantic validation errors into one ConfigError a person can act on."""

from __future__ import annotations

import types
from typing import Any, Callable, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from emews.core.errors import ConfigError, KeyedValueError, brief


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


def config_error(exc: ValidationError, model: type[BaseModel] | None, file: str | Callable[[str | None], str],
                 prefix: tuple[str, ...] = (), skip: int = 0) -> ConfigError:
    """The first error of ``exc`` as a ConfigError; later ones are counted in the message.

    Unknown keys are reported first (a misspelt key also makes a required one
    "missing"). ``prefix`` is prepended to the key and the first ``skip`` parts
    of pydantic's location dropped (a union's tag) when ``exc`` came from
    validating a sub-part. ``file`` names the file, or finds it from the key (a site
    merged from several files and overrides). A validator that raised
    :class:`~emews.core.errors.KeyedValueError` supplies its own message, allowed values and key.
    """
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    err = errors[0]
    loc = [str(p) for p in err["loc"]][skip:]
    key = ".".join([*prefix, *loc]) or None
    ctx = err.get("ctx") or {}
    allowed = None
    inner = ctx.get("error")
    if isinstance(inner, KeyedValueError):
        key, message, allowed = inner.key or key, inner.message, inner.allowed
    elif err["type"] == "extra_forbidden":
        message = f"unknown key {loc[-1]!r}"
        holder = _model_at(model, loc[:-1]) if model is not None else None
        allowed = ", ".join(holder.model_fields) if holder else None
    elif err["type"] == "union_tag_invalid":
        key = f"{key}.{ctx.get('discriminator', 'type').strip(chr(39))}" if key else key
        message = f"invalid value {brief(ctx.get('tag'))}"
        allowed = str(ctx.get("expected_tags") or "") or None
    elif err["type"] in ("literal_error", "enum"):
        message = f"invalid value {brief(err['input'])}"
        allowed = str(ctx.get("expected") or ctx.get("expected_tags") or "") or None
    elif err["type"] == "missing":
        message = "required key is missing"
    else:
        message = str(err["msg"]).removeprefix("Value error, ")
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return ConfigError(message, file=file(key) if callable(file) else file, key=key, allowed=allowed)
