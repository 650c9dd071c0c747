"""What the job tests with a gated objective share (test_output_on_a_full_disk, test_stopped_worker):
an objective whose tasks mark their start in an events folder (``started-ID`` holds the rank that
runs the task), wait for a gate file, print a long line and return ``x``, in a workflow of
``evaluations`` isolated tasks, launched with ``emews launch`` in the test's folder."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from testutil import EmewsCommand, write_workflow

OBJECTIVE = '''\
import os, time, pathlib, emews

def run(params):
    ctx = emews.current_task()
    pathlib.Path(params["events"], f"started-{ctx.task_id}").write_text(str(ctx.rank))
    while not os.path.exists(params["gate"]):
        time.sleep(0.01)
    print(f"task {ctx.task_id} says", "x" * 2000)
    return params["x"]
'''


@dataclass(frozen=True)
class GatedJob:
    """A launched job of the gated objective: its process, experiment, events folder and gate."""

    job: subprocess.Popen
    exp: Path
    events: Path
    gate: Path

    def started(self) -> list[Path]:
        """The marks of the tasks that have started."""
        return list(self.events.glob("started-*"))


def launch_gated(emews_cmd: EmewsCommand, folder: Path, *, evaluations: int, timeout: float,
                 workers: int = 2) -> GatedJob:
    """``emews launch`` the gated objective in ``folder`` (experiment ``folder/exp``): ``evaluations``
    tasks, each in its own process with ``task.timeout`` ``timeout``, on ``workers`` workers."""
    (folder / "model.py").write_text(OBJECTIVE)
    events, gate = folder / "events", folder / "gate"
    events.mkdir()
    wf = write_workflow(folder, objective={"module": str(folder / "model.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0},
                               "events": {"type": "constant", "value": str(events)},
                               "gate": {"type": "constant", "value": str(gate)}},
                        budget={"evaluations": evaluations}, task={"isolation": "process", "timeout": timeout})
    exp = folder / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", str(workers), "--exp-dir", str(exp))
    return GatedJob(job, exp, events, gate)
