"""GPU checks (issue 27 item 6): binding per worker, an NCCL group, checkpoint overhead of a ~1 GB model.

Three real ``emews launch`` runs on the local site (mpiexec next to this Python), each worker
bound to its GPU by the site's ``node.gpus`` / ``node.gpus_per_worker`` (``CUDA_VISIBLE_DEVICES``):

(a) binding: one task per worker prints the worker's rank, ``CUDA_VISIBLE_DEVICES`` and the
    name and UUID of the GPU it sees; every worker should see a different GPU.
(b) NCCL: one task of ``task.ranks`` = the GPU count joins ``ctx.process_group()`` with
    ``node.distributed_backend: nccl``, checks an ``all_reduce`` of the ranks' numbers and times
    one of 256 MB (one GPU: a group of one; NCCL wants a GPU per rank).
(c) checkpoints: one worker trains a stack of ``--layers`` square ``Linear`` layers (default 16 of
    4096: 268M fp32 parameters, 1.07 GB) for ``--epochs`` epochs of about ``--epoch-seconds`` each,
    reporting every epoch with a checkpoint of the ``state_dict``: ``none`` (no checkpoint),
    ``gpu`` (the CUDA tensors themselves: pinned host copies on a side stream, written in the
    background) and ``host`` (what objectives did before: ``.cpu()`` copies, pickled in the
    call). Modes alternate, ``--repeats`` times; the overhead is the median loop time's excess
    over ``none``'s, as a share of an epoch (the target: ``gpu`` <= 5 %).

    python bench/gpu_check.py          # on a machine with GPUs: about 4 minutes, progress printed
    python bench/gpu_check.py --cpu    # without one: a small CPU smoke run of the same script
    BENCH_DIR=/local/nvme python bench/gpu_check.py   # where the runs and checkpoints go (default: $TMPDIR)

Without a GPU (and without ``--cpu``) it says so in one line and exits 0. This file is also
the objectives the runs load (``binding``, ``nccl``, ``train``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

MODES = ("none", "gpu", "host")


def _device(params: dict) -> str:
    return "cpu" if params["cpu"] else "cuda"


def _write(params: dict, name: str, record: dict) -> None:
    """The task's record, under its final name only when complete (the script reads it as it lands)."""
    tmp = Path(params["out"]) / f".{name}.tmp"
    tmp.write_text(json.dumps(record))
    tmp.replace(tmp.with_name(f"{name}.json"))


def _rank() -> str:
    for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"):
        if var in os.environ:
            return os.environ[var]
    return "?"


def binding(params: dict, ctx: Any) -> dict:
    """What GPU this worker sees."""
    import torch

    record: dict[str, Any] = {"rank": _rank(), "pid": os.getpid(),
                              "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)"),
                              "visible": torch.cuda.device_count() if torch.cuda.is_available() else 0}
    if record["visible"]:
        props = torch.cuda.get_device_properties(0)
        record.update(name=props.name, uuid=str(getattr(props, "uuid", "?")),
                      memory_gib=round(props.total_memory / 2**30, 1))
    time.sleep(float(params["hold"]))  # every worker takes one task
    _write(params, f"binding-{params['job']}", record)
    return {"value": float(record["visible"])}


def nccl(params: dict, ctx: Any) -> dict:
    """An all_reduce over the task's team: the sum of the ranks' numbers, then 256 MB timed."""
    import torch
    import torch.distributed as dist

    device = torch.device("cpu") if params["cpu"] else torch.device("cuda", 0)  # the worker's own GPU
    if device.type == "cuda":
        torch.cuda.set_device(device)  # before the group: NCCL's communicator binds the current device
    ctx.process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.full((1,), float(rank + 1), device=device)
    dist.all_reduce(value)
    big = torch.ones(int(params["mb"]) * 2**20 // 4, device=device)
    dist.all_reduce(big)  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(5):
        dist.all_reduce(big)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - started) / 5
    _write(params, f"nccl-{rank}", {"rank": rank, "world": world, "backend": dist.get_backend(),
                                    "sum": float(value.item()), "expected": world * (world + 1) / 2,
                                    "device": str(device), "mb": params["mb"],
                                    "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)"),
                                    "allreduce_ms": 1000 * seconds, "algbw_gbs": big.numel() * 4 / seconds / 1e9})
    return {"value": float(value.item())}


