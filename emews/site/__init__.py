"""Sites: where and how an experiment runs.

A site file (``site-configs/NAME.yaml``; ``./site-configs/`` shadows the built-ins;
a path to a ``.yaml`` works too) has four parts, Parsl style — data only, the
behaviour lives in one small class per scheduler and per launcher::

    extends: summit              # optional base site (name or relative .yaml path), deep-merged
    requires_account: true       # refuse to render/submit without scheduler.account
    scheduler:                   # get nodes
      type: lsf | slurm | pbs | local
      account: ABC123            # -P / --account / -A
      queue: batch               # -q / --partition / -q
      walltime: "01:30:00"       # HH:MM:SS or HH:MM (unquoted 1:30:00 is fine too)
      nodes: 2
      job_name: emews
      directives: ["-alloc_flags gpumps"]   # raw lines; the #BSUB/#SBATCH/#PBS prefix is added
    launcher:                    # start ranks
      type: jsrun | srun | mpiexec | aprun | none
      command: "{python_bin}/mpiexec"       # optional; {python_bin} = dir of sys.executable (a venv's base's, where only it has the program)
      workers_per_node: 5        # each node offers workers_per_node + 1 rank slots
      args: "--depth=8 --cpu-bind depth"    # raw string or list, after the template flags;
                                           # {cpu_bind_list}: cores per local rank (emews.site.cpu_bind);
                                           # {cpu_bind}: the whole PALS option for them
    node:
      cores: 42
      sockets: 2                 # equal sockets over the cores, in order (default 1)
      reserved_cores: [0, 52]    # left to the system
      gpus: 6
      gpus_per_worker: 1
      gpu_binding: launcher | env          # launcher flags (jsrun -g, srun --gpus-per-task)
      gpu_env: CUDA_VISIBLE_DEVICES | ROCR_VISIBLE_DEVICES | HIP_VISIBLE_DEVICES | ZE_AFFINITY_MASK
      gpu_ids: ["0.0", "0.1"]              # optional names written to gpu_env
    environment:
      setup: ["module load cuda"]          # shell lines before the launcher
      vars: {OMP_NUM_THREADS: "1"}         # exported

Precedence: ``--set key=value`` > environment variables > YAML > defaults.  The
environment variables are ``EMEWS_ACCOUNT`` (scheduler.account), ``EMEWS_QUEUE``
(scheduler.queue), ``EMEWS_WALLTIME`` (scheduler.walltime), ``EMEWS_NODES``
(scheduler.nodes), ``EMEWS_WORKERS_PER_NODE`` (launcher.workers_per_node) and
``EMEWS_GPUS_PER_WORKER`` (node.gpus_per_worker).  Unknown keys, bad choices and
malformed values raise :class:`emews.core.errors.ConfigError` naming the file (or the
``--set``/``$VAR`` that set it), the dotted key and what is allowed.

Only ``scheduler.directives`` (one line each), ``environment.setup`` and
``launcher.args`` are raw.  Account, queue and job name must be one plain word,
``environment.vars`` names shell identifiers (values are quoted), and the
experiment directory must fit the scheduler's output directive (quoted for Slurm,
refused with whitespace, quotes, ``\\`` or ``#`` for PBS and LSF, never a control
character): every value that reaches ``job.sh`` is checked or quoted.

Rank layout and GPU slots: see :mod:`emews.site.layout`.

Public API::

    from emews.site import load_site, Site, bind_gpus, local_rank
    site = load_site("summit", overrides=["scheduler.account=ABC123"])
    from emews.site.jobs import submit_experiment, job_status, cancel_experiment
"""

from emews.site.gpus import LOCAL_RANK_VARS, bind_gpus, local_rank
from emews.site.loader import ENV_OVERRIDES, available_sites, builtin_site_dir
from emews.site.site import Site, load_site

__all__ = [
    "ENV_OVERRIDES",
    "LOCAL_RANK_VARS",
    "Site",
    "available_sites",
    "bind_gpus",
    "builtin_site_dir",
    "load_site",
    "local_rank",
]
