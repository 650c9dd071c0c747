"""The digits MLP (``digits_torch.py``) trained data-parallel with PyTorch DistributedDataParallel.

Run it with ``task.ranks: 2`` (``workflows/ddp.yaml``): every member of the task's team runs
``run``; ``ctx.process_group()`` joins them (gloo on CPUs; the site's NCCL, RCCL or XCCL on GPUs:
``node.distributed_backend``) and each member trains on its share of every global batch. The
global batch (``batch``) and the data order (``seed``, default the task's) do not depend on the
team's size, and each member's loss is scaled so that DDP's averaged gradient is the gradient of
the whole batch: a 2-rank run follows the 1-rank trajectory up to floating-point rounding.
Team rank 0's ``val_loss`` and ``accuracy`` are the result. Needs ``pip install emews-mpi[torch]``.
"""

from __future__ import annotations

from typing import Any, Mapping

try:
    from emews.objectives import digits_torch as base
except ImportError:  # loaded by file path beside digits_torch.py
    import digits_torch as base  # type: ignore[no-redef]


def run(params: Mapping[str, Any], ctx: Any) -> dict[str, float]:
    import torch
    import torch.distributed as dist
    from torch.nn import functional
    from torch.nn.parallel import DistributedDataParallel

    if base._DATA is None:
        base.setup()
    seed = int(params.get("seed", ctx.seed))
    torch.manual_seed(seed)
    ctx.process_group()
    world, me = dist.get_world_size(), dist.get_rank()
    model = DistributedDataParallel(base.build(params))
    optimizer = base.make_optimizer(model, params)
    x_train, _, y_train, _ = base._DATA
    batch = int(params.get("batch", 32))
    order_seed = torch.Generator().manual_seed(seed)
    metrics = base.evaluate(model.module)
    for epoch in range(int(params.get("epochs", 10))):
        model.train()
        order = torch.randperm(len(x_train), generator=order_seed)
        for start in range(0, len(order), batch):
            index = order[start:start + batch]
            if len(index) < world:  # every member needs a share of the batch
                continue
            mine = index[me::world]
            optimizer.zero_grad()
            # sum over my share, scaled so that DDP's mean over members is the whole batch's mean
            loss = functional.cross_entropy(model(x_train[mine]), y_train[mine], reduction="sum")
            (loss * world / len(index)).backward()
            optimizer.step()
        model.eval()
        metrics = base.evaluate(model.module)
        if ctx.report(step=epoch + 1, metrics=metrics).stop:  # team rank 0 reports; all obey
            break
    return metrics
