"""YAML reading with YAML 1.2 number and boolean rules and errors that name the file and line.

PyYAML follows YAML 1.1: ``1e-5`` stays a string and ``1:00:00`` becomes the
integer 3600 (base 60).  Site files are full of walltimes, so this loader only
knows decimal/hex integers and floats (``1e-5`` included); everything else that
looks numeric stays a string. Only ``true`` and ``false`` are booleans: YAML 1.1 also read
``yes``, ``no``, ``on`` and ``off`` so, which turned a categorical ``values: [yes, no]`` into
``[True, False]`` (and ``[yes, no, on]`` into a repeat).

Input is bounded: files over :data:`emews.core.textfiles.MAX_FILE_BYTES` are refused, a document
whose aliases expand to more than :data:`MAX_NODES` nodes is refused (alias
bombs), and a key given twice in one mapping is an error naming the key and
both lines. :func:`dump_yaml` writes what this loader reads back unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from emews.core.errors import ConfigError, EmewsError
from emews.core.textfiles import read_text

#: the most nodes a YAML document may hold once aliases are expanded
MAX_NODES = 1_000_000

_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"


class _TooLarge(EmewsError):
    """A document that expands to more than MAX_NODES nodes."""


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 style int/float resolution, bounded alias expansion, unique keys."""

    def construct_document(self, node: yaml.Node) -> Any:
        if _expanded_size(node, {}) > MAX_NODES:
            raise _TooLarge()
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[tuple[str, str], yaml.Mark] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            ident = (key_node.tag, key_node.value)
            if ident in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key_node.value!r} (first given on line {seen[ident].line + 1})",
                    key_node.start_mark,
                )
            seen[ident] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes in ``node`` counting every alias use as a full copy (memoized per node)."""
    if id(node) not in memo:
        if isinstance(node, yaml.SequenceNode):
            size = 1 + sum(_expanded_size(child, memo) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
        else:
            size = 1
        memo[id(node)] = size
    return memo[id(node)]


class _Dumper(yaml.SafeDumper):
    """SafeDumper that quotes exactly the strings :class:`_Loader` would read as something else."""

    def represent_str(self, data: str) -> yaml.ScalarNode:
        # PyYAML writes a NEL (U+0085) raw in a single-quoted scalar, where reading folds it
        # into a space: such strings are written double-quoted, where it is escaped (\N)
        if "\x85" in data:
            return self.represent_scalar("tag:yaml.org,2002:str", data, style='"')
        return super().represent_str(data)


_Dumper.add_representer(str, _Dumper.represent_str)


def _resolvers(yaml_1_1_bools: bool = False) -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    """YAML 1.2's numbers, and its booleans (``true``/``false`` only: ``yes``, ``no``, ``on`` and
    ``off`` stay strings, as a categorical's values) unless ``yaml_1_1_bools``: the dumper keeps
    YAML 1.1's, so that it quotes such strings for any other reader of the files it writes."""
    dropped = (_INT, _FLOAT) if yaml_1_1_bools else (_INT, _FLOAT, _BOOL)
    table = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in dropped]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    if not yaml_1_1_bools:
        for first in "tTfF":
            table.setdefault(first, []).append((_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")))
    numbers = [
        (_INT, re.compile(r"^(?:[-+]?(?:0|[1-9][0-9_]*)|0x[0-9a-fA-F_]+)$"), "-+0123456789"),
        (
            _FLOAT,
            re.compile(
                r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)
                 |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                 |[-+]?\.(?:inf|Inf|INF)
                 |\.(?:nan|NaN|NAN))$""",
                re.X,
            ),
            "-+0123456789.",
        ),
    ]
    for tag, rx, firsts in numbers:
        for first in firsts:
            table.setdefault(first, []).append((tag, rx))
    return table


_Loader.yaml_implicit_resolvers = _resolvers()
_Dumper.yaml_implicit_resolvers = _resolvers(yaml_1_1_bools=True)


#: PyYAML's words for the indentation mistakes of a hand-written file, and what they mean there
_IN_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"^expected <block end>, but found '<block (mapping|sequence) start>'$"),
        "this line does not line up with the keys above it (the keys of one mapping start in one "
        "column; indent with spaces)",
    ),
    (
        re.compile(r"^mapping values are not allowed here$"),
        "a 'key: value' where a plain value was expected: indent it under a key that has no value "
        "of its own, or quote a value that holds ': '",
    ),
    (re.compile(r"^found character '\\t' that cannot start any token$"), "a tab: indent with spaces, not tabs"),
)


def in_words(problem: str) -> str:
    """PyYAML's ``problem`` said as what is wrong with the line, for the mistakes a person makes
    by hand (a line indented one space off, a tab); any other problem as PyYAML says it."""
    return next((words for pattern, words in _IN_WORDS if pattern.match(problem)), problem)


def parse_yaml(text: str, *, source: str) -> Any:
    """Parse YAML text; a syntax error becomes a ConfigError naming source and line."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except _TooLarge:
        raise ConfigError(
            f"the document expands to more than {MAX_NODES:,} values (aliases counted at every use)", file=source
        ) from None
    except RecursionError:
        raise ConfigError("malformed YAML: nested too deeply", file=source) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = in_words(exc.problem or exc.context or "invalid YAML")
        raise ConfigError(f"malformed YAML: {where}{problem}", file=source) from None
    except yaml.reader.ReaderError as exc:  # a control character such as NUL: where it is, on one line
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - text.rfind("\n", 0, exc.position)
        raise ConfigError(
            f"malformed YAML: line {line}, column {column}: unacceptable character "
            f"#x{exc.character:04x} ({exc.reason})",
            file=source,
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"malformed YAML: {' '.join(str(exc).split())}", file=source) from None


def dump_yaml(data: Any) -> str:
    """YAML text that :func:`parse_yaml` reads back as ``data`` (strings such as ``"1e5"`` quoted).

    Write it as UTF-8 (:func:`read_text` reads nothing else).
    """
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


def load_mapping(path: Path) -> dict[str, Any]:
    """Read a YAML file that must hold a mapping (an empty file is an empty mapping)."""
    text = read_text(path)
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
    try:
        value = parse_yaml(text, source="--set") if text.strip() else None
    except ConfigError as exc:
        raise ConfigError(exc.message, file="--set", key=key) from None
    return key, value


def file_key(key: str, file: str) -> tuple[str, str]:
    """A ``--set`` key as the prefix that says which ``file`` it changes (``workflow.``, ``site.``:
    ``workflow.KEY``) and the key in that file: ``("workflow.", "budget.evaluations")``, or ``("",
    key)`` without the prefix. An error names ``prefix + key``, the key as the user typed it."""
    head, dot, rest = key.partition(".")
    return (head + dot, rest) if head == file and rest else ("", key)


def set_dotted(data: dict[str, Any], key: str, value: Any, source: str, *, typed: str = "") -> None:
    """Set ``data["a"]["b"] = value`` for ``key == "a.b"``, creating sections; ``source`` names the
    origin (``--set``, a ``$VAR``) as an error names it, before the key as the user typed it (``typed``:
    the prefix of :func:`file_key`, then ``key``)."""
    parts = key.split(".")
    if not key or any(not p for p in parts):
        raise ConfigError(f"malformed key {typed + key!r}", file=source, key=typed + key)
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            at = typed + ".".join(parts[: i + 1])
            raise ConfigError(f"{at!r} is a value, not a section", file=source, key=typed + key)
        node = child
    node[parts[-1]] = value
