"""The chaos harness's objective (``tests/chaos``): ``objectives/digits_torch.py``'s PyTorch MLP on
scikit-learn's digits, one report per epoch, whose checkpoint names the trial, the parameters and
the step that wrote it. A restore of any other checkpoint (another trial's, other parameters, a
step that is not the one restored) is logged as ``foreign`` and fails the task.

Knobs (environment, so that they reach isolated children):

``CHAOS_LOG``   append one JSON line per event (start, report, reported, end, foreign) to this file
``CHAOS_BLOB``  add this many bytes to each checkpoint (its write lasts long enough to be caught)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from emews.objectives import digits_torch


def _log(**event: Any) -> None:
    path = os.environ.get("CHAOS_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps(event) + "\n")


def run(params: Mapping[str, Any], ctx: Any) -> dict[str, float]:
    import torch

    if digits_torch._DATA is None:
        digits_torch.setup()
    torch.manual_seed(ctx.seed)
    mine = {key: params[key] for key in sorted(params)}
    model = digits_torch.build(params)
    optimizer = digits_torch.make_optimizer(model, params)
    saved, start = ctx.restore(default=(None, 0))
    _log(
        event="start",
        task=ctx.task_id,
        attempt=ctx.attempt,
        pid=os.getpid(),
        restored=start,
        from_trial=None if saved is None else saved["trial"],
    )
    if saved is not None:
        if (saved["trial"], saved["params"], saved["step"]) != (ctx.task_id, mine, start):
            _log(
                event="foreign",
                task=ctx.task_id,
                restored=start,
                saved_trial=saved["trial"],
                saved_params=saved["params"],
                saved_step=saved["step"],
                params=mine,
            )
            raise RuntimeError(
                f"trial {ctx.task_id} restored trial {saved['trial']}'s checkpoint "
                f"(step {saved['step']}, {saved['params']})"
            )
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
    x, _, y, _ = digits_torch._DATA
    metrics = digits_torch.evaluate(model)
    blob = bytes(int(os.environ.get("CHAOS_BLOB", "0")))
    for epoch in range(start, int(params["epochs"])):
        digits_torch.train_epoch(model, optimizer, x, y, int(params.get("batch", 64)))
        model.eval()
        metrics = digits_torch.evaluate(model)
        state = {
            "trial": ctx.task_id,
            "params": mine,
            "step": epoch + 1,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "blob": blob,
        }
        _log(event="report", task=ctx.task_id, step=epoch + 1)
        stop = ctx.report(step=epoch + 1, metrics=metrics, checkpoint=state).stop
        _log(event="reported", task=ctx.task_id, step=epoch + 1)
        if stop:
            break
    _log(event="end", task=ctx.task_id, attempt=ctx.attempt, loss=metrics["val_loss"])
    return metrics
