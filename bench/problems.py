"""The benchmark's problems as emews objectives (loaded by path: ``bench/problems.py``).

Every point carries the problem's name in the constant ``problem`` (optimizers do not search
constants), so one objective function serves every problem: ``free`` returns at once,
``timed`` first sleeps 0.2-1 s (drawn from the point), as a task that takes time does.

Problems: the project's four (``emews.objectives.benchmarks``: branin, hartmann6, ackley5,
mixed), COCO BBOB noiseless problems (``coco-experiment``), named like COCO's ids
(``bbob_f008_i01_d05``), in COCO's domain [-5, 5]^D, their mixed-integer variants
(``bbob-mixint_f008_i01_d05``: the first four fifths of the variables integers, as COCO makes
them), and two scikit-learn hyperparameter searches (``HPO``: cross-validated error, optimum 0).
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
from emews.core.space import Categorical, Constant, Float, Int, Space

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
    if name in HPO:
        space, function = HPO[name]
        return Problem(name, _with_name(name, space), function, lambda: 0.0)
    return _bbob(name)


def _bbob(name: str) -> Problem:
    import cocoex   # coco-experiment: only the BBOB part of the benchmark needs it

    suite_name, f, i, d = name.rsplit("_", 3)
    suite = cocoex.Suite(suite_name, "", f"function_indices:{int(f[1:])} dimensions:{int(d[1:])} "
                                         f"instance_indices:{int(i[1:])}")
    coco = next(iter(suite))
    keys = [f"x{k}" for k in range(coco.dimension)]
    integers = coco.number_of_integer_variables
    space = Space({k: Int(int(lo), int(hi)) if n < integers else Float(float(lo), float(hi))
                   for n, (k, lo, hi) in enumerate(zip(keys, coco.lower_bounds, coco.upper_bounds))})

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


def bbob_names(functions: list[int], dimensions: list[int], instances: list[int], suite: str = "bbob") -> list[str]:
    """COCO problem ids of ``suite`` (``bbob`` or ``bbob-mixint``)."""
    return [f"{suite}_f{f:03d}_i{i:02d}_d{d:02d}" for f in functions for d in dimensions for i in instances]


# --- scikit-learn hyperparameter searches: 3-fold cross-validated error, deterministic ---------

@functools.cache
def _dataset(name: str) -> tuple[Any, Any]:
    from sklearn import datasets

    loader = {"digits": datasets.load_digits, "breast_cancer": datasets.load_breast_cancer}[name]
    return loader(return_X_y=True)


def _cv_error(model: Any, dataset: str) -> float:
    from sklearn.model_selection import cross_val_score

    X, y = _dataset(dataset)
    return 1.0 - float(cross_val_score(model, X, y, cv=3).mean())


def svc_digits(params: Mapping[str, Any]) -> float:
    """An SVM on scikit-learn's digits (1,797 images of 8 x 8 pixels, scaled)."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    model = make_pipeline(StandardScaler(), SVC(C=params["C"], gamma=params["gamma"], kernel=params["kernel"],
                                                degree=params["degree"]))
    return _cv_error(model, "digits")


def forest_breast_cancer(params: Mapping[str, Any]) -> float:
    """A random forest on scikit-learn's breast cancer data (569 cases, 30 features)."""
    from sklearn.ensemble import RandomForestClassifier

    model = RandomForestClassifier(n_estimators=params["trees"], max_depth=params["depth"],
                                   max_features=params["features"], min_samples_leaf=params["leaf"],
                                   criterion=params["criterion"], random_state=0, n_jobs=1)
    return _cv_error(model, "breast_cancer")


#: name -> (space, objective); budgets in ``bench/quality.py``
HPO: dict[str, tuple[Space, Callable[[Mapping[str, Any]], float]]] = {
    "hpo_svc_digits": (Space({"C": Float(1e-3, 1e3, log=True), "gamma": Float(1e-5, 1.0, log=True),
                              "kernel": Categorical(("rbf", "poly", "sigmoid")), "degree": Int(2, 5)}),
                       svc_digits),
    "hpo_forest_breast_cancer": (Space({"trees": Int(5, 200, log=True), "depth": Int(1, 20),
                                        "features": Float(0.05, 1.0), "leaf": Int(1, 30, log=True),
                                        "criterion": Categorical(("gini", "entropy"))}),
                                 forest_breast_cancer),
}


def free(params: Mapping[str, Any]) -> float:
    """The problem's value at ``params``, at once."""
    return problem(params["problem"]).function(params)


def timed(params: Mapping[str, Any]) -> float:
    """The problem's value at ``params`` after 0.2-1 s (the same for the same point)."""
    low, high = TASK_SECONDS
    time.sleep(random.Random(repr(sorted(params.items()))).uniform(low, high))
    return free(params)
