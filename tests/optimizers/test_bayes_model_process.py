"""The bayes model process: handover without loss, fallback when it dies, nothing left behind."""

from __future__ import annotations

import copy
import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from emews.optimizers._bayes._engine import Engine
from emews.optimizers._bayes._remote import ModelProcess, ModelProcessError
from emews.optimizers._bayes._space import SpaceMap
from emews.optimizers.bayes import BayesianOptimizer
from emews.job.wiring import RunSpec, run_in_threads
from emews.objective.function import ObjectiveRef
from emews.core.space import Categorical, Float, Int, Space
from testutil import run_inline, wait_until

HERE = __file__
SPACE = Space({"x": Float(-5.0, 5.0), "n": Int(1, 20), "act": Categorical(("relu", "tanh", None))})


def _engine_with_history(n: int = 15, seed: int = 4) -> tuple[Engine, SpaceMap]:
    space_map = SpaceMap(SPACE)
    engine = Engine(space_map, seed=seed, n_initial_points=5, n_candidates=300)
    engine.reserve_size = 3
    rng = np.random.RandomState(seed)
    xs = [space_map.to_skopt(SPACE.sample(random.Random(int(s)))) for s in rng.randint(0, 10**6, n)]
    engine.tell(xs, [float(v) for v in rng.uniform(0, 5, n)])
    engine.propose(5)   # the initial design
    engine.propose(2)   # a fitted kernel and a drawn random state travel too
    assert engine.fits == 1
    return engine, space_map


def _ready(process: ModelProcess, timeout: float = 120.0) -> ModelProcess:
    assert wait_until(lambda: process.ready() or process.failed, timeout, poll=0.01) and not process.failed, \
        "the model process did not start"
    return process


def _server_children() -> list[int]:
    """Pids of model processes whose parent is this process."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"emews.optimizers._bayes._server" in cmdline:
            found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie waiting for init to reap it."""
    try:
        return ") Z " not in Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False


def test_handover_proposes_exactly_what_the_local_engine_would():
    """The engine moves with its whole state: same proposals, no repeats, nothing lost."""
    engine, space_map = _engine_with_history()
    twin = copy.deepcopy(engine)
    process = _ready(ModelProcess())
    try:
        remote = process.adopt(engine)
        more_x = [space_map.to_skopt({"x": 0.5 * i, "n": i + 1, "act": "tanh"}) for i in range(4)]
        more_y = [0.1 * i for i in range(4)]
        pending = [space_map.to_skopt({"x": 1.0, "n": 3, "act": "relu"})]
        remote.tell(more_x, more_y)
        twin.tell(more_x, more_y)
        assert remote.propose(3, pending) == twin.propose(3, pending)
        assert remote.reserve == twin.reserve
        assert remote.fits == twin.fits == 2 and remote.remote_fits == 1
        assert remote.n_told == twin.n_told == 19
    finally:
        process.close()
    assert _server_children() == []


def test_falls_back_to_the_local_engine_when_the_process_dies(caplog):
    engine, space_map = _engine_with_history()
    process = _ready(ModelProcess())
    try:
        remote = process.adopt(engine)
        remote.tell([space_map.to_skopt({"x": 2.0, "n": 5, "act": None})], [0.3])
        assert len(remote.propose(2)) == 2
        (pid,) = _server_children()
        os.kill(pid, signal.SIGKILL)
        remote.tell([space_map.to_skopt({"x": -2.0, "n": 9, "act": "relu"})], [0.7])
        with caplog.at_level(logging.WARNING, logger="emews.optimizers.bayes"):
            points = remote.propose(3)
        assert "model process died" in caplog.text
        assert len(points) == 3 and all(SPACE.contains(space_map.from_skopt(p)) for p in points)
        assert remote.n_told == 17   # the local copy saw every observation, before and after
        assert len(remote.propose(2)) == 2
    finally:
        process.close()


def test_an_engine_pickle_cannot_carry_stays_here_and_the_process_goes_on_serving():
    """A part of the engine that pickle cannot carry (a local function, as a patched fit): the
    handover raises ``ModelProcessError`` before anything is sent, so the proposer keeps the
    model in its own thread (as for a process that failed to start)."""
    engine, _ = _engine_with_history()
    fit = engine._fit
    engine._fit = lambda *args, **kwargs: fit(*args, **kwargs)
    process = _ready(ModelProcess())
    try:
        with pytest.raises(ModelProcessError, match="cannot be sent"):
            process.adopt(engine)
        assert len(engine.propose(1)) == 1                    # the local engine is untouched
        del engine._fit
        assert len(process.adopt(engine).propose(1)) == 1      # the channel is still clean
    finally:
        process.close()


