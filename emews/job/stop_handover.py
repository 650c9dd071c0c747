"""A stop signal that came before the job could take it, handed to the job's rank 0 once it can.

``emews launch`` passes a SIGTERM or SIGINT on to ``mpiexec``; Hydra passes it on to the ranks
through its proxies, and drops one that comes before its proxies run (the signal reaches
``mpiexec`` and goes nowhere: the job then ran to its end). A stop that comes before the job's rank
0 has joined the experiment's lease is therefore also sent to rank 0 itself, once it has joined:
by then every rank on its node has its stop handler (they meet in a collective first), and rank 0
stops the run as it stops it at the walltime margin. A stop that comes later goes the usual way
only; rank 0 takes a repeated signal as the one it got.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

from emews.config.lease import Owner

#: how often the lease is read while a stop waits for rank 0 to join it (only then)
POLL_SECONDS = 0.05


class StopHandover:
    """Hands an early stop to the job's rank 0 (``rank_zero``: where it runs once it has joined the
    lease, else ``None``); :meth:`close` once the job has ended."""

    def __init__(self, rank_zero: Callable[[], Owner | None]) -> None:
        self._rank_zero = rank_zero
        self._ended = threading.Event()
        self._thread: threading.Thread | None = None

    def stop(self, signum: int) -> None:
        """A stop signal was forwarded to the job: if rank 0 has not joined yet, send it there once it has."""
        if self._thread is not None or self._rank_zero() is not None:
            return  # the job runs: mpiexec's proxies pass the signal on
        self._thread = threading.Thread(target=self._hand_over, args=(signum,), name="emews-stop-handover", daemon=True)
        self._thread.start()

    def _hand_over(self, signum: int) -> None:
        while not self._ended.wait(POLL_SECONDS):
            owner = self._rank_zero()
            if owner is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):  # it ended meanwhile
                    os.kill(owner.pid, signum)
                return

    def close(self) -> None:
        """The job ended: stop waiting for it."""
        self._ended.set()
        if self._thread is not None:
            self._thread.join()
