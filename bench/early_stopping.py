"""Early stopping on a real learning curve: ASHA vs no stopping vs Optuna's pruners.

The same ``--configs`` configurations (drawn from ``workflows/asha.yaml``'s space with the seed)
are trained with the same per-trial seeds on the PyTorch digits model
(``objectives/digits_torch.py``, one report per epoch, up to ``--epochs`` epochs):

``none``              ``emews launch``, every trial trains all epochs (the reference result)
``asha``              ``emews launch`` with ``scheduler: asha`` (max_t = epochs, grace 1, rf 3)
``optuna-sha``        Optuna (in this process, one trial at a time) with SuccessiveHalvingPruner
                      (min_resource 1, reduction_factor 3)
``optuna-hyperband``  Optuna with HyperbandPruner (min_resource 1, max_resource epochs, rf 3)

All methods get the same configurations (an equal budget of trials, not of wall-clock: the emews
runs use ``--workers`` ranks, Optuna runs serially; wall time is printed for information). Printed
per method, medians over ``--seeds``: the best validation loss found, epochs trained, epochs as a
share of ``none``'s, and wall time. Target: ASHA reaches the ``none`` result with <= 1/3 of the epochs.

    nice -n 19 python bench/early_stopping.py                 # 27 configs x 27 epochs, 3 seeds
    nice -n 19 python bench/early_stopping.py --quick         # 9 configs x 9 epochs, 1 seed

Needs torch (``pip install emews-mpi[torch]``) and optuna. This file also holds the optimizer
the emews runs use (``FixedConfigs``: submits the given configurations in order).
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from emews.optimizer import Optimizer

REPO = Path(__file__).resolve().parents[1]
OBJECTIVE = REPO / "objectives" / "digits_torch.py"
WORKFLOW = REPO / "workflows" / "asha.yaml"


class FixedConfigs(Optimizer):
    """Evaluates the configurations in ``configs`` (a JSON list), all submitted at once, in order."""

    def __init__(self, configs: Path) -> None:
        self.configs = json.loads(Path(configs).read_text())

    def run(self, evaluator: Any) -> None:
        evaluator.put(self.configs)
        while evaluator.pending:
            evaluator.get(1)


def draw_configs(count: int, epochs: int, seed: int) -> list[dict]:
    from emews.workflow import load_workflow

    space = load_workflow(str(WORKFLOW), check_imports=False).space
    rng = random.Random(seed)
    return [{**space.sample(rng), "epochs": epochs} for _ in range(count)]


def run_emews(folder: Path, name: str, configs: list[dict], seed: int, workers: int, epochs: int,
              scheduler: dict | None) -> dict:
    listing = folder / f"{name}-configs.json"
    listing.write_text(json.dumps(configs))
    data = yaml.safe_load(WORKFLOW.read_text())
    data.update(optimizer={"name": f"{Path(__file__).resolve()}:FixedConfigs", "options": {"configs": str(listing)}},
                budget={"evaluations": len(configs)}, seed=seed, checkpoints={"keep_last": 1})
    data["objective"]["module"] = str(OBJECTIVE)
    data["space"]["epochs"] = {"type": "constant", "value": epochs}
    data.pop("scheduler", None)
    if scheduler:
        data["scheduler"] = scheduler
    wf = folder / f"{name}.yaml"
    wf.write_text(yaml.safe_dump(data))
    exp = folder / f"exp-{name}"
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "emews", "launch", str(wf), "--workers", str(workers),
                           "--exp-dir", str(exp)], capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{name}: emews launch failed:\n{proc.stderr}")
    db = sqlite3.connect(exp / "results.db")
    best = db.execute("SELECT MIN(objective) FROM results WHERE status = 'ok'").fetchone()[0]
    spent = db.execute("SELECT COUNT(*) FROM reports").fetchone()[0]
    db.close()
    return {"best": best, "epochs": spent, "wall": wall}


class _OptunaContext:
    """The objective's ``ctx`` backed by an Optuna trial: report -> trial.report + should_prune."""

    def __init__(self, trial: Any, seed: int) -> None:
        self.trial, self.seed, self.epochs = trial, seed, 0

    def restore(self, default: Any = None) -> Any:
        return default

    def report(self, step: int, metrics: dict, checkpoint: Any = None, wait: bool = True) -> Any:
        from emews.training import CONTINUE, Action, Decision

        self.epochs += 1
        self.trial.report(metrics["val_loss"], step)
        return Decision(Action.STOP) if self.trial.should_prune() else CONTINUE


