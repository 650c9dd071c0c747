"""A background thread that owns the surrogate engine while a run is going on.

The main thread (which owns the evaluator) hands it results and a demand ("this many points
could be submitted now"); the thread keeps the demand **plus a reserve** of proposals ready:
the reserve covers what the main thread will take while the next refit runs (results per
second x recent fit time), so the next refit starts while points are still in stock instead of
after they ran out. Each fit absorbs every result that arrived since the last one. After each
fit the engine's runners-up (``Engine.reserve``) are kept as a fallback the main thread can take
without waiting when even the stock ran dry. The thread never touches the evaluator, the queues
or MPI. How large the reserve is: :func:`reserve_size`.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._remote import ModelProcess, ModelProcessError, RemoteEngine, log

if TYPE_CHECKING:  # the engine (scikit-optimize, scikit-learn) is imported where a model is built
    from ._engine import Engine

#: a fit about to start waits this fraction of the last fit for the tasks still out
GATHER = 0.25

#: a wide run keeps at least ``workers // WIDE_LEAST`` proposals in stock, and may keep up to
#: ``workers // WIDE_MOST`` however few results were told (mbo's bounds, ``.mbo_ahead``)
WIDE_LEAST, WIDE_MOST = 64, 8

#: a wide run sizes its reserve for the longest of this many recent fits, not of the last 4: its
#: kernel is re-optimized once the results doubled, a fit several times longer than the ones
#: between, and a reserve sized for those ran dry during it (gaps of up to 1 s at 10,000 workers)
WIDE_CYCLES = 32


def reserve_size(
    rate: float, cycle: float, *, safety: float, most: int, told: int, staleness: float, workers: int = 0
) -> int:
    """Proposals to keep in stock beyond the demand: what ``rate`` results per second free during
    the next fit (``cycle`` seconds, the longest recent one) times ``safety``, at most ``most``.

    A run of a few workers also keeps it under ``staleness`` x the results ``told`` (early
    results are too informative to propose without). A wide run (``workers`` given: thousands
    out) keeps at least ``workers // WIDE_LEAST`` and lets the stock reach ``workers //
    WIDE_MOST`` however few results were told: right after a random first wave results arrive
    by hundreds a second while ``told`` is small, and a stock capped by it ran dry during every
    fit (each freed worker waited for the next one); a point proposed a fit early is one of
    thousands out, chosen with a model all the same.
    """
    need = math.ceil(rate * cycle * safety) if rate * cycle * safety > 0 else 0
    if workers <= 0:
        return 0 if need <= 0 else int(min(need, most, told * staleness))
    cap = max(told * staleness, workers // WIDE_MOST)
    return int(min(max(workers // WIDE_LEAST, min(need, cap)), most))


class Proposer:
    def __init__(
        self,
        engine: Engine,
        *,
        max_ahead: int = 0,
        min_cycle: float = 0.0,
        safety: float = 2.0,
        staleness: float = 0.25,
        longer_than_tasks: bool = False,
        process_after: float = math.inf,
        wide: bool = False,
        workers: int = 0,
    ) -> None:
        """``max_ahead``: most proposals kept ready beyond the demand; none until a fit took
        ``min_cycle`` seconds or more, and with ``longer_than_tasks`` none while a fit is shorter
        than a task (see :attr:`speculating`). ``staleness``: the reserve stays under this fraction of
        the results told (early results are too informative to propose without).
        See :meth:`_ahead`. ``process_after``: once a fit (with its proposals) took this many
        seconds, start a model process and hand the engine over to it when it is ready
        (0: start it at once; ``inf``: never; see :mod:`._remote`). ``wide``: more workers than
        a fit learns pending points (thousands): speculate from the first timed fit, whatever
        its length next to a task (a reserve's few stale points cost nothing next to the
        thousands out, and a worker waiting on every refit costs the refit). ``workers``: with
        ``wide``, the workers the reserve is sized for (:func:`reserve_size`; 0: sized as for a
        few workers)."""
        self.engine: Engine | RemoteEngine = engine
        self.process_after = process_after
        self._model_process: ModelProcess | None = None
        self._process_state = "none"  # none | starting | running | failed
        self.max_ahead = max_ahead
        self.min_cycle = min_cycle
        self.longer_than_tasks = longer_than_tasks
        self.wide = wide
        self.workers = workers if wide else 0
        self._started: dict[int, float] = {}  # task id -> when it was submitted
        self._durations: deque[float] = deque(maxlen=32)  # seconds recent tasks took
        self.safety = safety
        self.staleness = staleness
        self._told = 0
        self._fitted_on = 0  # results the last model fit saw (0: none fitted yet)
        self._arrivals: deque[float] = deque(maxlen=64)  # when results came in
        # seconds the last fits + proposals took
        self._cycles: deque[float] = deque(maxlen=WIDE_CYCLES if self.workers else 4)
        self._cond = threading.Condition()
        self._new_x: list[list[Any]] = []
        self._new_y: list[float] = []
        self._pending: dict[int, list[Any]] = {}  # task id -> skopt point, submitted, untold
        self._buffer: list[list[Any]] = []
        self._fallback: list[list[Any]] = []  # the last fit's runners-up
        self._demand = 0
        self._limit: int | None = None  # most points that can still be used
        self._busy = False
        self._stop = False
        self.error: BaseException | None = None
        self.busy_time = 0.0
        #: fits made while speculating (a reserve kept, runners-up offered): the decision
        #: :attr:`speculating` took, counted where it acts
        self.speculative_fits = 0
        self._thread = threading.Thread(target=self._loop, name="emews-bayes-model", daemon=True)

    def start(self) -> Proposer:
        if self.process_after <= 0:
            self._start_model_process()
        self._thread.start()
        return self

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout=60.0)  # a fit in progress is left to finish on its own
        if self._model_process is not None:
            self._model_process.close()

    # -- main thread ----------------------------------------------------------------------------
    def take(self, n: int) -> list[list[Any]]:
        """Up to ``n`` ready proposals, without waiting."""
        with self._cond:
            self._raise()
            out, self._buffer = self._buffer[:n], self._buffer[n:]
            self._demand = max(self._demand - len(out), 0)
            return out

    def take_fallback(self, n: int) -> list[list[Any]]:
        """Up to ``n`` of the last fit's runners-up, without waiting (for otherwise idle workers)."""
        with self._cond:
            self._raise()
            out, self._fallback = self._fallback[:n], self._fallback[n:]
            return out

    def submitted(self, ids: Sequence[int], xs: Sequence[list[Any]]) -> None:
        with self._cond:
            self._pending.update(zip(ids, xs, strict=False))
            now = time.monotonic()
            self._started.update((i, now) for i in ids)

    def tell(self, ids: Sequence[int], xs: Sequence[list[Any] | None], ys: Sequence[float]) -> None:
        with self._cond:
            now = time.monotonic()
            self._arrivals.extend(now for _ in ids)
            self._told += len(ids)
            # each result frees a worker: the main thread's next ``request`` will say so, but a
            # fit starting before it would propose for the stale demand (free tasks: 2 results
            # per fit at 1,000 observations instead of one fit per round of the workers)
            self._demand += len(ids)
            for i, x, y in zip(ids, xs, ys, strict=False):
                self._pending.pop(i, None)
                if (started := self._started.pop(i, None)) is not None:
                    self._durations.append(now - started)
                if x is not None:
                    self._new_x.append(x)
                    self._new_y.append(y)
            if self._wanted(low=True) > len(self._buffer):
                self._cond.notify_all()

    def request(self, n: int, limit: int | None = None) -> None:
        """``n`` proposals could be submitted now; at most ``limit`` more can ever be used."""
        with self._cond:
            self._demand = n
            self._limit = limit
            if self._wanted(low=True) > len(self._buffer):
                self._cond.notify_all()

    @property
    def busy(self) -> bool:
        """Whether the model thread is fitting or proposing right now."""
        with self._cond:
            return self._busy

    @property
    def speculating(self) -> bool:
        """Whether the model holds the workers up: the longest recent fit took ``min_cycle``
        seconds or more (and, with ``longer_than_tasks``, longer than a task: submission to
        result, median of the recent ones). Only then are proposals kept in reserve and
        runners-up handed to workers that would wait on a refit."""
        with self._cond:
            return self._speculating()

    @property
    def fitted(self) -> bool:
        """Whether a surrogate was fitted on at least the initial points' worth of results."""
        with self._cond:
            return self._fitted_on >= self.engine.n_initial_points

    def summary(self) -> dict:
        """Counters of the finished run."""
        out = {
            "fits": self.engine.fits,
            "hyperfits": self.engine.hyperfits,
            "model_time": self.busy_time,
            "estimator": self.engine.estimator_name(),
            "model_process": self._process_state,
            "results_told": self._told,  # handed to the model thread (it learns them at its next fit)
            "speculative_fits": self.speculative_fits,
        }
        if isinstance(self.engine, RemoteEngine):
            out["remote_fits"] = self.engine.remote_fits
            out["remote_from"] = self.engine.adopted_at  # results told before the handover
        return out

    @property
    def ready(self) -> int:
        with self._cond:
            return len(self._buffer)

    def wait_ready(self, n: int = 1, timeout: float | None = None) -> None:
        """Block until ``n`` proposals are ready (or the thread failed, or ``timeout``)."""
        with self._cond:
            self._cond.wait_for(lambda: len(self._buffer) >= n or self.error is not None, timeout)
            self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"the bayes model thread failed: {self.error!r}") from self.error

    # -- shared, called locked ------------------------------------------------------------------
    def _ahead(self) -> int:
        """Points the main thread will take while the next fit runs: results/s x the longest
        recent fit x ``safety``. (The demand refills the queue at the workers; this is on top.)

        Zero when the objective is slow next to the model (each fit then sees every result),
        when fits are shorter than ``min_cycle``, or with ``max_ahead`` 0; otherwise
        :func:`reserve_size`.
        """
        if len(self._arrivals) < 2 or not self._speculating():
            return 0
        cycle = max(self._cycles)
        span = self._arrivals[-1] - self._arrivals[0]
        rate = (len(self._arrivals) - 1) / span if span > 0 else math.inf
        # results arriving now still count: a stretch without results lowers the rate
        rate = min(rate, (len(self._arrivals) - 1) / max(time.monotonic() - self._arrivals[0], 1e-9))
        return reserve_size(
            rate,
            cycle,
            safety=self.safety,
            most=self.max_ahead,
            told=self._told,
            staleness=self.staleness,
            workers=self.workers,
        )

    def _speculating(self) -> bool:
        if self.max_ahead <= 0 or not self._cycles:
            return False
        if self.wide:
            return True
        cycle = max(self._cycles)
        if cycle < self.min_cycle:
            return False
        if self.longer_than_tasks:
            return bool(self._durations) and cycle > statistics.median(self._durations)
        return True

    def _count_decision(self) -> None:
        """Count a fit about to start while speculating; the first one is logged with why."""
        if not self._speculating():
            return
        if self.speculative_fits == 0 and not self.wide:
            tasks = f", tasks {statistics.median(self._durations):.3g} s" if self._durations else ""
            log.info(
                "bayes: refits hold the workers up, speculating (longest recent refit %.3g s%s)",
                max(self._cycles),
                tasks,
            )
        self.speculative_fits += 1

    def _gather_seconds(self) -> float:
        """How long a fit about to start waits for the tasks still out: ``GATHER`` of the last
        fit (0 while speculating: the reserve feeds the workers then). A task that comes back
        meanwhile is learned by this fit, and its worker gets a point of this batch instead of
        waiting for a fit of its own. Tasks that are short next to a fit come back: one fit
        then serves every worker (free tasks at 1,000 observations: 4 results per fit, not 2);
        long ones do not, and their workers lose at most that fraction of a fit."""
        if not self._pending or not self._cycles or self._speculating():
            return 0.0
        return GATHER * self._cycles[-1]

    def _wanted(self, low: bool = False) -> int:
        """Proposals to hold ready: the demand plus the reserve, within what can still be used.
        ``low``: the low-water mark that starts a refit (the demand plus half the reserve), so
        that each refit absorbs several results and the model thread does not spin."""
        ahead = self._ahead()
        want = self._demand + (ahead + 1) // 2 if low else self._demand + ahead
        return want if self._limit is None else min(want, self._limit)

    # -- model thread ---------------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._stop and self._wanted(low=True) <= len(self._buffer):
                        self._cond.wait()
                    if (gather := self._gather_seconds()) > 0:
                        self._cond.wait_for(lambda: self._stop or not self._pending, timeout=gather)
                    if self._stop:
                        return
                    new_x, new_y = self._new_x, self._new_y
                    self._new_x, self._new_y = [], []
                    n = self._wanted() - len(self._buffer)
                    pending = list(self._pending.values()) + list(self._buffer)
                    self._count_decision()
                    self._busy = True
                t0 = time.perf_counter()
                self._hand_over()
                self.engine.tell(new_x, new_y)
                fits = self.engine.fits
                xs = self.engine.propose(n, pending)
                cycle = time.perf_counter() - t0
                self.busy_time += cycle
                if self._process_state == "none" and cycle >= self.process_after:
                    self._start_model_process()
                with self._cond:
                    self._cycles.append(cycle)
                    if self.engine.fits > fits:
                        self._fitted_on = self.engine.n_told
                    self._buffer.extend(xs)
                    self._fallback = list(self.engine.reserve)
                    self._busy = False
                    self._cond.notify_all()
        except BaseException as exc:  # reported to the main thread on its next call
            with self._cond:
                self.error = exc
                self._busy = False
                self._cond.notify_all()

    def _start_model_process(self) -> None:
        self._model_process = ModelProcess()
        self._process_state = "starting"

    def _hand_over(self) -> None:
        """Move the engine into the model process once that is ready (model thread only)."""
        process = self._model_process
        if self._process_state != "starting" or process is None:
            return
        if not process.ready():
            if process.failed:
                self._process_state = "failed"
            return
        engine = self.engine
        # an Engine, or hyperspace's Subspaces (which has the interface the child calls)
        assert not isinstance(engine, RemoteEngine), "the engine moves once, from the 'starting' state"
        try:
            remote = process.adopt(engine)
        except (ModelProcessError, EOFError, OSError) as exc:
            log.warning("bayes: the model process could not take the model (%s); it stays here", exc)
            self._process_state = "failed"
            return
        self._process_state = "running"
        with self._cond:
            self.engine = remote
