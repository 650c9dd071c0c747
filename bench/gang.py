"""Gang scheduling of multi-rank tasks: EASY backfill against first-fit and smallest-first.

    python bench/gang.py [--workers 8,16] [--per-node 4] [--tasks 2000] [--seeds 7] [--sigma 0.5,0.8]
                         [--mix 1:0.70,2:0.25,4:0.05] [--depth WORKERS]

A discrete-event simulation on a simulated clock (no MPI, no sleeping): the policy is
``emews.runtime.gang.GangScheduler`` with its defaults (node-aware placement, one reservation held
early for the widest of the first 8 queued tasks, EASY backfill with a moving mean of run time per
size), the one the distributor drives through
``emews/runtime/teams.py`` for tasks with ``task.ranks > 1``. Only the policy is simulated
(no MPI, no messages, no start-up cost): the figures are the policy's alone.

Workload: ``--tasks`` tasks with sizes drawn from ``--mix`` and log-normal run times of mean 1
(log-sd ``--sigma``, one table each), independent of size. An asynchronous optimizer keeps ``--depth`` tasks
(default: the worker count) waiting until the whole budget is queued. Every policy of one seed
meets the same tasks in the same order; workers sit ``--per-node`` to a node.

Contenders, all placing ranks with the same ``NodeLayout.place``:
  * ``gang (EASY)``: this project's policy;
  * ``plain EASY``: the same with ``lookahead=1``: the reservation only ever for the head;
  * ``first-fit``: scan the queue in order, start every task that fits now (no reservation);
  * ``smallest-first``: the same, smallest tasks first;
  * ``fifo (no backfill)``: ``GangScheduler(backfill=False)``, strict order: nothing passes a
    blocked head (shown for the utilization it costs).

Prints, medians over seeds, per worker count:
  * busy: busy rank-time / (workers x time) from 0 to the moment the last task of the budget
    was queued (the steady state; the drain of a finite budget is left out);
  * max head wait, largest size / any size: the longest time a task waited from the moment it
    was first in line (the oldest waiting task) to its start, in units of the mean task time;
  * beyond free: the longest a task first in line waited past the moment enough ranks would
    have been idle had nothing else started (the part of its wait the policy caused; what is
    left is the wait for running tasks to end, which no policy without preemption avoids);
  * largest-size wait: median time from queueing to start of the largest tasks (mean task times).
Target: busy >= 90% and no task waits longer than 2x the mean task time once first in line.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import math
import random
import statistics
from dataclasses import dataclass
from collections.abc import Callable, Hashable
from typing import NamedTuple, Protocol

from emews.runtime.gang import GangScheduler, NodeLayout, Placement


class Policy(Protocol):
    def submit(self, key: Hashable, size: int = 1) -> None: ...
    def schedule(self, now: float) -> list[Placement]: ...
    def release(self, key: Hashable, now: float) -> tuple[int, ...]: ...


@dataclass(frozen=True, slots=True)
class Waiting:
    """A task in a greedy policy's queue."""

    seq: int
    size: int
    key: Hashable


class Greedy:
    """Start every queued task that fits now, in ``order`` (no reservation, no estimate)."""

    def __init__(self, nodes: dict[int, int], order: Callable[[Waiting], tuple[int, ...]]) -> None:
        self._layout = NodeLayout(nodes)
        self._idle = set(self._layout.ranks)
        self._queue: list[Waiting] = []
        self._running: dict[Hashable, tuple[int, ...]] = {}
        self._order = order
        self._seq = itertools.count()

    def submit(self, key: Hashable, size: int = 1) -> None:
        self._queue.append(Waiting(next(self._seq), size, key))

    def schedule(self, now: float) -> list[Placement]:
        started = []
        for task in sorted(self._queue, key=self._order):
            ranks = self._layout.place(task.size, self._idle)
            if ranks is None:
                continue
            self._idle.difference_update(ranks)
            self._queue.remove(task)
            self._running[task.key] = ranks
            started.append(Placement(task.key, ranks))
        return started

    def release(self, key: Hashable, now: float) -> tuple[int, ...]:
        ranks = self._running.pop(key)
        self._idle.update(ranks)
        return ranks


class Task(NamedTuple):
    """A simulated task: its size in ranks and its run time."""

    size: int
    duration: float


class Figures(NamedTuple):
    """What one policy achieved on one workload."""

    busy: float
    head_wait_largest: float
    head_wait_any: float
    delay_any: float
    wait_largest: float


def workload(seed: int, count: int, mix: dict[int, float], sigma: float) -> list[Task]:
    """``count`` tasks: sizes from ``mix``, log-normal run times of mean 1."""
    rng = random.Random(seed)
    sizes, weights = list(mix), list(mix.values())
    mu = -sigma * sigma / 2
    return [Task(rng.choices(sizes, weights)[0], rng.lognormvariate(mu, sigma)) for _ in range(count)]


def free_at(size: int, workers: int, now: float, ending: list[tuple[float, int]], tasks: list[Task]) -> float:
    """When ``size`` ranks are idle if nothing else starts: the wait no policy can avoid."""
    idle = workers - sum(tasks[i].size for _, i in ending)
    for end, i in sorted(ending):
        if idle >= size:
            break
        now, idle = end, idle + tasks[i].size
    return now


