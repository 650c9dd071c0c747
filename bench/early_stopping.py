"""Early stopping on a real learning curve: ASHA vs no stopping vs Optuna's pruners.

Configurations are drawn from ``workflows/asha.yaml``'s space with the seed and trained with the
same per-trial seeds on the PyTorch digits model (``objectives/digits_torch.py``, one report per
epoch, up to ``--epochs`` epochs):

``none``              ``emews launch``, every trial trains all epochs (the reference result)
``asha``              ``emews launch`` with ``trial_scheduler: asha`` (max_t = epochs, grace 1, rf 3)
``optuna-sha``        Optuna (in this process, one trial at a time) with SuccessiveHalvingPruner
                      (min_resource 1, reduction_factor 3)
``optuna-hyperband``  Optuna with HyperbandPruner (min_resource 1, max_resource epochs, rf 3)

The model-based rows choose their configurations themselves (from the same space), with the same
epochs budget:

``bohb``              ``emews launch`` with ``optimizer: bohb`` and ``trial_scheduler: asha`` (as
                      above), ``budget: {steps: none's epochs}``, defaults otherwise
``optuna-tpe-sha``    Optuna's TPESampler (defaults, seeded) with SuccessiveHalvingPruner (as above)

``none`` trains ``--configs`` configurations fully. The early-stopping methods get the same compute
budget, ``none``'s epochs: they take configurations in the same order (``none``'s first, then
more of the same draw) until that many epochs are spent (trials running then finish, or are
stopped early), the setting early stopping is for. Optuna runs serially in this process, without
checkpoints or MPI start-up; wall time is printed for information. Printed per method, medians
over ``--seeds``: the best validation loss found, the epochs trained, the epochs trained until
the method first held a result as good as ``none``'s best of that seed ("to match"; ``-`` if it
never did), both as shares of ``none``'s epochs, and wall time. A trial stopped early counts with
the last loss it reported. Target: ASHA reaches the ``none`` result with <= 1/3 of the epochs.

    nice -n 19 python bench/early_stopping.py                 # 27 configs x 27 epochs, 3 seeds
    nice -n 19 python bench/early_stopping.py --quick         # 9 configs x 9 epochs, 1 seed
    nice -n 19 python bench/early_stopping.py --methods none,bohb,optuna-tpe-sha   # some rows only

Needs torch (``pip install emews-mpi[torch]``) and optuna. This file also holds the optimizer
the emews runs use (``FixedConfigs``: submits the given configurations in order).
"""

from __future__ import annotations

import argparse
import json
import math
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

from emews.core.optimizer import Optimizer

REPO = Path(__file__).resolve().parents[1]
OBJECTIVE = REPO / "objectives" / "digits_torch.py"
WORKFLOW = REPO / "workflows" / "asha.yaml"


class FixedConfigs(Optimizer):
    """Evaluates the configurations in ``configs`` (a JSON list) in order, one per free worker, until
    ``epochs`` (training reports, the compute budget) have been spent or the list is done."""

    def __init__(self, configs: Path, epochs: int | None = None) -> None:
        self.configs = json.loads(Path(configs).read_text())
        self.epochs = epochs

    def run(self, evaluator: Any) -> None:
        queue = list(self.configs)
        while True:
            spent = self.epochs is not None and len(evaluator.reports()) >= self.epochs
            while queue and not spent and evaluator.pending < evaluator.workers:
                evaluator.put([queue.pop(0)])
            if not evaluator.pending:
                return
            evaluator.get(1)


def draw_configs(count: int, epochs: int, seed: int) -> list[dict]:
    from emews.config.workflow import load_workflow

    space = load_workflow(str(WORKFLOW), check_imports=False).space
    rng = random.Random(seed)
    return [{**space.sample(rng), "epochs": epochs} for _ in range(count)]


