"""Population-based training: emews' PBT vs Ray Tune's PBT on a learning-rate schedule.

The problem is one where a schedule matters: a small CNN on scikit-learn's 8x8 digits trained by
SGD, whose ``lr`` (log scale) and ``momentum`` PBT perturbs or resamples as it trains (a high rate
early, a low one late beats any constant rate). Both sides start from the same population (drawn
from the space with the seed), train each member for ``--epochs`` epochs with one report per
epoch, and perturb every ``--interval`` epochs, with their schedulers' other options at their
defaults:

``emews``  ``emews launch`` of a workflow with ``trial_scheduler: {name: pbt, options:
           {perturbation_interval}}`` (mutations: every searched parameter), the population as a
           ``sweep`` points file, one worker per member
``ray``    ``ray.tune.Tuner`` with ``PopulationBasedTraining(time_attr="training_iteration",
           perturbation_interval, hyperparam_mutations={lr: loguniform, momentum: uniform})``, the
           population as ``points_to_evaluate``, stopped at ``training_iteration`` = epochs, one CPU
           per member (all members train at once, as emews' workers)
``fixed``  (``--methods``) ``emews launch`` without a trial scheduler: each member keeps its initial
           ``lr`` and ``momentum`` throughout (what PBT's schedules are measured against)

Ray Tune runs as a child process with ``/tmp/emews-bench-ray/bin/python`` (made on first use:
``python -m venv --system-site-packages`` and ``pip install "ray[tune]"``; ``--ray-python``
names another). Printed per seed and as medians over ``--seeds``: the best member's final
validation loss (the target: emews no worse than Ray's), the population's median final loss, the
epochs trained (the budget: members x epochs, give or take what a clone retrains or skips) and
wall time. Ray checkpoints every ``--interval`` epochs and at the last (its PBT examples' practice),
emews at every report (its objective contract).

    nice -n 10 python bench/pbt.py                       # 4 members x 20 epochs, interval 4, 3 seeds
    nice -n 10 python bench/pbt.py --seeds 1 --epochs 12 # quicker
    nice -n 10 python bench/pbt.py --methods emews       # one side only
    nice -n 10 python bench/pbt.py --first-seed 4 --seeds 2 --methods emews,ray,fixed

This file is also the objective both sides train (``run(params, ctx)``, the emews objective
contract; the Ray side adapts ``ctx`` to ``ray.tune.report`` / ``get_checkpoint``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RAY_VENV = Path("/tmp/emews-bench-ray")
SPACE = {
    "lr": {"type": "float", "lower": 1.0e-3, "upper": 0.5, "log": True},
    "momentum": {"type": "float", "lower": 0.0, "upper": 0.95},
}

_DATA: Any = None


# --- the objective (both sides) -------------------------------------------------------------------

def setup() -> None:
    """Load and split the digits once per process (75/25, stratified, fixed split)."""
    global _DATA
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    torch.set_num_threads(1)
    x, y = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    as_x = lambda a: torch.tensor(a / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)  # noqa: E731
    _DATA = (as_x(x_train), as_x(x_val), torch.tensor(y_train), torch.tensor(y_val))


def build() -> Any:
    """Two 3x3 convolutions (8 and 16 channels), a 2x2 max-pool, a linear layer to 10 classes."""
    from torch import nn

    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 4 * 4, 10))


def evaluate(model: Any) -> dict[str, float]:
    import torch
    from torch.nn import functional

    _, x_val, _, y_val = _DATA
    with torch.no_grad():
        logits = model(x_val)
        loss = float(functional.cross_entropy(logits, y_val))
        return {"val_loss": loss if loss == loss else 1e9,  # a diverged member (NaN) ranks last
                "accuracy": float((logits.argmax(1) == y_val).float().mean())}


def run(params: Mapping[str, Any], ctx: Any) -> dict[str, float]:
    """Train from ``ctx.restore()`` (a PBT clone: the donor's weights and momentum buffers, this
    member's ``lr``/``momentum``) to ``params["epochs"]``, reporting each epoch with a checkpoint."""
    import torch

    from emews.objectives.digits_torch import train_reporting

    if _DATA is None:
        setup()
    torch.manual_seed(ctx.seed)
    model = build()
    lr, momentum = float(params["lr"]), float(params["momentum"])
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    x_train, _, y_train, _ = _DATA
    return train_reporting(ctx, model, optimizer, x_train, y_train, epochs=int(params["epochs"]), batch=32, lr=lr,
                           momentum=momentum, evaluate=evaluate)


# --- emews ----------------------------------------------------------------------------------------

def population(size: int, seed: int) -> list[dict[str, float]]:
    """The initial members: ``size`` draws of ``lr`` and ``momentum`` from the space."""
    from emews.core.space import Float

    dims = {name: Float(lower=d["lower"], upper=d["upper"], log=d.get("log", False)) for name, d in SPACE.items()}
    rng = random.Random(seed)
    return [{name: dim.sample(rng) for name, dim in dims.items()} for _ in range(size)]


def run_emews(folder: Path, members: list[dict], seed: int, epochs: int, interval: int, pbt: bool = True,
              options: dict | None = None) -> dict:
    """``emews launch`` of the population with ``trial_scheduler: pbt`` (``options`` besides the interval;
    ``pbt`` false: none, the members train with their initial parameters throughout)."""
    import yaml

    points = folder / "population.jsonl"
    points.write_text("".join(json.dumps(m) + "\n" for m in members))
    workflow = {
        "seed": seed,
        "optimizer": {"name": "sweep", "options": {"file": str(points)}},
        "objective": {"module": str(Path(__file__).resolve()), "metric": "val_loss", "direction": "minimize"},
        "space": {**SPACE, "epochs": {"type": "constant", "value": epochs}},
        "budget": {"evaluations": len(members)},
        "task": {"timeout": 1800, "isolation": "process"},
        "trial_scheduler": {"name": "pbt", "options": {"perturbation_interval": interval, **(options or {})}},
        "checkpoints": {"keep_last": 2},
    }
    if not pbt:
        del workflow["trial_scheduler"]
    path = folder / "pbt.yaml"
    path.write_text(yaml.safe_dump(workflow))
    exp = folder / "exp-emews"
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "emews", "launch", str(path), "--workers", str(len(members)),
                           "--exp-dir", str(exp)], capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"emews launch failed:\n{proc.stderr[-4000:]}")
    db = sqlite3.connect(exp / "results.db")
    finals = [row[0] for row in db.execute("SELECT objective FROM results WHERE status = 'ok'")]
    spent = db.execute("SELECT COUNT(*) FROM reports").fetchone()[0]
    exploits = db.execute("SELECT COUNT(*) FROM lineage").fetchone()[0] if pbt else 0
    db.close()
    return {"best": min(finals), "median": statistics.median(finals), "epochs": spent, "exploits": exploits,
            "wall": wall}


