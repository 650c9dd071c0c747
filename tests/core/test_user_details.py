"""Small things users hit (issue 25 point 4), each under a real ``mpiexec`` or the real command:

- ``emews status --watch`` started before the experiment exists waits for it, then for its run;
- the stop line names the signal that was sent (SIGINT is not SIGTERM);
- ``summary.json``'s ``elapsed`` counts every run of a resumed experiment;
- "did you mean ...?" for unknown names: optimizers, trial schedulers, sites, keys, options, workflows;
- every problem of a configuration is listed, one line each (not "(and 1 more problem)").

(Integers stay integers in ``emews.load``'s frames: ``tests/api/test_python_route.py``.)
"""

from __future__ import annotations

import json
import signal
import sqlite3
import threading
from pathlib import Path

import pytest

from testutil import REPO, RUGGED, rugged_workflow, wait_until, write_workflow


# --------------------------------------------------------------------------- status --watch
def test_status_watch_started_before_the_experiment_waits_for_it_and_its_run(emews_cmd, tmp_path: Path) -> None:
    """Right after ``emews launch`` (or before it) the directory does not exist yet: ``--watch``
    says it waits, then follows the run to its end (exit 0), instead of "not an experiment directory"."""
    watch = emews_cmd.popen("status", "exp", "--watch", "--interval", "0.1")
    lines: list[str] = []
    # drained as it comes: a refresh every 0.1 s through a slow (loaded) run fills a pipe's 64 KiB
    drain = threading.Thread(target=lambda: lines.extend(iter(watch.stdout.readline, "")), daemon=True)
    try:
        first = watch.stdout.readline()
        assert "waiting for" in first and "exp" in first, first + watch.stderr.read()
        assert watch.poll() is None  # still waiting: the directory does not exist
        drain.start()
        launch = emews_cmd(
            "launch", str(rugged_workflow(tmp_path, "ok", 4)), "--workers", "2", "--exp-dir", "exp", timeout=300
        )
        assert launch.returncode == 0, launch.stderr
        assert watch.wait(timeout=120) == 0, watch.stderr.read()
        drain.join(timeout=60)
        out = "".join(lines)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    assert "job: local, not running" in out and "4/4 evaluations: 4 ok" in out, out
    assert "Traceback" not in watch.stderr.read()


def test_status_of_a_run_that_is_making_its_store_says_nothing_yet(emews_cmd, tmp_path: Path) -> None:
    """The job makes its SQLite store's file a moment before its tables (rank 0 opens it, turns WAL
    on, then creates them): ``emews status`` in between, and ``--watch`` that refreshes through it,
    ended with a traceback, "sqlite3.OperationalError: no such table: results". They count nothing
    yet, and the watch follows the run to its end. The file is left here as the job's first
    statements leave it, the run's lease held by this test."""
    from emews.config.experiment import STORE_FILE, create_experiment
    from emews.config.lease import acquire
    from emews.store.results_store import ResultsStore

    exp = create_experiment(
        tmp_path / "exp",
        name="early",
        site={"name": "local"},
        info={"workers": 2},
        workflow={"space": {"x": {"type": "float", "lower": 0, "upper": 1}}, "budget": {"evaluations": 5}},
    )
    lease = acquire(exp, "emews launch")
    making = sqlite3.connect(exp / STORE_FILE, isolation_level=None)
    try:
        making.execute("PRAGMA journal_mode=WAL")  # the file is there, its tables are not
        once = emews_cmd("status", "exp")
        assert once.returncode == 0 and "Traceback" not in once.stderr, once.stderr
        assert "job: local, running" in once.stdout and "0/5 evaluations" in once.stdout, once.stdout
        watch = emews_cmd.popen("status", "exp", "--watch", "--interval", "0.1")
        try:
            assert "0/5 evaluations" in watch.stdout.readline() + watch.stdout.readline(), watch.stderr.read()
            assert watch.poll() is None  # the run goes on: the watch follows it
            ResultsStore(exp / STORE_FILE).close()  # the job's tables
            lease.release()  # the run is over
            out, err = watch.communicate(timeout=120)
        finally:
            if watch.poll() is None:
                watch.kill()
                watch.communicate()
    finally:
        making.close()
        lease.release()
    assert watch.returncode == 0 and "Traceback" not in err and "no such table" not in err + out, err
    assert "job: local, not running" in out, out


