"""An experiment's own files as the report and ``emews status`` read them: its workflow, site,
facts (``experiment.json``) and last run's summary, without pandas (``emews status`` reads its
store's figures by query; the report reads the store into frames: :mod:`emews.reporting.data`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emews.config.experiment import INFO_FILE, SITE_FILE, SUMMARY_FILE, read_workflow, require_experiment
from emews.config.yamlio import load_mapping
from emews.core.direction import Direction
from emews.core.errors import ConfigError


@dataclass
class ExperimentFiles:
    """What an experiment's files say, read once."""

    exp_dir: Path
    workflow: dict[str, Any]
    site: dict[str, Any]
    info: dict[str, Any]
    summary: dict[str, Any] | None
    #: what could not be read but is not needed to show the rest (a garbled ``site.yaml``), one
    #: line each naming the file
    unreadable: list[str] = field(default_factory=list, kw_only=True)

    @property
    def space(self) -> dict[str, dict[str, Any]]:
        return self.workflow.get("space", {})

    @property
    def budget(self) -> int | None:
        return self.workflow.get("budget", {}).get("evaluations")

    @property
    def direction(self) -> Direction:
        return Direction.of(self.workflow.get("objective", {}).get("direction"))

    @property
    def metric(self) -> str:
        return self.workflow.get("objective", {}).get("metric") or "value"

    @property
    def replicates(self) -> int:
        """How many times each point is evaluated (``replicates``; 1: no ensemble)."""
        return int(self.workflow.get("replicates") or 1)

    @property
    def run_workers(self) -> int:
        """Worker ranks of the latest launch or resume (the run going on now, if one is)."""
        return max(int(self.info.get("workers") or 0), 1)


def read_files(exp_dir: Path) -> ExperimentFiles:
    """Read ``exp_dir``'s files (a ConfigError, exit 2, when it is not an experiment)."""
    exp_dir = require_experiment(Path(exp_dir).absolute())
    workflow = read_workflow(exp_dir)
    unreadable: list[str] = []
    try:  # it gives the report the site's name only: a garbled one does not hide the store
        site = load_mapping(exp_dir / SITE_FILE) if (exp_dir / SITE_FILE).is_file() else {}
    except ConfigError as exc:
        site = {}
        unreadable.append(str(exc))
    info = _json_file(exp_dir / INFO_FILE) or {}
    return ExperimentFiles(exp_dir, workflow, site, info, _json_file(exp_dir / SUMMARY_FILE), unreadable=unreadable)


def _json_file(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
