"""The ``emews`` command: launch, check, results, status, cancel, and the in-job ``run``.

Exit status: 0 when a run completes (failed tasks included), 2 for
configuration errors, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

from emews.errors import ConfigError, EmewsError

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2
SITE_SECTIONS = ("scheduler", "launcher", "node", "environment", "extends", "requires_account")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="emews", description="Model exploration on HPC over MPI.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    launch = sub.add_parser("launch", help="run a workflow on a site (now on local, as a batch job elsewhere)")
    launch.add_argument("workflow", help="built-in workflow name or path to a workflow .yaml")
    launch.add_argument("--site", default="local", help="built-in site name or path to a site .yaml (default: local)")
    launch.add_argument("--workers", type=int, help="number of worker ranks")
    launch.add_argument("--exp-dir", type=Path, help="experiment directory (default: experiments/NAME-NNN)")
    launch.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a workflow or site key, e.g. budget.evaluations=50 scheduler.account=ABC")
    launch.add_argument("--dry-run", action="store_true", help="print the batch script and submit command only")

    check = sub.add_parser("check", help="validate a workflow (and optionally a site) without running")
    check.add_argument("workflow")
    check.add_argument("--site", help="also validate this site")
    check.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")

    resume = sub.add_parser("resume", help="run an experiment again: finished evaluations are not repeated")
    resume.add_argument("exp_dir", type=Path)
    resume.add_argument("--workers", type=int, help="number of worker ranks (default: as before)")

    results = sub.add_parser("results", help="write results.csv of an experiment and print its summary")
    results.add_argument("exp_dir", type=Path)

    status = sub.add_parser("status", help="scheduler state and progress of an experiment")
    status.add_argument("exp_dir", type=Path)

    cancel = sub.add_parser("cancel", help="cancel an experiment's batch job")
    cancel.add_argument("exp_dir", type=Path)

    run = sub.add_parser("run", help="(inside the MPI job) run this rank's part of an experiment")
    run.add_argument("exp_dir", type=Path)
    return parser


def _split_overrides(items: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    from emews.yamlio import parse_override

    workflow: dict[str, Any] = {}
    site: list[str] = []
    for item in items:
        key, value = parse_override(item)
        if key.split(".")[0] in SITE_SECTIONS:
            site.append(item)
        else:
            workflow[key] = value
    return workflow, site


def cmd_launch(args: argparse.Namespace) -> int:
    from emews.experiment import create_experiment, next_numbered
    from emews.site import load_site
    from emews.site.jobs import job_command, submit_experiment
    from emews.workflow import load_workflow

    if args.workers is not None and args.workers < 1:
        raise ConfigError("must be at least 1", key="--workers")
    wf_overrides, site_overrides = _split_overrides(args.set)
    workflow = load_workflow(args.workflow, wf_overrides)
    site = load_site(args.site, site_overrides)
    workers = site.total_workers(args.workers)
    target = (args.exp_dir or next_numbered(Path("experiments"), workflow.name)).absolute()
    if not site.is_local:
        script = site.render_batch_script(target, workers, job_command(target))  # validates before any write
        if args.dry_run:
            print(script)
            print("# submit with: " + shlex.join(site.submit_command(target / "job.sh")))
            return EXIT_OK
    elif args.dry_run:
        print(" ".join(site.launch_command(workers + 1, job_command(target))))
        return EXIT_OK
    exp_dir = create_experiment(target, name=workflow.name, workflow=workflow.to_dict(), site=site.to_dict(),
                                info={"workers": workers, "site": site.name})
    if site.is_local:
        return _run_local(site, exp_dir, workers)
    try:
        job_id = submit_experiment(site, exp_dir, workers)
    except BaseException:
        import shutil
        shutil.rmtree(exp_dir, ignore_errors=True)
        raise
    print(f"submitted job {job_id} to {site.name}; results will appear in {exp_dir / 'results.db'}")
    print(f"follow it with: emews status {exp_dir}")
    return EXIT_OK


def cmd_resume(args: argparse.Namespace) -> int:
    from emews.experiment import SITE_FILE, read_info, require_experiment
    from emews.site import load_site
    from emews.site.jobs import submit_experiment

    exp_dir = require_experiment(args.exp_dir.absolute())
    site = load_site(str(exp_dir / SITE_FILE))
    workers = site.total_workers(args.workers or read_info(exp_dir).get("workers"))
    if site.is_local:
        return _run_local(site, exp_dir, workers)
    job_id = submit_experiment(site, exp_dir, workers)
    print(f"submitted job {job_id} to {site.name} to resume {exp_dir}")
    return EXIT_OK


def _run_local(site: Any, exp_dir: Path, workers: int) -> int:
    from emews.site.jobs import job_command

    command = site.launch_command(workers + 1, job_command(exp_dir))
    print(f"experiment {exp_dir}: {workers} workers", file=sys.stderr)
    env = dict(os.environ)
    if sys.stderr.isatty():
        env["EMEWS_PROGRESS"] = "tty"
    try:
        return subprocess.call(command, env=env)
    except FileNotFoundError:
        raise EmewsError(f"cannot start {command[0]}: not found (is the mpich wheel installed?)") from None
    except KeyboardInterrupt:
        return EXIT_FAILED


def cmd_check(args: argparse.Namespace) -> int:
    from emews.workflow import load_workflow

    wf_overrides, site_overrides = _split_overrides(args.set)
    workflow = load_workflow(args.workflow, wf_overrides)
    print(f"{workflow.source}: ok — optimizer {workflow.model.optimizer.name}, "
          f"{len(workflow.space)} parameters, budget {workflow.model.budget.evaluations}")
    if args.site:
        from emews.site import load_site

        site = load_site(args.site, site_overrides)
        print(f"site {site.name}: ok")
    return EXIT_OK


def cmd_results(args: argparse.Namespace) -> int:
    from emews.report import export_csv, load_results, summary_text

    results = load_results(args.exp_dir)
    path, rows = export_csv(args.exp_dir, results)
    print(summary_text(results, None))
    print(f"wrote {rows} rows to {path}")
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from emews.experiment import WORKFLOW_FILE, require_experiment
    from emews.report import load_results, summary_text
    from emews.site.jobs import JOB_RECORD, job_status
    from emews.yamlio import load_mapping

    exp_dir = require_experiment(args.exp_dir)
    state = job_status(exp_dir) if (exp_dir / JOB_RECORD).exists() else "local"
    budget = load_mapping(exp_dir / WORKFLOW_FILE).get("budget", {}).get("evaluations")
    print(f"job: {state}")
    print(summary_text(load_results(exp_dir), budget))
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    from emews.experiment import require_experiment
    from emews.site.jobs import cancel_experiment

    cancel_experiment(require_experiment(args.exp_dir))
    print(f"cancelled the job of {args.exp_dir}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from emews.runtime.mpi_main import run_experiment

    return run_experiment(args.exp_dir)


COMMANDS = {"launch": cmd_launch, "resume": cmd_resume, "check": cmd_check, "results": cmd_results, "status": cmd_status,
            "cancel": cmd_cancel, "run": cmd_run}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ConfigError as exc:
        print(f"emews: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except EmewsError as exc:
        print(f"emews: {exc}", file=sys.stderr)
        return EXIT_FAILED