# --------------------------------------------------------------------------- the stop line
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_stop_line_names_the_signal_that_was_sent(emews_cmd, tmp_path: Path, gate, sig: signal.Signals) -> None:
    """Ctrl-C (SIGINT) to ``emews launch`` says "stopped by SIGINT" (it said SIGTERM: the signal
    launch forwarded), in the line, in ``summary.json``, and as the exit status 128 + N."""
    events, gate_file = gate
    job = emews_cmd.popen("launch", str(rugged_workflow(tmp_path, "wait", 6)), "--workers", "2", "--exp-dir", "exp")
    assert wait_until(lambda: len(list(events.glob("started-*"))) >= 2, timeout=120)
    job.send_signal(sig)
    assert job.wait(timeout=180) == 128 + sig
    err = job.stderr.read()
    assert f"stopped by {sig.name}" in err and "emews resume" in err and "Traceback" not in err, err
    other = ({signal.SIGINT, signal.SIGTERM} - {sig}).pop()
    assert f"stopped by {other.name}" not in err
    summary = json.loads((tmp_path / "exp" / "summary.json").read_text())
    assert summary["interrupted"] == f"stopped by {sig.name}" and summary["exit_status"] == 128 + sig
    assert emews_cmd.leftovers_after_exit() == []


# --------------------------------------------------------------------------- elapsed over runs
def test_summary_elapsed_counts_every_run_of_a_resumed_experiment(emews_cmd, tmp_path: Path) -> None:
    first = emews_cmd(
        "launch", str(rugged_workflow(tmp_path, "ok", 3)), "--workers", "2", "--exp-dir", "exp", timeout=300
    )
    assert first.returncode == 0, first.stderr
    before = json.loads((tmp_path / "exp" / "summary.json").read_text())
    assert before["runs"] == 1 and before["elapsed"] == before["this_run"]["elapsed"]
    again = emews_cmd("resume", "exp", "--set", "budget.evaluations=5", timeout=300)
    assert again.returncode == 0, again.stderr
    after = json.loads((tmp_path / "exp" / "summary.json").read_text())
    assert after["runs"] == 2 and after["completed"] == 5
    assert after["elapsed"] == pytest.approx(before["elapsed"] + after["this_run"]["elapsed"])
    assert after["elapsed"] > after["this_run"]["elapsed"]


