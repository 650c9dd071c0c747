"""Two ranks under mpiexec: rank 1 finishes first (``ignore`` or ``keep`` its stop-signal handler)
and marks its exit from Python; rank 0 then sends it SIGTERM over and over while it waits in
MPI_Finalize (see tests/training/test_interrupt_grace.py), until it is gone or 5 s have passed."""

import atexit
import os
import signal
import sys
import time
from pathlib import Path

from mpi4py import MPI

from emews.runtime.interrupt import Interrupt

comm = MPI.COMM_WORLD
interrupt = Interrupt().install()
marker = Path(sys.argv[2])
pids = comm.allgather(os.getpid())
if comm.Get_rank() == 1:
    if sys.argv[1] == "ignore":
        interrupt.ignore_from_now()
    atexit.register(marker.touch)  # the last Python code before the interpreter shuts down
else:
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    until = time.monotonic() + 5
    while time.monotonic() < until and Path(f"/proc/{pids[1]}").exists():
        try:
            os.kill(pids[1], signal.SIGTERM)
        except ProcessLookupError:
            break
        time.sleep(0.01)