# --- Ray Tune (in the child process) --------------------------------------------------------------

class _RayContext:
    """The objective's ``ctx`` on Ray Tune: restore from ``tune.get_checkpoint()``, report, with a checkpoint
    every ``every`` steps and at the last (Ray's PBT examples: checkpoint at the perturbation interval)."""

    def __init__(self, seed: int, counter: str, every: int, last: int) -> None:
        self.seed, self.counter, self.every, self.last = seed, counter, every, last

    def restore(self, default: Any = None) -> Any:
        import torch
        from ray import tune

        checkpoint = tune.get_checkpoint()
        if checkpoint is None:
            return default
        with checkpoint.as_directory() as folder:
            return torch.load(Path(folder) / "state.pt", weights_only=False)

    def report(self, step: int, metrics: dict, checkpoint: Any = None) -> Any:
        import torch
        from ray import tune

        with open(self.counter, "a") as out:  # one line per epoch trained, from every member
            out.write(f"{step}\n")
        if step % self.every and step != self.last:
            tune.report(metrics)
            return argparse.Namespace(stop=False)
        with tempfile.TemporaryDirectory() as folder:
            torch.save((checkpoint, step), Path(folder) / "state.pt")
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(folder))
        return argparse.Namespace(stop=False)


def ray_child(spec: dict) -> None:
    """Run Ray Tune's PBT as ``spec`` says; print one JSON line with the results."""
    import ray
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining
    from ray.tune.search.basic_variant import BasicVariantGenerator

    members, epochs, counter = spec["members"], spec["epochs"], spec["counter"]

    def trainable(config: dict) -> None:
        params = {**config, "epochs": epochs}
        # member i trains with emews' seed of task i (Evaluator._task_seed): the same initial weights and batches
        seed = (spec["seed"] * 1_000_003 + config["member"]) % (2**31 - 1)
        run(params, _RayContext(seed, counter, spec["interval"], epochs))

    space = {"lr": tune.loguniform(SPACE["lr"]["lower"], SPACE["lr"]["upper"]),
             "momentum": tune.uniform(SPACE["momentum"]["lower"], SPACE["momentum"]["upper"])}
    scheduler = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=spec["interval"],
                                        hyperparam_mutations=space)
    random.seed(spec["seed"])  # Ray's PBT draws from the global random module
    ray.init(num_cpus=len(members), include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    tuner = tune.Tuner(
        trainable,
        param_space={**space, "member": 0},
        tune_config=tune.TuneConfig(
            metric="val_loss", mode="min", scheduler=scheduler, num_samples=len(members),
            search_alg=BasicVariantGenerator(points_to_evaluate=[{**m, "member": i} for i, m in enumerate(members)])),
        # every checkpoint kept: with fewer, a donor's may be gone before a clone restores it
        run_config=tune.RunConfig(stop={"training_iteration": epochs}, storage_path=spec["storage"], verbose=0),
    )
    grid = tuner.fit()
    finals = [r.metrics["val_loss"] for r in grid if r.metrics and "val_loss" in r.metrics]
    print(json.dumps({"finals": finals, "errors": [str(r.error)[-300:] for r in grid if r.error]}))
    ray.shutdown()


def ray_python(given: str | None) -> str:
    """The interpreter with Ray Tune: ``given``, else the bench venv (made when missing)."""
    if given:
        return given
    python = RAY_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(RAY_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "ray[tune]"], check=True)
    return str(python)


