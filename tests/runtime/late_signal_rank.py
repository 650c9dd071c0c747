"""Two ranks under mpiexec: rank 1 finishes first (``ignore`` or ``keep`` its stop-signal handler)
and marks its exit from Python; once its SIGTERM handler is gone (the interpreter shut down, it
waits in MPI_Finalize) rank 0 sends it one SIGTERM (see tests/training/test_interrupt_grace.py). Each
rank writes the MPICH segments it maps to ``segments-N`` beside the marker first (with ``keep`` the
SIGTERM kills rank 1 and mpiexec the rest: the test removes the segment the job left)."""

import atexit
import os
import signal
import sys
import time
from pathlib import Path

from mpi4py import MPI

from emews.processes.mpich_shm import mapped_here
from emews.runtime.interrupt import Interrupt

comm = MPI.COMM_WORLD
interrupt = Interrupt().install()
marker = Path(sys.argv[2])
(marker.parent / f"segments-{comm.Get_rank()}").write_text("\n".join(mapped_here()))
pids = comm.allgather(os.getpid())
if comm.Get_rank() == 1:
    if sys.argv[1] == "ignore":
        interrupt.ignore_from_now()
    atexit.register(marker.touch)  # the last Python code before the interpreter shuts down
else:
    def catches_sigterm() -> bool:
        """Whether rank 1 still has a (Python) handler for SIGTERM: /proc's SigCgt mask."""
        for line in Path(f"/proc/{pids[1]}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
        return False

    # events, not time: rank 1 ran its last Python code, then the interpreter dropped its handler
    # (it now waits in MPI_Finalize for this rank); one SIGTERM lands there
    while not marker.exists() or catches_sigterm():
        time.sleep(0.01)
    os.kill(pids[1], signal.SIGTERM)
