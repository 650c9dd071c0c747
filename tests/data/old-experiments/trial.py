"""A training objective whose checkpoint names its trial: restoring another trial's checkpoint, or
one of another step than the restore says, fails the task."""


def run(params, ctx):
    saved, start = ctx.restore(default=(None, 0))
    if saved is not None and (saved["params"] != dict(params) or saved["step"] != start):
        raise RuntimeError(f"task {ctx.task_id} at step {start} restored {saved}")
    loss = 10.0 / (1 + params["lr"] * 100)
    for step in range(start, int(params["epochs"])):
        loss *= 0.9 - params["lr"]
        checkpoint = {"params": dict(params), "task": ctx.task_id, "step": step + 1}
        if ctx.report(step=step + 1, metrics={"val_loss": loss}, checkpoint=checkpoint).stop:
            break
    return {"val_loss": loss}
