"""``emews serve`` runs the optimizer with no workers of its own: the optimizers' defaults that depend
on the workers (ga's population and strategy, mbo's batch, hyperspace's subspaces) were sized for 1
worker. They are sized for the pools the experiment was launched with (``--workers`` each, ``--pools``
of them), and serve says so (docs/postgres.md, "Pools"); real PostgreSQL and real jobs."""

from __future__ import annotations

from pathlib import Path

from pgserver import PgServer

from emews.config.experiment import create_experiment
from emews.job.serving import sized_for_pools
from testutil import EmewsCommand, write_workflow

#: an optimizer that writes down the workers it is sized for, and proposes nothing
RECORDER = """
import os
from emews import Optimizer

class Recorder(Optimizer):
    def run(self, evaluator):
        with open(os.environ["SIZED_LOG"], "a") as fh:
            fh.write(f"{evaluator.workers}\\n")
"""


def test_serve_sizes_the_optimizer_for_the_pools_the_experiment_was_launched_with(
    pg_server: PgServer, tmp_path: Path
) -> None:
    (tmp_path / "recorder.py").write_text(RECORDER)
    wf = write_workflow(tmp_path, optimizer={"name": str(tmp_path / "recorder.py") + ":Recorder"},
                        budget={"evaluations": 4}, task={"timeout": 60, "isolation": "inline"},
                        store={"url": pg_server.url(), "lease": 5})
    cmd = EmewsCommand(tmp_path)
    log = tmp_path / "sized.log"
    cmd.env["SIZED_LOG"] = str(log)
    cmd("launch", str(wf), "--workers", "3", "--pools", "1", "--exp-dir", "exp", timeout=300)
    assert log.read_text().split() == ["3"]  # the launch's job: its own 3 workers
    served = cmd("serve", "exp", timeout=300)
    assert log.read_text().split() == ["3", "3"], served.stderr  # was 1: no workers of its own
    assert "optimizer is sized for 3 workers (the launch's 1 pool of 3 workers)" in served.stderr, served.stderr


def test_the_size_is_the_launchs_pools_times_their_workers(tmp_path: Path) -> None:
    def sized(info: dict) -> tuple[int, str]:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        return sized_for_pools(create_experiment(folder, name="t", workflow={}, site={}, info=info))

    assert sized({"workers": 4, "pools": 2}) == (8, "the launch's 2 pools of 4 workers")
    assert sized({"workers": 1, "pools": 1}) == (1, "the launch's 1 pool of 1 worker")
    assert sized({}) == (1, "the launch recorded no workers")
