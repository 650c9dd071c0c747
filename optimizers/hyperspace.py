"""HyperSpace: Bayesian optimization over overlapping subspaces (Young et al., "HyperSpace:
Distributed Bayesian Hyperparameter Optimization", SBAC-PAD 2018).

Workflow YAML::

    optimizer:
      name: hyperspace
      options: {seed: 1, overlap: 0.25}

The ``m`` split dimensions (numeric ones; ``split: [names]`` to choose them) are each cut into
two halves that overlap by ``overlap`` of the range (0.25: ``[0, 0.625]`` and ``[0.375, 1]`` in
the dimension's unit scale, log for log dimensions); their combinations make ``2^m`` subspaces.
Each subspace has a Bayesian optimizer of its own (the ``bayes`` engine: GP, EI, constant liar
for its pending points), all on the optimizer rank. A free worker gets the next proposal of the
subspace whose turn it is (round robin), and every result is told to every subspace that
contains the point, so results in overlapping regions are shared. Workers freed together
(short tasks) get one batch from the subspace whose turn it is (one fit for all of them).
``m`` defaults to the largest with ``2^m`` at most the workers (at least 1, at most 3 and the numeric dimensions):
one subspace per worker, as in the paper, where each subspace had an MPI rank.

At width (more than ``WIDE`` = 128 workers) the subspaces propose in a background thread, as
``bayes``' model does (``optimizers._bayes._proposer``): the thread keeps the demand plus a
reserve of proposals ready (what the workers take during the next fit, sized for the workers by
bayes' rule, ``_proposer.reserve_size``: at least 1/64 of them, up to 1/8 however few results
were told), each fit absorbs every result that arrived since the last, and a worker that would
wait on a fit gets one of the last fit's runners-up. Subspaces take turns per fit as above; a
subspace's pending points are the points in flight inside it. The optimizer thread only hands
out points and results, so workers freed while a subspace refits are not held up by it; once a
fit took 0.25 s the subspaces move to a model process of their own (as ``bayes``'
``model_process``), off the optimizer rank's GIL. The subspaces then share one GP kernel,
re-optimized by the subspace whose turn it is once the results grew 4x
(``optimizers._bayes._subspaces``). With at most 128 workers the loop is the synchronous one
above (seeded proposals as before).

After the run ``subspaces`` holds, per subspace, its bounds, the results it saw and the best
of them, which tells which regions are good and which are bad; in a run with an experiment
directory it is also written there as ``hyperspace.json`` and logged.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import Field

from emews.config.plugins import validate_options
from emews.core.errors import OptionError
from emews.core.optimizer import AskTellOptimizer
from emews.core.results import Result
from emews.core.seeds import resumed_seed
from emews.core.space import Float, Int, Space

from ._bayes._proposer import Proposer
from ._bayes._refill import Refill
from ._bayes._serve import serve
from ._bayes._settings import LIAR_PICKS, MAX_LIES
from ._failures import FailureImputation
from ._stopped import StoppedTrials

if TYPE_CHECKING:  # the model's modules load scikit-optimize, scikit-learn and scipy: imported where used
    from ._bayes._engine import Engine
    from ._bayes._space import SpaceMap

__all__ = ["HyperSpace", "Subspace", "split_space"]

log = logging.getLogger(__name__)

#: more workers than this (as bayes' ``WIDE``): the subspaces propose in a model thread that keeps
#: a reserve of proposals, so that freed workers take points from stock instead of waiting on a fit
WIDE = 2 * MAX_LIES

#: at width a subspace re-optimizes its GP kernel when its history grew 4x (10% below WIDE)
WIDE_HYPERFIT_GROWTH = 3.0

#: at width, once a fit took this many seconds the subspaces move to a model process of their
#: own (as bayes' ``process_after``): their fits then never hold the optimizer rank's GIL
PROCESS_AFTER = 0.25

#: a numeric dimension, the kind that can be split
Numeric = TypeVar("Numeric", Int, Float)


@dataclasses.dataclass
class Subspace:
    """One region of the search and the Bayesian optimizer that searches it."""

    space: Space
    bounds: dict[str, tuple[Any, Any]]  # the split dimensions' bounds in this subspace
    engine: Engine
    map: SpaceMap
    results: int = 0
    best: Result | None = None

    def tell(self, result: Result) -> bool:
        """Learn ``result`` if its point lies in this subspace; whether it did."""
        if not self.space.contains(result.params):
            return False
        self.engine.tell([self.map.to_skopt(result.params)], [result.loss])
        self.results += 1
        if result.ok and (self.best is None or result.loss < self.best.loss):
            self.best = result
        return True

    def tell_many(self, results: Sequence[Result]) -> list[bool]:
        """:meth:`tell` for several results at once (one transform for all); whether each was
        learned."""
        inside = [self.space.contains(r.params) for r in results]
        mine = [r for r, ok in zip(results, inside, strict=True) if ok]
        if mine:
            self.engine.tell([self.map.to_skopt(r.params) for r in mine], [r.loss for r in mine])
            self.results += len(mine)
            for r in mine:
                if r.ok and (self.best is None or r.loss < self.best.loss):
                    self.best = r
        return inside

    def summary(self) -> dict[str, Any]:
        best = self.best
        return {
            "bounds": {k: list(v) for k, v in self.bounds.items()},
            "results": self.results,
            "best_loss": best.loss if best else None,
            "best_point": dict(best.params) if best else None,
        }


def _halves(dim: Numeric, overlap: float) -> tuple[Numeric, Numeric]:
    """The two overlapping halves of a numeric dimension (in its unit scale)."""
    low_end, high_start = (1.0 + overlap) / 2.0, (1.0 - overlap) / 2.0
    return (
        dataclasses.replace(dim, upper=dim.from_unit(low_end)),
        dataclasses.replace(dim, lower=dim.from_unit(high_start)),
    )


def splittable(space: Space) -> list[str]:
    """The dimensions HyperSpace can cut in two: numeric ranges with more than one value."""
    return [name for name, dim in space.free.items() if isinstance(dim, (Int, Float)) and not dim.is_single]


def split_space(space: Space, names: Sequence[str], overlap: float) -> list[tuple[Space, dict[str, tuple[Any, Any]]]]:
    """The ``2^len(names)`` overlapping subspaces of ``space`` split along ``names``, with the
    split dimensions' bounds of each."""
    halves = {name: _split(space, name, overlap) for name in names}
    out = []
    for choice in itertools.product((0, 1), repeat=len(names)):
        picked = {name: halves[name][side] for name, side in zip(names, choice, strict=True)}
        dims = {**space.dimensions, **picked}
        out.append((Space(dims), {name: (dim.lower, dim.upper) for name, dim in picked.items()}))
    return out


