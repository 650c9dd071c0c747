"""``bench/scale.py`` runs rank 0's real path against simulated workers: the simulator has to speak the
workers' side of the protocol as it is (a worker says ``READY`` before it is handed tasks), or the
bench measures a rank 0 that never dispatches. Checked on a small width: every task is done."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "scale.py"


def test_the_scale_bench_dispatches_every_task_of_a_small_width() -> None:
    run = subprocess.run(
        [sys.executable, str(BENCH), "--workers", "20", "--optimizers", "random", "--demand", "200",
         "--rounds", "2", "--max-seconds", "120"],
        capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr
    row = next(line for line in run.stdout.splitlines() if line.startswith("random "))
    assert "(stopped" not in row, run.stdout
    workers, _, done = re.split(r"\s+", row)[1:4]
    assert (int(workers), int(done.replace(",", ""))) == (20, 40), run.stdout
