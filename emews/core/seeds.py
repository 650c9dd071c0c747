"""Seeds: any whole number given as a seed made fit for a library, the seed of a resumed run's draws,
and global generators seeded for one call of a library that takes no seed."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager

#: numpy's and Nevergrad's seeds are below 2**32; R's ``set.seed`` takes a 32-bit signed integer
NUMPY_SEEDS, R_SEEDS = 2**32, 2**31 - 1


def fitted_seed(seed: int | None, modulus: int = NUMPY_SEEDS) -> int | None:
    """``seed`` (any whole number: negative, 2**64) as one below ``modulus``; ``None`` stays ``None``."""
    return None if seed is None else int(seed) % modulus


def task_seed(seed: int, task_id: int) -> int:
    """Task ``task_id``'s ``ctx.seed`` in a run whose workflow seed is ``seed`` (the same in every run)."""
    return (seed * 1_000_003 + task_id) % R_SEEDS


def resumed_seed(seed: int | None, earlier_points: int) -> int:
    """The seed of a seeded run's draws once ``earlier_points`` evaluations were proposed by earlier
    runs: a resumed run draws on rather than proposing the first run's points again (32 bits)."""
    return random.Random(f"{seed}:{earlier_points}").getrandbits(32)


@contextmanager
def global_rngs_seeded(seed: int | None) -> Iterator[None]:
    """Within the block, Python's, numpy's and (when imported) torch's global generators start from
    ``seed``; after it they are back where they were. For libraries that draw from the global
    generators and take no seed (Xopt's generators); ``None``: the block runs as it is."""
    if seed is None:
        yield
        return
    import numpy as np

    python_state, numpy_state = random.getstate(), np.random.get_state()
    torch = sys.modules.get("torch")
    torch_state = torch.random.get_rng_state() if torch is not None else None
    random.seed(seed)
    np.random.seed(fitted_seed(seed))
    if torch is not None:
        torch.random.manual_seed(fitted_seed(seed))
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        if torch is not None and torch_state is not None:
            torch.random.set_rng_state(torch_state)
