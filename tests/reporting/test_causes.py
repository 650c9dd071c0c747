"""The report's failure causes count as the end-of-run summary counts them (issue 24): failures whose
lines differ only in the values they quote are one cause, shown by its first line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from emews.reporting.data import ExperimentData
from emews.reporting.failures import causes


def test_failures_that_differ_only_in_their_values_are_one_row_named_by_the_first() -> None:
    errors = ["Traceback (most recent call last):\n  File \"o.py\"\nRuntimeError: bad parameters x=0.5",
              "objective returned NaN", None,
              "Traceback (most recent call last):\n  File \"o.py\"\nRuntimeError: bad parameters x=-1.5",
              "nt3: error: argument --lr: invalid int value: '0.01'\ncommand python3 exited with status 2; ...",
              "Traceback (most recent call last):\n  File \"o.py\"\nRuntimeError: bad parameters x=3"]
    status = ["failed", "failed", "ok", "failed", "failed", "failed"]
    results = pd.DataFrame({"id": range(6), "status": status, "error": errors})
    data = ExperimentData(Path("exp"), {}, {}, {}, None, results, pd.DataFrame(index=results.index), 0, None)
    found = causes(data)
    assert found.to_dict("records") == [
        {"status": "failed", "cause": "RuntimeError: bad parameters x=0.5", "count": 3},
        {"status": "failed", "cause": "nt3: error: argument --lr: invalid int value: '0.01'", "count": 1},
        {"status": "failed", "cause": "objective returned NaN", "count": 1}]