def run_optuna(configs: list[dict], seed: int, pruner: Any) -> dict:
    import optuna

    from emews.imports import import_user_module

    objective = import_user_module(str(OBJECTIVE), what="objective")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", pruner=pruner, sampler=optuna.samplers.RandomSampler(seed))
    spent = 0

    def optimize(trial: Any) -> float:
        nonlocal spent
        params = configs[trial.number]  # the pruner sees only the reported values; the configs are fixed
        ctx = _OptunaContext(trial, (seed * 1_000_003 + trial.number) % (2**31 - 1))
        metrics = objective.run(params, ctx)
        spent += ctx.epochs
        if ctx.epochs < params["epochs"]:
            trial.set_user_attr("val_loss", metrics["val_loss"])
            raise optuna.TrialPruned()
        return metrics["val_loss"]

    started = time.perf_counter()
    study.optimize(optimize, n_trials=len(configs))
    wall = time.perf_counter() - started
    values = [t.value if t.value is not None else t.user_attrs.get("val_loss") for t in study.trials]
    return {"best": min(v for v in values if v is not None), "epochs": spent, "wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", type=int, default=27)
    parser.add_argument("--epochs", type=int, default=27)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.configs, args.epochs, args.seeds = 9, 9, 1
    import optuna

    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="emews-es-bench-") as tmp:
        for seed in range(1, args.seeds + 1):
            folder = Path(tmp) / f"seed{seed}"
            folder.mkdir()
            configs = draw_configs(args.configs, args.epochs, seed)
            asha = {"name": "asha", "options": {"max_t": args.epochs, "grace_period": 1, "reduction_factor": 3}}
            methods = {
                "none": lambda: run_emews(folder, "none", configs, seed, args.workers, args.epochs, None),
                "asha": lambda: run_emews(folder, "asha", configs, seed, args.workers, args.epochs, asha),
                "optuna-sha": lambda: run_optuna(configs, seed, optuna.pruners.SuccessiveHalvingPruner(
                    min_resource=1, reduction_factor=3)),
                "optuna-hyperband": lambda: run_optuna(configs, seed, optuna.pruners.HyperbandPruner(
                    min_resource=1, max_resource=args.epochs, reduction_factor=3)),
            }
            for name, method in methods.items():
                runs.setdefault(name, []).append(method())
                print(f"# seed {seed} {name}: {runs[name][-1]}", flush=True)
    print(f"# {args.configs} configs x up to {args.epochs} epochs, digits MLP (torch, CPU), {args.seeds} seeds, "
          f"emews with {args.workers} workers, Optuna serial; medians; machine shared (noisy wall times)")
    reference = statistics.median(r["epochs"] for r in runs["none"])
    print(f"{'method':>17} {'best val_loss':>14} {'epochs':>8} {'of none':>8} {'wall s':>8}")
    for name, results in runs.items():
        epochs = statistics.median(r["epochs"] for r in results)
        print(f"{name:>17} {statistics.median(r['best'] for r in results):>14.4f} {epochs:>8.0f} "
              f"{epochs / reference:>8.2f} {statistics.median(r['wall'] for r in results):>8.1f}")
    gaps = [a["best"] - n["best"] for a, n in zip(runs["asha"], runs["none"])]
    print(f"# asha best - none best per seed: {', '.join(f'{g:+.4f}' for g in gaps)}")


if __name__ == "__main__":
    main()
