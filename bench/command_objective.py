"""What a command objective costs per evaluation, against a Python function doing the same work.

    python bench/command_objective.py [--workers 2] [--budget 40] [--repeats 3]

Each contender is a real ``emews launch`` (the user's path, default options: process isolation)
of a sweep over ``--budget`` points of one parameter, all in this process tree, contenders in
turn per repeat so machine noise falls on all alike. Every evaluation returns ``x * x``:

  function   ``objective: {module: obj.py}`` (a Python function in the persistent child)
  sh         ``objective: {command: [sh, -c, 'echo "value ..."'], params: env}`` (a shell per task)
  python     ``objective: {command: [python3, model.py]}`` (an interpreter start per task, flags)

Prints, per contender, the median over repeats of the launch's wall time and of the mean task
time (``finished - started`` of the stored results), in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

MODEL = "import sys\nargs = dict(zip(sys.argv[1::2], sys.argv[2::2]))\nprint('value', float(args['--x']) ** 2)\n"
CONTENDERS = {
    "function": {"module": "obj.py"},
    "sh": {"command": ["sh", "-c", 'echo "value $(awk "BEGIN {print $x * $x}")"'], "params": "env"},
    "python": {"command": [sys.executable, "model.py"]},
}


def launch(folder: Path, name: str, workers: int, budget: int, repeat: int) -> tuple[float, float]:
    workflow = {"optimizer": {"name": "sweep", "options": {"levels": budget}},
                "objective": CONTENDERS[name], "space": {"x": {"type": "float", "lower": 0.0, "upper": 1.0}},
                "budget": {"evaluations": budget}, "task": {"timeout": 60}}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(workflow))
    exp = folder / f"exp-{name}-{repeat}"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "emews", "launch", str(path), "--workers", str(workers),
                    "--exp-dir", str(exp)], cwd=folder, check=True, capture_output=True)
    wall = time.perf_counter() - start
    db = sqlite3.connect(exp / "results.db")
    rows = db.execute("SELECT status, finished - started FROM results").fetchall()
    db.close()
    assert len(rows) == budget and {r[0] for r in rows} == {"ok"}, rows[:3]
    return wall, statistics.fmean(r[1] for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "obj.py").write_text("def run(p):\n    return p['x'] * p['x']\n")
        (folder / "model.py").write_text(MODEL)
        walls: dict[str, list[float]] = {n: [] for n in CONTENDERS}
        tasks: dict[str, list[float]] = {n: [] for n in CONTENDERS}
        for repeat in range(args.repeats):
            for name in CONTENDERS:
                wall, task = launch(folder, name, args.workers, args.budget, repeat)
                walls[name].append(wall)
                tasks[name].append(task)
    print(f"{args.budget} evaluations, {args.workers} workers, medians of {args.repeats} "
          f"(load average {os.getloadavg()[0]:.1f})")
    print(f"{'contender':<10} {'launch wall s':>14} {'task ms':>9}")
    for name in CONTENDERS:
        print(f"{name:<10} {statistics.median(walls[name]):>14.2f} {1000 * statistics.median(tasks[name]):>9.1f}")
    print(json.dumps({n: {"wall_s": statistics.median(walls[n]), "task_ms": 1000 * statistics.median(tasks[n])}
                      for n in CONTENDERS}))


if __name__ == "__main__":
    main()