def _model(params: dict) -> Any:
    import torch

    torch.manual_seed(0)
    width, layers = int(params["width"]), int(params["layers"])
    device = _device(params)  # initialised there: 268M parameters initialised on a CPU take seconds
    return torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False, device=device) for _ in range(layers)])


def _steps(model: Any, optimizer: Any, batch: Any, steps: int) -> Any:
    loss = None
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = model(batch).pow(2).mean()
        loss.backward()
        optimizer.step()
    return loss


def train(params: dict, ctx: Any) -> dict:
    """``epochs`` timed epochs (after one untimed), each reported with the mode's checkpoint."""
    import torch

    mode, epochs, steps = params["mode"], int(params["epochs"]), int(params["steps"])
    model = _model(params)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    batch = torch.randn(int(params["batch"]), int(params["width"]), device=_device(params))

    def checkpoint() -> Any:
        if mode == "none":
            return None
        state = model.state_dict()
        return state if mode == "gpu" else {k: v.detach().cpu() for k, v in state.items()}

    def sync() -> None:
        if not params["cpu"]:
            torch.cuda.synchronize()

    in_report = 0.0
    for epoch in range(epochs + 1):  # epoch 0: warm-up (kernels chosen, host buffers pinned), untimed
        if epoch == 1:
            sync()
            start = time.perf_counter()
        loss = _steps(model, optimizer, batch, steps)
        metrics = {"loss": float(loss.item())}  # the epoch's metric: the host waits for the GPU here
        started = time.perf_counter()
        ctx.report(step=epoch + 1, metrics=metrics, checkpoint=checkpoint())
        if epoch:
            in_report += time.perf_counter() - started
    sync()
    loop = time.perf_counter() - start
    record = {"mode": mode, "rep": params["rep"], "loop": loop, "epochs": epochs, "in_report": in_report,
              "params": sum(p.numel() for p in model.parameters())}
    _write(params, f"train-{params['job']}", record)
    return {"value": loop}


def _launch(folder: Path, name: str, function: str, points: list[dict], constants: dict, workers: int,
            site: list[str], task: dict, extra: dict | None = None,
            progress: Callable[[dict], None] | None = None) -> list[dict]:
    """One ``emews launch`` of ``points`` (a sweep over ``job``); the records the tasks wrote."""
    out = folder / f"out-{name}"
    out.mkdir()
    space = {"job": {"type": "ordered", "values": list(range(len(points)))}}
    space.update({k: {"type": "constant", "value": v} for k, v in {**constants, "out": str(out)}.items()})
    workflow = {"optimizer": {"name": "sweep"},
                "objective": {"module": str(Path(__file__).resolve()), "function": function},
                "space": space, "budget": {"evaluations": len(points)}, "task": task, **(extra or {})}
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(workflow))
    # every point's own values travel in the job number: the objective looks them up
    (out / "points.json").write_text(json.dumps(points))
    exp = folder / f"exp-{name}"
    command = [sys.executable, "-m", "emews", "launch", str(folder / f"{name}.yaml"), "--workers", str(workers),
               "--exp-dir", str(exp), *[arg for item in site for arg in ("--set", item)]]
    log = folder / f"{name}.log"
    shown: set[Path] = set()
    with open(log, "w") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
        while True:  # progress: each task's record as it lands
            try:
                code = proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
            for path in sorted(set(out.glob(f"{name}*.json")) - shown):
                shown.add(path)
                if progress is not None:
                    progress(json.loads(path.read_text()))
            if code is not None:
                break
    shutil.rmtree(exp, ignore_errors=True)  # checkpoints of a 1 GB model fill a disk fast
    if code != 0:
        raise SystemExit(f"gpu_check: {name}: emews launch failed (exit {code}):\n{log.read_text()[-4000:]}")
    return [json.loads(p.read_text()) for p in sorted(out.glob("*.json")) if p.name != "points.json"]


def _point(params: dict) -> dict:
    """The task's own values (``mode``, ``rep``) from the sweep's job number."""
    points = json.loads((Path(params["out"]) / "points.json").read_text())
    return {**params, **points[int(params["job"])]}


def _train_point(params: dict, ctx: Any) -> dict:
    return train(_point(params), ctx)


