"""The ``emews`` command: launch, check, results, status, report, cancel, clean-shm, and the in-job ``run``.

Exit status: 0 when a run completes (failed tasks included), 2 for
configuration errors (and an experiment another run owns), 3 when the run stopped
itself at the walltime margin and 128 + N when stopped by signal N (130: Ctrl-C,
143: SIGTERM; ``emews resume`` continues both), 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from emews.core.errors import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, ConfigError, EmewsError, did_you_mean
from emews.core.wording import counted

#: ``--set KEY=VALUE``: the key's first part says which file it changes, never a guess. These are the
#: site's (``scheduler`` is its batch scheduler); the workflow's are its sections (``trial_scheduler``
#: is its trial scheduler). ``workflow.KEY`` and ``site.KEY`` say it outright, and must for the keys
#: both files have (``name``, ``description``).
SITE_KEYS = ("scheduler", "launcher", "node", "environment", "extends", "requires_account", "name", "description")
SET_HELP = (
    "override a key: the workflow's (budget.evaluations=50, trial_scheduler.options.max_t=9) or the "
    "site's (scheduler.account=ABC, the batch scheduler; also launcher.*, node.*, environment.*); "
    "prefix workflow. or site. to say which file outright (needed for name and description)"
)

#: ``emews clean-shm``'s default ``--older-than``: a segment being made is mapped a moment later
CLEAN_SHM_AGE = 60.0


class _Parser(argparse.ArgumentParser):
    """argparse that keeps its subcommands' parsers (:attr:`commands`) and long options, so that an
    unknown option or command is named with the one probably meant (:func:`_unknown`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.commands: dict[str, _Parser] = {}
        self.long_options: list[str] = []  # before argparse adds --help
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        if action.help != argparse.SUPPRESS:  # run's --lease, --pool, --job-exit are emews' own
            self.long_options += [o for o in action.option_strings if o.startswith("--")]
        return action

    def error(self, message: str) -> NoReturn:
        """argparse's own mistakes (a missing or malformed value, a missing argument) as one line,
        exit 2, as every other mistake, not its usage and a second line."""
        allowed = ", ".join(self.commands) if self.commands else None
        raise ConfigError(f"{self.prog}: {message} (see {self.prog} --help)", allowed=allowed)

    def add_command(self, sub: Any, name: str, **kwargs: Any) -> _Parser:
        """``sub.add_parser(name, ...)``, kept in :attr:`commands`."""
        parser: _Parser = sub.add_parser(name, **kwargs)
        self.commands[name] = parser
        return parser


def _unknown(
    parser: _Parser, argv: Sequence[str], args: argparse.Namespace | None, extra: Sequence[str]
) -> ConfigError:
    """The one-line error for a command (``args`` is ``None``) or an argument its parser does not know:
    the closest command or option, and what is allowed."""
    if args is None:
        command = next(word for word in argv if not word.startswith("-"))
        return ConfigError(
            f"unknown command {command!r}{did_you_mean(command, parser.commands)}", allowed=", ".join(parser.commands)
        )
    sub = parser.commands[args.command]
    word = extra[0]
    name = word.partition("=")[0]
    said = (
        f"emews {args.command} has no option {name!r}{did_you_mean(name, sub.long_options)}"
        if word.startswith("-")
        else f"emews {args.command} takes no argument {word!r}"
    )
    return ConfigError(said, allowed=", ".join(sub.long_options))


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line's arguments; a ConfigError naming an unknown command or option, or argparse's
    own error (a missing or malformed value: :meth:`_Parser.error`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    first = next((word for word in argv if not word.startswith("-")), None)
    if first is not None and first not in parser.commands and not {"-h", "--help"} & set(argv):
        raise _unknown(parser, argv, None, [])
    args, extra = parser.parse_known_args(argv)
    if extra:
        raise _unknown(parser, argv, args, extra)
    return args


def _parser() -> _Parser:
    parser = _Parser(prog="emews", description="Model exploration on HPC over MPI.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    launch = parser.add_command(sub, "launch", help="run a workflow on a site (now on local, as a batch job elsewhere)")
    launch.add_argument("workflow", help="built-in workflow name or path to a workflow .yaml")
    launch.add_argument("--site", default="local", help="built-in site name or path to a site .yaml (default: local)")
    launch.add_argument("--workers", type=int, help="number of worker ranks")
    launch.add_argument("--exp-dir", type=Path, help="experiment directory (default: experiments/NAME-NNN)")
    launch.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)
    launch.add_argument("--dry-run", action="store_true", help="print the batch script and submit command only")
    launch.add_argument(
        "--pools",
        type=int,
        metavar="K",
        help="run the tasks through the PostgreSQL store's shared queue, on K jobs of --workers each "
        "(more join with emews attach; docs/postgres.md)",
    )

    check = parser.add_command(sub, "check", help="validate a workflow (and optionally a site) without running")
    check.add_argument("workflow")
    check.add_argument("--site", help="also validate this site")
    check.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)
    check.add_argument(
        "--try",
        dest="try_one",
        action="store_true",
        help="also ask the optimizer for its first point and evaluate it once here (a scratch "
        "directory, the task's timeout): exit 0 when it succeeds, 1 when it fails",
    )
    check.add_argument(
        "--task",
        type=int,
        metavar="ID",
        help="with --try and an experiment's workflow.yaml: evaluate its task ID again as it ran "
        "(its point and ctx.seed, the id column of results.csv) instead of the first point",
    )

    resume = parser.add_command(
        sub,
        "resume",
        help="continue a stopped experiment: the optimizer gets the earlier "
        "results, interrupted tasks run again, the budget is the total",
    )
    resume.add_argument("exp_dir", type=Path)
    resume.add_argument("--workers", type=int, help="number of worker ranks (default: as before)")
    resume.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change the budget or walltime before resuming, e.g. budget.evaluations=400, or the "
        "next allocation: scheduler.walltime, scheduler.queue, scheduler.account",
    )

    results = parser.add_command(sub, "results", help="write results.csv of an experiment and print its summary")
    results.add_argument("exp_dir", type=Path)
    results.add_argument(
        "--by-point",
        action="store_true",
        help="also results_by_point.csv: mean, std, min, max and count of each point's replicates",
    )
    results.add_argument(
        "--format",
        choices=("emews", "deephyper"),
        default="emews",
        help="deephyper: results_deephyper.csv as DeepHyper's analysis tools read it "
        "(objective maximized, failures as F_<status>, m:timestamp_* columns)",
    )

    status = parser.add_command(sub, "status", help="scheduler state and progress of an experiment")
    status.add_argument("exp_dir", type=Path)
    status.add_argument("--watch", action="store_true", help="refresh until the run is over (Ctrl-C stops)")
    status.add_argument(
        "--interval",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="seconds between refreshes with --watch (default 2)",
    )

    report = parser.add_command(sub, "report", help="plots and tables of an experiment: one HTML file, PNGs or a PDF")
    report.add_argument(
        "exp_dir",
        type=Path,
        nargs="+",
        help="the experiment; several: one page comparing their best-so-far curves (./comparison.html)",
    )
    report.add_argument(
        "--out", type=Path, help="output file (default: DIR/report.html, DIR/report-plots for png, DIR/report.pdf)"
    )
    report.add_argument(
        "--format", choices=("html", "png", "pdf"), help="default: named by --out's suffix (.pdf, .html), else html"
    )
    report.add_argument("--top", type=int, default=10, help="rows of the top evaluations table (default 10)")

    checkpoints = parser.add_command(
        sub, "checkpoints", help="list the durable checkpoints of an experiment (trial, step, metric, size, path)"
    )
    checkpoints.add_argument("exp_dir", type=Path)
    checkpoints.add_argument(
        "--best", type=int, metavar="K", help="only the best checkpoint of each of the best K trials, best first"
    )
    checkpoints.add_argument(
        "--per-checkpoint",
        action="store_true",
        help="with --best: the best K checkpoints, several of which may be one trial's",
    )

    cancel = parser.add_command(
        sub,
        "cancel",
        help="cancel an experiment's batch job and its attached pools' jobs (or, with --queued, its queued tasks)",
    )
    cancel.add_argument("exp_dir", type=Path)
    cancel.add_argument(
        "--queued",
        action="store_true",
        help="cancel the tasks of a pooled experiment that no pool has claimed (while no optimizer runs)",
    )

    attach = parser.add_command(
        sub,
        "attach",
        help="add a pool of workers to an experiment launched with --pools (now on local, as a batch job elsewhere)",
    )
    attach.add_argument("exp_dir", type=Path)
    attach.add_argument("--site", help="built-in site name or path to a site .yaml (default: the experiment's)")
    attach.add_argument(
        "--workers", type=int, help="number of worker ranks (default: the site's, else the experiment's)"
    )
    attach.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="change a key of the site")
    attach.add_argument("--dry-run", action="store_true", help="print the batch script and submit command only")

    serve = parser.add_command(
        sub, "serve", help="run the optimizer of an experiment launched with --pools here, without workers"
    )
    serve.add_argument("exp_dir", type=Path)

    clean_shm = parser.add_command(
        sub,
        "clean-shm",
        help="remove the MPICH shared-memory segments (/dev/shm/mpich_shm_*) your killed jobs left on this node",
    )
    clean_shm.add_argument("--dry-run", action="store_true", help="list them only")
    clean_shm.add_argument(
        "--older-than",
        type=float,
        default=CLEAN_SHM_AGE,
        metavar="SECONDS",
        help=f"only those unchanged for so long (default {CLEAN_SHM_AGE:g}: a job starting now makes its own)",
    )

    run = parser.add_command(sub, "run", help="(inside the MPI job) run this rank's part of an experiment")
    run.add_argument("exp_dir", type=Path)
    run.add_argument("--lease", help=argparse.SUPPRESS)  # the token of the launch that started the job
    run.add_argument("--pool", type=Path, help=argparse.SUPPRESS)  # an attached pool's folder (emews attach)
    # job.sh's last line: the launcher's exit status, the job's start time and the stop signal it got (0: none;
    # absent from a job.sh written before it) -> exit with the run's status
    run.add_argument("--job-exit", nargs="+", type=float, metavar="STATUS SINCE [SIGNAL]", help=argparse.SUPPRESS)
    # job.sh's watch of the job's start, beside the launcher line: the job's ranks and the launcher's pid
    run.add_argument("--watch-start", nargs=2, type=int, metavar=("RANKS", "PID"), help=argparse.SUPPRESS)
    return parser


