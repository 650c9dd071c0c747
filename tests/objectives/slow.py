"""A test objective that takes a few milliseconds."""

import time


def run(params: dict) -> float:
    time.sleep(0.02)
    return float(params["x"]) ** 2
