"""``emews.run(...)``: a workflow from Python arguments, run as ``emews launch`` runs a file.

The arguments become the workflow mapping a file holds (:mod:`emews.api.arguments`), validated
as a file is; :func:`emews.job.launching.launch` then creates the experiment directory (with the
resolved ``workflow.yaml`` and ``site.yaml`` that ``emews resume`` reads) and runs the MPI job
exactly as ``emews launch`` does. Its output (the progress line, the closing summary) comes
through ``sys.stdout``/``sys.stderr``, so a notebook shows it under the cell.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

from emews.api.arguments import LABEL, workflow_data
from emews.api.view import Experiment, load
from emews.core.errors import EXIT_OK, ConfigError, EmewsError
from emews.core.imports import importing_user_code

_GUARD = 'call emews.run under `if __name__ == "__main__":`'


class RunFailed(EmewsError):
    """The run ended without completing (exit status ``exit_status``); what it stored is in ``experiment``."""

    def __init__(self, message: str, experiment: Experiment | None, exit_status: int) -> None:
        super().__init__(message)
        self.experiment, self.exit_status = experiment, exit_status


def run(
    objective: Any,
    space: Any = None,
    optimizer: Any = "bayes",
    budget: Any = None,
    workers: int | None = None,
    site: str = "local",
    trial_scheduler: Any = None,
    *,
    metric: str | None = None,
    direction: str | None = None,
    exp_dir: str | Path | None = None,
    **options: Any,
) -> Experiment:
    """Run a search as ``emews launch`` would run its workflow file, and return the experiment.

    ``objective``: a module-level function (of a module, or of this script: then call ``run`` under
    ``if __name__ == "__main__":``), ``"model.py:function"``, ``"package.module:function"``, a
    command list or an objective mapping; ``space``: ``{name: {type: float, lower: 0, upper: 1}}``
    or ``{name: emews.Float(0, 1)}``; ``optimizer``: a name or ``{name:, options:}``; ``budget``:
    evaluations (int), a time (``"2h"``) or the workflow's mapping; ``trial_scheduler``: a name or
    ``{name:, options:}``; ``options``: the workflow's other keys (``task``, ``replicates``,
    ``seed``, ``checkpoints``, ``walltime``, ``name``, ...). A mistake is the ConfigError the same
    workflow file would raise. The experiment directory (``exp_dir``, default
    ``experiments/NAME-NNN``) holds the workflow as a file: ``emews resume EXP`` continues it.

    On a local site the call returns when the run ends; a run that did not complete raises
    :class:`RunFailed` (its ``experiment`` has what was stored), Ctrl-C stops the job cleanly and
    raises ``KeyboardInterrupt``. On a batch site it returns once the job is submitted.
    """
    from emews.config.workflow import workflow_from_mapping
    from emews.job.launching import launch
    from emews.site import load_site

    _refuse_inside_a_job()
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise ConfigError(f"must be a number of worker ranks >= 1, not {workers!r}", file=LABEL, key="workers")
    data = workflow_data(objective, space, optimizer, budget, trial_scheduler, metric, direction, options)
    name = data.get("name")
    stand_in = Path.cwd() / f"{name if isinstance(name, str) and name else 'experiment'}.yaml"
    workflow = workflow_from_mapping(data, stand_in, label=LABEL)
    target_site = load_site(site)
    launched = launch(
        workflow,
        target_site,
        workers=workers,
        exp_dir=None if exp_dir is None else Path(exp_dir),
        relay=_relay_wanted(),
    )
    assert launched.exp_dir is not None
    experiment = load(launched.exp_dir)
    if launched.status == EXIT_OK:
        return experiment
    if launched.status == 128 + signal.SIGINT:
        raise KeyboardInterrupt
    raise RunFailed(
        f"the run of {launched.exp_dir} ended with exit status {launched.status} (its lines above say "
        f"why); emews.load({str(launched.exp_dir)!r}) reads what it stored, and emews resume "
        f"{launched.exp_dir} continues it",
        experiment,
        launched.status,
    )


def _refuse_inside_a_job() -> None:
    """A script that defines its objective is imported again where the objective runs: there (and
    while ``run`` itself imports it to check it) a call to ``run`` is the script's missing guard."""
    if importing_user_code():
        raise EmewsError(
            f"emews.run was called while the objective's file was being imported (to check it, or "
            f"where it runs): {_GUARD}, as multiprocessing asks, so that importing the file only "
            "defines the objective"
        )


def _relay_wanted() -> bool:
    """Whether the job's output must go through ``sys.stdout``/``sys.stderr`` (a notebook, a capture):
    unless both are this process's own terminal descriptors."""
    try:
        return not (sys.stderr.isatty() and sys.stderr.fileno() == 2 and sys.stdout.fileno() == 1)
    except (AttributeError, OSError, ValueError):
        return True
