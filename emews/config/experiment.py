"""Experiment directories: created whole or not at all.

Layout::

    EXP/workflow.yaml    the resolved workflow (space inlined, paths absolute)
    EXP/site.yaml        the resolved site
    EXP/experiment.json  workers (of the latest launch or resume), creation time, emews version, the command line
    EXP/results.db       SQLite results store, one row per finished evaluation
    EXP/results.csv      written at the end of the run and by ``emews results``
    EXP/runs/NNNNNN/     per-task run dirs (stdout.txt / stderr.txt of the isolated child)
    EXP/emews.log        the optimizer rank's log
    EXP/exit-status.json the last run's exit status, room taken at its start (see exit_record.py)
    EXP/pools/pool-NNN/  an attached pool's folder (its site, job script and record, log, pool.json)
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from emews.config.exit_record import recorded_exit
from emews.config.yamlio import dump_yaml
from emews.core.build import Build, current_build, use_it
from emews.core.errors import ConfigError, closest
from emews.core.textfiles import write_atomic
from emews.store import STORE_FILE as STORE_FILE  # EXP/results.db, named where the store is opened

WORKFLOW_FILE = "workflow.yaml"
SITE_FILE = "site.yaml"
INFO_FILE = "experiment.json"
CSV_FILE = "results.csv"
LOG_FILE = "emews.log"
#: the lines of ``LOG_FILE`` (rank 0's ``logging``, and what the launch adds when the job ended first)
LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s"
SUMMARY_FILE = "summary.json"
#: the batch job's record (:mod:`emews.site.jobs`), in an experiment or an attached pool's folder
#: submitted to a scheduler: what ``emews status`` looks for before it asks any scheduler
JOB_RECORD = "job.json"
#: where an experiment's attached pools keep their folders (``pools/pool-NNN``)
POOLS_DIR = "pools"
#: in an attached pool's folder: the pool's id in the store (``{"pool": 2}``), written once it registered
POOL_RECORD = "pool.json"


#: the experiment's format (``experiment.json``'s ``format``): raised when the records an experiment
#: keeps (workflow.yaml, site.yaml, experiment.json) gain what an older emews cannot read, such as a
#: new key, whether or not the store's schema changes; an experiment of a higher format is refused
#: naming the emews that made it (docs/experiments.md, "Versions")
EXPERIMENT_FORMAT = 1


def run_record() -> dict[str, Any]:
    """What ``experiment.json`` records of the emews of the latest launch or resume: the format of
    the records it writes and its build (:class:`~emews.core.build.Build`)."""
    return {"format": EXPERIMENT_FORMAT, "emews": current_build().record()}


def next_numbered(root: Path, stem: str) -> Path:
    """``root/stem-001``, ``-002``, ...: the first that does not exist yet."""
    n = 1
    while (root / f"{stem}-{n:03d}").exists():
        n += 1
    return root / f"{stem}-{n:03d}"


def create_experiment(
    exp_dir: Path | None, *, name: str, workflow: dict[str, Any], site: dict[str, Any], info: dict[str, Any]
) -> Path:
    """Write a new experiment directory atomically (a temp dir renamed into place)."""
    target = exp_dir if exp_dir is not None else next_numbered(Path("experiments"), name)
    target = target.absolute()
    taken = ConfigError(
        f"{target} already exists and is not empty", key="--exp-dir", allowed="a new or empty directory"
    )
    if target.exists() and not target.is_dir():  # said as a file, not as a folder with things in it
        raise ConfigError(f"{target} is a file", key="--exp-dir", allowed="a new or empty directory")
    if target.exists() and any(target.iterdir()):
        if is_experiment_record(target / WORKFLOW_FILE):  # launched again (after an upgrade, a stop)
            raise ConfigError(
                f"{target} is an experiment already: emews resume {target} continues it",
                key="--exp-dir",
                allowed="a new or empty directory",
            )
        raise taken
    staging = target.parent / f".{target.name}.partial-{os.getpid()}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging.mkdir()
        (staging / "runs").mkdir()
        _dump_yaml(staging / WORKFLOW_FILE, workflow)
        _dump_yaml(staging / SITE_FILE, site)
        meta = {
            "name": name,
            "created": time.time(),
            "emews_version": current_build().version,  # the creator's (the key older emews read)
            **run_record(),
            "python": sys.executable,
            "command": sys.argv,
            **info,
        }
        (staging / INFO_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        try:
            if target.exists():
                target.rmdir()
            staging.rename(target)
        except OSError:  # another launch created it first
            raise taken from None
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ConfigError(
            f"cannot create the experiment directory: {exc.strerror or exc}",
            file=str(target),
            key="--exp-dir",
            allowed="a writable location",
        ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def read_workflow(exp_dir: Path) -> dict[str, Any]:
    """The experiment's resolved workflow, as plain data."""
    from emews.config.yamlio import load_mapping

    return load_mapping(require_experiment(exp_dir) / WORKFLOW_FILE)


