"""An older store's absolute checkpoint paths, made relative on its first open for writing
(``TrialStore._relocate``): string work over the rows (300k rows: 18 s -> 3 s), each path kept as
the store's own path rules (``_stored(_resolved(path))``) keep it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from emews.store.results_store import ResultsStore


def test_an_older_stores_absolute_paths_are_kept_as_the_path_rules_keep_them(tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    exp.mkdir()
    paths = [
        f"{exp}/checkpoints/000001/step-1.ckpt",  # inside: relative
        f"{exp}/runs/../checkpoints/000002/step-1.ckpt",  # inside once normalized
        f"{exp}/./checkpoints//000003/step-1.ckpt",
        "/where/it/was/exp/checkpoints/000004/step-1.ckpt",  # written where the experiment was
        "/where/it/was/exp/checkpoints/000005/../000005/step-1.ckpt",
        "//where/it/was/checkpoints/000006/step-1.ckpt",
        f"{exp}2/checkpoints/x",  # a sibling folder whose name starts as the experiment's: outside
        "/elsewhere/model.ckpt",  # outside, not in the layout: as it is
        "/checkpoints/000007",
        str(exp),
    ]
    ResultsStore(exp / "results.db", root=exp).close()
    db = sqlite3.connect(exp / "results.db")
    with db:
        db.executemany(
            "INSERT INTO checkpoints (trial, step, path, size, metric, loss, state) VALUES (?, 1, ?, 1, 1.0, 1.0, 'durable')",
            [(i, path) for i, path in enumerate(paths)],
        )
    reader = ResultsStore(exp / "results.db", root=exp, readonly=True)
    expected = [reader._stored(reader._resolved(path)) for path in paths]
    reader.close()
    assert [expected[i] for i in (0, 1, 2, 3, 5)] == [f"checkpoints/00000{i}/step-1.ckpt" for i in (1, 2, 3, 4, 6)]
    assert expected[4:5] + expected[6:] == paths[4:5] + paths[6:9] + ["."]  # the layout is read before `..`

    ResultsStore(exp / "results.db", root=exp).close()  # opened for writing: relocated
    assert [p for (p,) in db.execute("SELECT path FROM checkpoints ORDER BY trial")] == expected
    db.close()
