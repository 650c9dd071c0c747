"""HyperSpace's subspaces as one engine for the model thread (``Proposer``) at width.

``hyperspace`` with more workers than ``WIDE`` runs its subspaces' engines in a background
thread, as ``bayes`` runs its one engine: :class:`Subspaces` has the part of the ``Engine``
interface the :class:`~._proposer.Proposer` uses. Points are skopt points of the whole space
(a subspace's skopt point is one of the whole space: the same dimensions in the same order,
narrower bounds). A result is told to every subspace that contains it; a batch comes from the
subspace whose turn it is (one fit), or, at least ``LIAR_PICKS`` points per subspace before any
fit (the random first wave), is shared among all of them; a subspace's pending points are the
points in flight that lie in it (one vectorized comparison per batch, not one per point). The
subspaces share one GP kernel, re-optimized as the results grow (see ``_lend_kernel``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._engine import LIAR_PICKS, Engine
from ._space import SpaceMap


class Subspaces:
    """The engines of HyperSpace's subspaces behind one ``tell``/``propose``."""

    def __init__(self, engines: Sequence[Engine], bounds: Sequence[dict[str, tuple[Any, Any]]], full: SpaceMap) -> None:
        self.engines = list(engines)
        self.full = full
        # per subspace: the columns of its split dimensions in a whole-space skopt point, and their bounds
        self._cols = [np.array([full.names.index(name) for name in b], dtype=int) for b in bounds]
        self._lo = [np.array([lo for lo, _ in b.values()], dtype=float) for b in bounds]
        self._hi = [np.array([hi for _, hi in b.values()], dtype=float) for b in bounds]
        for engine in self.engines:
            if engine.map.names != full.names:
                raise ValueError("a subspace must search the same dimensions as the whole space")
        self._turn = 0
        self._told = 0
        self._donor: int | None = None  # the subspace whose kernel was optimized last
        self._kernel_at = 0  # results told to all subspaces then
        self.reserve: list[list[Any]] = []
        #: the results the Proposer waits for before it calls the model fitted: every subspace's
        #: initial points (``n_told`` counts the results of all of them)
        self.n_initial_points = sum(e.n_initial_points for e in self.engines)
        #: per subspace, results told to it and proposals it made (for tests and the report)
        self.told = [0] * len(self.engines)
        self.proposed = [0] * len(self.engines)

    # the Engine interface the Proposer reads -------------------------------------------------
    @property
    def fits(self) -> int:
        return sum(e.fits for e in self.engines)

    @property
    def hyperfits(self) -> int:
        return sum(e.hyperfits for e in self.engines)

    @property
    def n_proposed(self) -> int:
        return sum(e.n_proposed for e in self.engines)

    @n_proposed.setter
    def n_proposed(self, value: int) -> None:
        """Set by a model process's reply (``RemoteEngine``); each engine keeps its own count."""

    @property
    def n_told(self) -> int:
        return self._told

    def estimator_name(self) -> str:
        return self.engines[0].estimator_name()

    def inside(self, k: int, xs: Sequence[list[Any]]) -> np.ndarray:
        """Which of the whole-space skopt points ``xs`` lie in subspace ``k`` (a boolean array)."""
        if not len(xs):
            return np.zeros(0, dtype=bool)
        values = np.asarray(xs, dtype=float)[:, self._cols[k]]  # every value a number (categories: indices)
        return np.all((values >= self._lo[k]) & (values <= self._hi[k]), axis=1)

    def tell(self, xs: Sequence[list[Any]], ys: Sequence[float]) -> None:
        """Tell every subspace the results whose points lie in it."""
        if not xs:
            return
        self._told += len(xs)
        for k, engine in enumerate(self.engines):
            mask = self.inside(k, xs)
            if mask.any():
                engine.tell(
                    [x for x, ok in zip(xs, mask, strict=True) if ok], [y for y, ok in zip(ys, mask, strict=True) if ok]
                )
                self.told[k] += int(mask.sum())

    def propose(self, n: int, pending: Sequence[list[Any]] = ()) -> list[list[Any]]:
        """``n`` points from the subspace whose turn it is (one fit, conditioned on the points in
        flight inside it), or, before any fit, shared among all subspaces when ``n`` is at least
        ``LIAR_PICKS`` per subspace (the random first wave of thousands of workers). Later large
        batches stay one fit: shared, every batch of 512 or more at 10,000 workers was 8 fits
        (7.5 s of CPU per batch of 1,000 instead of about 1)."""
        if n <= 0:
            return []
        count = len(self.engines)
        shares, turns, self._turn = share_out(n, count, self._turn, wave=n >= LIAR_PICKS * count and self.fits == 0)
        out: list[list[Any]] = []
        for k, share in zip(turns, shares, strict=True):
            mask = self.inside(k, pending)
            mine = [x for x, ok in zip(pending, mask, strict=True) if ok]
            self._lend_kernel(k)
            hyperfits = self.engines[k].hyperfits
            xs = self.engines[k].propose(share, mine)
            if self.engines[k].hyperfits > hyperfits:  # a fresh kernel: the one the others take
                self._donor, self._kernel_at = k, max(self._told, 1)
            self.proposed[k] += len(xs)
            out += xs
            self.reserve = list(self.engines[k].reserve)
        return out

    def _lend_kernel(self, k: int) -> None:
        """One GP kernel for all subspaces (they are regions of one objective): a subspace whose
        kernel is due for re-optimization takes the latest one a sibling optimized, unless the
        results told to all of them grew by ``hyperfit_growth`` since; then it optimizes one
        itself, which the others take in turn. A run of 20,000 results at 10,000 workers makes
        a handful of hyperparameter fits in all instead of several per subspace: at width a
        subspace's history grows past the growth between its turns, so that nearly every fit
        was one (two GPs each with ``output_warp`` auto; 17 of 23 fits, 38% busy)."""
        engine = self.engines[k]
        if engine.estimator_name() != "GP" or not engine._hyperfit_due() or self._donor is None:
            return
        if self._told >= self._kernel_at * (1.0 + engine.hyperfit_growth):
            return  # stale: this subspace optimizes the next shared kernel
        donor = self.engines[self._donor]
        if donor is engine:
            return
        engine._kernel, engine._kernels = donor._kernel, dict(donor._kernels)
        engine._warped = getattr(donor, "_warped", False)  # the output warp the donor chose
        engine._kernel_n = max(engine.n_told, 1)


def share_out(n: int, count: int, turn: int, *, wave: bool) -> tuple[list[int], list[int], int]:
    """Who proposes ``n`` points among ``count`` subspaces taking turns from ``turn``: in a
    ``wave`` every subspace its share, else the one whose turn it is; (shares, subspaces, next turn)."""
    if wave:
        shares = [n // count + (i < n % count) for i in range(count)]
        return shares, [(turn + i) % count for i in range(count)], turn + count
    return [n], [turn % count], turn + 1
