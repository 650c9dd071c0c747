"""The ``space:`` section: a mapping of parameter specs, or ``{file: params.json}`` (a CANDLE GA
JSON), built into a :class:`~emews.core.space.Space`, every parameter's mistakes said together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from emews.config.space_names import other_tool_problems
from emews.config.validation import config_error
from emews.config.workflow_paths import resolve_path
from emews.config.workflow_schema import PARAM_MODELS, ParamSpec
from emews.core.candle_space import load_candle_json
from emews.core.errors import ConfigError, brief
from emews.core.space import Dimension, Space, SpaceError

_PARAM: TypeAdapter[Any] = TypeAdapter(ParamSpec)


#: what a parameter's name may be
NAME_ALLOWED = "a non-empty name without control characters (tab, newline, escape)"


def build_space(raw: dict[str, Any], file: str, workflow_dir: Path, open_points: bool = False) -> Space:
    """``{file: params.json}`` (a CANDLE GA JSON) or a mapping of parameter specs; ``open_points``:
    an open space (see :class:`~emews.core.space.Space`), which may be empty."""
    if set(raw) == {"file"} and isinstance(raw["file"], str):
        path = resolve_path(raw["file"], workflow_dir)
        if path is None:
            raise ConfigError(f"space file {raw['file']} does not exist", file=file, key="space.file")
        try:
            space = load_candle_json(path)
        except SpaceError as exc:
            raise ConfigError(exc.detail, file=str(path), key=exc.key) from None
        return space.opened() if open_points else space
    dims: dict[str, Dimension] = {}
    problems: list[ConfigError] = []
    for name, entry in raw.items():
        if not str(name) or not str(name).isprintable():  # an empty one is a bare ``--`` to a command
            problems.append(
                ConfigError(f"parameter name {str(name)!r} is not a name", file=file, key="space", allowed=NAME_ALLOWED)
            )
            continue
        try:
            dims[name] = _dimension(str(name), entry, file)
        except ConfigError as exc:
            problems.append(exc)  # every parameter's mistakes, not only the first one's
    if problems:
        raise ConfigError.together(problems)
    try:
        return Space(dims, open=open_points)
    except SpaceError as exc:
        raise ConfigError(
            exc.detail,
            file=file,
            key=exc.key,
            allowed=None
            if open_points
            else "a space is optional only for a sweep over a points "
            "file (optimizer: {name: sweep, options: {file: points.txt}})",
        ) from None


def _dimension(name: str, entry: Any, file: str) -> Dimension:
    """The dimension of one ``space`` entry (a ConfigError naming ``space.NAME``)."""
    if not isinstance(entry, dict):
        raise ConfigError(
            f"expected a mapping such as {{type: float, lower: 0, upper: 1}}, got {brief(entry)}",
            file=file,
            key=f"space.{name}",
        )
    others = other_tool_problems(entry)  # Ray Tune's loguniform as a type, Optuna's step
    if others:
        raise ConfigError.together(
            [
                ConfigError(message, file=file, key=f"space.{name}.{key}", allowed=allowed)
                for key, message, allowed in others
            ]
        )
    try:
        spec = _PARAM.validate_python(entry)
    except ValidationError as exc:
        kind = entry.get("type")  # any YAML value: a mapping or a list is no type (and unhashable)
        model = PARAM_MODELS.get(kind) if isinstance(kind, str) else None
        raise config_error(exc, model, file, ("space", name), skip=1 if model else 0) from None
    try:
        return spec.dimension()
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc), file=file, key=f"space.{name}") from None
