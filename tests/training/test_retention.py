"""Checkpoint retention (a pure policy) and what an experiment keeps on disk for later jobs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from emews.output.catalog import list_checkpoints, load_best
from emews.training.retention import Retainer, Retention
from test_trial_runs import launch, trainer_workflow
from testutil import query, write_workflow


@dataclass
class Row:
    id: int
    trial: int
    step: int
    loss: float | None


def test_retention_hand_computed() -> None:
    """Trial 0: losses 5, 1, 3, 4 at steps 1-4; trial 1: 2, None at steps 1-2.
    keep_last 1 -> 0:s4 and 1:s2; keep_best 1 -> 0:s2 and 1:s1; best 1 of the experiment -> 0:s2;
    pinned 0:s1. Deleted: 0:s3 only."""
    rows = [Row(1, 0, 1, 5.0), Row(2, 0, 2, 1.0), Row(3, 0, 3, 3.0), Row(4, 0, 4, 4.0),
            Row(5, 1, 1, 2.0), Row(6, 1, 2, None)]
    assert Retention(keep_last=1, keep_best=1, keep_best_experiment=1).to_delete(rows, pinned={1}) == [3]
    assert Retention().to_delete(rows, pinned=set()) == []                          # default: keep all
    assert Retention(keep_best_experiment=2).to_delete(rows, pinned=set()) == [1, 3]  # + each trial's newest
    assert Retention(keep_last=2).to_delete(rows, pinned=set()) == [1, 2]


@settings(deadline=None, max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 4), st.one_of(st.none(), st.floats(0, 10))), min_size=1, max_size=60),
       st.integers(1, 6), st.one_of(st.none(), st.integers(1, 3)), st.one_of(st.none(), st.integers(0, 3)),
       st.one_of(st.none(), st.integers(0, 4)))
def test_incremental_retention_keeps_what_the_whole_policy_keeps(rows, batch, last, best, top) -> None:
    """Fed in batches as checkpoints become durable, the retainer keeps exactly what the policy
    applied to every checkpoint at the end keeps (it never needs a rescan)."""
    policy = Retention(last, best, top)
    steps: dict[int, int] = {}
    made = []
    for i, (trial, loss) in enumerate(rows):
        steps[trial] = steps.get(trial, 0) + 1
        made.append(Row(i, trial, steps[trial], loss))
    retainer, deleted = Retainer(policy), set()
    for start in range(0, len(made), batch):
        deleted.update(retainer.add(made[start:start + batch], set()))
    assert deleted == set(policy.to_delete(made, set()))

def test_an_experiment_keeps_what_the_policy_says_and_lists_and_loads_the_best(emews_cmd, tmp_path: Path) -> None:
    """The ASHA hand case (last steps 9, 9, 1, 3, 9; loss falls with each step) with keep_last 1,
    keep_best 1 and the experiment's best 2: each trial's last step, and trial 4's steps 8 and 9."""
    wf = trainer_workflow(tmp_path, task={"isolation": "process"},
                          trial_scheduler={"name": "asha", "options": {"max_t": 9}},
                          checkpoints={"keep_last": 1, "keep_best": 1, "keep_best_experiment": 2})
    exp = launch(emews_cmd, wf)
    kept = {(t, s) for t, s in query(exp, "SELECT trial, step FROM checkpoints WHERE state = 'durable'")}
    assert kept == {(0, 9), (1, 9), (2, 1), (3, 3), (4, 8), (4, 9)}
    on_disk = {p.relative_to(exp).as_posix() for p in (exp / "checkpoints").rglob("*") if p.is_file()}
    assert on_disk == {p for (p,) in query(exp, "SELECT path FROM checkpoints WHERE state = 'durable'")}
    assert query(exp, "SELECT COUNT(*) FROM checkpoints WHERE state = 'deleted'") == [(31 - 6,)]

    best = load_best(exp, k=3)   # distinct trials: each one's best checkpoint (before: 4:s9, 4:s8, 1:s9)
    assert [(row.trial, row.step) for row, _ in best] == [(4, 9), (1, 9), (0, 9)]
    assert [state["trail"] for _, state in best] == [list(range(1, 10))] * 3
    per_checkpoint = load_best(exp, k=2, per_trial=False)
    assert [(row.trial, row.step) for row, _ in per_checkpoint] == [(4, 9), (4, 8)]
    assert [state["trail"] for _, state in per_checkpoint] == [list(range(1, 10)), list(range(1, 9))]
    assert [(r.trial, r.step) for r in list_checkpoints(exp)] == sorted(kept)

    listing = emews_cmd("checkpoints", str(exp), "--best", "2", check=True).stdout.splitlines()
    assert listing[0].split() == ["trial", "step", "metric", "size", "path"]
    assert [line.split()[:3] for line in listing[1:]] == [["4", "9", "0.161111"], ["1", "9", "0.211111"]]
    listing = emews_cmd("checkpoints", str(exp), "--best", "2", "--per-checkpoint", check=True).stdout.splitlines()
    assert [line.split()[:3] for line in listing[1:]] == [["4", "9", "0.161111"], ["4", "8", "0.175"]]
    assert emews_cmd("checkpoints", str(exp), "--best", "0").returncode == 2



