"""Model-based optimization in R: mlrMBO where installed, else the same loop from mlr + randomForest.

The algorithm lives in ``mbo.R`` (next to this file) and runs through
:class:`emews.contrib.rbridge.ROptimizer` on the optimizer rank's main thread:

* a Latin hypercube initial design of ``n_initial`` points (default ``max(4 * d, workers)``),
* a random-forest surrogate with standard errors (mlr ``regr.randomForest``, ``predict.type = "se"``),
  fitted to log-transformed losses in the fallback,
* an infill criterion (``cb``: mean - lambda * se with a random lambda per proposal, the default;
  or ``ei``: expected improvement) optimized over ``candidates`` random and locally perturbed points,
* with the mlrMBO package: ``initSMBO`` / ``proposePoints`` / ``updateSMBO`` in batches of
  ``workers`` points; without it (the fallback): an asynchronous loop that refills every idle
  worker as soon as results arrive, refitting the forest once per batch of arrivals up to about
  160 observations, then less often as a fit grows dearer (every 40 results at 1,000
  observations, at most every 100), with the proposals in between taken from the last fit's
  candidates: about 21 ms of optimizer time per result at 1,000 observations instead of 240.

Failed evaluations (loss ``inf``) are kept in the model with their loss imputed as the worst
finite loss seen so far, so the surrogate steers away from them; until something succeeds,
proposals are random.

A resumed run starts from the earlier runs' results (``evaluator.history``): they are the
initial design, with their losses, topped up to ``n_initial`` when there are fewer.

``implementation`` (after ``run``, also logged and written to ``EXP/mbo.json``)
says which of the two ran: ``"mlrMBO"`` or ``"fallback (mlr + randomForest)"``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emews.contrib.rbridge import ROptimizer, RUnavailable, check_script
from emews.core.seeds import R_SEEDS, fitted_seed
from emews.core.space import Space
from emews.core.wording import noun_for

if TYPE_CHECKING:
    from emews.core.evaluator import Evaluator

log = logging.getLogger("emews.optimizers.mbo")

MLRMBO = "mlrMBO"
FALLBACK = "fallback (mlr + randomForest)"
INSTALL = "mbo needs R and rpy2: install with bash tools/install-r.sh and pip install 'emews-mpi[r]'"


class MBO(ROptimizer):
    """Random-forest model-based optimization written in R.

    Options (each one's name, default and allowed values are declared once, by ``emews_mbo``'s
    ``options`` list in ``mbo.R``; ``emews check`` refuses another name or value through
    :meth:`ROptimizer.check`, as for any R optimizer): ``seed`` (default: the run's seed),
    ``n_initial`` (initial design size, default ``max(4 * d, workers)``), ``infill`` (``cb`` |
    ``ei``), ``lambda`` (confidence-bound weight, default 1; each proposal draws its own lambda
    from an exponential distribution with this mean, mlrMBO's qLCB), ``candidates`` (points the
    infill criterion is optimized over per proposal round, default 2000), ``ntree`` (trees in the
    forest, default 200), ``transform`` (of the losses before fitting: ``log``, the default,
    ``rank`` or ``none``; fallback only) and ``implementation`` (``auto`` | ``mlrMBO`` |
    ``fallback``).
    """

    script = Path(__file__).with_name("mbo.R")
    entry = "emews_mbo"

    def __init__(self, seed: int | None = None, **options: Any) -> None:
        if "lambda_" in options:  # lambda is a Python keyword: MBO(lambda_=2) from Python
            options["lambda"] = options.pop("lambda_")
        given = {"seed": fitted_seed(seed, R_SEEDS), **options}  # any integer seed; R seeds with 32-bit ones
        super().__init__(options={k: v for k, v in given.items() if v is not None})
        self.implementation: str | None = None
        self._exp_dir: Path | None = None

    def check(self, space: Space) -> None:
        """rpy2 imports, R has the packages the chosen implementation needs, and every option is
        one ``emews_mbo`` declares, with a value it allows (:meth:`ROptimizer.check`, as for any R
        optimizer)."""
        implementation = self.options.get("implementation")
        needed = ["mlrMBO"] if implementation == "mlrMBO" else ["mlr", "ParamHelpers", "lhs", "randomForest"]
        try:
            checked = check_script(self.script, self.entry, needed)  # and the options: one R start
        except RUnavailable as exc:
            raise ValueError(f"{INSTALL} ({exc})") from None
        missing = checked.missing
        if missing:
            raise ValueError(f"{INSTALL} (R lacks the {noun_for(len(missing), 'package')} {', '.join(missing)})")
        self.check_options(checked)

    def on_info(self, key: str, value: Any) -> None:
        if key == "implementation":
            self.implementation = str(value)
            log.info("mbo: running the %s implementation", self.implementation)
            self._write_report()

    def run(self, evaluator: Evaluator) -> None:
        self._exp_dir = evaluator.exp_dir
        try:
            super().run(evaluator)
        finally:
            self._write_report(finished=True)

    def _write_report(self, finished: bool = False) -> None:
        directory = self._exp_dir
        if directory is None or self.implementation is None:
            return
        report = {"implementation": self.implementation, "options": self.options, "finished": finished}
        if finished and isinstance(self.value, dict):
            report["summary"] = {k: v for k, v in self.value.items() if k != "implementation"}
        try:
            directory.mkdir(parents=True, exist_ok=True)
            (directory / "mbo.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
        except OSError as exc:
            log.warning("mbo: cannot write %s: %s", directory / "mbo.json", exc)
