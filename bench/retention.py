"""Cost of checkpoint retention per report on the optimizer rank: a rescan of every durable
checkpoint (what emews did before) against the incremental :class:`emews.training.retention.Retainer`.

A real results store (SQLite, WAL) gets ``--trials`` trials of ``--steps`` reports each, every
report with a checkpoint that becomes durable at once (as the background writer reports it),
under ``keep_last: 1, keep_best: 1, keep_best_experiment: 5``. Printed: the median and the
last-tenth median milliseconds of retention work per report, for both ways (the rescan grows
with the experiment; the incremental one should not), and that both keep the same checkpoints.

    nice -n 19 python bench/retention.py                 # 200 trials x 20 steps
    nice -n 19 python bench/retention.py --trials 50 --steps 10
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emews.training.retention import Retainer, Retention  # noqa: E402
from emews.store.results_store import ResultsStore  # noqa: E402
from emews.store.trial_store import DURABLE, TrialStore  # noqa: E402
from emews.training.messages import CheckpointNote, Report  # noqa: E402

POLICY = Retention(keep_last=1, keep_best=1, keep_best_experiment=5)


def one_way(folder: Path, trials: int, steps: int, incremental: bool) -> tuple[list[float], set[int]]:
    """Per-report retention seconds, and the ids kept at the end."""
    with ResultsStore(folder / ("inc.db" if incremental else "scan.db")) as results:
        store = TrialStore(results.connection)
        retainer = Retainer(POLICY)
        spent: list[float] = []
        for step in range(1, steps + 1):
            for trial in range(trials):
                path = f"/ckpt/{trial}/{step}"
                loss = (trial * 7919 % 101) / 100 + 1 / step
                store.add_report(Report(trial, 0, step, {"loss": loss}, 0.0, CheckpointNote(path, 1)), loss, loss)
                store.mark_durable([path])
                start = time.perf_counter()
                if incremental:
                    doomed = retainer.add(store.durable_at([path]), store.pinned())
                else:
                    doomed = POLICY.to_delete(store.checkpoints((DURABLE,)), store.pinned())
                if doomed:
                    store.mark_deleted(doomed)
                spent.append(time.perf_counter() - start)
        kept = {row.id for row in store.checkpoints((DURABLE,))}
    return spent, kept


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rows = {}
        for name, incremental in (("rescan", False), ("incremental", True)):
            spent, kept = one_way(Path(tmp), args.trials, args.steps, incremental)
            tail = spent[-max(1, len(spent) // 10):]
            rows[name] = kept
            print(f"{name:12s} reports {len(spent):6d}  median {statistics.median(spent) * 1e3:8.3f} ms  "
                  f"last tenth median {statistics.median(tail) * 1e3:8.3f} ms  kept {len(kept)}")
        print("same checkpoints kept:", rows["rescan"] == rows["incremental"])


if __name__ == "__main__":
    main()
