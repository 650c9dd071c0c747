"""results.csv: written while a run goes on (CsvFile.follow) it has the same bytes as one export."""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from emews.report import CsvFile, write_csv
from emews.results import Result, Status
from emews.runtime.store import ResultsStore

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
    from emews.csvfollow import CsvFollower
    from emews.experiment import CSV_FILE, STORE_FILE, WORKFLOW_FILE

    (tmp_path / WORKFLOW_FILE).write_text("{}\n")  # what makes a folder an experiment directory
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