def _site(gpus: int, backend: str | None = None) -> list[str]:
    sets = [f"site.node.gpus={gpus}", "site.node.gpus_per_worker=1"] if gpus else []
    return sets + ([f"site.node.distributed_backend={backend}"] if backend else [])


def check_binding(folder: Path, workers: int, gpus: int, cpu: bool) -> None:
    print(f"(a) GPU binding: {workers} workers, node.gpus {gpus}" + (", node.gpus_per_worker 1" if gpus else ""),
          flush=True)
    records = _launch(folder, "binding", "binding", [{}] * workers, {"hold": 1.0 if cpu else 3.0, "cpu": cpu}, workers,
                      _site(gpus),
                      {"isolation": "inline"})
    for r in sorted(records, key=lambda r: str(r["rank"])):
        print(f"    rank {r['rank']:>3}  CUDA_VISIBLE_DEVICES={r['CUDA_VISIBLE_DEVICES']:<8} sees {r['visible']}  "
              f"{r.get('name', '-')}  {r.get('uuid', '-')}", flush=True)
    uuids = [r.get("uuid") for r in records if r.get("uuid")]
    ranks = {r["rank"] for r in records}
    verdict = "ok" if len(set(uuids)) == len(uuids) == len(ranks) == workers else "CHECK"
    verdict = verdict if gpus else "no GPU to bind (CPU smoke run)"
    print(f"    {len(ranks)} workers answered, {len(set(uuids))} distinct GPUs: {verdict}", flush=True)


def check_nccl(folder: Path, gpus: int, cpu: bool) -> None:
    ranks = max(gpus, 1) if not cpu else 2
    backend = "gloo" if cpu else "nccl"
    print(f"(b) process group: one task of {ranks} rank(s), backend {backend}"
          + (" (one GPU: a group of one)" if ranks == 1 else ""), flush=True)
    records = _launch(folder, "nccl", "nccl", [{}], {"cpu": cpu, "mb": 8 if cpu else 256}, ranks,
                      _site(0 if cpu else gpus, backend), {"isolation": "process", "ranks": ranks, "timeout": 300})
    for r in sorted(records, key=lambda r: r["rank"]):
        print(f"    rank {r['rank']}/{r['world']} {r['backend']} on {r['device']} "
              f"(CUDA_VISIBLE_DEVICES={r['CUDA_VISIBLE_DEVICES']}): all_reduce sum {r['sum']:g} "
              f"(expected {r['expected']:g}); {r['mb']} MB all_reduce {r['allreduce_ms']:.1f} ms, "
              f"{r['algbw_gbs']:.1f} GB/s", flush=True)
    ok = len(records) == ranks and all(r["sum"] == r["expected"] for r in records)
    print(f"    {'ok' if ok else 'CHECK'}", flush=True)


def calibrate(args: argparse.Namespace) -> int:
    """Steps per epoch for ``--epoch-seconds`` (timed here, then the GPU's memory is given back)."""
    import torch

    params = {"width": args.width, "layers": args.layers, "cpu": args.cpu}
    model = _model(params)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    batch = torch.randn(args.batch, args.width, device=_device(params))
    _steps(model, optimizer, batch, 2).item()
    started = time.perf_counter()
    _steps(model, optimizer, batch, 3).item()
    per_step = (time.perf_counter() - started) / 3
    del model, optimizer, batch
    if not args.cpu:
        torch.cuda.empty_cache()
    return max(1, round(args.epoch_seconds / per_step))


