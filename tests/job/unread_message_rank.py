"""Two ranks under mpiexec: rank 1 sends rank 0 a message that rank 0 never reads, then both leave,
with :func:`emews.job.mpi_main.leave_together` (``drop``: what is unread is dropped) or a bare
barrier (``keep``), and finalize MPI; each rank writes how that went to ``MARKER_DIR/rank-N``
(``finalized``, or the error), and the MPICH segments it maps to ``MARKER_DIR/segments-N`` first (with
``keep`` Hydra kills rank 1: the test removes the segment the job left). See tests/job/test_stop_signal.py."""

import sys
from pathlib import Path

from mpi4py import MPI

from emews.job.mpi_main import leave_together
from emews.processes.mpich_shm import mapped_here
from emews.runtime.transport import quiet_barrier

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
drop, markers = sys.argv[1] == "drop", Path(sys.argv[2])
(markers / f"segments-{rank}").write_text("\n".join(mapped_here()))
if rank == 1:
    comm.send("never read", dest=0, tag=5)  # small: sent eagerly, complete at once
(leave_together if drop else quiet_barrier)(comm)
try:
    MPI.Finalize()
    said = "finalized"
except MPI.Exception as exc:
    said = exc.Get_error_string()
(markers / f"rank-{rank}").write_text(said)
