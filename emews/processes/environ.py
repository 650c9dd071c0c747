"""What a child process inherits: the environment without the MPI process manager's variables."""

from __future__ import annotations

from collections.abc import Mapping

from emews.core.gpu_binding import LOCAL_RANK_VARS

#: environment variables of the MPI process manager that a rank inherits: a process the rank starts
#: must not see them (it would join the job's process manager as that rank)
PROCESS_MANAGER_PREFIXES = ("PMI_", "PMIX_", "HYDRA_")
#: ... and what a program launched from inside the job (``ctx.launch``) must not see either: Open MPI
#: refuses a nested launch under OMPI_*, PALS and Slurm's per-step values would override its own, and
#: a launcher sets only its own node-local rank variable: another one left over (MPICH's, under srun)
#: would be read first (:func:`emews.core.gpu_binding.local_rank`)
LAUNCH_SCRUBBED_PREFIXES = (
    *PROCESS_MANAGER_PREFIXES,
    *LOCAL_RANK_VARS,
    "MPI_LOCALNRANKS",
    "OMPI_",
    "PALS_",
    "SLURM_STEP_",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_TASKS_PER_NODE",
    "SLURM_CPU_BIND",
)


def scrubbed_environ(
    environ: Mapping[str, str], prefixes: tuple[str, ...] = LAUNCH_SCRUBBED_PREFIXES
) -> dict[str, str]:
    """``environ`` without the variables whose names start with one of ``prefixes``."""
    return {k: v for k, v in environ.items() if not k.startswith(prefixes)}
