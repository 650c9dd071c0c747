"""The benchmark's problems as emews objectives (loaded by path: ``bench/problems.py``).

Every point carries the problem's name in the constant ``problem`` (optimizers do not search
constants), so one objective function serves every problem: ``free`` returns at once,
``timed`` first sleeps 0.2-1 s (drawn from the point), as a task that takes time does.

Problems: the project's four (``emews.objectives.benchmarks``: branin, hartmann6, ackley5,
mixed) and COCO BBOB noiseless problems (``coco-experiment``), named like COCO's ids
(``bbob_f008_i01_d05``), in COCO's domain [-5, 5]^D.
"""

from __future__ import annotations

import functools
import os
import random
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from emews.objectives.benchmarks import PROBLEMS
from emews.space import Constant, Float, Space

#: seconds a ``timed`` task takes, uniform in this range
TASK_SECONDS = (0.2, 1.0)


_CWD = threading.Lock()    # ``_bbob_xopt`` changes the working folder
_COCO = threading.RLock()  # COCO's C problems are built and evaluated one thread at a time


@dataclass(frozen=True)
class Problem:
    name: str
    space: Space
    function: Callable[[Mapping[str, Any]], float]
    optimum: Callable[[], float]

    @property
    def dimension(self) -> int:
        return len(self.space.free)


def _with_name(name: str, space: Space) -> Space:
    return Space({**space.dimensions, "problem": Constant(name)})


def problem(name: str) -> Problem:
    """The problem called ``name`` (one of ``PROBLEMS`` or a BBOB id)."""
    with _COCO:
        return _problem(name)


@functools.lru_cache(maxsize=None)
def _problem(name: str) -> Problem:
    if name in PROBLEMS:
        p = PROBLEMS[name]
        return Problem(name, _with_name(name, p["space"]), p["function"], lambda: p["optimum"])
    return _bbob(name)


def _bbob(name: str) -> Problem:
    import cocoex   # coco-experiment: only the BBOB part of the benchmark needs it

    _, f, i, d = name.split("_")
    suite = cocoex.Suite("bbob", "", f"function_indices:{int(f[1:])} dimensions:{int(d[1:])} "
                                     f"instance_indices:{int(i[1:])}")
    coco = next(iter(suite))
    keys = [f"x{k}" for k in range(coco.dimension)]
    space = Space({k: Float(float(lo), float(hi)) for k, lo, hi in zip(keys, coco.lower_bounds, coco.upper_bounds)})

    def function(params: Mapping[str, Any]) -> float:
        x = [float(params[k]) for k in keys]
        with _COCO:
            return float(coco(x))

    return Problem(name, _with_name(name, space), function,
                   functools.cache(lambda: function(dict(zip(keys, _bbob_xopt(coco))))))


def _bbob_xopt(coco: Any) -> list[float]:
    """The optimum of a BBOB problem. cocoex has no public accessor: its ``_best_parameter``
    writes the optimum to ``._bbob_problem_best_parameter.txt`` in the working folder, so it
    runs in a temporary one."""
    with _CWD, tempfile.TemporaryDirectory() as tmp:
        here = os.getcwd()
        os.chdir(tmp)
        try:
            coco._best_parameter("print")
            with open("._bbob_problem_best_parameter.txt") as fh:
                return [float(v) for v in fh.read().split()]
        finally:
            os.chdir(here)


def bbob_names(functions: list[int], dimensions: list[int], instances: list[int]) -> list[str]:
    return [f"bbob_f{f:03d}_i{i:02d}_d{d:02d}" for f in functions for d in dimensions for i in instances]


def free(params: Mapping[str, Any]) -> float:
    """The problem's value at ``params``, at once."""
    return problem(params["problem"]).function(params)


def timed(params: Mapping[str, Any]) -> float:
    """The problem's value at ``params`` after 0.2-1 s (the same for the same point)."""
    low, high = TASK_SECONDS
    time.sleep(random.Random(repr(sorted(params.items()))).uniform(low, high))
    return free(params)