def run_ray(folder: Path, members: list[dict], seed: int, epochs: int, interval: int, python: str) -> dict:
    counter = folder / "ray-epochs.txt"
    counter.write_text("")
    spec = {"members": members, "seed": seed, "epochs": epochs, "interval": interval, "counter": str(counter),
            "storage": str(folder / "ray")}
    started = time.perf_counter()
    proc = subprocess.run([python, str(Path(__file__).resolve()), "--ray-child", json.dumps(spec)],
                          capture_output=True, text=True, env={**os.environ, "RAY_AIR_NEW_OUTPUT": "0",
                                                               "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1"})
    wall = time.perf_counter() - started
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{\"finals\"")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"ray tune failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    answer = json.loads(lines[-1])
    if answer["errors"]:
        raise SystemExit(f"ray tune: {len(answer['errors'])} trials failed: {answer['errors'][0]}")
    finals = answer["finals"]
    spent = len(counter.read_text().split())
    return {"best": min(finals), "median": statistics.median(finals), "epochs": spent, "wall": wall}


# --- the comparison -------------------------------------------------------------------------------

def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--ray-child":
        ray_child(json.loads(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=4, help="population size (and emews workers)")
    parser.add_argument("--epochs", type=int, default=20, help="epochs each member trains")
    parser.add_argument("--interval", type=int, default=4, help="perturbation interval, in epochs")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=1, help="seeds run: first-seed, first-seed + 1, ...")
    parser.add_argument("--methods", default="emews,ray",
                        help="comma-separated: emews, ray, fixed (emews without PBT: the initial parameters throughout)")
    parser.add_argument("--pbt-options", default="{}", help="JSON: emews pbt's options besides the interval")
    parser.add_argument("--ray-python", default=None, help="an interpreter with ray[tune] (default: the bench venv)")
    args = parser.parse_args()
    chosen = args.methods.split(",")
    unknown = set(chosen) - {"emews", "ray", "fixed"}
    if unknown:
        parser.error(f"--methods: unknown {', '.join(sorted(unknown))}; allowed: emews, ray, fixed")
    try:
        pbt_options = json.loads(args.pbt_options)
    except json.JSONDecodeError as exc:
        parser.error(f"--pbt-options: not JSON ({exc.msg}); allowed: a JSON object of pbt's options")
    if not isinstance(pbt_options, dict):
        parser.error("--pbt-options: allowed: a JSON object of pbt's options, e.g. '{\"perturb_step\": 0.03}'")
    python = ray_python(args.ray_python) if "ray" in chosen else ""
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="emews-pbt-bench-") as tmp:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            members = population(args.members, seed)
            for name in chosen:
                folder = Path(tmp) / f"seed{seed}-{name}"
                folder.mkdir()
                if name in ("emews", "fixed"):
                    result = run_emews(folder, members, seed, args.epochs, args.interval, pbt=name == "emews",
                                       options=pbt_options)
                else:
                    result = run_ray(folder, members, seed, args.epochs, args.interval, python)
                runs.setdefault(name, []).append(result)
                print(f"# seed {seed} {name}: {json.dumps(result)}", flush=True)
    print(f"# digits CNN (torch, CPU), {args.members} members x {args.epochs} epochs, perturbation interval "
          f"{args.interval}, {args.seeds} seeds; medians")
    print(f"{'method':>7} {'best final val_loss':>20} {'median member':>14} {'epochs':>7} {'wall s':>7}")
    for name, results in runs.items():
        print(f"{name:>7} {statistics.median(r['best'] for r in results):>20.4f} "
              f"{statistics.median(r['median'] for r in results):>14.4f} "
              f"{statistics.median(r['epochs'] for r in results):>7.0f} "
              f"{statistics.median(r['wall'] for r in results):>7.1f}")
    if "emews" in runs and "ray" in runs:
        print("# best final val_loss per seed, emews vs ray: " + ", ".join(
            f"{e['best']:.4f} vs {r['best']:.4f}" for e, r in zip(runs["emews"], runs["ray"], strict=True)))


if __name__ == "__main__":
    main()
