"""The objective's side of a training trial: ``ctx.report`` and ``ctx.restore`` for one task.

Created on the first call of either (an objective that never calls them costs nothing). A
report with a checkpoint takes an in-memory snapshot, hands it to the process's background
:class:`~emews.training.checkpoints.CheckpointWriter` and returns; the files written since the last
message travel with the next one, so the optimizer rank learns which checkpoints are durable.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from emews.core.followed_dir import FollowedDir
from emews.training.checkpoints import (
    CHECKPOINTS_DIR,
    CheckpointWriter,
    CorruptCheckpoint,
    checkpoint_path,
    framed_size,
    local_tier,
    read_checkpoint,
    snapshot,
    staging_folder,
)
from emews.training.messages import (
    CONTINUE,
    Action,
    CheckpointNote,
    CheckpointsDurable,
    Decision,
    Reply,
    Report,
    RestoreRequest,
    TrialLink,
)

#: one writer per process, mode and local tier, so its threads serve every task the process runs
_WRITERS: dict[tuple[bool, str | None], CheckpointWriter] = {}


def process_writer(background: bool, local_dir: str | None = None) -> CheckpointWriter:
    """The process's writer; ``local_dir``: a node-local tier (files staged under
    ``LOCAL_DIR/emews-HOST-PID``, environment variables expanded) flushed to the experiment directory."""
    writer = _WRITERS.get((background, local_dir))
    if writer is None:
        tier = None if local_dir is None else local_tier(local_dir)
        local = None if tier is None else staging_folder(tier)
        writer = _WRITERS[(background, local_dir)] = CheckpointWriter(background=background, local_dir=local)
    return writer


class TrialSession:
    """Reports and restores of one task (one attempt); ``end`` closes it when ``run`` returns."""

    def __init__(
        self,
        trial: int,
        link: TrialLink | None,
        *,
        experiment: FollowedDir | None,
        run_dir: Callable[[], Path] | None,
        background: bool = True,
        local_dir: str | None = None,
        attempt: int = 0,
    ) -> None:
        self.trial = trial
        self.attempt = attempt  # the task's run (``Task.attempt``): in its checkpoints' names
        self.id = int.from_bytes(os.urandom(6), "big")
        self._link = link
        # the experiment directory, followed if it is moved while the task trains (mv EXP EXP2)
        self._experiment = experiment
        self._run_dir = run_dir  # where a file checkpoint is extracted: the task's run dir, asked at each restore
        self._writer = process_writer(background, local_dir)
        self._serial = 0
        self._outstanding = 0  # reports posted whose reply has not been taken
        self._unseen: Decision = CONTINUE  # the first stop-like decision not yet returned
        self._restart: Mapping[str, Any] | None = None

    def report(self, step: int, metrics: Mapping[str, Any], checkpoint: Any = None, *, wait: bool = True) -> Decision:
        if isinstance(step, bool) or not isinstance(step, int):
            raise TypeError(f"ctx.report: step must be an int, got {step!r}")
        if not isinstance(metrics, Mapping):
            raise TypeError(f"ctx.report: metrics must be a dict, got {type(metrics).__name__}")
        if self._link is not None and not wait:  # the previous report's decision is due now
            self._collect()
            if self._unseen.action is Action.EXPLOIT:
                # this step trained the weights the clone replaces: neither reported nor checkpointed
                # (its checkpoint would count as the trial's own since the clone, and be restored)
                return self._decision()
        note = None if checkpoint is None else self._stage(step, checkpoint)
        if self._link is None:
            return CONTINUE
        self._link.post(
            Report(self.trial, self.id, step, dict(metrics), time.time(), note, self._writer.done(), self._failures())
        )
        self._outstanding += 1
        if wait:
            self._collect()
        return self._decision()

    def _decision(self) -> Decision:
        """The first stop-like decision not yet returned (else continue); an exploit's parameters
        are kept for the run again (:meth:`end`)."""
        decision, self._unseen = self._unseen, CONTINUE
        if decision.action is Action.EXPLOIT:
            self._restart = decision.params
        return decision

    def restore(self, default: Any = None) -> Any:
        """``(checkpoint, step)`` of the newest durable checkpoint that verifies, else ``default``."""
        if self._link is None:
            return default
        self._link.post(RestoreRequest(self.trial, self.id, self._writer.done()))
        self._collect()
        reply = self._take(block=True)
        assert reply is not None
        extract_to = None if self._run_dir is None else self._run_dir()
        for candidate in reply.candidates:
            try:
                return read_checkpoint(candidate.path, extract_to), candidate.step
            except CorruptCheckpoint as exc:
                print(f"emews: not restoring {exc}", file=sys.stderr)
        return default

    def end(self) -> Mapping[str, Any] | None:
        """The objective returned: wait for the checkpoint writes, say which are durable, take
        the replies still due. Returns the parameters to run again with (PBT exploit) or ``None``."""
        self._writer.flush()
        failed = self._failures()
        if self._link is not None:
            self._link.post(CheckpointsDurable(self.trial, self.id, self._writer.done(), failed))
            self._collect()
        self._decision()  # an exploit answered to a last report that did not wait still runs again
        restart, self._restart = self._restart, None
        return restart

    def _failures(self) -> tuple[str, ...]:
        """The checkpoint writes that failed since the last call, each said in the task's stderr (the
        optimizer rank is told them with the next message and says so where the run's output goes)."""
        failed = self._writer.failures()
        try:
            for failure in failed:
                print(f"emews: checkpoint not written: {failure}", file=sys.stderr, flush=True)
        except OSError:  # the same full disk holds the task's output: the optimizer rank says it
            pass
        return failed

    def _stage(self, step: int, checkpoint: Any) -> CheckpointNote:
        if self._experiment is None:
            raise RuntimeError("ctx.report(checkpoint=...): this run has no experiment directory")
        kind, payload, name = snapshot(checkpoint)
        experiment = self._experiment
        inside = checkpoint_path(Path(CHECKPOINTS_DIR), self.trial, step, self._serial, self.attempt)
        self._serial += 1
        # written where the experiment is when the writer gets to it (moved meanwhile: where it went)
        self._writer.submit(lambda: experiment.current() / inside, kind, payload, name)
        return CheckpointNote(str(experiment.current() / inside), framed_size(kind, payload, name))

    def _collect(self) -> None:
        """Wait for the replies to every report posted."""
        while self._outstanding:
            reply = self._take(block=True)
            assert reply is not None
            self._outstanding -= 1
            if self._unseen.action is Action.CONTINUE:
                self._unseen = reply.decision

    def _take(self, block: bool) -> Reply | None:
        assert self._link is not None
        return self._link.take(self.id, block)
