"""Find a site file, overlay ``extends:`` bases, apply environment and ``--set``
overrides, and validate the result into a :class:`SiteConfig`.

Precedence, highest first: ``--set key=value`` > environment variables
(:data:`ENV_OVERRIDES`) > the site YAML (a file overrides the base it extends) >
schema defaults.  Mappings merge key by key; lists and scalars replace.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from emews.config.validation import config_error
from emews.config.yamlio import file_key, load_mapping, parse_override, parse_yaml, set_dotted
from emews.core.errors import ConfigError, did_you_mean
from emews.site.schema import SiteConfig

#: Environment variables that override one site key each.
ENV_OVERRIDES: dict[str, str] = {
    "EMEWS_ACCOUNT": "scheduler.account",
    "EMEWS_QUEUE": "scheduler.queue",
    "EMEWS_WALLTIME": "scheduler.walltime",
    "EMEWS_NODES": "scheduler.nodes",
    "EMEWS_WORKERS_PER_NODE": "launcher.workers_per_node",
    "EMEWS_GPUS_PER_WORKER": "node.gpus_per_worker",
}


def env_overridden(environ: Mapping[str, str] | None = None) -> list[str]:
    """The variables of :data:`ENV_OVERRIDES` set (not blank) in ``environ`` (default: this process's)."""
    environ = os.environ if environ is None else environ
    return [var for var in ENV_OVERRIDES if (environ.get(var) or "").strip()]


USER_SITE_DIR = "site-configs"
_SUFFIXES = (".yaml", ".yml")


def builtin_site_dir() -> Path:
    """Directory of the site files shipped with emews (``emews.site_configs``)."""
    try:
        from importlib.resources import files

        return Path(str(files("emews.site_configs")))
    except (ImportError, ModuleNotFoundError, TypeError):
        return Path(__file__).resolve().parents[2] / "site-configs"


def _search_dirs() -> list[Path]:
    return [Path.cwd() / USER_SITE_DIR, builtin_site_dir()]


def available_sites() -> list[str]:
    """Names of the sites that :func:`find_site_file` can find, sorted."""
    names = {
        p.stem
        for d in _search_dirs()
        if d.is_dir()
        for p in d.iterdir()
        if p.suffix in _SUFFIXES and not p.stem.startswith("_")
    }
    return sorted(names)


def _looks_like_path(ref: str) -> bool:
    return ref.endswith(_SUFFIXES) or os.sep in ref or "/" in ref


def find_site_file(ref: str, *, relative_to: Path | None = None, skip: Iterable[Path] = ()) -> Path:
    """Resolve a site name or a path to a YAML file.

    A path (``*.yaml`` or containing ``/``) is taken as is (relative to
    ``relative_to`` when given); a name is looked up in ``./site-configs/``
    first, then among the built-in sites.  ``skip`` lists files already in an
    ``extends`` chain, so ``./site-configs/summit.yaml`` may extend the
    built-in ``summit``.
    """
    skipped = {p.resolve() for p in skip}
    if _looks_like_path(ref):
        path = Path(ref).expanduser()
        if relative_to is not None and not path.is_absolute():
            path = relative_to / path
        if not path.is_file():
            raise ConfigError(f"site file {str(path)!r} does not exist", key="site")
        return path
    for directory in _search_dirs():
        for suffix in _SUFFIXES:
            path = directory / f"{ref}{suffix}"
            if path.is_file() and path.resolve() not in skipped:
                return path
    raise ConfigError(
        f"unknown site {ref!r}" + did_you_mean(ref, available_sites()),
        key="site",
        allowed=", ".join(available_sites()) or "(no site files found)",
    )


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``: mappings merge recursively, anything else replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _record(origins: dict[str, str], data: Mapping[str, Any], source: str, prefix: str = "") -> None:
    """Remember which source set each dotted key (for error messages)."""
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        origins[dotted] = source
        if isinstance(value, Mapping):
            _record(origins, value, source, dotted + ".")


def _read_chain(path: Path, origins: dict[str, str], chain: list[Path]) -> dict[str, Any]:
    """A file merged over the bases it ``extends`` (recursively)."""
    if path.resolve() in {p.resolve() for p in chain}:
        cycle = " -> ".join(str(p) for p in [*chain, path])
        raise ConfigError(f"extends cycle: {cycle}", file=path, key="extends")
    data = load_mapping(path)
    base_ref = data.pop("extends", None)
    merged: dict[str, Any] = {}
    if base_ref is not None:
        if not isinstance(base_ref, str) or not base_ref:
            raise ConfigError(f"extends must name a site or a .yaml path, not {base_ref!r}", file=path, key="extends")
        try:
            base_path = find_site_file(base_ref, relative_to=path.parent, skip=[*chain, path])
        except ConfigError as exc:
            message = exc.message
            if base_ref == path.stem and not _looks_like_path(base_ref):
                message = f"{base_ref!r} is this file's own name, and no other site file has that name"
            raise ConfigError(message, file=path, key="extends", allowed=exc.allowed) from None
        merged = _read_chain(base_path, origins, [*chain, path])
    _record(origins, data, str(path))
    result = deep_merge(merged, data)
    if _sets_node_key(data, "gpus") and not _sets_node_key(data, "gpu_ids"):
        _drop_gpu_ids(result)
    return result


def _sets_node_key(layer: Mapping[str, Any], name: str) -> bool:
    """Whether a layer (a file's mapping) sets ``node.NAME``."""
    node = layer.get("node")
    return isinstance(node, Mapping) and name in node


def _drop_gpu_ids(data: dict[str, Any]) -> None:
    """A layer that sets another GPU count describes another node: the base's GPU names go (kept
    where the count is theirs: ``--set node.gpus=8`` on frontier keeps its nearest-first order)."""
    node = data.get("node")
    if isinstance(node, dict):
        ids, gpus = node.get("gpu_ids"), node.get("gpus")
        if isinstance(ids, list) and type(gpus) is int and len(ids) == gpus:
            return
        node.pop("gpu_ids", None)


def _apply(data: dict[str, Any], origins: dict[str, str], key: str, value: Any, source: str, typed: str = "") -> None:
    """Set ``key`` (``typed``: the ``site.`` it was typed with) to ``value``, recording ``source`` as its origin."""
    set_dotted(data, key, value, key_origin({key: source}, key, None)[0] or source, typed=typed)
    origins[key] = source
    if isinstance(value, Mapping):
        _record(origins, value, source, key + ".")


def _origin(origins: Mapping[str, str], key: str, default: str) -> str:
    """Where ``key`` (or the section holding it) was set; a section no file has, made by setting a
    key inside it (``--set budget.evaluations=5`` makes ``budget``), is that key's origin."""
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        found = origins.get(".".join(parts[:n]))
        if found:
            return found
    inside = [origin for set_key, origin in origins.items() if key and set_key.startswith(key + ".")]
    return inside[-1] if inside else default


def key_origin(origins: Mapping[str, str], key: str, default: Path | None) -> tuple[str | None, str]:
    """The ``file`` and ``key`` an error about site key ``key`` names: ``--set`` and the key when a
    ``--set`` item gave it, ``$VAR`` when an environment variable did, else the file that set it
    (``default``: the site's own file)."""
    origin = _origin(origins, key, "" if default is None else str(default))
    if origin.startswith("--set "):  # the key as the user typed it: with its site. prefix, if any
        prefix, given = file_key(origin.removeprefix("--set "), "site")
        return "--set", prefix + key if key == given or key.startswith(given + ".") else prefix + given
    return origin or None, key


def _override_sets(key: str, value: Any, name: str) -> bool:
    """Whether a ``--set`` item sets ``node.NAME`` (``node.NAME=...`` or ``node={NAME: ...}``)."""
    return key == f"node.{name}" or (key == "node" and isinstance(value, Mapping) and name in value)


def resolve_site(
    ref: str | Path, overrides: Iterable[str] = (), environ: Mapping[str, str] | None = None
) -> tuple[SiteConfig, Path, dict[str, str]]:
    """Load, merge, override and validate a site; return it with its file and where each dotted
    key was set (a file's path, ``--set KEY`` or ``$VAR``: see :func:`key_origin`)."""
    path = find_site_file(str(ref))
    origins: dict[str, str] = {}
    data = _read_chain(path, origins, [])
    raw_name = load_mapping(path).get("name")
    data["name"] = raw_name if isinstance(raw_name, str) and raw_name else path.stem
    environ = os.environ if environ is None else environ
    for var, key in ENV_OVERRIDES.items():
        text = environ.get(var)
        if text is not None and text.strip():
            _apply(data, origins, key, parse_yaml(text, source=f"${var}"), f"${var}")
    items = [(*file_key(key, "site"), value) for key, value in map(parse_override, overrides)]
    names_gpus = any(_override_sets(key, value, "gpu_ids") for _, key, value in items)
    for prefix, key, value in items:
        _apply(data, origins, key, value, f"--set {prefix}{key}", prefix)
        if _override_sets(key, value, "gpus") and not names_gpus:
            _drop_gpu_ids(data)
    try:
        return SiteConfig.model_validate(data), path, origins
    except ValidationError as exc:
        raise config_error(exc, SiteConfig, lambda key: key_origin(origins, key or "", path)) from None
