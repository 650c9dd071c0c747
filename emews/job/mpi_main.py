"""The in-job entry point, ``emews run EXP_DIR``: every rank of the MPI job runs this.

Rank 0 takes (or, with the launch's token, joins) the experiment's lease, reads the
workflow and site, and broadcasts what the workers need (:mod:`emews.job.rank_zero`). Each
rank imports only what its role needs: the workers neither read a file nor load the
configuration layer, so they start at once. A stop signal (walltime, ``scancel``,
Ctrl-C) makes every rank wind down: rank 0 stores what arrived, writes ``summary.json``
and ``results.csv``, and exits with 128 + the signal number; ``emews resume``
continues. The ranks leave together, once rank 0's outputs are written, each with nothing
left unread, so each finalizes MPI and exits on its own (:func:`leave_together`). Exit status otherwise: 0 completed, 1 failed, 2 configuration error.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from pathlib import Path
from typing import Any

from emews.core.cores import cpu_quota, usable_cores
from emews.core.errors import EXIT_CONFIG, EXIT_OK
from emews.job.shm_records import record, records_folder
from emews.job.start_marks import mark_start, marks_folder
from emews.runtime.backoff import Backoff, spin_for
from emews.runtime.interrupt import Interrupt
from emews.runtime.team_comm import TeamWorld
from emews.runtime.transport import MPITransport, drop_unread, quiet_barrier, quiet_bcast
from emews.runtime.worker_rank import WorkerPlan, serve_on_node


def run_experiment(exp_dir: Path, lease_token: str | None = None, *, pool_dir: Path | None = None) -> int:
    """Run this rank's part of the experiment (of one of its pools, with ``pool_dir``: ``emews
    attach``); return the process exit status."""
    marks = marks_folder(exp_dir, lease_token, pool_dir)
    if marks is not None:  # this rank came: the start's watch names those that did not, should it be stuck
        mark_start(marks)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    interrupt = Interrupt().install()
    if comm.Get_size() < 2:
        said = world_of_one(os.environ)
        if said is not None:
            print(said, file=sys.stderr)
        return EXIT_CONFIG
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    segments = records_folder(exp_dir, lease_token, pool_dir)
    if segments is not None and node.Get_rank() == 0:  # removed where the job ends, should it be killed
        record(segments)
    ranks_on_node = node.Get_size()
    node_cores, usable = node_usable_cores(node.allgather((sorted(os.sched_getaffinity(0)), cpu_quota())))
    # no polling when the node has fewer cores than ranks; a CPU quota does not count here: under
    # a 1-core quota, 2 ranks on 2 cores served 30% more no-op tasks polling (docs/benchmarks.md)
    Backoff.spin_default = spin_for(ranks_on_node, node_cores)
    if comm.Get_rank() == 0 and pool_dir is not None:
        from emews.job.pool_lead import lead_pool  # a pool's distributor, fed from the store

        try:
            return lead_pool(exp_dir.absolute(), pool_dir.absolute(), comm, interrupt)
        finally:
            interrupt.ignore_from_now()
            leave_together(comm, patience=LEAVE_PATIENCE)
    if comm.Get_rank() == 0:
        from emews.job.rank_zero import lead  # the optimizer's role: configuration, store, reports

        try:
            return lead(exp_dir.absolute(), comm, lease_token, interrupt, spare_core=usable > ranks_on_node)
        finally:
            interrupt.ignore_from_now()
            leave_together(comm, patience=LEAVE_PATIENCE)
    plan: WorkerPlan | None = quiet_bcast(comm)
    if plan is None:  # rank 0 refused the run and says why
        leave_together(comm)
        return EXIT_CONFIG
    teams = TeamWorld(comm) if plan.gang else None  # collective: rank 0 makes its own
    try:
        serve_on_node(plan, MPITransport(comm), ranks_on_node, node.Get_rank(), interrupt, teams=teams)
    finally:
        interrupt.ignore_from_now()  # a late signal must not kill this rank while rank 0 writes its outputs
        leave_together(comm)
    return EXIT_OK


#: (launcher, its variable of the number of processes it started, that of this process's index)
LAUNCHER_SIZES = (
    ("srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID"),
    ("jsrun", "JSM_NAMESPACE_SIZE", "JSM_NAMESPACE_RANK"),
    ("mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),
)


def world_of_one(environ: Any) -> str | None:
    """What a process in an MPI world of one says (``None``: nothing, another process of the same
    launch says it): a launcher that started several processes the MPI library sees as singletons
    does not speak its process-management interface (srun without ``--mpi=pmi2`` for pip's MPICH)."""
    for launcher, size_var, rank_var in LAUNCHER_SIZES:
        size = environ.get(size_var, "")
        if size.isdigit() and int(size) > 1:
            if environ.get(rank_var, "0") != "0":
                return None
            return (
                f"emews run: {launcher} started {size} processes, but the MPI library sees each as a world "
                f"of 1: the launcher and the MPI library do not connect; nothing ran (give the launcher the "
                f"process-management interface the MPI library was built for in the site's launcher.args, "
                f"e.g. srun --mpi=pmi2 for pip's mpich, --mpi=pmix for PMIx builds; or launch with the "
                f"library's own mpiexec)"
            )
    return "emews run: needs at least 2 MPI ranks (1 optimizer + workers)"


def node_usable_cores(ranks: list[tuple[list[int], float | None]]) -> tuple[int, float]:
    """The cores of a node's ranks, from each rank's (affinity, cgroup CPU quota): how many any of
    them may run on, and how many they may keep busy together, capped by the tightest quota (the
    ranks of a job share its cgroup)."""
    cores = len(set().union(*(set(affinity) for affinity, _ in ranks)))
    quotas = [quota for _, quota in ranks if quota is not None]
    return cores, usable_cores(cores, min(quotas) if quotas else math.inf)


#: seconds rank 0, its outputs written, waits for the workers to leave with it
LEAVE_PATIENCE = 30.0


def leave_together(comm: Any, patience: float | None = None) -> None:
    """Return once every rank is done, rank 0's outputs (store, ``summary.json``, CSV) written,
    with no message left unread for this rank.

    mpiexec (Hydra) SIGKILLs every rank still running as soon as one exits without having
    finalized MPI, and MPICH's MPI_Finalize fails on a message still unmatched: a worker that
    stopped on its own at a stop signal left the optimizer rank's STOP unread, failed to
    finalize, and the job's other ranks, rank 0 among them while it wrote its outputs, were
    killed ("BAD TERMINATION ... Killed (signal 9)"). Workers now read until their STOP
    (:func:`emews.runtime.worker.await_stop`); what is still unread here is dropped
    (:func:`~emews.runtime.transport.drop_unread`, noted in rank 0's log), and no rank leaves
    before rank 0's outputs are written. The wait is a non-blocking barrier polled with
    back-off, so the waiting ranks do not spin. A worker waits for rank 0 however long it
    takes (rank 0 always arrives); rank 0, whose work is saved, gives up after ``patience``
    seconds (a worker that died never arrives).
    """
    quiet_barrier(comm, patience)
    dropped = drop_unread(comm)
    if dropped:  # a worker has no log: this reaches rank 0's emews.log only
        logging.getLogger("emews").info("rank %d: %d unread messages dropped before leaving", comm.Get_rank(), dropped)