def _split(space: Space, name: str, overlap: float) -> tuple[Int | Float, Int | Float]:
    """The two halves of the numeric dimension ``name`` (see :func:`splittable`)."""
    dim = space[name]
    if isinstance(dim, Int):
        return _halves(dim, overlap)
    assert isinstance(dim, Float), f"{name}: only numeric dimensions are split (see splittable)"
    return _halves(dim, overlap)


class HyperSpace(AskTellOptimizer):
    """One Bayesian optimizer per overlapping subspace, proposals taken round robin.

    Options: ``seed``; ``overlap`` of the two halves of a split dimension (0.25); ``splits``
    (m, the dimensions split; default: ``2^m`` <= workers, at most 3); ``split`` (names of the
    dimensions to split; default the first ``m`` numeric ones); ``n_initial_points`` per
    subspace (3; results shared from overlapping subspaces count); ``n_candidates`` (1000);
    ``max_gp_points`` per subspace (200); ``output_warp`` (auto | true | false: GPs fitted on
    the losses or their Yeo-Johnson transform, as bayes); ``failure_penalty`` (worst | skip | a number, as bayes).
    """

    def __init__(
        self,
        seed: int | None = None,
        overlap: Annotated[float, Field(ge=0, lt=1)] = 0.25,
        splits: Annotated[int, Field(ge=1, le=6)] | None = None,
        split: list[str] | None = None,
        n_initial_points: Annotated[int, Field(ge=1)] = 3,
        n_candidates: Annotated[int, Field(ge=10)] = 1000,
        max_gp_points: Annotated[int, Field(ge=10)] = 200,
        output_warp: bool | Literal["auto"] = "auto",
        failure_penalty: Literal["worst", "skip"] | Annotated[float, Field(allow_inf_nan=False)] = "worst",
    ) -> None:
        validate_options(HyperSpace, {k: v for k, v in locals().items() if k != "self"})
        self.seed, self.overlap, self.splits, self.split = seed, overlap, splits, split
        self.engine_options: dict[str, Any] = dict(
            n_initial_points=n_initial_points,
            n_candidates=n_candidates,
            max_gp_points=max_gp_points,
            max_hyperfit_points=max_gp_points,
            output_warp=output_warp,
        )
        self.failure_penalty = failure_penalty
        self.subspaces: list[Subspace] = []
        self._turn = 0
        self._pending: dict[int, tuple[int, list[Any]]] = {}  # task id -> (subspace, skopt point)
        self._fresh: list[tuple[int, list[Any]]] = []  # the last suggest's, not yet submitted
        #: what the subspaces are told about trials stopped early (``optimizers._stopped``)
        self.stopped = StoppedTrials(None)

    def check(self, space: Space) -> None:
        """Before launch: the dimensions named in ``split`` exist and can be split."""
        names = splittable(space)
        for name in self.split or ():
            if name not in names:
                raise OptionError(
                    "split",
                    f"{name!r} is not a numeric dimension of the space with more than one value",
                    ", ".join(names) or "none",
                )

    def start(self, space: Space, workers: int) -> None:
        # here, not at the top: ``emews check`` and ``emews launch`` load this class to validate
        # the options and need no model
        from ._bayes._engine import Engine
        from ._bayes._space import SpaceMap

        super().start(space, workers)
        self.check(space)
        names = splittable(space)
        m = self.splits or max(1, min(3, int(math.log2(max(workers, 1)))))
        chosen = list(self.split) if self.split else names[:m]
        self.subspaces = []
        for i, (sub, bounds) in enumerate(split_space(space, chosen, self.overlap)):
            smap = SpaceMap(sub)
            seed = None if self.seed is None else self.seed * 1000 + i
            engine = Engine(
                smap, seed=seed, failures=FailureImputation.from_option(self.failure_penalty), **self.engine_options
            )
            self.subspaces.append(Subspace(sub, bounds, engine, smap))

    def run(self, evaluator: Any) -> None:
        if self.seed is None:
            self.seed = evaluator.seed
        if evaluator.earlier_points:  # resumed: the subspaces draw on, not the earlier runs' draws again
            self.seed = resumed_seed(self.seed, evaluator.earlier_points) % 4_000_000
        self.stopped = StoppedTrials(evaluator)
        try:
            if evaluator.workers > WIDE:
                self._run_wide(evaluator)
            else:
                super().run(evaluator)
        finally:
            self._report(evaluator.exp_dir)

    def _run_wide(self, evaluator: Any) -> None:
        """The asynchronous loop at width: a model thread proposes for the subspaces in turn and
        keeps a reserve (see the module docstring); this thread submits and hands results over."""
        from ._bayes._space import SpaceMap
        from ._bayes._subspaces import Subspaces

        self.task_points = {}
        self.budget = evaluator.budget
        self.start(evaluator.space, evaluator.workers)
        workers = evaluator.workers
        full = SpaceMap(evaluator.space)
        for sub in self.subspaces:
            sub.engine.reserve_size = max(workers // len(self.subspaces), 1)
            # results arrive by hundreds a second: a kernel re-optimized at every 10% of growth
            # was most of the model's time (two GP hyperfits with output_warp auto, per fit)
            sub.engine.hyperfit_growth = max(sub.engine.hyperfit_growth, WIDE_HYPERFIT_GROWTH)
            sub.engine.wide_wave = True
        self.model = Subspaces([s.engine for s in self.subspaces], [s.bounds for s in self.subspaces], full)
        self.stats: dict[str, Any] = {"proposed": 0, "runners_up": 0, "random_fillers": 0}
        proposer = Proposer(
            self.model,  # type: ignore[arg-type]
            max_ahead=4 * workers,
            wide=True,
            workers=workers,
            process_after=PROCESS_AFTER,
        ).start()
        refill = Refill(
            self.space, full, proposer, workers=workers, speculate=True, max_idle=None, seed=self.seed, stats=self.stats
        )

        def learn(results: Sequence[Result]) -> None:
            results = self.stopped.results(results)  # a trial stopped early: its last report's loss
            xs = [full.to_skopt(r.params) if self.space.contains(r.params) else None for r in results]
            proposer.tell([r.id for r in results], xs, [r.loss for r in results])
            self._note(results, xs)

        try:
            if evaluator.history:
                learn(list(evaluator.history))
            serve(evaluator, proposer, refill, target=workers, to_x=full.to_skopt, learn=learn, stats=self.stats)
        finally:
            proposer.close()
            self.stats.update(proposer.summary())

    def _note(self, results: Sequence[Result], xs: Sequence[list[Any] | None]) -> None:
        """Count the results each subspace saw and keep its best (the report), at width."""
        known = [(r, x) for r, x in zip(results, xs, strict=True) if x is not None]
        if not known:
            return
        for k, sub in enumerate(self.subspaces):
            inside = self.model.inside(k, [x for _, x in known])
            for (r, _), ok in zip(known, inside, strict=True):
                if ok:
                    sub.results += 1
                    if r.ok and (sub.best is None or r.loss < sub.best.loss):
                        sub.best = r

    def suggest(self, n: int) -> list[dict[str, Any]]:
        """``n`` proposals from the subspace whose turn it is: one fit, a constant-liar batch
        conditioned on that subspace's pending points. One worker freed at a time (tasks that
        take time) gets one proposal per subspace in turn; workers freed together share one
        fit instead of one each (free tasks at 1,000 observations: 4 results per fit, not 1);
        ``n`` of at least ``LIAR_PICKS`` (64) per subspace (the first wave of thousands of
        workers) is shared out among all of them, one fit each, so that no region takes a whole
        wave; smaller batches keep one fit per suggestion (the optimizer thread fits while
        workers wait). Each fit's work is bounded in the points in flight (see
        ``optimizers._bayes._engine``)."""
        from ._bayes._subspaces import share_out

        count = len(self.subspaces)
        # a wave of thousands of workers: every subspace proposes its share
        shares, turns, self._turn = share_out(n, count, self._turn, wave=n >= LIAR_PICKS * count)
        pending: dict[int, list[list[Any]]] = {k: [] for k in turns}
        for j, x in self._pending.values():
            if j in pending:
                pending[j].append(x)
        self._fresh, points = [], []
        for k, share in zip(turns, shares, strict=True):
            sub = self.subspaces[k]
            xs = sub.engine.propose(share, pending[k])
            self._fresh += [(k, x) for x in xs]
            points += [sub.map.from_skopt(x) for x in xs]
        return points

    def submitted(self, ids: Sequence[int], points: Sequence[dict[str, Any]]) -> None:
        super().submitted(ids, points)
        self._pending.update(zip(ids, self._fresh, strict=False))
        self._fresh = []

    def ingest(self, results: Sequence[Result]) -> None:
        """Tell every subspace that contains a result's point; results of points a subspace did
        not propose (other subspaces', earlier runs') count towards its initial design. A trial
        stopped early counts with its last report's loss (``optimizers._stopped``)."""
        results = self.stopped.results(results)
        proposers = [self._pending.pop(result.id, (None, None))[0] for result in results]
        for k, sub in enumerate(self.subspaces):  # one tell per subspace: thousands of results at width
            learned = sub.tell_many(results)
            sub.engine.n_proposed += sum(ok and k != j for ok, j in zip(learned, proposers, strict=True))

    def _report(self, exp_dir: str | os.PathLike[str] | None) -> None:
        report = [sub.summary() for sub in self.subspaces]
        for i, entry in enumerate(report):
            log.info(
                "hyperspace subspace %d %s: %d results, best %s",
                i,
                entry["bounds"],
                entry["results"],
                entry["best_loss"],
            )
        if exp_dir is not None and report:
            path = Path(exp_dir) / "hyperspace.json"
            tmp = path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(report, indent=2, default=repr, allow_nan=False) + "\n")
            os.replace(tmp, path)
