"""The :class:`Site` front object: one resolved site, its scheduler and its launcher."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from emews.core.errors import ConfigError
from emews.core.launched_gpus import Member, wrapped
from emews.core.wording import counted
from emews.site.batch_schedulers import BatchScheduler, scheduler_for
from emews.site.cpu_bind import OPTION, PLACEHOLDER, cpu_bind_args, cpu_bind_text, rank_cores
from emews.site.gpus import gpu_binding
from emews.site.launchers import Launcher, launcher_for
from emews.site.layout import Layout
from emews.site.loader import key_origin, resolve_site
from emews.site.queue_limits import check_queue_limits
from emews.site.schema import LauncherConfig, SiteConfig


class Site:
    """A validated site: renders batch scripts and launcher lines, submits and tracks jobs."""

    def __init__(
        self, config: SiteConfig, source: Path | None = None, origins: Mapping[str, str] | None = None
    ) -> None:
        self.config = config
        self.source = source
        #: where each dotted key was set (:func:`emews.site.loader.resolve_site`); none: ``source``
        self.origins = dict(origins or {})
        self.scheduler: BatchScheduler = scheduler_for(config.scheduler)
        #: each node-local rank's cores where launcher.args bind them ({cpu_bind_list}), else None
        self._slot_cores: list[list[int]] | None = None
        self.launcher: Launcher = launcher_for(self._bound_launcher_config())

    def __repr__(self) -> str:
        return f"Site({self.name!r}, scheduler={self.config.scheduler.type!r}, launcher={self.config.launcher.type!r})"

    def _bound_launcher_config(self) -> LauncherConfig:
        """``launcher`` with ``{cpu_bind_list}`` (or a ``{cpu_bind}`` argument) in its args written out
        for this site's ranks per node."""
        launcher, node = self.config.launcher, self.config.node
        if not any(PLACEHOLDER in arg or OPTION in arg for arg in launcher.args):
            return launcher
        if any(OPTION in arg and arg != OPTION for arg in launcher.args):
            file, key = key_origin(self.origins, "launcher.args", self.source)
            raise ConfigError(
                f"{OPTION} stands for whole launcher arguments, not part of one",
                file=file,
                key=key,
                allowed=f"{OPTION} as an argument of its own, or --cpu-bind=list:{PLACEHOLDER}",
            )
        used = OPTION if OPTION in launcher.args else PLACEHOLDER
        per_node = self.ranks_per_node
        if per_node is None or node.cores is None:
            file, key = key_origin(self.origins, "launcher.args", self.source)
            raise ConfigError(
                f"{used} binds the ranks of a batch job's nodes; this site has no "
                + ("node.cores" if per_node is not None else "ranks per node (scheduler.type: local)"),
                file=file,
                key=key,
                allowed="launcher.args without {cpu_bind_list}, or node.cores on a batch site",
            )
        self._check_node_gpus()  # the cores follow the GPUs: they must fit first
        try:
            self._slot_cores = rank_cores(
                per_node, node.cores, node.sockets, node.reserved_cores, node.gpus, node.gpus_per_worker
            )
        except ConfigError as exc:
            file, key = key_origin(self.origins, self._blamed(["launcher.workers_per_node"]), self.source)
            raise ConfigError(exc.message.replace(PLACEHOLDER, used), file=file, key=key, allowed=exc.allowed) from None
        cores, option = cpu_bind_text(self._slot_cores), cpu_bind_args(self._slot_cores)
        args = [
            out for arg in launcher.args for out in (option if arg == OPTION else [arg.replace(PLACEHOLDER, cores)])
        ]
        return launcher.model_copy(update={"args": args})

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def is_local(self) -> bool:
        return self.config.scheduler.type == "local"

    def team_launch_line(
        self, ranks: tuple[int, ...], hosts: tuple[str, ...], cores: tuple[tuple[int, ...], ...] = ()
    ) -> tuple[str, ...]:
        """``ctx.launch``'s command line for a team of world ``ranks`` on ``hosts`` (``cores``: the
        cores the launcher bound each to, ``()`` where it bound none): this site's launcher over their
        hosts and, where the site binds GPUs or the launcher bound cores, each launched rank given one
        member's share of the team's GPUs and that member's cores (:mod:`emews.core.launched_gpus`)
        (a bound method of a site pickles: rank 0 sends it to the workers in their plan)."""
        node = self.config.node
        line = self.launcher.team_line(
            hosts, local=self.is_local, gpus_per_rank=node.gpus_per_worker, gpu_binding=node.gpu_binding
        )
        members = self._team_members(ranks, hosts, cores)
        if not line or not members or self.launcher.binds_team_gpus:
            return tuple(line)
        return tuple([*line, *wrapped(gpu_binding(self), members, sys.executable)])

    def _team_members(
        self, ranks: tuple[int, ...], hosts: tuple[str, ...], cores: tuple[tuple[int, ...], ...] = ()
    ) -> dict[str, list[Member]]:
        """Host -> the GPU names and cores of the team's members there, in team order (block
        placement: a rank's node-local rank is its index on its node, see :mod:`emews.site.layout`);
        a member's cores are those the launcher bound it to (``cores``), else its slot's where the
        site binds ranks to cores; a host with neither GPUs nor cores for any member is left out."""
        binding = gpu_binding(self)
        per_node = self.ranks_per_node
        members: dict[str, list[Member]] = {}
        for index, (rank, host) in enumerate(zip(ranks, hosts, strict=True)):
            slot = rank if per_node is None else rank % per_node
            bound = list(cores[index]) if index < len(cores) else []
            if not bound and self._slot_cores is not None:
                bound = self._slot_cores[slot]
            members.setdefault(host, []).append(Member(binding.share(slot), bound))
        return {host: found for host, found in members.items() if any(m.gpus or m.cores for m in found)}

    def to_dict(self) -> dict[str, Any]:
        """The resolved site as plain data; ``load_site`` of it written as YAML round-trips."""
        return self.config.model_dump(mode="json")

    # -- sizing -------------------------------------------------------------
    @property
    def nodes(self) -> int:
        return 1 if self.is_local else self.config.scheduler.nodes

    @property
    def ranks_per_node(self) -> int | None:
        """Rank slots per node on a batch site: workers_per_node + 1 (see ``layout``)."""
        return None if self.is_local else self.config.launcher.workers_per_node + 1

    def total_workers(self, workers: int | None = None) -> int:
        """Worker ranks of a run: ``workers`` if given, else as many as the allocation holds
        (every rank slot of every node but the optimizer's; on local, workers_per_node).

        ConfigError when the allocation (or the node's GPUs) cannot hold them.
        """
        total = self._default_workers() if workers is None else workers
        if not isinstance(total, int) or total < 1:
            raise ConfigError(f"need at least one worker, got {workers!r}", key="workers", allowed="an integer >= 1")
        if self.is_local:
            self._check_local_gpus(total)
        else:
            self._check_node_gpus()
            self._check_capacity(total)
        return total

    def _default_workers(self) -> int:
        per_node = self.config.launcher.workers_per_node
        return per_node if self.is_local else self.nodes * (per_node + 1) - 1

    def _check_local_gpus(self, total: int) -> None:
        node = self.config.node
        gpw = node.gpus_per_worker
        if gpw and total * gpw > node.gpus:
            raise ConfigError(
                f"{counted(total, 'worker')} x {counted(gpw, 'GPU')} need {counted(total * gpw, 'GPU')}; "
                f"this machine has {node.gpus}",
                key="workers",
                allowed=f"1..{node.gpus // gpw}",
            )

    def _check_node_gpus(self) -> None:
        """Every rank slot of a node (the optimizer's included) gets its GPUs."""
        launcher, node = self.config.launcher, self.config.node
        slots, gpw = self.ranks_per_node or 1, node.gpus_per_worker
        if gpw and slots * gpw > node.gpus:
            allowed = {
                "launcher.workers_per_node": f"1..{node.gpus // gpw - 1}" if node.gpus // gpw > 1 else None,
                "node.gpus": f"at least {slots * gpw}",
                "node.gpus_per_worker": f"1..{node.gpus // slots}" if node.gpus >= slots else None,
            }
            blamed = self._blamed(list(allowed))
            file, key = key_origin(self.origins, blamed, self.source)
            raise ConfigError(
                f"{slots} rank slots per node ({counted(launcher.workers_per_node, 'worker')} + 1 for the "
                f"optimizer) x {counted(gpw, 'GPU')} need {counted(slots * gpw, 'GPU')}; a node has {node.gpus}",
                file=file,
                key=key,
                allowed=allowed[blamed],
            )

    def _blamed(self, keys: list[str]) -> str:
        """Of the site keys an error is about, the one to name: the last one a ``--set`` item or an
        environment variable gave (the user's latest word), else one the site's own file sets (not
        the site it extends), else the first."""
        origins = {k: key_origin(self.origins, k, self.source)[0] or "" for k in keys}
        given = [k for k in keys if origins[k].startswith(("--set", "$"))]
        own = [k for k in keys if self.source is not None and origins[k] == str(self.source)]
        return given[-1] if given else own[0] if own else keys[0]

    def _check_capacity(self, total: int) -> None:
        slots = self.ranks_per_node or 1
        capacity = self.nodes * slots
        if total + 1 > capacity:
            raise ConfigError(
                f"{counted(total, 'worker')} + 1 optimizer rank do not fit {counted(self.nodes, 'node')} x "
                f"{counted(slots, 'rank slot')}",
                key="workers",
                allowed=f"1..{capacity - 1}, or more scheduler.nodes / launcher.workers_per_node",
            )

    def layout(self, ranks: int) -> Layout:
        """Placement of ``ranks`` ranks (optimizer included) on this site."""
        node = self.config.node
        return Layout(
            nodes=self.nodes,
            ranks=ranks,
            ranks_per_node=self.ranks_per_node,
            cores_per_node=node.cores,
            gpus_per_node=node.gpus,
            gpus_per_rank=node.gpus_per_worker,
            gpu_binding=node.gpu_binding,
        )

    # -- commands -----------------------------------------------------------
    def launch_command(self, ranks: int, command: list[str]) -> list[str]:
        """The launcher line that starts ``ranks`` ranks of ``command``."""
        return self.launcher.line(self.layout(ranks), list(command))

    def environment_vars(self) -> dict[str, str]:
        """The site's ``environment.vars``: what every rank gets in its environment."""
        return dict(self.config.environment.vars)

    def local_command(self, ranks: int, command: list[str]) -> list[str]:
        """The launcher line for a run started here (no batch script).

        With ``environment.setup`` lines, the line runs in the shell that ran them
        (``bash -c 'SETUP\nexec "$@"' emews LINE...``), so ``module load`` or
        ``source venv/bin/activate`` reach the ranks; the line itself is passed as
        arguments, never pasted into the shell text.
        """
        line = self.launch_command(ranks, command)
        setup = self.config.environment.setup
        if not setup:
            return line
        return ["bash", "-c", "\n".join([*setup, 'exec "$@"']), "emews", *line]

    def check_ready(self) -> None:
        """ConfigError for what a batch submission needs and the site lacks, or asks for and its
        queue does not take (``scheduler.limits``)."""
        if self.config.requires_account and not self.config.scheduler.account:
            raise ConfigError(
                f"site {self.name!r} needs an account/project to charge",
                file=self.source,
                key="scheduler.account",
                allowed="--set scheduler.account=PROJECT or $EMEWS_ACCOUNT",
            )
        try:
            check_queue_limits(self.config.scheduler)
        except ConfigError as exc:
            file, key = key_origin(self.origins, exc.key or "scheduler.nodes", self.source)
            raise ConfigError(exc.message, file=file, key=key, allowed=exc.allowed) from None

    def render_batch_script(
        self,
        exp_dir: Path,
        workers: int,
        command: list[str],
        *,
        exit_command: list[str] | None = None,
        watch_command: list[str] | None = None,
        lead: str = "optimizer",
    ) -> str:
        """A complete batch script: directives, environment, the launcher line, run in the background
        so that the batch system's early warning reaches the ranks (:data:`WARNING_FORWARD`); the
        script then ends with the launcher's exit status or, with ``exit_command``, by ``exec``-ing it
        with the launcher's exit status, the job's start time (UNIX seconds) and the stop signal the job
        got (0: none) as its last three arguments; a stop signal (:data:`STOP_FORWARD`) then goes to the
        launcher, and the shell waits for it and the watch before it runs the end step. ``watch_command``: run in the background beside the launcher line, with the
        launcher's pid appended (the job's start, watched). ``lead``: what rank 0 runs (an attached pool's is its distributor), as the
        script's comment names it."""
        self.check_ready()
        exp_dir = Path(exp_dir)
        total = self.total_workers(workers)
        layout = self.layout(total + 1)
        env = self.config.environment
        lines = ["#!/bin/bash", *self.scheduler.directives(layout, exp_dir)]
        lines.append(
            f"# emews site {self.name}: {counted(total, 'worker')} + 1 {lead} = {layout.ranks} ranks on "
            f"{counted(layout.nodes, 'node')}"
        )
        # the vars first, as on local (where every rank's environment holds them): setup may use them
        lines += [f"export {key}={shlex.quote(value)}" for key, value in env.vars.items()]
        lines += env.setup
        lines.append(f"cd {shlex.quote(str(exp_dir))}")
        launcher = shlex.join(self.launch_command(layout.ranks, command))
        ends = exit_command is not None  # the job has an end step: the shell outlives a stop signal to run it
        watch = [] if watch_command is None else [f'{shlex.join(watch_command)} "$emews_launcher" &', "emews_watch=$!"]
        lines += [
            *(["emews_started=$(date +%s)", *STOP_FORWARD] if ends else []),
            *WARNING_FORWARD,
            f"{launcher} &",
            "emews_launcher=$!",
            *([STOP_BEFORE_LAUNCHER] if ends else []),
            *watch,
            'while wait "$emews_launcher"; emews_status=$?; kill -0 "$emews_launcher" 2>/dev/null; do :; done',
            *(['while wait "$emews_watch"; kill -0 "$emews_watch" 2>/dev/null; do :; done'] if watch else []),
            'exit "$emews_status"'
            if exit_command is None
            else f'trap "" TERM INT HUP; exec {shlex.join(exit_command)} "$emews_status" "$emews_started" "$emews_signal"',
        ]
        return "\n".join(lines) + "\n"

    def submit_command(self, script: Path) -> list[str]:
        return self.scheduler.submit_command(Path(script))

    def submit_line(self, script: Path) -> str:
        """The submit command as a shell line (what a dry run shows)."""
        return self.scheduler.submit_line(Path(script))

    def submit(self, script: Path) -> str:
        """Submit a batch script; return the job id (EmewsError with the scheduler's stderr)."""
        self.check_ready()
        return self.scheduler.submit(Path(script))

    def job_state(self, job_id: str) -> str:
        return self.scheduler.job_state(job_id)

    def cancel(self, job_id: str) -> None:
        self.scheduler.cancel(job_id)


