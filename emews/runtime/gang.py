"""Gang scheduling of multi-rank tasks over worker ranks grouped by node (EASY backfill).

A task of size ``k`` runs on ``k`` worker ranks at once. ``GangScheduler`` decides which
queued tasks start now and on which ranks; it never calls MPI and never reads a clock: the
caller passes ``now`` (the distributor's monotonic clock, or a simulated one in tests and
``bench/gang.py``).

* **Placement** (``NodeLayout.place``): the ``k`` ranks of a task come from one node when
  one node has ``k`` idle ranks (the node with the fewest idle ranks that fit: whole nodes stay
  whole for large tasks), in a node-aligned block (offset a multiple of ``k`` in the node,
  inside the ``2k`` block with the fewest idle ranks); otherwise from as few nodes as possible.
* **Order**: higher ``priority`` first, then submission order.
* **One reservation, EASY backfill**: when the task holding the reservation does not fit, it
  gets the *shadow time* at which enough ranks will be idle, from the expected end of the running
  tasks. Any other task starts now only if it fits in the idle ranks and does not delay the
  reservation: it ends by the shadow time even on its cautious estimate, or it only uses ranks
  that are spare after the holder starts even if the running tasks take their cautious estimates.
  Estimates are a moving mean (and spread) of run time per size (``RunTimeEstimate``; cautious =
  mean + one standard deviation) unless the task brings its own, exact, estimate.
* **Early reservation for wide tasks**: the holder is the widest of the first ``lookahead`` queued
  tasks of the head's priority (the oldest among equals; it starts at once if it fits), so ranks
  drain for a wide task while the smaller tasks ahead of it are still queued, instead of only once
  it is first in line. The head takes the reservation back once it is *due*: first in line for
  ``patience`` times its own expected run time, or passed by ``passes`` wider tasks (so the wait
  moved to it stays short). ``lookahead=1`` is plain EASY; without backfill there is none.
* **Release**: ``release(key, now)`` returns all ranks of a group to the pool together.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Generator, Hashable, Iterable, Mapping
from dataclasses import dataclass

from emews.core.wording import counted


@dataclass(frozen=True, slots=True)
class Placement:
    """A task that starts now on ``ranks`` (ascending)."""

    key: Hashable
    ranks: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Reservation:
    """The head task's claim: ``size`` ranks at ``shadow``; ``extra`` of the ranks idle now are
    spare then (the backfill may use them for tasks that end later; a backfilled task only ever
    takes ranks idle now, so ``extra`` counts no more than those)."""

    key: Hashable
    size: int
    shadow: float
    extra: int


@dataclass(slots=True)
class _Queued:
    key: Hashable
    size: int
    priority: float
    order: int
    estimate: float | None

    def sort_key(self) -> tuple[float, int]:
        return (-self.priority, self.order)


@dataclass(slots=True)
class _Head:
    """The task first in line: since when, and how many wider tasks have started before it."""

    key: Hashable
    since: float
    passed: int = 0

    def due(self, now: float, patience: float, passes: int) -> bool:
        """It has waited ``patience`` seconds first in line, or been passed ``passes`` times."""
        return now - self.since >= patience or self.passed >= passes


@dataclass(frozen=True, slots=True)
class _Started:
    """A task this scheduler started: its ranks, when, and how long it should take."""

    key: Hashable
    size: int
    ranks: tuple[int, ...]
    start: float
    estimate: float
    cautious: float


class _Ordered:
    """A set of node indices whose smallest member is at hand (a heap with lazy deletion)."""

    __slots__ = ("_heap", "members")

    def __init__(self) -> None:
        self.members: set[int] = set()
        self._heap: list[int] = []

    def __len__(self) -> int:
        return len(self.members)

    def add(self, node: int) -> None:
        if node not in self.members:
            self.members.add(node)
            heapq.heappush(self._heap, node)

    def discard(self, node: int) -> None:
        self.members.discard(node)
        if len(self._heap) > 2 * len(self.members) + 32:
            self._heap = sorted(self.members)  # a sorted list is a heap

    def first(self) -> int | None:
        """The smallest member (``None``: empty)."""
        heap = self._heap
        while heap and heap[0] not in self.members:
            heapq.heappop(heap)
        return heap[0] if heap else None


_DUE, _OVER, _GONE = 0, 1, 2


class _Ends:
    """When the running tasks end under one estimate per task (the expected or the cautious one),
    in order at any ``now``: the tasks not yet overrun in a heap by ``start + duration``; the
    overrun ones, given their duration again from ``now``, as their ranks summed per duration
    (a heap of the durations), so that reading the first ends costs their number times a
    logarithm, not a sort of every running task, even when thousands share one estimate."""

    def __init__(self) -> None:
        self._entries: dict[Hashable, list] = {}  # key -> [start + duration, duration, size, state]
        self._due: list[tuple[float, int, list]] = []  # (start + duration, seq, entry): ends after _now
        self._over: list[float] = []  # durations of the overrun tasks (stale ones not in _over_size)
        self._over_size: dict[float, int] = {}  # duration -> ranks of the overrun tasks
        self._now = float("-inf")
        self._seq = itertools.count()

    def add(self, key: Hashable, start: float, duration: float, size: int) -> None:
        entry = [start + duration, duration, size, _DUE]
        self._entries[key] = entry
        self._push(entry, next(self._seq))

    def discard(self, key: Hashable) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        if entry[3] == _OVER:
            left = self._over_size[entry[1]] - entry[2]
            if left:
                self._over_size[entry[1]] = left
            else:
                del self._over_size[entry[1]]
        entry[3] = _GONE
        if len(self._due) + len(self._over) > 2 * len(self._entries) + 64:
            self._rebuild()

    def _push(self, entry: list, seq: int, *, heap: bool = True) -> None:
        """``entry`` among the due ends, or the overrun ones; ``heap=False``: appended to the
        due list, which the caller heapifies once (:meth:`_rebuild`)."""
        if entry[0] > self._now:
            entry[3] = _DUE
            item = (entry[0], seq, entry)
            if heap:
                heapq.heappush(self._due, item)
            else:
                self._due.append(item)
        else:
            self._overrun(entry)

    def _overrun(self, entry: list) -> None:
        entry[3] = _OVER
        duration = entry[1]
        if duration not in self._over_size:
            self._over_size[duration] = 0
            heapq.heappush(self._over, duration)
        self._over_size[duration] += entry[2]

    def _rebuild(self) -> None:
        """The heaps again from the live entries only (one heapify, not a push per entry)."""
        entries = list(self._entries.values())
        self._due, self._over, self._over_size = [], [], {}
        for seq, entry in enumerate(entries):  # fresh sequence numbers: only order among equals
            self._push(entry, seq, heap=False)
        heapq.heapify(self._due)
        self._seq = itertools.count(len(entries))

    def _advance(self, now: float) -> None:
        """Move the tasks overrun by ``now`` to the overrun sums (all back first if time went back)."""
        if now < self._now:
            self._now = now
            self._rebuild()
            return
        self._now = now
        due = self._due
        while due and due[0][0] <= now:
            entry = heapq.heappop(due)[2]
            if entry[3] == _DUE:
                self._overrun(entry)

    def ascending(self, now: float) -> Generator[tuple[float, int], None, None]:
        """``(end, ranks)`` of the running tasks, earliest end first, where an overrun task ends at
        ``now`` plus its duration (overrun tasks of one duration together); what was read is put
        back when the iteration ends or is closed."""
        self._advance(now)
        due, over, over_size = self._due, self._over, self._over_size
        read_due: list[tuple[float, int, list]] = []
        read_over: list[float] = []
        try:
            while True:
                while due and due[0][2][3] != _DUE:
                    heapq.heappop(due)
                while over and over[0] not in over_size:
                    heapq.heappop(over)
                if over and (not due or now + over[0] < due[0][0]):
                    duration = heapq.heappop(over)
                    while over and over[0] == duration:  # a duration pushed again: once is enough
                        heapq.heappop(over)
                    read_over.append(duration)
                    yield now + duration, over_size[duration]
                elif due:
                    item = heapq.heappop(due)
                    read_due.append(item)
                    yield item[0], item[2][2]
                else:
                    return
        finally:
            for item in read_due:
                heapq.heappush(due, item)
            for duration in read_over:
                heapq.heappush(over, duration)

    def size_ending_by(self, now: float, time: float, enough: int | None = None) -> int:
        """Ranks of the running tasks that end by ``time`` (ends as :meth:`ascending` gives them);
        with ``enough``, the count stops growing once it reaches ``enough`` (the caller needs no
        more, and the walk reads only the first ends, not every task ending by a far ``time``)."""
        total = 0
        walk = self.ascending(now)
        try:
            for end, size in walk:
                if end > time or (enough is not None and total >= enough):
                    break
                total += size
        finally:
            walk.close()
        return total


class NodeLayout:
    """Worker ranks grouped by node, and the choice of ``k`` idle ranks among them."""

    def __init__(self, nodes: Mapping[int, Hashable]) -> None:
        """``nodes`` maps each worker rank to its node (a host name, an index)."""
        if not nodes:
            raise ValueError("a gang scheduler needs at least one worker rank")
        grouped: dict[Hashable, list[int]] = {}
        for rank in sorted(nodes):
            grouped.setdefault(nodes[rank], []).append(rank)
        self._nodes: list[tuple[int, ...]] = [tuple(ranks) for ranks in grouped.values()]
        self._ranks = tuple(sorted(nodes))

    @property
    def ranks(self) -> tuple[int, ...]:
        """All worker ranks, ascending."""
        return self._ranks

    @property
    def nodes(self) -> list[tuple[int, ...]]:
        """The worker ranks of each node, in node order."""
        return list(self._nodes)

    def place(self, size: int, idle: Iterable[int]) -> tuple[int, ...] | None:
        """``size`` ranks among ``idle`` (one node and an aligned block when possible), or ``None``."""
        idle_set = set(idle)
        free = [[r for r in node if r in idle_set] for node in self._nodes]
        if sum(len(f) for f in free) < size:
            return None
        chosen: list[int] = []
        remaining = size
        candidates = list(range(len(self._nodes)))
        while True:
            fits = [n for n in candidates if len(free[n]) >= remaining]
            if fits:
                best = min(fits, key=lambda n: (len(free[n]), not _aligned(self._nodes[n], free[n], remaining), n))
                chosen.extend(_block(self._nodes[best], free[best], remaining))
                return tuple(sorted(chosen))
            widest = max(candidates, key=lambda n: (len(free[n]), -n))
            chosen.extend(free[widest])
            remaining -= len(free[widest])
            candidates.remove(widest)


def _aligned(node: tuple[int, ...], free: list[int], size: int) -> list[int]:
    """Offsets (in the node) of fully idle blocks of ``size`` ranks starting at a multiple of ``size``."""
    idle = set(free)
    return [o for o in range(0, len(node) - size + 1, size) if all(r in idle for r in node[o : o + size])]


def _block(node: tuple[int, ...], free: list[int], size: int) -> list[int]:
    """The aligned block whose enclosing ``2*size`` block is busiest; else the first idle ranks."""
    offsets = _aligned(node, free, size)
    if not offsets:
        return free[:size]
    idle = set(free)

    def idle_around(offset: int) -> int:
        start = offset // (2 * size) * (2 * size)
        return sum(r in idle for r in node[start : start + 2 * size])

    best = min(offsets, key=lambda o: (idle_around(o), o))
    return list(node[best : best + size])


class IdleRanks:
    """The idle ranks of a :class:`NodeLayout`, kept per node as they change, so that placing a
    task looks at the nodes with enough idle ranks only, not at every rank of the job: the same
    choice as :meth:`NodeLayout.place` over :attr:`ranks`, at any width.

    Nodes are indexed by their count of idle ranks, and, for each task size asked for, by whether
    they hold an aligned idle block of that size; each index keeps its lowest node at hand. A
    placement over several nodes detaches the nodes it takes from and puts them back after."""

    def __init__(self, layout: NodeLayout, ranks: Iterable[int]) -> None:
        self._layout = layout
        self._nodes = layout.nodes
        self._node_of = {r: n for n, node in enumerate(self._nodes) for r in node}
        self._free: list[set[int]] = [set() for _ in self._nodes]
        #: idle count -> the nodes with that many idle ranks (counts above 0 only)
        self._by_count: dict[int, _Ordered] = {}
        #: size -> idle count -> the nodes with that count and an aligned idle block of that size
        self._aligned_by: dict[int, dict[int, _Ordered]] = {}
        self.ranks: set[int] = set()
        self.add(ranks)

    def __len__(self) -> int:
        return len(self.ranks)

    def add(self, ranks: Iterable[int]) -> None:
        self._change(ranks, idle=True)

    def remove(self, ranks: Iterable[int]) -> None:
        self._change(ranks, idle=False)

    def _change(self, ranks: Iterable[int], *, idle: bool) -> None:
        """Mark ``ranks`` idle (or not), re-indexing each node they touch once, not once a rank
        (a team's ranks mostly share a node)."""
        by_node: dict[int, list[int]] = {}
        for rank in ranks:
            if (rank in self.ranks) != idle:
                by_node.setdefault(self._node_of[rank], []).append(rank)
        for node, changed in by_node.items():
            free = self._free[node]
            self._unindex(node, len(free))
            if idle:
                free.update(changed)
                self.ranks.update(changed)
            else:
                free.difference_update(changed)
                self.ranks.difference_update(changed)
            self._index(node, len(free))

    def _index(self, node: int, count: int) -> None:
        if not count:
            return
        self._by_count.setdefault(count, _Ordered()).add(node)
        for size, by_count in self._aligned_by.items():
            if size <= count and self._aligned(node, size):
                by_count.setdefault(count, _Ordered()).add(node)

    def _unindex(self, node: int, count: int) -> None:
        if not count:
            return
        _drop(self._by_count, count, node)
        for size, by_count in self._aligned_by.items():
            if size <= count:
                _drop(by_count, count, node)

    def place(self, size: int) -> tuple[int, ...] | None:
        """``size`` idle ranks, chosen as :meth:`NodeLayout.place` chooses them: among the nodes
        with the fewest idle ranks that hold ``size``, the first with an aligned block, else the
        first; when no node holds ``size``, all the idle ranks of the widest node (the first of
        the widest) and again for what remains."""
        if len(self.ranks) < size:
            return None
        chosen: list[int] = []
        detached: list[tuple[int, int]] = []
        remaining = size
        try:
            while (node := self._fitting(remaining)) is None:
                count = max(self._by_count)
                widest = self._by_count[count].first()
                assert widest is not None
                chosen.extend(self._free_list(widest))
                remaining -= count
                self._unindex(widest, count)
                detached.append((widest, count))
            chosen.extend(_block(self._nodes[node], self._free_list(node), remaining))
        finally:
            for widest, count in detached:
                self._index(widest, count)
        return tuple(sorted(chosen))

    def _fitting(self, size: int) -> int | None:
        """The node of fewest idle ranks that holds ``size``: the first with an aligned block, else the first."""
        counts = [c for c in self._by_count if c >= size]
        if not counts:
            return None
        count = min(counts)
        aligned = self._aligned_index(size).get(count)
        node = aligned.first() if aligned is not None else None
        return node if node is not None else self._by_count[count].first()

    def _aligned_index(self, size: int) -> dict[int, _Ordered]:
        """The nodes with an aligned idle block of ``size`` by idle count (built the first time asked)."""
        by_count = self._aligned_by.get(size)
        if by_count is None:
            by_count = self._aligned_by[size] = {}
            for count, nodes in self._by_count.items():
                if count >= size:
                    for node in nodes.members:
                        if self._aligned(node, size):
                            by_count.setdefault(count, _Ordered()).add(node)
        return by_count

    def _free_list(self, node: int) -> list[int]:
        free = self._free[node]
        return [r for r in self._nodes[node] if r in free]

    def _aligned(self, node: int, size: int) -> bool:
        """Whether ``node`` holds an aligned idle block of ``size`` (:func:`_aligned`, stopping at the first)."""
        ranks, free = self._nodes[node], self._free[node]
        return any(free.issuperset(ranks[o : o + size]) for o in range(0, len(ranks) - size + 1, size))


def _drop(index: dict[int, _Ordered], count: int, node: int) -> None:
    """Take ``node`` out of ``index[count]``, and the count out of the index once it has no node."""
    nodes = index.get(count)
    if nodes is not None:
        nodes.discard(node)
        if not nodes:
            del index[count]


class RunTimeEstimate:
    """Moving mean and spread of run time per task size (exponential, weight ``alpha`` on the newest).

    A size never seen yet is estimated from all sizes together, and before any run at all by
    ``initial`` (spread 0). ``cautious(size)`` is the mean plus ``caution`` standard deviations:
    what a backfill candidate is assumed to take, so a long-tailed run time rarely delays the head.
    """

    def __init__(self, *, alpha: float = 0.2, initial: float = 1.0, caution: float = 1.0) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        self._alpha = alpha
        self._initial = initial
        self._caution = caution
        self._by_size: dict[int, tuple[float, float]] = {}
        self._overall: tuple[float, float] | None = None

    def record(self, size: int, seconds: float) -> None:
        """One task of ``size`` ranks ran ``seconds``."""
        self._by_size[size] = self._mix(self._by_size.get(size), seconds)
        self._overall = self._mix(self._overall, seconds)

    def __call__(self, size: int) -> float:
        """Expected (mean) run time of a task of ``size`` ranks."""
        return self._moments(size)[0]

    def cautious(self, size: int) -> float:
        """Mean plus ``caution`` standard deviations of the run time of a task of ``size`` ranks."""
        mean, variance = self._moments(size)
        return mean + self._caution * variance**0.5

    def _moments(self, size: int) -> tuple[float, float]:
        known = self._by_size.get(size, self._overall)
        return (self._initial, 0.0) if known is None else known

    def _mix(self, old: tuple[float, float] | None, new: float) -> tuple[float, float]:
        if old is None:
            return new, 0.0
        mean, variance = old
        step = self._alpha * (new - mean)
        return mean + step, (1.0 - self._alpha) * (variance + (new - mean) * step)


class GangScheduler:
    """Which queued multi-rank tasks start now, and on which ranks (EASY backfill).

    ``submit`` tasks, call ``schedule(now)`` after every change (a submission, a release),
    start the returned placements, and ``release(key, now)`` each when it ends. With
    ``backfill=False`` nothing passes a blocked head task (strict priority order). ``lookahead``,
    ``patience`` (in the head's expected run times) and ``passes``: see the module docstring.
    """

    def __init__(
        self,
        nodes: Mapping[int, Hashable],
        *,
        estimate: RunTimeEstimate | None = None,
        backfill: bool = True,
        lookahead: int = 8,
        patience: float = 0.35,
        passes: int = 2,
    ) -> None:
        if lookahead < 1 or passes < 0 or patience < 0:
            raise ValueError(f"need lookahead >= 1, patience >= 0, passes >= 0; got {lookahead}, {patience}, {passes}")
        self._layout = NodeLayout(nodes)
        self._estimate = estimate if estimate is not None else RunTimeEstimate()
        self._backfill = backfill
        self._lookahead = lookahead if backfill else 1
        self._patience = patience
        self._passes = passes
        self._head: _Head | None = None
        self._idle = IdleRanks(self._layout, self._layout.ranks)
        self._queue: list[_Queued] = []
        self._keys: set[Hashable] = set()
        self._running: dict[Hashable, _Started] = {}
        self._expected_ends = _Ends()  # the running tasks' ends, in order, for the reservation
        self._cautious_ends = _Ends()
        self._counter = itertools.count()
        self._reservation: Reservation | None = None
        self._retired: set[int] = set()
        self._explicit = 0  # queued tasks with their own estimate
        self._sizes: dict[int, int] = {}  # size -> queued tasks of that size

    @property
    def layout(self) -> NodeLayout:
        """The worker ranks by node, as placement sees them."""
        return self._layout

    @property
    def workers(self) -> int:
        """Worker ranks in the job."""
        return len(self._layout.ranks)

    @property
    def idle(self) -> frozenset[int]:
        """Ranks running nothing now."""
        return frozenset(self._idle.ranks)

    @property
    def queued(self) -> list[Hashable]:
        """Keys of waiting tasks, in the order they will be considered."""
        return [q.key for q in self._ordered()]

    @property
    def running(self) -> dict[Hashable, tuple[int, ...]]:
        """Ranks of each running task."""
        return {key: run.ranks for key, run in self._running.items()}

    @property
    def reservation(self) -> Reservation | None:
        """The reservation after the last ``schedule``: the head's, or a wider task's among the first
        ``lookahead`` (``None``: nothing waits for ranks)."""
        return self._reservation

    def submit(self, key: Hashable, size: int = 1, *, priority: float = 0.0, estimate: float | None = None) -> None:
        """Queue task ``key`` of ``size`` ranks; ``estimate`` (seconds) overrides the moving mean."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"task size must be a positive number of ranks, got {size!r}")
        if size > self.workers - len(self._retired):
            raise ValueError(f"task size {size} is larger than the job's {counted(self.workers, 'worker rank')}")
        if key in self._keys:
            raise ValueError(f"task {key!r} is already queued or running")
        self._keys.add(key)
        self._explicit += estimate is not None
        self._sizes[size] = self._sizes.get(size, 0) + 1
        # kept in order as it grows (higher priority first, then submission order): never sorted again
        bisect.insort(self._queue, _Queued(key, size, priority, next(self._counter), estimate), key=_Queued.sort_key)

    def schedule(self, now: float) -> list[Placement]:
        """Start what may start now: the reservation holder while it fits, then backfill (EASY)."""
        started: list[Placement] = []
        reservation: Reservation | None = None
        while self._queue:
            ordered = self._queue  # in order
            holder = self._holder(ordered, now)
            if holder.size <= len(self._idle):
                if holder is not ordered[0]:
                    assert self._head is not None
                    self._head.passed += 1
                started.append(self._start(holder, now))
                continue
            reservation = self._reserve(holder, now)
            if self._backfill:
                started.extend(self._fill(holder, reservation, now))
            break
        self._reservation = reservation
        return started

    def release(self, key: Hashable, now: float) -> tuple[int, ...]:
        """Task ``key`` ended: all its ranks are idle again (returned); its run time is recorded."""
        run = self._running.pop(key, None)
        if run is None:
            raise KeyError(f"task {key!r} is not running")
        self._keys.discard(key)
        self._expected_ends.discard(key)
        self._cautious_ends.discard(key)
        self._idle.add(r for r in run.ranks if r not in self._retired)
        self._estimate.record(run.size, max(0.0, now - run.start))
        return run.ranks

    def retire(self, rank: int) -> None:
        """``rank`` takes no more tasks (its worker stopped); a task running on it still ends by ``release``."""
        self._retired.add(rank)
        self._idle.remove((rank,))

    def withdraw_larger(self, size: int) -> list[Hashable]:
        """Remove the queued tasks larger than ``size`` ranks (after retirements); their keys."""
        gone = [q for q in self._queue if q.size > size]
        self._queue = [q for q in self._queue if q.size <= size]
        for q in gone:
            self._keys.discard(q.key)
            self._explicit -= q.estimate is not None
            self._unqueued(q.size)
        return [q.key for q in gone]

    def _holder(self, ordered: list[_Queued], now: float) -> _Queued:
        """The head if it is due, else the widest of the first ``lookahead`` of its priority."""
        head = ordered[0]
        if self._head is None or self._head.key != head.key:
            self._head = _Head(head.key, now)
        if self._head.due(now, self._patience * self._expected(head), self._passes):
            return head
        window = [t for t in ordered[: self._lookahead] if t.priority == head.priority]
        return max(window, key=lambda t: (t.size, -t.order))

    def _fill(self, holder: _Queued, reservation: Reservation, now: float) -> list[Placement]:
        """Backfill: the tasks that fit now and end by the shadow time, or fit in the spare ranks."""
        started, spare = [], reservation.extra
        # a size without its own estimate that could not start cannot start later in this pass
        # (its cautious estimate, the shadow: fixed; the idle and spare ranks: only fewer), so
        # once every queued size that fits the idle ranks failed, the rest of a long queue is not read
        failed: set[int] = set()
        explicit = self._explicit
        queue, idle, at = self._queue, len(self._idle), 0  # read in place: a start deletes queue[at]
        while idle and at < len(queue):
            task = queue[at]
            if task is holder or task.size > idle or (task.estimate is None and task.size in failed):
                at += 1
                continue
            by_shadow = now + self._cautious(task) <= reservation.shadow
            if by_shadow or task.size <= spare:
                spare -= 0 if by_shadow else task.size
                started.append(self._start(task, now))
                idle -= task.size
            else:
                at += 1
                if task.estimate is not None:
                    continue
                failed.add(task.size)
            if not explicit and all(size > idle or size in failed for size in self._sizes):
                break
        return started

    def _ordered(self) -> list[_Queued]:
        return list(self._queue)

    def _unqueued(self, size: int) -> None:
        left = self._sizes[size] - 1
        if left:
            self._sizes[size] = left
        else:
            del self._sizes[size]

    def _expected(self, task: _Queued) -> float:
        return task.estimate if task.estimate is not None else self._estimate(task.size)

    def _cautious(self, task: _Queued) -> float:
        return task.estimate if task.estimate is not None else self._estimate.cautious(task.size)

    def _start(self, task: _Queued, now: float) -> Placement:
        ranks = self._idle.place(task.size)
        assert ranks is not None and len(ranks) == task.size
        self._idle.remove(ranks)
        queue = self._queue
        del queue[bisect.bisect_left(queue, task.sort_key(), key=_Queued.sort_key)]
        self._explicit -= task.estimate is not None
        self._unqueued(task.size)
        run = _Started(task.key, task.size, ranks, now, self._expected(task), self._cautious(task))
        self._running[task.key] = run
        self._expected_ends.add(task.key, now, run.estimate, task.size)
        self._cautious_ends.add(task.key, now, run.cautious, task.size)
        return Placement(task.key, ranks)

    def _reserve(self, task: _Queued, now: float) -> Reservation:
        """When enough ranks for ``task`` will be idle (expected ends of the running tasks), and
        how many of the ranks idle now are spare then even if those tasks take their cautious
        estimate. Counting the ranks that surely end by the shadow stops at ``task.size``: from
        there every idle rank is spare (at 10,000 workers with a far shadow the count read
        thousands of ends, a third of the distributor's time with mixed task sizes)."""
        free, shadow = len(self._idle), now
        walk = self._expected_ends.ascending(now)  # the first ends only, not a sort of every task
        try:
            for end, size in walk:
                if free >= task.size:
                    break
                free, shadow = free + size, end
        finally:
            walk.close()
        idle = len(self._idle)
        ending = self._cautious_ends.size_ending_by(now, shadow, enough=task.size)
        return Reservation(task.key, task.size, shadow, min(idle, max(0, idle + ending - task.size)))
