"""The progress line's rate of a search of slow trainings: an NT3 UPF of 3 trainings (677 s) said
"0.00/s" on every line, also after all 3 had finished, where ``emews status`` says r"0\.00443/s". Below
10 per second the rate has 3 significant digits; from 10 on it stays a whole number."""

from __future__ import annotations

import re
import time

import pytest

from emews.runtime.progress import Progress


@pytest.mark.parametrize(("done", "seconds", "said"), [(3, 677.3, r"0\.00443/s"), (2, 86.2, r"0\.0232/s"),
                                                       (9, 3.0, "3/s"), (150_000, 5.48, r"27,3\d\d/s"), (0, 20.0, "0/s")])
def test_the_rate_says_slow_evaluations_in_significant_digits(done: int, seconds: float, said: str) -> None:
    progress = Progress(budget=None, workers=2, started=time.monotonic() - seconds)
    progress.done = done
    line = progress.line()
    assert re.search(f", 0/2 workers busy, {said}$", line), line  # the time since ``started`` has grown a little