def test_an_error_in_the_engine_is_reported_with_the_child_traceback():
    engine, _ = _engine_with_history()
    process = _ready(ModelProcess())
    try:
        remote = process.adopt(engine)
        with pytest.raises(ModelProcessError, match="Traceback"):
            process.call("propose", [["not", "a", "point", "at", "all"]], [1.0], 1, [])
        assert len(remote.propose(1)) == 1   # the process goes on serving
    finally:
        process.close()


def test_the_model_process_dies_with_the_optimizer_rank(tmp_path):
    script = tmp_path / "rank0.py"
    script.write_text(textwrap.dedent("""
        import os, time
        from emews.optimizers._bayes._remote import ModelProcess
        p = ModelProcess()
        while not p.ready():
            time.sleep(0.01)
        print(p._proc.pid, flush=True)
        os.kill(os.getpid(), 9)
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    pid = int(out.stdout.split()[0])
    gone = wait_until(lambda: not _running(pid), timeout=30)
    assert gone, f"model process {pid} outlived its parent"


def test_a_run_hands_the_model_over_and_leaves_nothing_behind(monkeypatch):
    """The engine moves to the child at the first fit after the child is ready. The child is made
    ready before the run starts (its start-up is waited for, not guessed), so the handover must
    happen; the run then fits remotely and ends with no model process left."""
    start = ModelProcess.__init__

    def start_and_wait(self):
        start(self)
        _ready(self)

    monkeypatch.setattr(ModelProcess, "__init__", start_and_wait)
    opt = BayesianOptimizer(seed=3, n_initial_points=5, n_candidates=300, model_process=True)
    summary, _ = run_inline(lambda: opt, space=SPACE, objective=ObjectiveRef(HERE, "quick_quadratic"), budget=40,
                            workers=4, seed=3)
    assert summary.completed == 40
    assert opt.stats["model_process"] == "running", opt.stats
    assert opt.stats["remote_fits"] >= 1 and opt.stats["remote_from"] == 0, opt.stats
    assert _server_children() == []


def quick_quadratic(params):
    return (params["x"] - 1.0) ** 2 + params["n"] / 20


class _FitsTake(BayesianOptimizer):
    """Each fit in this process takes ``extra`` seconds more (a stand-in for a large GP)."""

    def __init__(self, extra: float, **options):
        super().__init__(**options)
        self.extra = extra

    def start(self, space, workers):
        super().start(space, workers)
        fit = self.engine._fit

        def slower_fit(*args, **kwargs):
            time.sleep(self.extra)
            return fit(*args, **kwargs)

        self.engine._fit = slower_fit


@pytest.mark.parametrize("process_after, extra, states", [(3600.0, 0.0, {"none"}),
                                                          (0.05, 0.1, {"starting", "failed"})])
def test_auto_starts_a_process_once_a_fit_took_process_after(process_after, extra, states):
    """``auto``: no model process while every fit is quicker than ``process_after`` (out of reach
    here, however loaded the machine); one once a fit took longer (fits made slower than it).
    The slowed fit is a local function, which cannot be handed over: when the process is ready
    before the run ends, the handover fails and the run goes on with the model in its thread."""
    opt = _FitsTake(extra, seed=1, n_initial_points=4, n_candidates=200, process_after=process_after)
    spec = RunSpec(space=SPACE, make_optimizer=lambda: opt, objective=ObjectiveRef(HERE, "quick_quadratic"), budget=20,
                   isolation="inline", seed=1, show_progress=False)
    assert run_in_threads(spec, workers=3).completed == 20
    assert opt.stats["model_process"] in states, opt.stats
    assert _server_children() == []


@pytest.mark.parametrize("options, key", [({"model_process": "sometimes"}, "model_process"),
                                          ({"process_after": -1}, "process_after")])
def test_model_process_options_are_checked(options, key):
    with pytest.raises(ValueError, match=key):
        BayesianOptimizer(**options)
