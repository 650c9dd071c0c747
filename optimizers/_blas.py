"""One BLAS thread while an optimizer fits its model on the optimizer rank.

The rank shares its node with workers, and the matrices of a surrogate are small: OpenBLAS'
threads, sized to the node, spin against the workers for the cores. Measured on this 2-core
machine with both cores busy: a 200-point Cholesky took 41 ms with two BLAS threads, 0.9 ms
with one (a 300-point one in ``bayes``: 0.8 s instead of 20 ms).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator

from threadpoolctl import ThreadpoolController


@functools.cache
def _controller() -> ThreadpoolController:
    """The process's thread pools, found once (a lookup reads ``/proc/self/maps``: 5 ms)."""
    return ThreadpoolController()


#: the limit is the process's: blocks on two threads would restore the sizes out of order
_ONE_AT_A_TIME = threading.RLock()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS limited to one thread inside the block (the pools' own sizes restored after); one
    block at a time in the process (a model thread and the optimizer's take turns)."""
    with _ONE_AT_A_TIME, _controller().limit(limits=1, user_api="blas"):
        yield
