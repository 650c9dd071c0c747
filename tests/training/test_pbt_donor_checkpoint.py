"""Which checkpoint a PBT exploit clones: the optimizer rank's side (TrialService on a real SQLite
store), with a scheduler that answers what each case needs. The donor's checkpoint is the newest
durable one the donor wrote itself since its last clone and trained past (it came with an earlier
report than the donor's latest, which may be its last); a donor with none has nothing to give (its
newest restorable checkpoint is its own donor's, possibly the exploiting trial's), so the exploit is
dropped: the trial continues and its scheduler is told."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from emews.core.results import Task
from emews.runtime.trial_reports import TrialService
from emews.store.results_store import ResultsStore
from emews.training.messages import CONTINUE, Action, CheckpointNote, Decision, Report
from emews.training.schedulers import TrialScheduler


class Scripted(TrialScheduler):
    """Answers each report with the next scripted decision (``CONTINUE`` when none is left for it)
    and records the exploits it is told were dropped."""

    def __init__(self, script: Mapping[tuple[int, int], Decision]) -> None:
        super().__init__("loss", "min")
        self.script = dict(script)
        self.dropped: list[int] = []

    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
        return self.script.pop((trial, step), CONTINUE)

    def exploit_dropped(self, trial: int) -> None:
        self.dropped.append(trial)


def exploit(donor: int, lr: float) -> Decision:
    return Decision(Action.EXPLOIT, {"lr": lr}, donor)


class Run:
    """Trials 0-2 of one experiment in ``folder``: each report writes its checkpoint file first (so
    it is durable when the report is answered) unless told not to."""

    def __init__(self, folder: Path, scheduler: Scripted) -> None:
        self.folder = folder
        self.store = ResultsStore(folder / "results.db", root=folder)
        self.service = TrialService(self.store, scheduler, metric="loss")
        self.tasks = {t: Task(t, {"lr": 0.1 * (t + 1)}, t, 0.0) for t in range(3)}

    def report(self, trial: int, step: int, loss: float, durable: bool = True) -> Decision:
        path = self.folder / "checkpoints" / f"{trial:06d}" / f"step-{step:08d}.ckpt"
        if durable:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"weights")
        note = CheckpointNote(str(path), 7)
        reply = self.service.handle(Report(trial, 0, step, {"loss": loss}, 0.0, note), self.tasks[trial])
        assert reply is not None and reply.decision is not None
        return reply.decision

    def lineage(self) -> list[tuple[int, int, int, int, int]]:
        """(trial, step, donor, writer of the checkpoint, its step) of each exploit, in order."""
        rows = []
        for row in self.store.lineage():
            ckpt = self.store.checkpoint(row["checkpoint"])
            assert ckpt is not None
            rows.append((row["trial"], row["step"], row["donor"], ckpt.trial, ckpt.step))
        return rows


def test_a_trial_never_clones_a_donor_whose_newest_checkpoint_is_its_own(tmp_path: Path) -> None:
    """The reviewer's run: trial 0 clones trial 1's step-1 checkpoint; trial 1, the bottom at its step
    3, is told to clone trial 0, which has written nothing since. Trial 0's newest restorable
    checkpoint is trial 1's own step-1 one: before, that was cloned and recorded with donor 1 (trial
    1 rolled back to its own older weights with new parameters). Now the exploit is dropped: trial 1
    continues with its parameters, no lineage row, the scheduler told. Once trial 0 wrote its step-3
    checkpoint and trained past it, trial 1's next exploit clones that one, written by trial 0."""
    scheduler = Scripted({(0, 2): exploit(1, 0.25), (1, 3): exploit(0, 0.5), (1, 4): exploit(0, 0.75)})
    run = Run(tmp_path, scheduler)
    assert run.report(1, 1, 0.5) == CONTINUE
    assert run.report(1, 2, 0.45) == CONTINUE
    assert run.report(0, 1, 3.0) == CONTINUE
    assert run.report(0, 2, 2.9).action is Action.EXPLOIT
    assert run.lineage() == [(0, 2, 1, 1, 1)]
    decision = run.report(1, 3, 2.0)
    assert run.lineage() == [(0, 2, 1, 1, 1)]   # before: also (1, 3, 1, 1, 1), trial 1 its own donor
    assert decision == CONTINUE and scheduler.dropped == [1]
    assert run.tasks[1].params == {"lr": 0.2}
    assert run.report(0, 3, 0.4) == CONTINUE
    assert run.report(0, 4, 0.35) == CONTINUE
    assert run.report(1, 4, 1.9).action is Action.EXPLOIT
    assert run.lineage() == [(0, 2, 1, 1, 1), (1, 4, 0, 0, 3)] and run.tasks[1].params == {"lr": 0.75}
    assert all(donor != trial and writer == donor for trial, _, donor, writer, _ in run.lineage())
    run.store.close()