def _split_overrides(items: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """``--set`` items: the workflow's (key -> value) and the site's (``KEY=VALUE``), each by the first
    part of its key (see :data:`SITE_KEYS`), the key as typed (a ``workflow.``/``site.`` prefix is the
    loader's to read, and its errors name the key so)."""
    from emews.config.yamlio import parse_override

    workflow: dict[str, Any] = {}
    site: list[str] = []
    for item in items:
        key, value = parse_override(item)
        if _set_target(key) == "site":
            site.append(f"{key}={item.partition('=')[2]}")
        else:
            workflow[key] = value
    return workflow, site


def _set_target(key: str) -> str:
    """``"workflow"`` or ``"site"``: the file a ``--set`` key changes. A ConfigError when its first part
    names neither file's section, or both without a ``workflow.``/``site.`` prefix."""
    from emews.config.workflow_schema import WorkflowModel

    head, _, rest = key.partition(".")
    if head in ("workflow", "site") and rest:
        return head
    workflow_sections = tuple(WorkflowModel.model_fields)
    in_workflow, in_site = head in workflow_sections, head in SITE_KEYS
    if in_workflow and in_site:
        raise ConfigError(
            "a key of both the workflow and the site",
            file="--set",
            key=head,
            allowed=f"workflow.{key} or site.{key}",
        )
    if head == "scheduler" and rest.split(".")[0] in ("name", "options"):
        raise ConfigError(
            "scheduler is the site's batch scheduler (account, queue, walltime, ...)",
            file="--set",
            key=key,
            allowed=f"trial_{key} for the workflow's trial scheduler",
        )
    if not (in_workflow or in_site):
        raise ConfigError(
            "no section of the workflow or the site" + did_you_mean(head, (*workflow_sections, *SITE_KEYS)),
            file="--set",
            key=head,
            allowed="the workflow's "
            + ", ".join(workflow_sections)
            + "; the site's "
            + ", ".join(SITE_KEYS)
            + "; or workflow.KEY, site.KEY",
        )
    return "workflow" if in_workflow else "site"


def cmd_launch(args: argparse.Namespace) -> int:
    from emews.config.workflow import load_workflow
    from emews.job.launching import launch
    from emews.site import load_site

    wf_overrides, site_overrides = _split_overrides(args.set)
    workflow = load_workflow(args.workflow, wf_overrides)
    site = load_site(args.site, site_overrides)
    return launch(
        workflow, site, workers=args.workers, exp_dir=args.exp_dir, dry_run=args.dry_run, pools=args.pools
    ).status


def cmd_serve(args: argparse.Namespace) -> int:
    from emews.job.serving import serve

    return serve(args.exp_dir)


def cmd_attach(args: argparse.Namespace) -> int:
    from emews.job.attaching import attach

    return attach(args.exp_dir, site=args.site, workers=args.workers, site_overrides=args.set, dry_run=args.dry_run)


def cmd_resume(args: argparse.Namespace) -> int:
    from emews.job.launching import resume

    wf_overrides, site_overrides = _split_overrides(args.set)
    return resume(
        args.exp_dir, workers=args.workers, workflow_overrides=wf_overrides, site_overrides=site_overrides
    ).status


def cmd_check(args: argparse.Namespace) -> int:
    from emews.config.workflow import load_workflow

    wf_overrides, site_overrides = _split_overrides(args.set)
    if site_overrides and not args.site:  # else checked against no site, and said ok
        raise ConfigError(
            "a key of the site, and emews check reads a site only with --site",
            file="--set",
            key=site_overrides[0].partition("=")[0],
            allowed="--site SITE with it (emews check WORKFLOW --site SITE --set KEY=VALUE), or a key of the workflow",
        )
    if args.task is not None and not args.try_one:
        raise ConfigError("--task ID needs --try (it evaluates that task again here)", key="--task")
    workflow = load_workflow(args.workflow, wf_overrides)
    rerun = None
    if args.task is not None:
        from emews.job.stored_task import stored_task

        rerun = stored_task(workflow, args.task)  # before any "ok": a wrong id is one line, exit 2
    site = None
    if args.site:  # checked as launch checks it (an account, the batch script), before any "ok"
        from emews.site import load_site
        from emews.site.jobs import job_command

        site = load_site(args.site, site_overrides)
        if not site.is_local:  # its default size (launch may be given --workers; check is not)
            where = (Path("experiments") / workflow.name).absolute()
            workflow.check_task_size(site.total_workers(None))  # --workers only asks for fewer
            site.render_batch_script(where, site.total_workers(None), job_command(where))
    from emews.config.planned_budget import fit_to_plan, plan_text

    cut = fit_to_plan(workflow)  # as launch cuts it: what will run
    for line in ([cut] if cut else []) + workflow.warnings():
        print(f"emews: warning: {line}", file=sys.stderr)
    print(
        f"{workflow.label}: ok — optimizer {workflow.model.optimizer.name}, "
        f"{plan_text(workflow)}, budget {workflow.model.budget.describe()}"
    )
    if site is not None:
        print(f"site {site.name}: ok")
    if args.try_one:
        from emews.job.first_try import try_workflow

        outcome = try_workflow(workflow, site.environment_vars() if site is not None else None, rerun)
        print("\n".join(outcome.lines()))
        return outcome.exit_status
    return EXIT_OK


def cmd_results(args: argparse.Namespace) -> int:
    from emews.config.experiment import CSV_FILE, read_workflow
    from emews.core.direction import Direction
    from emews.output.by_point import BY_POINT_FILE, write_by_point_csv
    from emews.output.deephyper_csv import DEEPHYPER_FILE, write_deephyper_csv
    from emews.output.export import export_csv, open_store, refuse_lost_store, summary_text, totals

    exp_dir = args.exp_dir.absolute()
    workflow = read_workflow(exp_dir)
    names, objective = list(workflow.get("space", {})), workflow.get("objective") or {}
    store = open_store(exp_dir)  # the one opening: what is said, the CSV and the points all come from it
    if store is None:
        refuse_lost_store(exp_dir)
        print(summary_text(totals(None), None))
        print(f"no results stored yet: {exp_dir / CSV_FILE} not written")
        if args.by_point:
            print(f"no results stored yet: {exp_dir / BY_POINT_FILE} not written")
        if args.format == "deephyper":
            print(f"no results stored yet: {exp_dir / DEEPHYPER_FILE} not written")
    else:
        try:
            store.verify()
            path, rows = export_csv(exp_dir, names, store, with_stored_keys=True)
            ensemble = {
                "replicates": workflow.get("replicates", 1),
                "direction": Direction.of(objective.get("direction")),
            }
            print(summary_text(totals(store, **ensemble), None))
            print(f"wrote {counted(rows, 'row')} to {path}")
            if args.by_point:
                path, rows = write_by_point_csv(exp_dir, store)
                print(f"wrote {counted(rows, 'point')} to {path}")
            if args.format == "deephyper":
                path, rows = write_deephyper_csv(exp_dir, store=store)
                print(f"wrote {counted(rows, 'row')} in DeepHyper's format to {path}")
        finally:
            store.close()
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from emews.config.experiment import require_experiment
    from emews.reporting import status

    if not args.interval > 0 or args.interval == float("inf"):
        raise ConfigError(f"must be a finite number of seconds > 0, not {args.interval:g}", key="--interval")
    if args.watch:  # waits for an experiment that does not exist yet
        status.watch(args.exp_dir.absolute(), args.interval)
    else:
        print(status.text(require_experiment(args.exp_dir.absolute()))[0])
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from emews.config.experiment import require_experiment

    try:
        from emews.reporting import data, render
    except ModuleNotFoundError as exc:
        raise EmewsError(f"emews report needs {exc.name}: pip install 'emews-mpi[report]'") from None
    exp_dirs = [require_experiment(path.absolute()) for path in args.exp_dir]
    seen: dict[Path, Path] = {}
    for typed, exp_dir in zip(args.exp_dir, exp_dirs, strict=True):
        first = seen.setdefault(exp_dir.resolve(), typed)
        if first is not typed:
            again = "named twice" if str(first) == str(typed) else f"is {first} again"
            raise ConfigError(f"{again}: compare different experiments", file=str(typed))
    fmt = render.chosen_format(args.out, args.format)
    loaded = [data.load(exp_dir) for exp_dir in exp_dirs]
    for problem in (p for experiment in loaded for p in experiment.unreadable):
        print(f"emews: note: {problem} (the report is made without it)", file=sys.stderr)
    if len(loaded) > 1:
        out = args.out or Path(render.COMPARISON_FILE if fmt == "html" else "comparison-plots")
        written = render.write_comparison(loaded, out, fmt, out_given=args.out is not None)
    else:
        out = args.out or render.default_output(exp_dirs[0], fmt)
        written = render.write(loaded[0], out, fmt, top=args.top, out_given=args.out is not None)
    print(
        f"wrote {written.path}"
        + (f" and {counted(len(written.pngs), 'plot')} in {render.png_folder(written.path)}" if fmt == "html" else "")
    )
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    from emews.config.experiment import require_experiment
    from emews.job.cancelling import cancel_jobs, cancel_queued

    exp_dir = require_experiment(args.exp_dir.absolute())
    if args.queued:
        cancelled = cancel_queued(exp_dir)
        print(f"cancelled {len(cancelled)} queued tasks of {args.exp_dir}")
        return EXIT_OK
    for line in cancel_jobs(exp_dir):
        print(line)
    return EXIT_OK


def cmd_checkpoints(args: argparse.Namespace) -> int:
    from emews.output.catalog import best_checkpoints, durable_checkpoints, format_table

    if args.best is not None and args.best < 1:
        raise ConfigError(f"must be at least 1, got {args.best}", key="--best")
    present, gone, lost = durable_checkpoints(args.exp_dir.absolute())  # one read: the list and the notes agree
    rows = best_checkpoints(present, args.best, per_trial=not args.per_checkpoint)
    print(format_table(rows))
    print(counted(len(rows), "checkpoint"), file=sys.stderr)
    if gone:
        print(
            f"emews: note: {counted(len(gone), 'checkpoint')} the store records {'is' if len(gone) == 1 else 'are'} "
            f"not listed: {'its file is' if len(gone) == 1 else 'their files are'} gone (deleted or moved), "
            f"e.g. {gone[0].path}",
            file=sys.stderr,
        )
    if lost:
        print(
            f"emews: note: {counted(len(lost), 'checkpoint')} reported {'was' if len(lost) == 1 else 'were'} never "
            "written (the task's process died, or the write failed, before its background writer wrote "
            f"{'it' if len(lost) == 1 else 'them'}): e.g. trial {lost[0].trial} step {lost[0].step}",
            file=sys.stderr,
        )
    return EXIT_OK


def cmd_clean_shm(args: argparse.Namespace) -> int:
    from emews.processes import mpich_shm

    if not 0 <= args.older_than < float("inf"):
        raise ConfigError(f"must be a finite number of seconds >= 0, not {args.older_than:g}", key="--older-than")
    found = mpich_shm.remove_unmapped(
        mpich_shm.present(mpich_shm.SHM_DIR),
        shm_dir=mpich_shm.SHM_DIR,
        older_than=args.older_than,
        dry_run=args.dry_run,
    )
    for segment in found:
        print(
            f"{'would remove' if args.dry_run else 'removed'} {mpich_shm.SHM_DIR / segment.name} ({segment.size:,} bytes)"
        )
    if not found:
        print(f"no MPICH segment of yours in {mpich_shm.SHM_DIR} that no live process maps: nothing to remove")
    else:
        said = "would free" if args.dry_run else "freed"
        print(f"{counted(len(found), 'segment')}, {mpich_shm.megabytes(found)} {said}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    if args.job_exit is not None:
        from emews.job.job_start import batch_job_exit

        if len(args.job_exit) not in (2, 3):
            raise ConfigError("emews run --job-exit takes STATUS SINCE [SIGNAL] (job.sh's last line)")
        status, since, received = (*args.job_exit, 0)[:3]
        return batch_job_exit(args.exp_dir.absolute(), args.lease, int(status), since, args.pool, int(received))
    if args.watch_start is not None:
        from emews.job.job_start import watch_batch_start

        ranks, launcher = args.watch_start
        return watch_batch_start(args.exp_dir.absolute(), args.lease, ranks, launcher, args.pool)
    from emews.job.mpi_main import run_experiment

    return run_experiment(args.exp_dir, args.lease, pool_dir=args.pool)


COMMANDS = {
    "launch": cmd_launch,
    "resume": cmd_resume,
    "check": cmd_check,
    "results": cmd_results,
    "status": cmd_status,
    "report": cmd_report,
    "cancel": cmd_cancel,
    "run": cmd_run,
    "attach": cmd_attach,
    "serve": cmd_serve,
    "checkpoints": cmd_checkpoints,
    "clean-shm": cmd_clean_shm,
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parse(argv)
    except ConfigError as exc:
        print(f"emews: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        status = COMMANDS[args.command](args)
        sys.stdout.flush()  # a reader that went away (``| head``) is met here, not at the interpreter's exit
        return status
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more reaches it, silently
        return 128 + signal.SIGPIPE
    except ConfigError as exc:
        print(f"emews: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except EmewsError as exc:
        print(f"emews: {exc}", file=sys.stderr)
        return EXIT_FAILED
