"""Seeds: any whole number given as a seed made fit for a library, and the seed of a resumed run's draws."""

from __future__ import annotations

import random

#: numpy's and Nevergrad's seeds are below 2**32; R's ``set.seed`` takes a 32-bit signed integer
NUMPY_SEEDS, R_SEEDS = 2**32, 2**31 - 1


def fitted_seed(seed: int | None, modulus: int = NUMPY_SEEDS) -> int | None:
    """``seed`` (any whole number: negative, 2**64) as one below ``modulus``; ``None`` stays ``None``."""
    return None if seed is None else int(seed) % modulus


def resumed_seed(seed: int | None, earlier_points: int) -> int:
    """The seed of a seeded run's draws once ``earlier_points`` evaluations were proposed by earlier
    runs: a resumed run draws on rather than proposing the first run's points again (32 bits)."""
    return random.Random(f"{seed}:{earlier_points}").getrandbits(32)