def simulate(policy: Policy, tasks: list[Task], workers: int, depth: int) -> Figures:
    """Run ``tasks`` through ``policy`` on a simulated clock; the optimizer keeps ``depth`` waiting."""
    ending: list[tuple[float, int]] = []
    waiting: set[int] = set()
    queued_at: dict[int, float] = {}
    first_in_line: dict[int, float] = {}
    ranks_free_at: dict[int, float] = {}
    started: dict[int, float] = {}
    submitted = 0
    last_queued = 0.0
    now = 0.0
    while submitted < len(tasks) or waiting or ending:
        while ending and ending[0][0] <= now:
            policy.release(heapq.heappop(ending)[1], now)
        while submitted < len(tasks) and len(waiting) < depth:
            policy.submit(submitted, tasks[submitted].size)
            waiting.add(submitted)
            queued_at[submitted] = last_queued = now
            submitted += 1
        for placement in policy.schedule(now):
            i = placement.key
            waiting.discard(i)
            started[i] = now
            heapq.heappush(ending, (now + tasks[i].duration, i))
        if waiting and min(waiting) not in first_in_line:
            head = min(waiting)
            first_in_line[head] = now
            ranks_free_at[head] = free_at(tasks[head].size, workers, now, ending, tasks)
        if ending:
            now = ending[0][0]
        elif waiting:
            raise RuntimeError(f"{type(policy).__name__} left tasks waiting on an idle job")
    window = last_queued
    busy = sum(t.size * max(0.0, min(started[i] + t.duration, window) - min(started[i], window))
               for i, t in enumerate(tasks))
    largest = max(t.size for t in tasks)
    head = {i: started[i] - first_in_line.get(i, started[i]) for i in started}
    delay = {i: started[i] - ranks_free_at.get(i, started[i]) for i in started}
    return Figures(
        busy=busy / (workers * window) if window > 0 else math.nan,
        head_wait_largest=max((w for i, w in head.items() if tasks[i].size == largest), default=0.0),
        head_wait_any=max(head.values()),
        delay_any=max(delay.values()),
        wait_largest=statistics.median(started[i] - queued_at[i] for i, t in enumerate(tasks) if t.size == largest),
    )


POLICIES: dict[str, Callable[[dict[int, int]], Policy]] = {
    "gang (EASY)": lambda nodes: GangScheduler(nodes),
    "plain EASY": lambda nodes: GangScheduler(nodes, lookahead=1),
    "first-fit": lambda nodes: Greedy(nodes, order=lambda task: (task.seq,)),
    "smallest-first": lambda nodes: Greedy(nodes, order=lambda task: (task.size, task.seq)),
    "fifo (no backfill)": lambda nodes: GangScheduler(nodes, backfill=False),
}


def parse_mix(text: str) -> dict[int, float]:
    pairs = (part.split(":") for part in text.split(","))
    return {int(size): float(weight) for size, weight in pairs}


COLUMNS = (("busy", "busy", "{:>6.1%}"), ("head_wait_largest", "head wait {largest}", "{:>12.2f}"),
           ("head_wait_any", "head wait any", "{:>13.2f}"), ("delay_any", "beyond free", "{:>11.2f}"),
           ("wait_largest", "wait {largest} med", "{:>12.2f}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="8,16", help="worker counts, comma-separated")
    parser.add_argument("--per-node", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=7)
    parser.add_argument("--sigma", default="0.5,0.8", help="log-sd of run times, comma-separated")
    parser.add_argument("--mix", type=parse_mix, default=parse_mix("1:0.70,2:0.25,4:0.05"))
    parser.add_argument("--depth", type=int, default=0, help="tasks kept waiting (default: the worker count)")
    args = parser.parse_args()
    largest = max(args.mix)
    print(f"sizes {args.mix}, {args.tasks} tasks, {args.per_node} workers per node, log-normal run times of mean 1; "
          f"medians over {args.seeds} seeds; waits in mean task times (max over a run)")
    header = "  ".join(f"{title.format(largest=largest):>{len(fmt.format(0.0))}}" for _, title, fmt in COLUMNS)
    print(f"{'sigma':>5} {'workers':>7}  {'policy':<19} {header}")
    for sigma in (float(x) for x in args.sigma.split(",")):
        for workers in (int(w) for w in args.workers.split(",")):
            nodes = {r: (r - 1) // args.per_node for r in range(1, workers + 1)}
            runs: dict[str, list[Figures]] = {name: [] for name in POLICIES}
            for seed in range(args.seeds):
                tasks = workload(seed, args.tasks, args.mix, sigma)
                for name, make in POLICIES.items():
                    runs[name].append(simulate(make(nodes), tasks, workers, args.depth or workers))
            for name, figures in runs.items():
                cells = "  ".join(fmt.format(statistics.median(getattr(x, field) for x in figures))
                                  for field, _, fmt in COLUMNS)
                print(f"{sigma:>5} {workers:>7}  {name:<19} {cells}")


if __name__ == "__main__":
    main()
