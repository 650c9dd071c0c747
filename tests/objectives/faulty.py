"""A test objective that misbehaves on purpose, chosen by ``params["mode"]``."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path

import emews


def setup() -> None:
    marker = os.environ.get("FAULTY_MARKERS")
    if marker:
        Path(marker, f"setup-{os.getpid()}").touch()


def teardown() -> None:
    marker = os.environ.get("FAULTY_MARKERS")
    if marker:
        Path(marker, f"teardown-{os.getpid()}").touch()


def run(params: dict) -> object:
    mode = params.get("mode", "ok")
    x = float(params.get("x", 1.0))
    if mode == "ok":
        print(f"evaluating x={x}")
        return x * x
    if mode == "dict":
        return {"value": x, "accuracy": 0.5, "epochs_run": 3}
    if mode == "raise":
        raise RuntimeError(f"bad parameters x={x}")
    if mode == "nan":
        return float("nan")
    if mode == "segfault":
        ctypes.string_at(0)
    if mode == "oom":
        blocks = []
        while True:
            blocks.append(bytearray(64 * 2**20))
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "abort":  # a native library that says why on stderr, then ends the process
        print("training step 1", flush=True)
        os.write(2, b"OpenBLAS error: Memory allocation still failed\n")
        os._exit(1)
    if mode == "abort-signal":
        os.write(2, b"cuda runtime: fatal error: device lost\n")
        os.kill(os.getpid(), signal.SIGABRT)
    if mode == "hang":
        time.sleep(3600)
    if mode == "context":
        ctx = emews.current_task()
        (ctx.run_dir / "note.txt").write_text(f"{ctx.task_id} {ctx.rank} {ctx.seed}")
        return float(ctx.rank)
    if mode == "gpus":
        ctx = emews.current_task()
        return {"value": float(ctx.rank), "gpu_ids": list(ctx.gpu_ids),
                "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}
    raise ValueError(f"unknown mode {mode}")
