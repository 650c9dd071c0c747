"""A real PyTorch (CPU) training objective: an MLP on scikit-learn's bundled digits, epoch by epoch.

Reports the validation loss and accuracy after every epoch with a checkpoint of the model and
optimizer state, and stops when the trial scheduler says so (ASHA, Hyperband, median, PBT).
``ctx.restore()`` continues a retried, resumed or PBT-cloned trial from its checkpoint; a PBT
clone keeps the cloned weights and momentum and trains on with its own (explored) ``lr``.

Parameters: ``lr`` (SGD learning rate), ``momentum``, ``units``, ``layers``, ``batch``,
``weight_decay``, ``epochs`` (the most epochs a trial may train). Needs ``pip install
emews-mpi[torch]``. Returns ``val_loss`` (the metric) and ``accuracy``.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any, Callable, Mapping

if find_spec("torch") is None:  # said at import (emews check), not in every task's setup; torch loads there
    raise ModuleNotFoundError(
        "No module named 'torch': the asha, pbt and ddp workflows train with PyTorch: pip install 'emews-mpi[torch]'",
        name="torch",
    )

_DATA: Any = None


def setup() -> None:
    """Load and split the data once per process (they ship with scikit-learn)."""
    global _DATA
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    torch.set_num_threads(1)  # one core per worker rank; more threads slow down shared nodes
    x, y = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    scaler = StandardScaler().fit(x_train)
    as_x = lambda a: torch.tensor(scaler.transform(a), dtype=torch.float32)  # noqa: E731
    _DATA = (as_x(x_train), as_x(x_val), torch.tensor(y_train), torch.tensor(y_val))


def build(params: Mapping[str, Any]) -> Any:
    """The model for ``params`` (64 inputs, 10 classes)."""
    from torch import nn

    units, layers = int(params.get("units", 64)), int(params.get("layers", 1))
    parts: list[Any] = []
    width = 64
    for _ in range(layers):
        parts += [nn.Linear(width, units), nn.ReLU()]
        width = units
    return nn.Sequential(*parts, nn.Linear(width, 10))


def make_optimizer(model: Any, params: Mapping[str, Any]) -> Any:
    import torch

    return torch.optim.SGD(model.parameters(), lr=float(params.get("lr", 0.05)),
                           momentum=float(params.get("momentum", 0.9)),
                           weight_decay=float(params.get("weight_decay", 0.0)))


def evaluate(model: Any) -> dict[str, float]:
    """Validation loss and accuracy of ``model``."""
    import torch
    from torch.nn import functional

    _, x_val, _, y_val = _DATA
    with torch.no_grad():
        logits = model(x_val)
        return {"val_loss": float(functional.cross_entropy(logits, y_val)),
                "accuracy": float((logits.argmax(1) == y_val).float().mean())}


def train_epoch(model: Any, optimizer: Any, x: Any, y: Any, batch: int, generator: Any = None) -> None:
    """One epoch of minibatch training on cross-entropy, the rows shuffled (by ``generator``, else
    torch's global one); the model left in training mode."""
    import torch
    from torch.nn import functional

    model.train()
    order = torch.randperm(len(x), generator=generator)
    for i in range(0, len(order), batch):
        index = order[i:i + batch]
        optimizer.zero_grad()
        functional.cross_entropy(model(x[index]), y[index]).backward()
        optimizer.step()


def train_reporting(ctx: Any, model: Any, optimizer: Any, x: Any, y: Any, *, epochs: int, batch: int, lr: float,
                    momentum: float, evaluate: Callable[[Any], dict[str, float]] = evaluate) -> dict[str, float]:
    """Train ``model`` from ``ctx.restore()`` (a PBT clone: the donor's weights and momentum
    buffers, its own ``lr`` and ``momentum``) to ``epochs`` epochs of :func:`train_epoch`,
    reporting ``evaluate(model)`` after each with a checkpoint of model and optimizer, until the
    trial scheduler says stop; the last metrics."""
    saved, start = ctx.restore(default=(None, 0))
    if saved is not None:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        for group in optimizer.param_groups:  # a PBT clone trains on with its own parameters
            group["lr"], group["momentum"] = lr, momentum
    metrics = evaluate(model)
    for epoch in range(start, epochs):
        train_epoch(model, optimizer, x, y, batch)
        model.eval()
        metrics = evaluate(model)
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        if ctx.report(step=epoch + 1, metrics=metrics, checkpoint=state).stop:
            break
    return metrics


def run(params: Mapping[str, Any], ctx: Any) -> dict[str, float]:
    import torch

    if _DATA is None:
        setup()
    torch.manual_seed(ctx.seed)
    model = build(params)
    optimizer = make_optimizer(model, params)
    x_train, _, y_train, _ = _DATA
    return train_reporting(ctx, model, optimizer, x_train, y_train, epochs=int(params.get("epochs", 27)),
                           batch=int(params.get("batch", 32)), lr=float(params.get("lr", 0.05)),
                           momentum=float(params.get("momentum", 0.9)))