def disk_seconds(folder: Path, size: int) -> float:
    """Seconds to write ``size`` bytes and fsync them where the checkpoints go (what a write costs)."""
    block = os.urandom(1 << 20) * 16
    started = time.perf_counter()
    with open(folder / "probe", "wb") as fh:
        for _ in range(max(1, size // len(block))):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
    seconds = time.perf_counter() - started
    (folder / "probe").unlink()
    return seconds


def check_checkpoints(folder: Path, args: argparse.Namespace, gpus: int) -> None:
    steps = calibrate(args)
    params = args.layers * args.width * args.width
    print(f"(c) checkpoint overhead: {args.layers} x Linear({args.width}) = {params / 1e6:.0f}M fp32 parameters "
          f"({params * 4 / 1e9:.2f} GB), {args.epochs} epochs of {steps} steps (~{args.epoch_seconds:g} s), "
          f"a checkpoint every epoch; modes {', '.join(MODES)} alternating, {args.repeats} repeats", flush=True)
    print(f"    the checkpoint's size written and fsynced in {folder}: {disk_seconds(folder, params * 4):.2f} s "
          "(BENCH_DIR picks the folder)", flush=True)
    points = [{"mode": mode, "rep": rep} for rep in range(args.repeats) for mode in MODES]
    constants = {"cpu": args.cpu, "width": args.width, "layers": args.layers, "batch": args.batch,
                 "epochs": args.epochs, "steps": steps}
    def progress(r: dict) -> None:
        print(f"    [{len(points)} tasks] {r['mode']:>4} repeat {r['rep']}: {r['loop']:.2f} s for {r['epochs']} epochs, "
              f"{1000 * r['in_report'] / r['epochs']:.1f} ms/epoch in report", flush=True)

    records = _launch(folder, "train", "_train_point", points, constants, 1, _site(min(gpus, 1)),
                      {"isolation": "inline"}, {"checkpoints": {"background": True, "keep_last": 1}}, progress)
    base = statistics.median(r["loop"] for r in records if r["mode"] == "none")
    epoch = base / args.epochs
    print(f"    {'mode':>5} {'loop s (median)':>16} {'per epoch s':>12} {'in report ms/epoch':>19} "
          f"{'overhead % of an epoch':>23}", flush=True)
    overhead = {}
    for mode in MODES:
        mine = [r for r in records if r["mode"] == mode]
        loop = statistics.median(r["loop"] for r in mine)
        in_report = 1000 * statistics.median(r["in_report"] for r in mine) / args.epochs
        overhead[mode] = 100 * (loop - base) / base
        print(f"    {mode:>5} {loop:>16.2f} {loop / args.epochs:>12.3f} {in_report:>19.1f} {overhead[mode]:>22.1f}%",
              flush=True)
    verdict = "meets" if overhead["gpu"] <= 5 else "misses"
    if args.cpu:
        print("    (CPU smoke run: no device tensors, so `gpu` takes the plain path; the numbers mean nothing)")
    print(f"    overhead: gpu snapshots {overhead['gpu']:.1f}% of a {epoch:.2f} s epoch ({verdict} the <= 5% target); "
          f"host copies: {overhead['host']:.1f}%", flush=True)


def gpu_count() -> tuple[int, str]:
    try:
        import torch
    except ImportError:
        return 0, "torch is not installed"
    if not torch.cuda.is_available():
        return 0, f"torch {torch.__version__}: torch.cuda.is_available() is False"
    return torch.cuda.device_count(), ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cpu", action="store_true", help="a small CPU smoke run (no GPU needed)")
    parser.add_argument("--workers", type=int, default=0, help="workers for (a) (default: one per GPU)")
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--epoch-seconds", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=("binding", "nccl", "checkpoints"), action="append")
    args = parser.parse_args()
    gpus, why = gpu_count()
    if not gpus and not args.cpu:
        print(f"gpu_check: no GPU here ({why}); nothing measured (--cpu runs a small CPU smoke version)")
        return
    if args.cpu:
        gpus = 0
        args.width, args.layers, args.batch = min(args.width, 256), min(args.layers, 4), min(args.batch, 64)
        args.epoch_seconds, args.repeats, args.epochs = min(args.epoch_seconds, 0.3), min(args.repeats, 1), 2
    workers = args.workers or max(gpus, 2 if args.cpu else 1)
    started = time.monotonic()
    print(f"# gpu_check: {gpus} GPU(s){' (CPU smoke run)' if args.cpu else ''}; {time.strftime('%Y-%m-%d %H:%M:%S')}; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="emews-gpu-check-", dir=os.environ.get("BENCH_DIR")) as tmp:
        only = set(args.only or ("binding", "nccl", "checkpoints"))
        if "binding" in only:
            check_binding(Path(tmp), workers, gpus, args.cpu)
        if "nccl" in only:
            check_nccl(Path(tmp), gpus, args.cpu)
        if "checkpoints" in only:
            check_checkpoints(Path(tmp), args, gpus)
    print(f"# done in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
