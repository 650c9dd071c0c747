"""results.csv: written while a run goes on (CsvFile.follow) it has the same bytes as one export."""

from __future__ import annotations

import csv
import os
import random
import signal
from pathlib import Path

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from emews.output.export import CsvFile, write_csv
from emews.core.results import Result, Status
from emews.store.results_store import ResultsStore

PARAMS = ["x", "act", "units"]


def result(i: int, rng: random.Random, late_metric_from: int) -> Result:
    ok = rng.random() > 0.2
    metrics = {"acc": rng.random(), "curve": [rng.random() for _ in range(3)]} if ok and rng.random() > 0.5 else {}
    if ok and i >= late_metric_from:
        metrics["val_loss"] = rng.random()
    return Result(id=i, params={"x": rng.random(), "act": rng.choice(["relu", "a,b", 'q"t']), "units": i},
                  status=Status.OK if ok else Status.FAILED, objective=rng.random() if ok else None,
                  loss=0.0 if ok else float("inf"), metrics=metrics,
                  error=None if ok else "Traceback:\n  boom, with a comma", rank=1 + i % 3, host="node",
                  submitted=1.7e9 + i, started=1.7e9 + i + 0.25, finished=1.7e9 + i + 0.5)


@given(n=st.integers(0, 60), seed=st.integers(0, 2**16), batch=st.integers(1, 10),
       late_metric_from=st.integers(0, 80))
@settings(deadline=None, max_examples=60)
def test_following_a_live_store_writes_the_bytes_of_one_export(tmp_path_factory, n, seed, batch, late_metric_from):
    folder = tmp_path_factory.mktemp("csv")
    rng = random.Random(seed)
    results = [result(i, rng, late_metric_from) for i in range(n)]
    arrival = sorted(results, key=lambda r: r.id + rng.uniform(0, 8))  # out of order, as workers finish
    store = ResultsStore(folder / "results.db")
    reader = ResultsStore(folder / "results.db", readonly=True)
    followed = CsvFile(folder / "followed.csv", PARAMS)
    for start in range(0, len(arrival), batch):
        store.commit(results=arrival[start:start + batch])
        followed.follow(reader)
        assert followed.rows <= n and not (folder / "followed.csv").exists()  # in place only at the end
    assert followed.finish(reader) == n
    assert write_csv(reader, folder / "once.csv", PARAMS) == n
    assert (folder / "followed.csv").read_bytes() == (folder / "once.csv").read_bytes()
    assert sorted(p.name for p in folder.iterdir() if p.suffix == ".tmp") == []  # no temp file left
    store.close()
    reader.close()


def test_a_gap_holds_the_rows_after_it_back(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path / "results.db")
    rng = random.Random(1)
    rows = [result(i, rng, 99) for i in range(5)]
    followed = CsvFile(tmp_path / "results.csv", PARAMS)
    store.commit(results=[rows[0], rows[1], rows[3], rows[4]])  # task 2 still runs
    followed.follow(store)
    assert followed.rows == 2
    store.commit(results=[rows[2]])
    followed.follow(store)
    assert followed.rows == 5


def test_the_csv_child_follows_a_store_being_written_and_finishes_with_the_bytes_of_one_export(tmp_path: Path) -> None:
    from emews.config.experiment import CSV_FILE, EXPERIMENT_FILES, STORE_FILE
    from emews.output.csvfollow import CsvFollower

    for name in EXPERIMENT_FILES:  # what makes a folder an experiment directory
        (tmp_path / name).write_text("{}\n")
    rng = random.Random(5)
    rows = [result(i, rng, 30) for i in range(60)]
    store = ResultsStore(tmp_path / STORE_FILE)
    follower = CsvFollower(tmp_path, PARAMS, interval=0.01)
    for start in range(0, 60, 7):  # out of order within each batch, as workers finish
        store.commit(results=sorted(rows[start:start + 7], key=lambda r: -r.id))
    assert follower.finish() == 60
    followed = (tmp_path / CSV_FILE).read_bytes()
    assert write_csv(store, tmp_path / "once.csv", PARAMS) == 60
    assert followed == (tmp_path / "once.csv").read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []
    store.close()



def test_the_csv_child_steps_over_the_ids_cancelled_in_the_run(tmp_path: Path) -> None:
    """An id the optimizer cancelled (``evaluator.cancel``) never gets a result: the child stopped
    there until the run's end; told of it, it writes the rows after it."""
    from emews.config.experiment import CSV_FILE, EXPERIMENT_FILES, STORE_FILE
    from emews.output.csvfollow import CsvFollower
    from testutil import wait_until

    for name in EXPERIMENT_FILES:
        (tmp_path / name).write_text("{}\n")
    rng = random.Random(3)
    rows = [result(i, rng, 30) for i in range(6)]
    store = ResultsStore(tmp_path / STORE_FILE)
    follower = CsvFollower(tmp_path, PARAMS, interval=0.01)
    store.commit(results=[r for r in rows if r.id != 2])  # task 2 was cancelled before it started
    follower.skip([2])
    followed = wait_until(lambda: next(tmp_path.glob(f".{CSV_FILE}.*.tmp"), None))
    assert followed is not None
    assert wait_until(lambda: len(list(csv.reader(followed.open(newline="")))) == 1 + 5), followed.read_text()
    assert follower.finish() == 5
    assert write_csv(store, tmp_path / "once.csv", PARAMS) == 5
    assert (tmp_path / CSV_FILE).read_bytes() == (tmp_path / "once.csv").read_bytes()
    store.close()

