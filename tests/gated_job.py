"""The launch of the tests' gated objective (``tests/objectives/gated.py``) in a job's tests
(test_output_on_a_full_disk, test_stopped_worker, test_moved_while_running, test_stop_signal,
test_pool_stopped_worker, test_status): its tasks run in a process of their own and each marks its
start in the marks folder (the rank that runs it and that rank's pid), waits for the gate file,
prints a long line and returns. How long a task waits is the command's (:meth:`Gated.arm`: its
environment, so that two pools of one experiment may differ): ``deadline`` bounds the wait at the
gate (no bound by default), and a task that starts with the gate already open waits ``pace``
seconds at most for the file ``end`` (0 by default: the run goes on at its own pace once the gate is
open)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from testutil import GATED, EmewsCommand, write_workflow


class Mark(NamedTuple):
    """Where a task started: its worker's rank and the pid of that rank's process."""

    rank: int
    pid: int


def started(marks: Path) -> dict[int, Mark]:
    """Task id -> :class:`Mark` of the tasks that have started (their marks in ``marks``: the last
    start of each, the lines written whole)."""
    found = {}
    for path in marks.iterdir():
        if lines := [line for line in path.read_text().splitlines(keepends=True) if line.endswith("\n")]:
            rank, _, parent = lines[-1].split()
            found[int(path.name)] = Mark(int(rank), int(parent))
    return found


@dataclass(frozen=True)
class Gated:
    """A workflow of the gated objective, its marks folder, its gate and its ``end`` file."""

    workflow: Path
    marks: Path
    gate: Path
    end: Path

    def started(self) -> dict[int, Mark]:
        """The tasks that have started: :func:`started`."""
        return started(self.marks)

    def arm(self, command: EmewsCommand, *, deadline: float | None = None, pace: float | None = None) -> None:
        """Point ``command``'s tasks at this marks folder, gate and ``end``; ``deadline`` and ``pace``
        (the module's docstring): ``GATE_TIMEOUT`` and ``GATE_PACE`` in its environment."""
        command.env.update(MARK_DIR=str(self.marks), GATE_FILE=str(self.gate), GATE_END=str(self.end),
                           GATE_TIMEOUT=str(deadline if deadline is not None else float("inf")),
                           GATE_PACE=str(pace or 0), GATE_SAYS="2000")


@dataclass(frozen=True)
class GatedJob(Gated):
    """A launched job of the gated objective: its process and experiment too."""

    job: subprocess.Popen
    exp: Path


def write_gated(folder: Path, *, evaluations: int, timeout: float, task: dict[str, Any] | None = None,
                **sections: Any) -> Gated:
    """The gated objective in the workflow ``folder/wf.yaml``: ``evaluations`` tasks, each in its own
    process with ``task.timeout`` ``timeout`` (``task``: more of the task's keys), ``sections`` over
    the rest; the commands that run it are :meth:`Gated.arm`'s."""
    marks, gate, end = folder / "marks", folder / "gate", folder / "end"
    marks.mkdir()
    wf = write_workflow(folder, objective={"module": str(GATED), "function": "run"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}},
                        budget={"evaluations": evaluations}, task={"isolation": "process", "timeout": timeout, **(task or {})},
                        **sections)
    return Gated(wf, marks, gate, end)


def launch_gated(emews_cmd: EmewsCommand, folder: Path, *, evaluations: int, timeout: float, workers: int = 2,
                 deadline: float | None = None, pace: float | None = None, options: Sequence[str] = ()) -> GatedJob:
    """``emews launch`` the :func:`write_gated` in ``folder`` (experiment ``folder/exp``) on
    ``workers`` workers, with ``options`` more, ``emews_cmd`` armed (:meth:`Gated.arm`)."""
    gated = write_gated(folder, evaluations=evaluations, timeout=timeout)
    gated.arm(emews_cmd, deadline=deadline, pace=pace)
    exp = folder / "exp"
    job = emews_cmd.popen("launch", str(gated.workflow), "--workers", str(workers), "--exp-dir", str(exp), *options)
    return GatedJob(gated.workflow, gated.marks, gated.gate, gated.end, job, exp)
