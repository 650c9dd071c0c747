"""A ``task.ranks`` function for tests: points with ``x > 0.5`` take 2 ranks, ``x < 0.1`` far too many."""


def ranks(point: dict) -> int:
    return 99 if point["x"] < 0.1 else 2 if point["x"] > 0.5 else 1
