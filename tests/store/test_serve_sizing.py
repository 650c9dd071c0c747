"""A pooled experiment's optimizer runs its tasks on every pool, so the optimizers' defaults that
depend on the workers (ga's population and strategy, mbo's batch, hyperspace's subspaces) are sized
for the pools (docs/postgres.md, "Pools"): the launch's ``--pools K`` of ``--workers`` each (the
launch's job, whose K - 1 other pools may not have joined yet, and ``emews serve``, which has no
workers of its own), or the pools running when it starts (those ``emews attach`` added too) when
they hold more; real PostgreSQL and real jobs."""

from __future__ import annotations

import signal
from pathlib import Path

from pgserver import PgServer
from pooled import seen

from emews.config.experiment import create_experiment
from emews.job.pool_size import launched_size
from testutil import EmewsCommand, wait_until, write_workflow

#: an optimizer that writes down the workers it is sized for, proposes nothing, and returns once
#: the file GO exists (stopped before: its experiment stays unfinished)
RECORDER = """
import os, time
from emews import Optimizer

class Recorder(Optimizer):
    def run(self, evaluator):
        with open(os.environ["SIZED_LOG"], "a") as fh:
            fh.write(f"{evaluator.workers}\\n")
        while not os.path.exists(os.environ["GO"]):
            time.sleep(0.05)
"""


def test_the_optimizer_is_sized_for_every_pool_launched_and_attached(pg_server: PgServer, tmp_path: Path) -> None:
    """``--pools 2 --workers 1``: the launch's job is sized for 2 (was 1, its own worker). A pool of
    3 attaches while it runs; the launch is stopped (the pool keeps waiting for work); ``emews serve``
    is sized for the 3 of the pool running then (was 2, the launch's) and says so."""
    (tmp_path / "recorder.py").write_text(RECORDER)
    wf = write_workflow(tmp_path, optimizer={"name": str(tmp_path / "recorder.py") + ":Recorder"},
                        budget={"evaluations": 4}, task={"timeout": 60, "isolation": "inline"},
                        store={"url": pg_server.url(), "lease": 30})
    launching, attaching, serving = EmewsCommand(tmp_path), EmewsCommand(tmp_path), EmewsCommand(tmp_path)
    log = tmp_path / "sized.log"
    for cmd in (launching, attaching, serving):
        cmd.env.update(SIZED_LOG=str(log), GO=str(tmp_path / "go"))
    exp = tmp_path / "exp"
    launch = launching.popen("launch", str(wf), "--workers", "1", "--pools", "2", "--exp-dir", "exp")
    attached = None
    try:
        assert wait_until(lambda: log.exists() and log.read_text().split(), 180), launch.poll()
        assert log.read_text().split() == ["2"]  # the launch's 2 pools of 1 worker (was 1: its own)
        attached = attaching.popen("attach", "exp", "--workers", "3")
        running = "SELECT workers FROM pools WHERE stopped IS NULL ORDER BY id"
        assert wait_until(lambda: 3 in [w for (w,) in seen(exp, running)], 180), seen(exp, "SELECT * FROM pools")
        launch.send_signal(signal.SIGTERM)  # the optimizer stops with its budget not done
        launch.communicate(timeout=180)
        assert [w for (w,) in seen(exp, running)] == [3]  # the attached pool waits for work
        (tmp_path / "go").touch()
        served = serving("serve", "exp", timeout=300)
        assert served.returncode == 0, served.stderr
        assert log.read_text().split() == ["2", "3"], served.stderr  # was 2: the launch's pools
        assert "optimizer is sized for 3 workers (the 1 pool running now)" in served.stderr, served.stderr
        assert attached.wait(timeout=120) == 0  # the served optimizer finished: the pool ends
    finally:
        (tmp_path / "go").touch()
        for cmd in (launching, attaching, serving):
            cmd.kill_all()


def test_serve_with_no_pool_running_is_sized_for_the_launchs_pools(pg_server: PgServer, tmp_path: Path) -> None:
    (tmp_path / "recorder.py").write_text(RECORDER)
    (tmp_path / "go").touch()
    wf = write_workflow(tmp_path, optimizer={"name": str(tmp_path / "recorder.py") + ":Recorder"},
                        budget={"evaluations": 4}, task={"timeout": 60, "isolation": "inline"},
                        store={"url": pg_server.url(), "lease": 5})
    cmd = EmewsCommand(tmp_path)
    log = tmp_path / "sized.log"
    cmd.env.update(SIZED_LOG=str(log), GO=str(tmp_path / "go"))
    cmd("launch", str(wf), "--workers", "3", "--pools", "1", "--exp-dir", "exp", timeout=300)
    assert log.read_text().split() == ["3"]  # the launch's job: its own 3 workers
    served = cmd("serve", "exp", timeout=300)
    assert log.read_text().split() == ["3", "3"], served.stderr  # was 1: no workers of its own
    assert "optimizer is sized for 3 workers (the launch's 1 pool of 3 workers)" in served.stderr, served.stderr


def test_the_launchs_size_is_its_pools_times_their_workers(tmp_path: Path) -> None:
    def sized(info: dict) -> tuple[int, str]:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        return launched_size(create_experiment(folder, name="t", workflow={}, site={}, info=info))

    assert sized({"workers": 4, "pools": 2}) == (8, "the launch's 2 pools of 4 workers")
    assert sized({"workers": 1, "pools": 1}) == (1, "the launch's 1 pool of 1 worker")
    assert sized({}) == (0, "the launch recorded no workers")
