"""The job tests' gated objective, and the launch of it (test_output_on_a_full_disk,
test_stopped_worker, test_moved_while_running, test_stop_signal, test_pool_stopped_worker).

Each task marks its start in the events folder (``started-ID`` holds the rank that runs it and that
rank's pid: tasks run in a process of their own), waits for the gate file, prints a long line and
returns ``x``. How long a task waits is the command's (its environment, so that two pools of one
experiment may differ): ``GATE_DEADLINE`` bounds the wait at the gate (no bound by default), and a
task that starts with the gate already open waits ``GATE_PACE`` seconds at most for the file ``end``
(0 by default: the run goes on at its own pace once the gate is open)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from testutil import EmewsCommand, write_workflow

OBJECTIVE = '''\
import os, time, pathlib, emews

def wait_for(path, seconds):
    """Until ``path`` exists, ``seconds`` at most."""
    deadline = time.monotonic() + seconds
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)

def run(params):
    ctx = emews.current_task()
    events = pathlib.Path(params["events"])
    mark = events / f".started-{ctx.task_id}"  # written whole, then named: a reader never sees it half-written
    mark.write_text(f"{ctx.rank} {os.getppid()}")
    mark.rename(events / f"started-{ctx.task_id}")
    if os.path.exists(params["gate"]):
        wait_for(params["end"], float(os.environ.get("GATE_PACE", "0")))
    else:
        wait_for(params["gate"], float(os.environ.get("GATE_DEADLINE", "inf")))
    print(f"task {ctx.task_id} says", "x" * 2000)
    return params["x"]
'''


class Mark(NamedTuple):
    """Where a task started: its worker's rank and the pid of that rank's process."""

    rank: int
    pid: int


def started(events: Path) -> dict[int, Mark]:
    """Task id -> :class:`Mark` of the tasks that have started (their marks in ``events``)."""
    marks = {}
    for path in events.glob("started-*"):
        rank, pid = path.read_text().split()
        marks[int(path.name.split("-")[1])] = Mark(int(rank), int(pid))
    return marks


@dataclass(frozen=True)
class Gated:
    """A workflow of the gated objective, its events folder, its gate and its ``end`` file."""

    workflow: Path
    events: Path
    gate: Path
    end: Path

    def started(self) -> dict[int, Mark]:
        """The tasks that have started: :func:`started`."""
        return started(self.events)


@dataclass(frozen=True)
class GatedJob(Gated):
    """A launched job of the gated objective: its process and experiment too."""

    job: subprocess.Popen
    exp: Path


def write_gated(folder: Path, *, evaluations: int, timeout: float, **sections: Any) -> Gated:
    """The gated objective (``folder/model.py``) in the workflow ``folder/wf.yaml``: ``evaluations``
    tasks, each in its own process with ``task.timeout`` ``timeout``, ``sections`` over the rest."""
    (folder / "model.py").write_text(OBJECTIVE)
    events, gate, end = folder / "events", folder / "gate", folder / "end"
    events.mkdir()
    wf = write_workflow(folder, objective={"module": str(folder / "model.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0},
                               "events": {"type": "constant", "value": str(events)},
                               "gate": {"type": "constant", "value": str(gate)},
                               "end": {"type": "constant", "value": str(end)}},
                        budget={"evaluations": evaluations}, task={"isolation": "process", "timeout": timeout},
                        **sections)
    return Gated(wf, events, gate, end)


def launch_gated(emews_cmd: EmewsCommand, folder: Path, *, evaluations: int, timeout: float, workers: int = 2,
                 deadline: float | None = None, pace: float | None = None, options: Sequence[str] = ()) -> GatedJob:
    """``emews launch`` the :func:`write_gated` in ``folder`` (experiment ``folder/exp``) on
    ``workers`` workers, with ``options`` more; ``deadline`` and ``pace``: ``GATE_DEADLINE`` and
    ``GATE_PACE`` (the module's docstring) in ``emews_cmd``'s environment."""
    gated = write_gated(folder, evaluations=evaluations, timeout=timeout)
    for name, seconds in (("GATE_DEADLINE", deadline), ("GATE_PACE", pace)):
        if seconds is not None:
            emews_cmd.env[name] = str(seconds)
    exp = folder / "exp"
    job = emews_cmd.popen("launch", str(gated.workflow), "--workers", str(workers), "--exp-dir", str(exp), *options)
    return GatedJob(gated.workflow, gated.events, gated.gate, gated.end, job, exp)
