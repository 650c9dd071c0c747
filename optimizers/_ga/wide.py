"""The wide steady-state GA's breeder: screened children bred ahead, off the optimizer thread.

At 100,000 workers on 60 s tasks the GA takes in 1,667 results a second. Breeding ten children
per child and screening them with the surrogate took 825 us of CPU per child in the optimizer
thread, which shares its interpreter lock with the distributor: 69.5% busy (docs/benchmarks.md,
"Rank 0 at width"). Above ``steady_state.WIDE_WORKERS`` workers with the screen on, a thread of
:class:`WideBreeder` keeps a stock of screened children ready instead, bred in batches by a
:class:`~.breeding.Breeding` in a model process (``_ga.breeding_process``: no interpreter lock shared
with the distributor), from a snapshot of the population and every result learned since the
last batch. The optimizer thread only inserts results, tells them, and takes children from the
stock; when the stock runs short of what the workers need, it breeds unscreened children itself
(``steady_state``), so a worker never waits for the model.

How much stock (:class:`Stock`): what the optimizer takes while the next batch is bred, results
per second x the longest recent batch x ``SAFETY``; a batch starts when the stock falls under
half of that. How many children are bred per child screened adapts to what the model process
keeps up with (:class:`Factor`): ``screen`` while the stock lasts, fewer (down to 2) after a
batch during which the optimizer found the stock empty. If the model process cannot start or
dies, the breeding goes on in this thread.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from emews.core.space import Space
from emews.processes.channel import ChildExited, ChildProcess

from .breeding import Breeding, Child, Member, Row
from .individual import Individual, LossFitness
from .options import GAOptions

log = logging.getLogger("emews.optimizers.ga")

#: the stock covers this many times what is taken while a batch is bred
SAFETY = 3.0
#: the fewest children a batch breeds
LEAST = 16
#: seconds the breeder waits for the model process to start before breeding in this process
START_TIMEOUT = 60.0
#: seconds ``close`` waits for the model process to exit before killing it
EXIT_WAIT = 5.0


class Stock:
    """The breeder's stock size from the results' rate and the batches' length (a clock passed in,
    so that a virtual one can drive it)."""

    def __init__(self, most: int, least: int = LEAST, safety: float = SAFETY) -> None:
        self.most, self.least, self.safety = max(most, least), least, safety
        self._arrivals: deque[tuple[float, int]] = deque(maxlen=64)  # (when, results so far)
        self._told = 0
        self._cycles: deque[float] = deque(maxlen=4)  # seconds the recent batches took

    def arrived(self, now: float, count: int) -> None:
        self._told += count
        self._arrivals.append((now, self._told))

    def bred(self, seconds: float) -> None:
        self._cycles.append(seconds)

    def rate(self, now: float) -> float:
        """Results per second recently (a stretch without results lowers it)."""
        if len(self._arrivals) < 2:
            return 0.0
        (first, before), (_, after) = self._arrivals[0], self._arrivals[-1]
        return (after - before) / max(now - first, 1e-9)

    def target(self, now: float) -> int:
        """Children to hold: results/s x the longest recent batch x ``safety``, within bounds."""
        if not self._cycles:
            return self.least
        need = math.ceil(self.rate(now) * max(self._cycles) * self.safety)
        return min(max(need, self.least), self.most)

    def low(self, now: float) -> int:
        """The stock under which the next batch starts: half the target."""
        return (self.target(now) + 1) // 2


class Factor:
    """Children bred per child screened: cut by a third (not below ``least``) after a batch during
    which the stock ran dry, one more (up to ``most``, the ``screen`` option) after one it lasted."""

    def __init__(self, most: int, least: int = 2) -> None:
        self.most, self.least = most, min(least, most)
        self.value = most

    def after_batch(self, ran_dry: bool) -> int:
        if ran_dry:
            self.value = max(self.value * 2 // 3, self.least)
        else:
            self.value = min(self.value + 1, self.most)
        return self.value


class WideBreeder:
    """A thread keeping screened children ready for the optimizer thread (see the module)."""

    def __init__(
        self,
        options: GAOptions,
        space: Space,
        seed: Any,
        population: list[Individual],
        *,
        most: int,
        process: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``population``: the GA's own list, copied by the thread for each batch (its members
        are never changed once in it). ``most``: the largest stock. ``process``: breed in a
        model process (else in this thread)."""
        self._config = (options, space, seed)
        self._population = population
        self.stock = Stock(most)
        self.factor = Factor(options.screen)
        self._dry = False  # the optimizer found the stock short since the batch began
        self._batches_done = 0
        self._clock = clock
        self._cond = threading.Condition()
        self._rows: list[Row] = []
        self._buffer: deque[Individual] = deque()
        self._scale = 1.0
        self._limit: int | None = None
        self._stop = False
        self.error: BaseException | None = None
        self._local: Breeding | None = None
        self._fallback: Breeding | None = None  # the optimizer thread's unscreened breeding
        self._proc: ChildProcess | None = None
        self.process_state = "none"  # none | starting | running | failed
        if process:
            try:
                self._proc = ChildProcess(
                    "emews.optimizers._ga.breeding_process",
                    config=self._config,
                    env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
                )
                self.process_state = "starting"
            except OSError as exc:
                log.warning("ga: could not start the model process (%s); breeding stays in this process", exc)
                self.process_state = "failed"
        self._counters: dict[str, int] = {}
        self._counted: dict[str, int] = {}  # a lost model process's last counters
        self.model_time = 0.0
        self._thread = threading.Thread(target=self._loop, name="emews-ga-breeder", daemon=True)

    def start(self) -> WideBreeder:
        self._thread.start()
        return self

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout=EXIT_WAIT)  # a batch in progress is left to finish on its own
        if self._proc is not None:
            self._proc.close(EXIT_WAIT)

    # -- optimizer thread ---------------------------------------------------------------------------
    def tell(self, scored: Sequence[Individual], scale: float, limit: int) -> None:
        """``scored``: results just inserted; ``scale``: the mutation step's factor now;
        ``limit``: the most children that can still be used (the budget left)."""
        # the loss the GA selects on, a failure's included (the screen learns failures, ``_ga.screen``)
        rows = [(dict(ind), ind.loss) for ind in scored]
        with self._cond:
            self._raise()
            self._rows += rows
            self._scale, self._limit = scale, limit
            if rows:
                self.stock.arrived(self._clock(), len(rows))
            if self._wants_batch():
                self._cond.notify_all()

    def take(self, n: int) -> list[Individual]:
        """Up to ``n`` children from the stock, without waiting."""
        with self._cond:
            self._raise()
            out = [self._buffer.popleft() for _ in range(min(n, len(self._buffer)))]
            if len(out) < n and self._batches_done:
                self._dry = True
            if self._limit is not None:
                self._limit = max(self._limit - len(out), 0)
            if out and self._wants_batch():
                self._cond.notify_all()
            return out

    def unscreened(self, population: Sequence[Individual], n: int, scale: float) -> list[Individual]:
        """``n`` children of ``population`` bred here, now, without the screen (the optimizer thread's
        fallback when the stock runs short): the breeder's operators on plain dicts, a third of
        the cost of DEAP's clone-based :func:`~.engine.breed_child`, from a random stream of their own."""
        if self._fallback is None:
            options, space, seed = self._config
            self._fallback = Breeding(options, space, f"{seed}-unscreened")
        members: list[Member] = [(ind, ind.fitness.wvalues) for ind in population]
        return [_child(point, parent) for point, parent in self._fallback.breed(members, n, scale, factor=1)]

    @property
    def ready(self) -> int:
        with self._cond:
            return len(self._buffer)

    def wait_stock(self, n: int, timeout: float | None = None) -> int:
        """Block until ``n`` children are ready (or ``timeout``); how many are (tests, benchmarks)."""
        with self._cond:
            self._cond.wait_for(lambda: len(self._buffer) >= n or self.error is not None, timeout)
            self._raise()
            return len(self._buffer)

    def summary(self) -> dict[str, Any]:
        """Counters: batches, children bred and screened, model fits, where the model ran."""
        with self._cond:
            out: dict[str, Any] = {
                k: self._counted.get(k, 0) + self._counters.get(k, 0)
                for k in ("batches", "bred", "screened", "fits", "hyperfits")
            }
        out["factor"] = self.factor.value
        out["model_process"] = self.process_state
        out["model_time"] = self.model_time
        return out

    def _raise(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"the GA's breeder failed: {self.error!r}") from self.error

    # -- shared, called locked --------------------------------------------------------------------
    def _wants_batch(self) -> bool:
        if len(self._population) < 2 or self._limit is None:
            return False  # nothing to breed from yet (the first children are random)
        stocked = len(self._buffer)
        return stocked < self._limit and stocked < self.stock.low(self._clock())

    # -- breeder thread -----------------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._stop or self._wants_batch())
                    if self._stop:
                        return
                    rows, self._rows = self._rows, []
                    stocked = len(self._buffer)
                    assert self._limit is not None  # _wants_batch
                    n = max(min(self.stock.target(self._clock()), self._limit) - stocked, 1)
                    members: list[Member] = [(dict(m), m.fitness.wvalues) for m in list(self._population)]
                    scale, factor = self._scale, self.factor.value
                    self._dry = False
                t0 = time.perf_counter()
                children = self._breed(rows, members, n, scale, factor)
                if children is None:
                    return  # stopped during the batch
                seconds = time.perf_counter() - t0
                self.model_time += seconds
                made = [_child(point, parent) for point, parent in children]
                with self._cond:
                    self.stock.bred(seconds)
                    if self._batches_done:
                        self.factor.after_batch(self._dry)
                    self._batches_done += 1
                    self._buffer.extend(made)
                    self._cond.notify_all()
        except BaseException as exc:  # reported to the optimizer thread on its next call
            with self._cond:
                self.error = exc
                self._cond.notify_all()

    def _breed(self, rows: list[Row], members: list[Member], n: int, scale: float, factor: int) -> list[Child] | None:
        """One batch, in the model process while it serves, else here."""
        if self._proc is not None and self.process_state == "starting":
            self._await_process()
        if self._proc is not None and self.process_state == "running":
            try:
                status, payload = self._proc.request(("breed", rows, members, n, scale, factor))
            except (ChildExited, EOFError, OSError) as exc:
                if self._stop:
                    return None
                log.warning("ga: the model process died (%r); breeding goes on in this process", exc)
                self._lose_process(members)
            else:
                if status == "error":
                    raise RuntimeError(f"the GA's model process failed:\n{payload}")
                children, self._counters = payload
                return children
        local = self._local_breeding(members)
        local.learn(rows)
        children = local.breed(members, n, scale, factor)
        self._counters = local.counters()
        return children

    def _await_process(self) -> None:
        assert self._proc is not None
        try:
            ready = self._proc.wait_ready(START_TIMEOUT)
        except ChildExited as exc:
            ready = None
            why = f"it exited during start-up ({exc})"
        else:
            why = "it did not start in time" if ready is None else f"it could not start: {ready.error}"
        if ready is not None and ready.error is None:
            self.process_state = "running"
            return
        log.warning("ga: the model process is unavailable, %s; breeding stays in this process", why)
        self._lose_process([])

    def _lose_process(self, members: list[Member]) -> None:
        self.process_state = "failed"
        with self._cond:
            self._counted, self._counters = dict(self._counters), {}
        if self._proc is not None:
            self._proc.kill()
        self._local_breeding(members)

    def _local_breeding(self, members: list[Member]) -> Breeding:
        """The breeding in this process; made at the first need, learning the population's
        points first (the results told to a lost model process are not kept here)."""
        if self._local is None:
            self._local = Breeding(*self._config)
            self._local.learn([(point, -wvalues[0] if wvalues else None) for point, wvalues in members])
        return self._local


def _child(point: dict[str, Any], parent: tuple[float, ...] | None) -> Individual:
    """A bred child as the GA submits it: no fitness yet, its parent's remembered."""
    ind = Individual.__new__(Individual)
    dict.update(ind, point)
    ind.fitness = LossFitness.__new__(LossFitness)  # wvalues (): not valid, as a fresh fitness
    ind.result = None
    ind.parent_fitness = parent
    return ind