def test_two_bottom_trials_never_both_clone_the_first_ones_donor_through_it(tmp_path: Path) -> None:
    """Trial 2 clones trial 0 at step 2; trial 1 is then told to clone trial 2 before trial 2 wrote a
    checkpoint of its own: before, it cloned trial 0's checkpoint recorded as trial 0's (a donor the
    scheduler never chose, so every bottom trial ended on one checkpoint). Now it is dropped."""
    scheduler = Scripted({(2, 2): exploit(0, 0.25), (1, 2): exploit(2, 0.5)})
    run = Run(tmp_path, scheduler)
    for trial in range(3):
        run.report(trial, 1, 1.0 + trial)
    assert run.report(0, 2, 0.5) == CONTINUE
    assert run.report(2, 2, 3.0).action is Action.EXPLOIT
    decision = run.report(1, 2, 2.5)
    assert run.lineage() == [(2, 2, 0, 0, 1)]   # before: also (1, 2, 0, 0, 1), trial 2 asked, trial 0 recorded
    assert decision == CONTINUE and scheduler.dropped == [1]
    run.store.close()


def test_the_checkpoint_of_the_donors_latest_report_is_never_cloned(tmp_path: Path) -> None:
    """Trial 0 reported steps 1 and 2, both checkpoints durable, and may return after step 2 (its
    last, for all this rank knows): trial 1's clone takes step 1, which trial 0 trained past. A donor
    whose only checkpoint came with its latest report gives nothing yet: that exploit is dropped.
    Before, the clone took step 2, a final checkpoint when trial 0 then returned: nothing left to train."""
    scheduler = Scripted({(1, 1): exploit(2, 0.5), (1, 2): exploit(0, 0.5)})
    run = Run(tmp_path, scheduler)
    run.report(0, 1, 1.0)
    run.report(0, 2, 0.9)
    run.report(2, 1, 0.1)
    assert run.report(1, 1, 2.0) == CONTINUE and scheduler.dropped == [1]
    assert run.report(1, 2, 2.0).action is Action.EXPLOIT
    assert run.lineage() == [(1, 2, 0, 0, 1)]
    run.store.close()


def test_the_donors_checkpoint_is_its_newest_durable_one(tmp_path: Path) -> None:
    """Trial 0 wrote steps 1-3, the step-3 file not yet in place (staged, not durable): a clone of
    trial 0 takes its step 2, its newest durable checkpoint. A donor with no durable checkpoint at all
    gives nothing: that exploit is dropped too."""
    scheduler = Scripted({(1, 1): exploit(2, 0.5), (1, 2): exploit(0, 0.5)})
    run = Run(tmp_path, scheduler)
    run.report(0, 1, 1.0)
    run.report(0, 2, 0.9)
    run.report(0, 3, 0.8, durable=False)
    run.report(2, 1, 0.1, durable=False)
    assert run.report(1, 1, 2.0) == CONTINUE and scheduler.dropped == [1]
    assert run.report(1, 2, 2.0).action is Action.EXPLOIT
    assert run.lineage() == [(1, 2, 0, 0, 2)]
    run.store.close()