def run_emews(folder: Path, name: str, configs: list[dict], seed: int, workers: int, epochs: int,
              scheduler: dict | None, budget: int | None = None, optimizer: dict | None = None) -> dict:
    """``configs`` in order (``FixedConfigs``), or ``optimizer`` choosing them until ``budget``
    epochs (``budget: {steps: N}``)."""
    data = yaml.safe_load(WORKFLOW.read_text())
    if optimizer is None:
        listing = folder / f"{name}-configs.json"
        listing.write_text(json.dumps(configs))
        data.update(optimizer={"name": f"{Path(__file__).resolve()}:FixedConfigs",
                               "options": {"configs": str(listing), "epochs": budget}},
                    budget={"evaluations": len(configs)})
    else:
        data.update(optimizer=optimizer, budget={"steps": budget})
    data.update(seed=seed, checkpoints={"keep_last": 1})
    data["objective"]["module"] = str(OBJECTIVE)
    data["space"]["epochs"] = {"type": "constant", "value": epochs}
    data.pop("trial_scheduler", None)
    if scheduler:
        data["trial_scheduler"] = scheduler
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
    # the epochs spent when each result arrived, in arrival order: what it took to hold that loss
    arrivals = [(objective, db.execute("SELECT COUNT(*) FROM reports WHERE time <= ?", (finished,)).fetchone()[0])
                for objective, finished in db.execute(
                    "SELECT objective, finished FROM results WHERE status = 'ok' ORDER BY finished")]
    db.close()
    return {"best": best, "epochs": spent, "wall": wall, "arrivals": arrivals}


class _OptunaContext:
    """The objective's ``ctx`` backed by an Optuna trial: report -> trial.report + should_prune."""

    def __init__(self, trial: Any, seed: int) -> None:
        self.trial, self.seed, self.epochs = trial, seed, 0

    def restore(self, default: Any = None) -> Any:
        return default

    def report(self, step: int, metrics: dict, checkpoint: Any = None, wait: bool = True) -> Any:
        from emews.training.messages import CONTINUE, Action, Decision

        self.epochs += 1
        self.trial.report(metrics["val_loss"], step)
        return Decision(Action.STOP) if self.trial.should_prune() else CONTINUE


def run_optuna(configs: list[dict] | None, seed: int, pruner: Any, budget: int, epochs: int = 0) -> dict:
    """Optuna on ``configs`` in order, or (``configs`` None) with TPE choosing them from the workflow's
    space until ``budget`` epochs."""
    import optuna

    from emews.core.imports import import_user_module

    objective = import_user_module(str(OBJECTIVE), what="objective")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.RandomSampler(seed) if configs is not None else optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(direction="minimize", pruner=pruner, sampler=sampler)
    space = _space()
    spent = 0

    def optimize(trial: Any) -> float:
        nonlocal spent
        # fixed configs: the pruner sees only the reported values; else TPE chooses from the space
        params = configs[trial.number] if configs is not None else {**_suggest(trial, space), "epochs": epochs}
        ctx = _OptunaContext(trial, (seed * 1_000_003 + trial.number) % (2**31 - 1))
        metrics = objective.run(params, ctx)
        spent += ctx.epochs
        if ctx.epochs < params["epochs"]:
            trial.set_user_attr("val_loss", metrics["val_loss"])
            raise optuna.TrialPruned()
        return metrics["val_loss"]

    arrivals: list[tuple[float, int]] = []

    def arrived(study: Any, trial: Any) -> None:
        arrivals.append((trial.value if trial.value is not None else trial.user_attrs.get("val_loss"), spent))
        if spent >= budget:
            study.stop()

    started = time.perf_counter()
    study.optimize(optimize, n_trials=len(configs) if configs is not None else None, callbacks=[arrived])
    wall = time.perf_counter() - started
    return {"best": min(_losses(arrivals), default=math.nan), "epochs": spent, "wall": wall, "arrivals": arrivals}


def _space() -> Any:
    from emews.config.workflow import load_workflow

    return load_workflow(str(WORKFLOW), check_imports=False).space


def _suggest(trial: Any, space: Any) -> dict:
    """A point of ``space`` from an Optuna trial (ordered lists as categorical, as emews.contrib.optuna)."""
    from emews.core.space import Categorical, Float, Int

    point = {}
    for name, dim in space.free.items():
        if isinstance(dim, Float):
            point[name] = trial.suggest_float(name, dim.lower, dim.upper, log=dim.log)
        elif isinstance(dim, Int):
            point[name] = trial.suggest_int(name, dim.lower, dim.upper, log=dim.log)
        elif isinstance(dim, Categorical):
            point[name] = trial.suggest_categorical(name, list(dim.values))
    return point


def _losses(arrivals: list[tuple[float | None, int]]) -> list[float]:
    """The finite losses of ``arrivals`` (a diverged trial reports NaN; it never counts as best)."""
    return [loss for loss, _ in arrivals if loss is not None and math.isfinite(loss)]