DIVERGING = """
def run(params, ctx):
    sign = params["sign"]  # -1 under maximize: the same ranking, the metric negated
    losses = {"diverges": [0.9, float("-inf"), 0.8], "good": [0.5, 0.1, 0.3]}[params["kind"]]
    for step, loss in enumerate(losses, 1):
        ctx.report(step=step, metrics={"loss": sign * loss}, checkpoint={"trial": ctx.task_id, "step": step})
    return {"loss": sign * losses[-1]}
"""


@pytest.mark.parametrize("direction", ["minimize", "maximize"])
def test_a_diverged_report_is_never_the_best_checkpoint(emews_cmd, tmp_path: Path, direction: str) -> None:
    """A trial whose metric blew up to the "best" infinity (a loss of -inf, an accuracy of inf) at step
    2: its checkpoint is no candidate for the best, as a non-finite result is a failure. Before, it
    ranked first: ``load_best`` returned the diverged weights and ``keep_best_experiment: 1`` deleted
    the good trial's best checkpoint (step 2, neither its newest) to keep it."""
    (tmp_path / "diverging.py").write_text(DIVERGING)
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep"},
        objective={"module": str(tmp_path / "diverging.py"), "metric": "loss", "direction": direction},
        space={"kind": {"type": "ordered", "values": ["diverges", "good"]},
               "sign": {"type": "constant", "value": 1 if direction == "minimize" else -1}},
        budget={"evaluations": 2}, task={"isolation": "process"},
        checkpoints={"keep_last": 1, "keep_best_experiment": 1})
    exp = launch(emews_cmd, wf)
    blowup = query(exp, "SELECT metrics FROM reports WHERE trial = 0 AND step = 2")[0][0]
    assert blowup == ('{"loss":-Infinity}' if direction == "minimize" else '{"loss":Infinity}')
    (row, state), = load_best(exp, k=1)
    assert (row.trial, row.step, state) == (1, 2, {"trial": 1, "step": 2})
    kept = {(t, s) for t, s in query(exp, "SELECT trial, step FROM checkpoints WHERE state = 'durable'")}
    assert kept == {(0, 3), (1, 2), (1, 3)}
    listing = emews_cmd("checkpoints", str(exp), "--best", "2", check=True).stdout.splitlines()
    assert [line.split()[:2] for line in listing[1:]] == [["1", "2"], ["0", "3"]]


SAVES_A_FILE = """
def run(params, ctx):
    for step in (1, 2):
        path = ctx.run_dir / "model.txt"
        path.write_text(f"trial {ctx.task_id} step {step}")
        ctx.report(step=step, metrics={"loss": params["rate"] / step}, checkpoint=path)
    return {"loss": params["rate"] / 2}
"""


def test_the_best_file_checkpoints_are_extracted_each_to_its_own_path(emews_cmd, tmp_path: Path) -> None:
    """Trials 0-2 each checkpoint ``model.txt`` (their run folder's) at steps 1 and 2; trial 2 is the
    best. Every row ``load_best`` returns holds its own file, with ``extract_to`` and without. Before,
    each extraction overwrote the last (``EXTRACT_TO/model.txt``; beside the checkpoint, one per
    trial): every row's path read "trial 0 step 2", and with ``per_trial`` false both of trial 2's
    rows read "trial 2 step 1"."""
    (tmp_path / "saves.py").write_text(SAVES_A_FILE)
    wf = write_workflow(tmp_path, optimizer={"name": "sweep"},
                        objective={"module": str(tmp_path / "saves.py"), "metric": "loss"},
                        space={"rate": {"type": "ordered", "values": [3.0, 2.5, 1.0]}},
                        budget={"evaluations": 3}, task={"isolation": "process"})
    exp = launch(emews_cmd, wf)
    best = load_best(exp, k=3, extract_to=tmp_path / "best")
    assert [(row.trial, path.read_text()) for row, path in best] == [
        (2, "trial 2 step 2"), (1, "trial 1 step 2"), (0, "trial 0 step 2")]
    assert len({path for _, path in best}) == 3 and all(path.is_relative_to(tmp_path / "best") for _, path in best)
    per_checkpoint = load_best(exp, k=2, per_trial=False)
    assert [path.read_text() for _, path in per_checkpoint] == ["trial 2 step 2", "trial 2 step 1"]
    assert all(path.is_relative_to(exp / "checkpoints" / "000002") for _, path in per_checkpoint)
