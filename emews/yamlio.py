"""YAML reading with YAML 1.2 number rules and errors that name the file and line.

PyYAML follows YAML 1.1: ``1e-5`` stays a string and ``1:00:00`` becomes the
integer 3600 (base 60).  Site files are full of walltimes, so this loader only
knows decimal/hex integers and floats (``1e-5`` included); everything else that
looks numeric stays a string.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from emews.errors import ConfigError

_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 style int/float resolution."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    _INT, re.compile(r"^(?:[-+]?(?:0|[1-9][0-9_]*)|0x[0-9a-fA-F_]+)$"), list("-+0123456789"))
_Loader.add_implicit_resolver(
    _FLOAT,
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)
                 |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                 |[-+]?\.(?:inf|Inf|INF)
                 |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


def parse_yaml(text: str, *, source: str) -> Any:
    """Parse YAML text; a syntax error becomes a ConfigError naming source and line."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise ConfigError(f"malformed YAML: {where}{problem}", file=source) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"malformed YAML: {exc}", file=source) from None


def load_mapping(path: Path) -> dict[str, Any]:
    """Read a YAML file that must hold a mapping (an empty file is an empty mapping)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror}", file=path) from None
    data = parse_yaml(text, source=str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping of keys, found {type(data).__name__}", file=path)
    return data


def parse_override(item: str) -> tuple[str, Any]:
    """``"scheduler.nodes=2"`` -> ``("scheduler.nodes", 2)``; values are read as YAML scalars."""
    key, sep, text = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"expected KEY=VALUE, got {item!r}", file="--set", key=item.strip() or None)
    key = key.strip()
    value = parse_yaml(text, source=f"--set {key}") if text.strip() else None
    return key, value


def set_dotted(data: dict[str, Any], key: str, value: Any, source: str) -> None:
    """Set ``data["a"]["b"] = value`` for ``key == "a.b"``, creating sections; ``source`` names the origin."""
    parts = key.split(".")
    if not key or any(not p for p in parts):
        raise ConfigError(f"malformed key {key!r}", file=source, key=key)
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{'.'.join(parts[:i + 1])!r} is a value, not a section",
                              file=source, key=key)
        node = child
    node[parts[-1]] = value