def update_budget(exp_dir: Path, overrides: dict[str, Any]) -> None:
    """Apply ``budget.*`` overrides to the experiment's workflow.yaml (validated, replaced atomically).
    Only the keys set change: an older experiment's record keeps its own key names (``scheduler:``,
    read silently for good), so that a job that fails before it migrates the store leaves a
    workflow.yaml the older emews still reads beside the store it left."""
    from emews.config.workflow import load_workflow
    from emews.config.yamlio import file_key, set_dotted

    path = exp_dir / WORKFLOW_FILE
    load_workflow(str(path), overrides, check_imports=False)  # a bad value is --set's, named so; nothing written
    data = read_workflow(exp_dir)
    for typed, value in overrides.items():
        prefix, key = file_key(typed, "workflow")
        set_dotted(data, key, value, "--set", typed=prefix)
    _replace_yaml(path, data)


def update_site(exp_dir: Path, site: dict[str, Any]) -> None:
    """Replace the experiment's site.yaml with ``site`` (a resolved site's data, replaced atomically):
    what ``emews resume --set scheduler.walltime=...`` changed, which the job reads back (the
    walltime margin where the batch system gives no end time)."""
    _replace_yaml(exp_dir / SITE_FILE, site)


def _replace_yaml(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` with ``data`` as YAML, atomically: written beside it, then renamed over it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        _dump_yaml(tmp, data)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def update_info(exp_dir: Path, **fields: Any) -> None:
    """Set ``fields`` in ``experiment.json`` (what a resume changes of the run it records: its
    worker count), replaced atomically."""
    path = exp_dir / INFO_FILE
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps({**read_info(exp_dir), **fields}, indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"cannot write: {exc.strerror or exc}", file=str(path)) from None


def read_info(exp_dir: Path) -> dict[str, Any]:
    """``experiment.json`` (``{}`` when there is none: it only records the run); a garbled one is a
    :class:`ConfigError` naming it."""
    path = exp_dir / INFO_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise ConfigError(f"cannot read: {reason}", file=str(path), allowed="the JSON object emews wrote") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"cannot read: a JSON {type(data).__name__}, not an object",
            file=str(path),
            allowed="the JSON object emews wrote",
        )
    return data


#: the files every experiment directory has from its creation on (written together, renamed into place)
EXPERIMENT_FILES = (WORKFLOW_FILE, SITE_FILE)


def is_experiment(exp_dir: Path) -> bool:
    """Whether ``exp_dir`` is an experiment directory: it holds :data:`EXPERIMENT_FILES`."""
    return all((exp_dir / name).is_file() for name in EXPERIMENT_FILES)


def is_experiment_record(path: Path) -> bool:
    """Whether ``path`` is the workflow.yaml an experiment directory records (emews wrote it, maybe
    an older emews), rather than a workflow a user wrote."""
    return path.name == WORKFLOW_FILE and all((path.parent / name).is_file() for name in EXPERIMENT_FILES)


def require_experiment(exp_dir: Path) -> Path:
    """``exp_dir`` when it is an experiment directory; a :class:`ConfigError` naming the file it
    lacks when not (a folder that only holds a workflow.yaml, such as the one a user wrote, is not)."""
    if not exp_dir.exists():
        near = _near_folder(exp_dir)
        raise ConfigError(
            "not an experiment directory (no such folder"
            + (f"; did you mean {str(near)!r}?)" if near is not None else ")"),
            file=str(exp_dir),
        )
    missing = [name for name in EXPERIMENT_FILES if not (exp_dir / name).is_file()]
    if missing:
        raise ConfigError(
            f"not an experiment directory (no {' or '.join(missing)}; emews launch writes "
            f"{' and '.join(EXPERIMENT_FILES)} into the experiment directory it creates)",
            file=str(exp_dir),
        )
    refuse_newer(exp_dir)
    return exp_dir


def refuse_newer(exp_dir: Path) -> None:
    """A :class:`ConfigError` when a newer emews made the experiment's records (its format is past
    :data:`EXPERIMENT_FORMAT`), naming that emews: before a key only that version knows is read as
    unknown. A record without a format (emews before formats) or that cannot be read passes."""
    try:
        info = read_info(exp_dir)
    except ConfigError:
        return  # experiment.json only records the run: a garbled one is named where it is needed
    found = info.get("format")
    if isinstance(found, int) and not isinstance(found, bool) and found > EXPERIMENT_FORMAT:
        raise ConfigError(
            f"made by a newer emews (experiment format {found}; this one reads up to {EXPERIMENT_FORMAT}): "
            + use_it(Build.from_record(info.get("emews"))),
            file=str(exp_dir / INFO_FILE),
        )


def _near_folder(path: Path) -> Path | None:
    """``path`` with its first missing part replaced by the closest folder's name there
    (``experiment/random-001`` -> ``experiments/random-001``), when that path exists; else ``None``."""
    parts = path.parts
    for i, part in enumerate(parts):
        parent = Path(*parts[:i]) if i else Path(".")
        if (parent / part).exists():
            continue
        try:
            names = sorted(entry.name for entry in parent.iterdir() if entry.is_dir())
        except OSError:
            return None
        close = closest(part, names)
        fixed = parent.joinpath(close, *parts[i + 1 :]) if close is not None else None
        return fixed if fixed is not None and fixed.exists() else None
    return None


def _dump_yaml(path: Path, data: dict[str, Any]) -> None:
    path.write_text(dump_yaml(data), encoding="utf-8")


def write_pool_record(pool_dir: Path, pool: int) -> None:
    """Record in ``pool_dir`` the id the store gave its pool (``emews status`` names the folder)."""
    write_atomic(pool_dir / POOL_RECORD, [json.dumps({"pool": pool}).encode()])


def pool_folders(exp_dir: Path) -> dict[int, Path]:
    """The attached pools' folders by pool id (those whose record can be read)."""
    folders: dict[int, Path] = {}
    for record in sorted((exp_dir / POOLS_DIR).glob(f"pool-*/{POOL_RECORD}")):
        try:
            pool = json.loads(record.read_text(encoding="utf-8")).get("pool")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(pool, int):
            folders[pool] = record.parent
    return folders


def read_summary(exp_dir: Path) -> dict[str, Any]:
    """The last finished run's ``summary.json``; ``{}`` when there is none or it cannot be read."""
    try:
        data = json.loads((exp_dir / SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def run_exit_status(exp_dir: Path, since: float) -> int | None:
    """The exit status the run that finished after ``since`` recorded (``None``: no such run): its
    ``summary.json``'s, else its exit record's (:mod:`emews.config.exit_record`)."""
    data = read_summary(exp_dir)
    status = data.get("exit_status")
    if isinstance(data.get("finished"), (int, float)) and data["finished"] >= since and isinstance(status, int):
        return status
    return recorded_exit(exp_dir, since)  # a full disk had no room for the summary