# --------------------------------------------------------------------------- did you mean
@pytest.mark.parametrize(
    ("sections", "extra_args", "expected"),
    [
        ({"optimizer": {"name": "bayse"}}, [], "optimizer.name: unknown optimizer 'bayse'; did you mean 'bayes'?"),
        (
            {"optimizer": {"name": "tpe"}},
            [],
            "unknown optimizer 'tpe'; TPE is Optuna's: emews.contrib.optuna:OptunaSampler",
        ),
        ({"optimizer": {"name": "asha"}}, [], "asha is a trial scheduler: trial_scheduler: {name: asha}"),
        (
            {"trial_scheduler": {"name": "hyperbnd"}},
            [],
            "unknown trial scheduler 'hyperbnd'; did you mean 'hyperband'?",
        ),
        (
            {"optimizer": {"name": "random", "options": {"sed": 1}}},
            [],
            "optimizer.options.sed: unknown key 'sed'; did you mean 'seed'?",
        ),
        ({"budget": {"evaluation": 5}}, [], "budget.evaluation: unknown key 'evaluation'; did you mean 'evaluations'?"),
        (
            {"objective": {"module": str(RUGGED), "direction": "min"}},
            [],
            "objective.direction: invalid value 'min'; did you mean 'minimize'?",
        ),
        (
            {"space": {"x": {"type": "flaot", "lower": 0, "upper": 1}}},
            [],
            "space.x.type: invalid value 'flaot'; did you mean 'float'?",
        ),
        ({}, ["--site", "loacl"], "site: unknown site 'loacl'; did you mean 'local'?"),
        ({}, ["--set", "bugdet.evaluations=3"], "no section of the workflow or the site; did you mean 'budget'?"),
    ],
)
def test_an_unknown_name_says_what_was_probably_meant(
    emews_cmd, tmp_path: Path, sections: dict, extra_args: list[str], expected: str
) -> None:
    wf = write_workflow(tmp_path, **sections)
    proc = emews_cmd("check", str(wf), *extra_args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert expected in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["launch", "random", "--sites", "perlmutter"],
            "emews launch has no option '--sites'; did you mean '--site'? (allowed: --help, --site, --workers, --exp-dir, "
            "--set, --dry-run, --pools)",
        ),
        (["check", "random", "--stie=local"], "emews check has no option '--stie'; did you mean '--site'?"),
        (
            ["launch", "random", "--site", "perlmuter"],
            "site: unknown site 'perlmuter'; did you mean 'perlmutter'? (allowed: aurora, frontier, local, perlmutter, "
            "polaris, summit)",
        ),
        (["lanch", "random"], "unknown command 'lanch'; did you mean 'launch'? (allowed: launch, check, resume,"),
        (["launch", "random", "local"], "emews launch takes no argument 'local' (allowed: --help, --site,"),
        # argparse's own mistakes printed its usage and a second line (found in a docs walkthrough)
        (
            ["launch", "random", "--workers", "x"],
            "emews launch: argument --workers: invalid int value: 'x' (see emews launch --help)",
        ),
        (["report", "exp", "--format", "jpg"], "emews report: argument --format: invalid choice: 'jpg'"),
        (["launch"], "emews launch: the following arguments are required: workflow (see emews launch --help)"),
        ([], "emews: the following arguments are required: COMMAND (see emews --help) (allowed: launch, check,"),
    ],
)
def test_an_unknown_option_or_command_says_what_was_probably_meant(
    emews_cmd, tmp_path: Path, args: list[str], expected: str
) -> None:
    """Found here: `emews launch random --sites perlmutter` printed argparse's usage of emews itself
    and 'unrecognized arguments: --sites perlmutter', naming neither the command nor its options."""
    proc = emews_cmd(*args)  # in tmp_path
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("emews: error: ") and expected in proc.stderr, (
        proc.stderr
    )
    assert not (tmp_path / "experiments").exists()


def test_an_unknown_workflow_name_says_what_was_probably_meant(emews_cmd) -> None:
    proc = emews_cmd("check", "randm")
    assert proc.returncode == 2 and "unknown workflow 'randm'; did you mean 'random'?" in proc.stderr, proc.stderr


def test_a_workflow_file_named_without_its_suffix_is_named_with_it(emews_cmd, tmp_path: Path) -> None:
    """``emews check wf`` beside ``wf.yaml`` (a new user leaving the suffix off) offered nothing of
    the file it probably meant: it says ``did you mean 'wf.yaml'?`` now."""
    (tmp_path / "wf.yaml").write_text((REPO / "workflows" / "random.yaml").read_text())
    proc = emews_cmd("check", "wf")
    assert proc.returncode == 2 and "unknown workflow 'wf'; did you mean 'wf.yaml'?" in proc.stderr, proc.stderr


# --------------------------------------------------------------------------- every problem
def test_every_problem_of_a_workflow_is_listed_one_line_each(emews_cmd, tmp_path: Path) -> None:
    """Five mistakes in one file: five lines, each naming the file and its key; a misspelt key is
    not also reported as a missing one, and no "(and N more problems)" hides any."""
    wf = write_workflow(
        tmp_path,
        budget={"evaluation": 5},
        task={"timeout": -1, "ranks": 1.5},
        objective={"module": str(RUGGED), "direction": "min"},
        space={"x": {"type": "float", "lowr": 0.0, "upper": 1.0}, "n": {"type": "int", "lower": 1, "upper": 2.5}},
    )
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    keys = ["budget.evaluation", "objective.direction", "task.timeout", "task.ranks", "space.x.lowr", "space.n.upper"]
    assert len(lines) == len(keys), proc.stderr
    assert lines[0].startswith(f"emews: error: {wf}: budget.evaluation: unknown key 'evaluation'")
    for key in keys:
        assert sum(f"{wf}: {key}: " in line for line in lines) == 1, (key, proc.stderr)
    assert all(line.startswith("  also: ") for line in lines[1:]), proc.stderr
    assert "more problem" not in proc.stderr and "space.x.lower" not in proc.stderr