def trained_store(folder: Path, n: int) -> ResultsStore:
    """A store of ``n`` results, some with metrics, failures and quoted strings, and training reports."""
    from emews.store.trial_store import TrialStore
    from emews.training.messages import Report

    rng = random.Random(7)
    store = ResultsStore(folder / "results.db")
    store.commit(results=[result(i, rng, n // 2) for i in range(n) if i % 97 != 5])  # gaps in the ids
    trials = TrialStore(store.connection)
    for i in range(0, n, 13):
        trials.add_report(Report(trial=i, session=0, step=i % 7, metrics={"val_loss": 0.5}, time=1.7e9 + i), 0.5, 0.5)
        if i % 2:
            trials.add_decision(i, i % 7, "stop")
    return store


@pytest.mark.parametrize("n", [2, 3, 50, 400])
def test_a_large_export_split_with_a_child_writes_the_bytes_of_one_process(tmp_path: Path, n: int) -> None:
    store = trained_store(tmp_path, n)
    rows = write_csv(store, tmp_path / "alone.csv", PARAMS, parallel_from=10**9)
    assert write_csv(store, tmp_path / "split.csv", PARAMS, parallel_from=2) == rows == n - len(range(5, n, 97))
    assert (tmp_path / "split.csv").read_bytes() == (tmp_path / "alone.csv").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp or part file left
    store.close()


def test_the_rows_after_the_split_are_written_by_the_child(tmp_path: Path) -> None:
    from emews.output.csvpart import CsvPart
    from emews.output.csvrows import Columns

    store = trained_store(tmp_path, 40)
    part = CsvPart(store, tmp_path, Columns.of(store, PARAMS), first_id=30)
    assert part._child is not None
    with open(tmp_path / "tail.csv", "w", newline="") as fh:
        assert part.append_to(fh) == 10
    write_csv(store, tmp_path / "whole.csv", PARAMS, parallel_from=10**9)
    whole = (tmp_path / "whole.csv").read_bytes().split(b"\r\n")
    assert (tmp_path / "tail.csv").read_bytes().split(b"\r\n") == whole[-11:]  # the last 10 rows and the end
    store.close()


def test_a_child_that_dies_leaves_its_rows_to_the_parent(tmp_path: Path, monkeypatch) -> None:
    import emews.output.export
    from emews.output.csvpart import CsvPart

    class KilledAtOnce(CsvPart):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            os.kill(self._child.pid, signal.SIGKILL)

    store = trained_store(tmp_path, 300)
    expected = write_csv(store, tmp_path / "alone.csv", PARAMS, parallel_from=10**9)
    monkeypatch.setattr(emews.output.export, "CsvPart", KilledAtOnce)
    assert write_csv(store, tmp_path / "split.csv", PARAMS, parallel_from=2) == expected
    assert (tmp_path / "split.csv").read_bytes() == (tmp_path / "alone.csv").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    store.close()


def test_results_before_the_first_result_says_nothing_was_written(tmp_path: Path) -> None:
    """emews results on an experiment with no store yet (a queued job) said 'wrote 0 rows to
    results.csv' and wrote no file."""
    import subprocess
    import sys

    from emews.config.experiment import create_experiment

    exp = create_experiment(tmp_path / "exp", name="early", site={"name": "local"}, info={"workers": 2},
                            workflow={"space": {"x": {"type": "float", "lower": 0, "upper": 1}},
                                      "budget": {"evaluations": 5}})
    proc = subprocess.run([sys.executable, "-m", "emews", "results", str(exp)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "wrote" not in proc.stdout and f"no results stored yet: {exp / 'results.csv'} not written" in proc.stdout
    assert not (exp / "results.csv").exists()


def test_results_decides_and_writes_from_one_store_opening(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture) -> None:
    """emews results decided 'no results stored yet' on one opening of the store and wrote the CSV
    from a second (export_csv opened it again): when the run's first commit came in between, it said
    'no results stored yet: results.csv not written' and wrote results.csv. The first commit is made
    here right after the first opening, where a run's would land; what is said and what is written
    now agree."""
    import emews.output.export
    from emews.cli import main
    from emews.config.experiment import STORE_FILE, create_experiment

    exp = create_experiment(tmp_path / "exp", name="race", site={"name": "local"}, info={"workers": 2},
                            workflow={"space": {"x": {"type": "float", "lower": 0, "upper": 1}},
                                      "budget": {"evaluations": 5}})
    real_open = emews.output.export.open_store
    opened: list[object] = []

    def open_then_the_run_commits(exp_dir: Path):  # the real opening, then the run's first commit
        store = real_open(exp_dir)
        if not opened:
            first = ResultsStore(exp / STORE_FILE)
            first.commit(results=[Result(id=0, params={"x": 0.5}, status=Status.OK, objective=0.25, loss=0.25)])
            first.close()
        opened.append(store)
        return store

    monkeypatch.setattr(emews.output.export, "open_store", open_then_the_run_commits)
    assert main(["results", str(exp), "--by-point"]) == 0
    out = capsys.readouterr().out
    assert f"no results stored yet: {exp / 'results.csv'} not written" in out, out
    assert not (exp / "results.csv").exists() and not (exp / "results_by_point.csv").exists()
    assert len(opened) == 1
