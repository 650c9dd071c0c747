"""A ``task.ranks`` function for tests: points with ``x > 0.5`` take 2 ranks, ``x < 0.1`` far too many."""


def ranks(point: dict) -> int:
    return 99 if point["x"] < 0.1 else 2 if point["x"] > 0.5 else 1


def odd_types(point: dict) -> object:
    """``"2"`` for ``k == 5`` and ``True`` for ``k == 6`` (no whole numbers: those tasks fail), ``2.0`` for
    ``k == 7`` (counts as 2), else ``k``."""
    return {5: "2", 6: True, 7: 2.0}.get(point["k"], point["k"])