#: the job script's lines that keep its shell alive through a stop signal (its default action is to die,
#: and on a cluster that tracks a job's processes in a cgroup every process of the step dies with it: the
#: watch of the job's start before it removed the ranks' marks, the job's end step never run): the signal
#: is passed on to the launcher, and the first one is the end step's last argument (0: none)
STOP_FORWARD = (
    "# scancel, qdel, bkill: SIGTERM (LSF: SIGINT, then SIGTERM) to every process of the job, SIGKILL after the",
    "# batch system's grace (Slurm KillWait, PBS kill_delay, LSF JOB_TERMINATE_INTERVAL): each is passed on to the",
    "# launcher; this shell waits for it and for the watch of the job's start, then runs the job's end (the first named)",
    "emews_signal=0",
    'emews_stop() { [ "$emews_signal" = 0 ] && emews_signal=$1; kill "-$1" "$emews_launcher" 2>/dev/null; }',
    "trap 'emews_stop 15' TERM",
    "trap 'emews_stop 2' INT",
    "trap 'emews_stop 1' HUP",
)

#: a stop signal that came before the launcher's pid was known, passed on once it is
STOP_BEFORE_LAUNCHER = '[ "$emews_signal" = 0 ] || kill "-$emews_signal" "$emews_launcher" 2>/dev/null'

#: the job script's lines that pass the batch system's early warning (Slurm ``--signal=B:USR1@SECONDS``,
#: sent to the batch shell only, whose default action for it is to die) on to the launcher, which
#: hands it to the ranks: the run stops at the walltime margin at once (exit status 3). The launcher
#: runs in the background so that the trap runs while it does, and ``wait`` is repeated until it ended.
WARNING_FORWARD = (
    "# Slurm --signal=B:USR1@SECONDS (the batch shell's early warning): emews pauses its trials and stops now",
    "trap 'kill -USR1 \"$emews_launcher\" 2>/dev/null' USR1",
)


def load_site(ref: str | Path, overrides: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> Site:
    """Load a site by name (``./site-configs/`` first, then built-ins) or by YAML path.

    ``overrides`` are ``--set`` items (``"scheduler.nodes=2"``); ``environ``
    defaults to ``os.environ`` (see :data:`emews.site.loader.ENV_OVERRIDES`).
    """
    config, path, origins = resolve_site(ref, overrides, environ)
    return Site(config, path, origins)
