"""The early-stopping benchmark's training problems, one objective for all (``bench/es_problems.py``).

Each point carries its problem in the constant ``problem``; ``run(params, ctx)`` trains it and
reports after every step (``ctx.report``), stopping when told. Three shapes of learning curve:

``mlp``  a PyTorch MLP (one hidden layer) on scikit-learn's digits, as ``objectives/digits_torch.py``
         (same split and scaling); a step is an epoch of SGD
``cnn``  a small PyTorch CNN on the digits as 8x8 images (two 3x3 convolutions, a 2x2 max-pool,
         a linear layer); a step is an epoch
``hgb``  scikit-learn's HistGradientBoostingClassifier on the bundled breast-cancer table, grown
         with ``warm_start``: a step is ``ROUNDS`` more boosting rounds; the metric is the
         validation log-loss (boosting overfits: the curves cross and turn up)

Every problem reports ``val_loss`` (minimized). ``SPACES`` holds each problem's search space as
workflow YAML (``space:``), ``STEPS`` the steps a trial trains at most.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


#: boosting rounds per report of ``hgb``
ROUNDS = 6

STEPS = {"mlp": 27, "cnn": 9, "hgb": 18}

SPACES: dict[str, dict[str, Any]] = {
    "mlp": {
        "lr": {"type": "float", "lower": 1.0e-3, "upper": 0.5, "log": True},
        "momentum": {"type": "float", "lower": 0.0, "upper": 0.95},
        "units": {"type": "ordered", "values": [16, 32, 64, 128]},
        "batch": {"type": "ordered", "values": [32, 64, 128]},
    },
    "cnn": {
        "lr": {"type": "float", "lower": 1.0e-3, "upper": 0.5, "log": True},
        "momentum": {"type": "float", "lower": 0.0, "upper": 0.95},
        "channels": {"type": "ordered", "values": [4, 8, 12]},
        "batch": {"type": "ordered", "values": [32, 64, 128]},
    },
    "hgb": {
        "learning_rate": {"type": "float", "lower": 0.01, "upper": 1.0, "log": True},
        "max_leaf_nodes": {"type": "int", "lower": 2, "upper": 64, "log": True},
        "min_samples_leaf": {"type": "int", "lower": 2, "upper": 60, "log": True},
        "l2_regularization": {"type": "float", "lower": 1.0e-4, "upper": 10.0, "log": True},
    },
}

_DIGITS: Any = None
_TABLE: Any = None


def run(params: Mapping[str, Any], ctx: Any) -> dict[str, float]:
    """Train ``params["problem"]`` for up to ``params["epochs"]`` steps, reporting each (an emews
    objective: the trial's seed is ``ctx.seed``)."""
    metrics: dict[str, float] = {}
    for step, metrics in enumerate(steps(params, ctx.seed), start=1):
        if ctx.report(step=step, metrics=metrics).stop:
            break
    return metrics


def steps(params: Mapping[str, Any], seed: int) -> Iterator[dict[str, float]]:
    """The metrics after each step of training ``params`` (``epochs`` steps at most) with ``seed``.
    Deterministic for a seed, also when several run interleaved in one process (each has its own
    random generator), so a curve can be replayed and extended later."""
    problem = params.get("problem")
    if problem not in STEPS:
        raise ValueError(f"problem must be one of {', '.join(STEPS)}, got {problem!r}")
    return {"mlp": _mlp, "cnn": _cnn, "hgb": _hgb}[problem](params, seed)


def _digits() -> Any:
    """The digits as tensors: (flat standardized, images in [0, 1]) x (train, val), the split of
    ``objectives/digits_torch.py``."""
    global _DIGITS
    if _DIGITS is None:
        import torch
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
        from sklearn.preprocessing import StandardScaler

        torch.set_num_threads(1)
        x, y = load_digits(return_X_y=True)
        x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
        scaler = StandardScaler().fit(x_train)
        flat = lambda a: torch.tensor(scaler.transform(a), dtype=torch.float32)  # noqa: E731
        image = lambda a: torch.tensor(a / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)  # noqa: E731
        _DIGITS = {"flat": (flat(x_train), flat(x_val)), "image": (image(x_train), image(x_val)),
                   "y": (torch.tensor(y_train), torch.tensor(y_val))}
    return _DIGITS


def _train(model: Any, params: Mapping[str, Any], seed: int, inputs: str) -> Iterator[dict[str, float]]:
    """SGD on the digits' ``inputs`` (flat | image), an epoch per step."""
    import torch
    from torch.nn import functional

    from emews.objectives.digits_torch import train_epoch

    data = _digits()
    (x_train, x_val), (y_train, y_val) = data[inputs], data["y"]
    order_rng = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=float(params["lr"]), momentum=float(params["momentum"]))
    batch = int(params["batch"])
    for _ in range(int(params["epochs"])):
        train_epoch(model, optimizer, x_train, y_train, batch, order_rng)
        model.eval()
        with torch.no_grad():  # not across the yield: grad mode is global, other curves train meanwhile
            logits = model(x_val)
            metrics = {"val_loss": float(functional.cross_entropy(logits, y_val)),
                       "accuracy": float((logits.argmax(1) == y_val).float().mean())}
        yield metrics


def _mlp(params: Mapping[str, Any], seed: int) -> Iterator[dict[str, float]]:
    import torch
    from torch import nn

    _digits()
    torch.manual_seed(seed)  # the initial weights (built before any other generator runs on)
    units = int(params["units"])
    model = nn.Sequential(nn.Linear(64, units), nn.ReLU(), nn.Linear(units, 10))
    return _train(model, params, seed, "flat")


def _cnn(params: Mapping[str, Any], seed: int) -> Iterator[dict[str, float]]:
    import torch
    from torch import nn

    _digits()
    torch.manual_seed(seed)
    c = int(params["channels"])
    model = nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(2 * c * 16, 10))
    return _train(model, params, seed, "image")


def _table() -> Any:
    global _TABLE
    if _TABLE is None:
        from sklearn.datasets import load_breast_cancer
        from sklearn.model_selection import train_test_split

        from threadpoolctl import threadpool_limits

        threadpool_limits(1)  # OpenMP threads spinning on a shared core cost more than they give
        x, y = load_breast_cancer(return_X_y=True)
        _TABLE = train_test_split(x, y, test_size=0.3, random_state=0, stratify=y)
    return _TABLE


def _hgb(params: Mapping[str, Any], seed: int) -> Iterator[dict[str, float]]:
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import log_loss

    x_train, x_val, y_train, y_val = _table()
    model = HistGradientBoostingClassifier(
        learning_rate=float(params["learning_rate"]), max_leaf_nodes=int(params["max_leaf_nodes"]),
        min_samples_leaf=int(params["min_samples_leaf"]), l2_regularization=float(params["l2_regularization"]),
        max_iter=ROUNDS, early_stopping=False, warm_start=True, random_state=seed % (2**31 - 1))
    for step in range(1, int(params["epochs"]) + 1):
        model.set_params(max_iter=step * ROUNDS)
        model.fit(x_train, y_train)
        proba = model.predict_proba(x_val)
        yield {"val_loss": float(log_loss(y_val, proba)), "accuracy": float((proba.argmax(1) == y_val).mean())}