def epochs_to_match(arrivals: list[tuple[float | None, int]], target: float) -> float:
    """The epochs spent when a result at least as good as ``target`` first arrived (inf: never)."""
    for loss, epochs in arrivals:
        if loss is not None and math.isfinite(loss) and loss <= target:
            return epochs
    return math.inf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", type=int, default=27)
    parser.add_argument("--epochs", type=int, default=27)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--methods", default="none,asha,optuna-sha,optuna-hyperband,bohb,optuna-tpe-sha",
                        help="comma-separated rows to run (none is always run: the reference)")
    parser.add_argument("--bohb-options", default="{}", help="JSON: bohb's options besides the seed")
    args = parser.parse_args()
    chosen = {"none", *args.methods.split(",")}
    if args.quick:
        args.configs, args.epochs, args.seeds = 9, 9, 1
    import optuna

    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="emews-es-bench-") as tmp:
        for seed in range(1, args.seeds + 1):
            folder = Path(tmp) / f"seed{seed}"
            folder.mkdir()
            pool = draw_configs(args.configs * args.epochs, args.epochs, seed)  # more than any budget takes
            configs, budget = pool[:args.configs], args.configs * args.epochs
            asha = {"name": "asha", "options": {"max_t": args.epochs, "grace_period": 1, "reduction_factor": 3}}
            methods = {
                "none": lambda: run_emews(folder, "none", configs, seed, args.workers, args.epochs, None),
                "asha": lambda: run_emews(folder, "asha", pool, seed, args.workers, args.epochs, asha, budget),
                "optuna-sha": lambda: run_optuna(pool, seed, optuna.pruners.SuccessiveHalvingPruner(
                    min_resource=1, reduction_factor=3), budget),
                "optuna-hyperband": lambda: run_optuna(pool, seed, optuna.pruners.HyperbandPruner(
                    min_resource=1, max_resource=args.epochs, reduction_factor=3), budget),
                "bohb": lambda: run_emews(folder, "bohb", [], seed, args.workers, args.epochs, asha, budget,
                                          optimizer={"name": "bohb", "options": {
                                              "seed": seed, **json.loads(args.bohb_options)}}),
                "optuna-tpe-sha": lambda: run_optuna(None, seed, optuna.pruners.SuccessiveHalvingPruner(
                    min_resource=1, reduction_factor=3), budget, args.epochs),
            }
            unknown = chosen - set(methods)
            if unknown:
                raise SystemExit(f"--methods: unknown {', '.join(sorted(unknown))}; allowed: {', '.join(methods)}")
            for name, method in methods.items():
                if name not in chosen:
                    continue
                run = method()
                target = runs["none"][-1]["best"] if name != "none" else run["best"]
                run["to_match"] = epochs_to_match(run.pop("arrivals"), target)
                runs.setdefault(name, []).append(run)
                print(f"# seed {seed} {name}: {run}", flush=True)
    print(f"# none: {args.configs} configs x {args.epochs} epochs; the others: configs until that many epochs; "
          f"digits MLP (torch, CPU), {args.seeds} seeds, emews with {args.workers} workers, Optuna serial; medians")
    reference = statistics.median(r["epochs"] for r in runs["none"])
    print(f"{'method':>17} {'best val_loss':>14} {'epochs':>8} {'of none':>8} {'to match':>9} {'of none':>8} "
          f"{'wall s':>8}")
    for name, results in runs.items():
        epochs = statistics.median(r["epochs"] for r in results)
        to_match = statistics.median(r["to_match"] for r in results)
        shown = "-" if math.isinf(to_match) else f"{to_match:.0f}"
        print(f"{name:>17} {statistics.median(r['best'] for r in results):>14.4f} {epochs:>8.0f} "
              f"{epochs / reference:>8.2f} {shown:>9} {to_match / reference:>8.2f} "
              f"{statistics.median(r['wall'] for r in results):>8.1f}")
    for name in runs:
        if name != "none":
            shares = ", ".join("never" if math.isinf(r["to_match"]) else f"{r['to_match'] / n['epochs']:.2f}"
                               for r, n in zip(runs[name], runs["none"]))
            print(f"# {name}: epochs to match none's best, per seed, as a share of none's: {shares}")


if __name__ == "__main__":
    main()
