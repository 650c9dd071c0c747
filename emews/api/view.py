"""``emews.load(EXP)``: an experiment directory as Python objects, for a notebook or a script.

Read only, live or finished: every property reads the directory again (the store opened
read-only, beside a running job if there is one); nothing here takes the experiment's lease or
writes a file. The same experiment stays runnable from the command line (``emews resume EXP``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from emews.config.experiment import read_summary, read_workflow, require_experiment
from emews.core.direction import Direction
from emews.core.errors import ConfigError, EmewsError, did_you_mean
from emews.output.csvrows import Columns
from emews.output.export import open_store, refuse_lost_store
from emews.output.frames import reports_frame, results_frame, typed

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class Experiment:
    """One experiment directory: its results, training reports, checkpoints, summary and plots.

    ``results``: one row per finished evaluation, the columns of ``results.csv`` typed (``p:NAME``
    parameters, ``m:NAME`` metrics, times parsed as UTC); ``reports``: one row per trial and step,
    one column per metric; ``best(k)``: the ``k`` best successful rows; ``checkpoints``: the
    durable checkpoints (trial, step, metric, size, path); ``summary``: the last run's
    ``summary.json``; ``plot(name)``: a figure of ``emews report``.
    """

    def __init__(self, exp_dir: str | Path) -> None:
        self.path = require_experiment(Path(exp_dir).absolute())

    def __repr__(self) -> str:
        return f"Experiment({str(self.path)!r})"

    @property
    def workflow(self) -> dict[str, Any]:
        """The resolved workflow the experiment runs (``workflow.yaml``), as plain data."""
        return read_workflow(self.path)

    @property
    def direction(self) -> Direction:
        return Direction.of(self.workflow.get("objective", {}).get("direction"))

    @property
    def results(self) -> pd.DataFrame:
        """Every finished evaluation (the rows of ``results.csv``, typed), in id order."""
        space = self.workflow.get("space") or {}
        store = open_store(self.path)
        if store is None:  # nothing finished yet (a ConfigError if the summary says otherwise)
            refuse_lost_store(self.path)
            header = Columns(tuple(space), (), False).header()
            return _empty_frame(header)
        with store:
            store.verify()
            return results_frame(store, space)

    @property
    def reports(self) -> pd.DataFrame:
        """Training reports: one row per trial and step (``trial``, ``step``, ``time``, a column per metric)."""
        store = open_store(self.path)
        if store is None:
            return _empty_frame(["trial", "step", "time"])
        with store:
            store.verify()
            return reports_frame(store)

    def best(self, k: int = 1) -> pd.DataFrame:
        """The ``k`` best successful evaluations, best first (by the objective's direction, then id)."""
        if k < 1:
            raise ConfigError(f"must be at least 1, not {k}", key="k")
        rows = self.results
        ok = rows[(rows["status"] == "ok") & rows["objective"].notna()]
        ascending = self.direction is Direction.MINIMIZE
        ranked = ok.sort_values(["objective", "id"], ascending=[ascending, True], kind="stable")
        return ranked.head(k).reset_index(drop=True)

    @property
    def checkpoints(self) -> pd.DataFrame:
        """The durable checkpoints, by trial and step: ``trial``, ``step``, ``metric``, ``size``, ``path``."""
        from emews.output.catalog import list_checkpoints

        rows = list_checkpoints(self.path)
        return pd.DataFrame(
            {
                "trial": typed([r.trial for r in rows]),
                "step": typed([r.step for r in rows]),
                "metric": typed([r.metric for r in rows], float),
                "size": typed([r.size for r in rows]),
                "path": typed([r.path for r in rows]),
            }
        )

    @property
    def summary(self) -> dict[str, Any]:
        """The last finished run's ``summary.json`` (counts, best, elapsed over every run, how it
        ended); ``{}`` before a run has finished."""
        return read_summary(self.path)

    @property
    def running(self) -> bool:
        """Whether a run of the experiment goes on now (a local run, or a queued or running batch job)."""
        from emews.reporting.status import job_state

        return job_state(self.path)[1]

    @property
    def plot_names(self) -> list[str]:
        """The names :meth:`plot` takes: the plots of ``emews report``, in page order."""
        return [kind.name for kind in _report_plots()]

    def plot(self, name: str | None = None) -> Figure | dict[str, Figure] | None:
        """The figure of ``emews report``'s plot ``name`` (``None`` when the experiment has nothing
        to show in it yet); without a name, every plot that has something to show, by name."""
        from emews.reporting import data

        kinds = {kind.name: kind for kind in _report_plots()}
        if name is not None and name not in kinds:
            raise ConfigError(
                f"unknown plot {name!r}" + did_you_mean(name, kinds), key="plot", allowed=", ".join(kinds)
            )
        loaded = data.load(self.path)
        if name is not None:
            made = kinds[name].make(loaded)
            return None if made is None else made.figure
        return {plot.name: plot.figure for kind in kinds.values() if (plot := kind.make(loaded)) is not None}


def _report_plots() -> tuple[Any, ...]:
    try:
        from emews.reporting.render import PLOTS
    except ModuleNotFoundError as exc:
        raise EmewsError(f"plots need {exc.name}: pip install 'emews-mpi[report]'") from None
    return PLOTS


def _empty_frame(columns: list[str]) -> pd.DataFrame:
    """A frame with ``columns`` and no rows."""
    return pd.DataFrame({name: pd.Series(dtype=object) for name in columns})


def load(exp_dir: str | Path) -> Experiment:
    """The experiment in ``exp_dir`` (a ConfigError when it is not one), read only."""
    return Experiment(exp_dir)
