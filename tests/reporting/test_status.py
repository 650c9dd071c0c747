"""``emews status``: the headline of a finished run against its store, and ``--watch`` on a live run."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from stores import count

import emews as emews_api
from emews.core.errors import ConfigError
from testutil import GATED, EmewsCommand, command_cost, said, status_comes_to_say, wait_until, write_workflow


def test_status_of_a_finished_run_matches_the_store(faulty_exp: Path) -> None:
    proc = EmewsCommand(faulty_exp.parent)("status", str(faulty_exp))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    with sqlite3.connect(faulty_exp / "results.db") as db:
        counts = dict(db.execute("SELECT status, COUNT(*) FROM results GROUP BY status"))
        best, best_id = db.execute("SELECT objective, id FROM results WHERE status = 'ok' "
                                   "ORDER BY loss, id LIMIT 1").fetchone()
    done = sum(counts.values())
    assert lines[0] == "job: local, not running"
    order = ["ok", "failed", "crashed", "timeout"]
    assert lines[1] == f"{done}/{done} evaluations: " + ", ".join(f"{counts[s]} {s}" for s in order if s in counts)
    assert lines[2] == f"best objective {best:.6g} (task {best_id}) with parameters:"
    failed = done - counts["ok"]
    assert lines[4].startswith(f"{failed} failed; workers busy: 0/3; rate ") and lines[4].endswith("ETA -")


def test_status_and_results_read_the_store_once_without_frames_or_sites(faulty_exp: Path) -> None:
    """``emews status`` of a finished local run loaded pandas, numpy, pydantic and the sites (most of
    its 0.6 CPU-seconds: users poll it, from watch(1) too) and opened the store twice (the headline,
    then the trials, each its own connection). It opens it once and loads none of them; nor does
    ``emews results``. Each prints what it printed."""
    cmd = EmewsCommand(faulty_exp.parent)
    for command in ("status", "results"):
        cost = command_cost(cmd, command, str(faulty_exp))
        assert cost.status == 0 and cost.out == cmd(command, str(faulty_exp), check=True).stdout, cost
        assert cost.heavy == [] and cost.opened == ["sqlite3"], (command, cost.heavy[:20], cost.opened)


def test_the_best_points_integers_are_integers(tmp_path: Path) -> None:
    """Finding 13 of reliability-2026-11-26: ``"mb": 1.0, "epochs": 12.0`` where results.csv has 1 and 12."""
    wf = write_workflow(tmp_path, space={"x": {"type": "float", "lower": -2.0, "upper": 2.0},
                                         "mb": {"type": "int", "lower": 1, "upper": 4},
                                         "epochs": {"type": "constant", "value": 12}},
                        budget={"evaluations": 4}, task={"timeout": 30, "isolation": "inline"})
    emews = EmewsCommand(tmp_path)
    emews("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180, check=True)
    proc = emews("status", str(tmp_path / "exp"), check=True)
    lines = proc.stdout.splitlines()
    with sqlite3.connect(tmp_path / "exp" / "results.db") as db:
        (params,), = db.execute("SELECT params FROM results WHERE status = 'ok' ORDER BY loss, id LIMIT 1")
    assert lines[2].endswith("with parameters:")
    assert lines[3].strip() == json.dumps(json.loads(params)) and '"epochs": 12' in lines[3], lines[3]


def test_the_best_points_null_is_null(tmp_path: Path) -> None:
    """A categorical value null in the best point: ``emews status`` printed ``"c": NaN`` (not JSON;
    ``emews results`` and the launch print ``"c": null``)."""
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        space={"x": {"type": "ordered", "values": [0.5]}, "c": {"type": "categorical", "values": [None, "a"]}},
        budget={"evaluations": 2},
        task={"timeout": 30, "isolation": "inline"},
    )
    emews = EmewsCommand(tmp_path)
    emews("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180, check=True)
    status = emews("status", str(tmp_path / "exp"), check=True).stdout.splitlines()
    results = emews("results", str(tmp_path / "exp"), check=True).stdout.splitlines()
    assert status[2].endswith("with parameters:")
    assert json.loads(status[3]) == {"x": 0.5, "c": None}, status[3]
    assert status[3] == results[2]


def test_a_lost_store_is_refused_not_shown_as_nothing_stored(tmp_path: Path) -> None:
    """``results.db`` gone (a copy made without it) while ``summary.json`` records 4 evaluations:
    ``emews results`` refused it, but ``emews status`` showed ``0/4 evaluations`` and ``emews report``
    wrote an empty report (exit 0); both now refuse it as ``emews results`` does."""
    wf = write_workflow(tmp_path, budget={"evaluations": 4}, task={"timeout": 30, "isolation": "inline"})
    emews = EmewsCommand(tmp_path)
    emews("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180, check=True)
    (tmp_path / "exp" / "results.db").unlink()
    for command in ("results", "status", "report"):
        proc = emews(command, str(tmp_path / "exp"))
        assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
        assert "results.db: missing, yet summary.json records 4 evaluations stored" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "exp" / "report.html").exists()
    with pytest.raises(ConfigError, match="missing, yet summary.json records 4"):
        _ = emews_api.load(tmp_path / "exp").results


def test_watch_of_a_finished_run_prints_once_and_ends(faulty_exp: Path) -> None:
    proc = EmewsCommand(faulty_exp.parent)("status", str(faulty_exp), "--watch", "--interval", "0.1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("job: local, not running") == 1


def test_watch_follows_a_live_run_until_it_ends_and_a_report_reads_it_meanwhile(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    wf = write_workflow(tmp_path, objective={"module": str(GATED), "function": "run"},
                        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}}, budget={"evaluations": 8},
                        task={"timeout": 600, "isolation": "process"})  # held at the gate as long as the test needs
    cmd = EmewsCommand(tmp_path)
    cmd.env.update(GATE_FILE=str(gate), GATE_FROM="4", GATE_TIMEOUT="600")
    job = cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    try:
        in_flight = "SELECT COUNT(*) FROM tasks t LEFT JOIN results r ON r.id = t.id WHERE r.id IS NULL"
        assert wait_until(lambda: count(exp, in_flight) >= 2, timeout=180)  # both workers held at the gate
        watch = cmd.popen("status", "exp", "--watch", "--interval", "0.2")
        seen: list[str] = []
        while sum(line == "job: local, running" for line in seen) < 2:  # two refreshes while it runs
            line = watch.stdout.readline()
            assert line, watch.stderr.read()
            seen.append(line.rstrip("\n"))
        assert "4/8 evaluations: 4 ok" in seen
        assert any(line.startswith("0 failed; workers busy: 2/2; rate ") for line in seen)
        live = cmd("report", "exp", timeout=300)  # beside the running job, which holds 2 tasks at the gate
        assert live.returncode == 0, live.stderr
        page = (exp / "report.html").read_text()
        assert "<td>4/8 evaluations: 4 ok</td>" in page and 'id="plot-load"' in page
        gate.touch()
        rest, err = watch.communicate(timeout=300)
        assert watch.returncode == 0, err
        states = [line for line in rest.splitlines() if line.startswith("job: ")]
        assert states[-1] == "job: local, not running"  # the last refresh, after which it ended
        assert set(states[:-1]) <= {"job: local, running"}
        assert "8/8 evaluations: 8 ok" in rest
        assert job.wait(timeout=300) == 0
    finally:
        gate.touch()
        job.wait(timeout=300)


def test_a_bad_interval_is_one_line(faulty_exp: Path) -> None:
    proc = EmewsCommand(faulty_exp.parent)("status", str(faulty_exp), "--watch", "--interval", "0")
    assert proc.returncode == 2 and "--interval" in proc.stderr and proc.stderr.count("\n") == 1


def test_cancel_of_a_local_experiment_is_a_misuse_in_one_line(faulty_exp: Path) -> None:
    """docs/workflow-reference.md: cancel cancels the batch job and its pools' jobs. A local run has
    none: emews cancel exited 1 (a failure) where a misuse is exit 2, and did not say how to stop one."""
    proc = EmewsCommand(faulty_exp.parent)("cancel", str(faulty_exp))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "no batch job was submitted" in proc.stderr and "Ctrl-C" in proc.stderr, proc.stderr
    assert not (faulty_exp / "job.json").exists()


@pytest.mark.parametrize("command", [["status"], ["status", "--watch"], ["results"], ["report"], ["resume"],
                                     ["cancel"], ["checkpoints"]])
def test_a_folder_holding_only_a_workflow_is_not_an_experiment(faulty_exp: Path, tmp_path: Path,
                                                                command: list[str]) -> None:
    """A user's project folder holding its workflow.yaml counted as an experiment: emews report wrote
    report.html and report-plots/ there, status showed '0/10 evaluations, not running', results said
    'no results stored yet'. Now every command refuses it in one line naming what it lacks."""
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy(faulty_exp / "workflow.yaml", folder / "workflow.yaml")
    proc = EmewsCommand(tmp_path)(command[0], str(folder), *command[1:], timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert f"{folder}: not an experiment directory (no site.yaml" in proc.stderr
    assert [p.name for p in folder.iterdir()] == ["workflow.yaml"]


def test_a_garbled_site_yaml_still_shows_what_the_store_holds(faulty_exp: Path, tmp_path: Path) -> None:
    """emews status refused an experiment whose site.yaml was garbled ('site.yaml: malformed YAML',
    exit 2), though all it shows is in the store; now it shows that and names the broken file."""
    shown = EmewsCommand(tmp_path)("status", str(faulty_exp))
    assert shown.returncode == 0, shown.stderr
    copy = tmp_path / "exp"
    shutil.copytree(faulty_exp, copy)
    (copy / "site.yaml").write_text("name: [unclosed\n  : :\n")
    proc = EmewsCommand(tmp_path)("status", str(copy))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:-1] == shown.stdout.splitlines()
    assert lines[-1].startswith(f"note: {copy / 'site.yaml'}: malformed YAML") and "shown without it" in lines[-1]


def test_watch_of_a_file_is_one_line_not_a_wait_forever(faulty_exp: Path, tmp_path: Path) -> None:
    """status --watch given a file (results.csv for its experiment) said 'waiting for .../results.csv
    to appear' though it exists, and waited for good: a file never becomes an experiment."""
    for target in (faulty_exp / "results.csv", faulty_exp / "workflow.yaml"):
        proc = EmewsCommand(tmp_path)("status", str(target), "--watch", "--interval", "0.1", timeout=60)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and f"{target}: not an experiment directory" in proc.stderr


def test_an_ensembles_best_points_null_is_null(tmp_path: Path) -> None:
    """As above with ``replicates: 2``: the ensemble's best point came from the report's parameter
    frame without the null mended, so ``emews status`` printed ``"c": NaN`` there again."""
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        space={"x": {"type": "ordered", "values": [0.5]}, "c": {"type": "categorical", "values": [None, "a"]}},
        budget={"evaluations": 4},
        replicates=2,
        task={"timeout": 30, "isolation": "inline"},
    )
    emews = EmewsCommand(tmp_path)
    emews("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180, check=True)
    status = emews("status", str(tmp_path / "exp"), check=True).stdout
    results = emews("results", str(tmp_path / "exp"), check=True).stdout
    assert "NaN" not in status, status
    points = [json.loads(line) for line in status.splitlines() if line.strip().startswith("{")]
    assert {"x": 0.5, "c": None} in points or {"x": 0.5, "c": "a"} in points, status
    assert points == [json.loads(line) for line in results.splitlines() if line.strip().startswith("{")]


def test_status_of_a_local_run_that_stopped_says_how_it_ended(tmp_path: Path) -> None:
    """A local run that fail fast stopped (exit 1) showed `job: local, not running` and `7/40
    evaluations: 7 failed`, as if it were paused, where a batch job's status says how its run ended."""
    (tmp_path / "model.py").write_text("def run(params):\n    return None\n")
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "model.py")}, budget={"evaluations": 40},
                        task={"timeout": 30, "isolation": "inline"})
    emews = EmewsCommand(tmp_path)
    assert emews("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180).returncode == 1
    status = emews("status", "exp", check=True).stdout.splitlines()
    assert status[0] == ("job: local, not running, the run ended with exit status 1: the first 5 evaluations all "
                         "failed: objective returned NoneType None, not a number"), status


@pytest.mark.parametrize("typed", ["experiment/faulty-001", "experiments/faulty-01"])
def test_a_misspelt_experiment_folder_says_which_was_meant(typed: str, faulty_exp: Path, tmp_path: Path) -> None:
    """`emews status experiment/random-001` (the s left out) said 'not an experiment directory (no
    workflow.yaml or site.yaml; ...)' of a folder that does not exist, and named no near one."""
    shutil.copytree(faulty_exp, tmp_path / "experiments" / "faulty-001", symlinks=True)
    for command in ("status", "results", "report", "resume"):
        proc = EmewsCommand(tmp_path)(command, typed)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert "not an experiment directory (no such folder; did you mean '" in proc.stderr, proc.stderr
        assert "experiments/faulty-001'?)" in proc.stderr, proc.stderr


def test_the_rate_of_a_finished_experiment_is_over_all_its_runs_and_never_in_scientific_notation(
    tmp_path: Path,
) -> None:
    """A last run that only ran two tasks again, in a few ms, two hours after the first: ``emews status``
    said the rate of that run alone (``rate 667/s``; ``1.85e+03/s`` for a shorter one). A finished
    experiment's rate is over all its runs' working time, and says it; a live one's is its run's, with
    its length; a slow rate has its decimals, not an exponent."""
    from test_timeline import T0, experiment

    from emews.reporting.files import read_files
    from emews.reporting.headline import headline, store_figures
    from emews.store import open_store

    def figures(exp: Path):
        files = read_files(exp)
        with open_store(exp, readonly=True) as store:
            return files, store_figures(files, store)

    later = 7200.0
    schedule = [(i, i, i + 1, 1) for i in range(10)] + [(9.5, later, later + 0.002, 1), (9.5, later, later + 0.003, 2)]
    exp = experiment(tmp_path, schedule, workers=2, requeued=(10, 11))
    proc = EmewsCommand(tmp_path)("status", str(exp), check=True)
    assert proc.stdout.splitlines()[-1] == "0 failed; workers busy: 0/2; rate 1.2/s over 10.0 s in 2 runs; ETA -"
    live = headline(*figures(exp), running=True, now=T0 + later + 0.004)
    assert live.rate_said() == "500/s over this run's 4.0 ms"
    slow = experiment(tmp_path / "slow", [(0, 0, 86_400, 1)], workers=1)
    assert headline(*figures(slow), running=False).rate_said() == "0.0000116/s over 24 h 00 min"


def test_the_ranks_the_last_run_went_on_without_are_shown_by_status_and_the_report(tmp_path: Path) -> None:
    """summary.json's lost ranks (finding: not recorded at all) are shown where the run's problems are:
    under ``emews status``'s failures line and in the report's header."""
    from test_timeline import T0, experiment

    from emews.reporting import data
    from emews.reporting.summary import header
    from emews.core.lost_ranks import LostRank

    exp = experiment(tmp_path, [(0, 0, 1, 2), (0, 1, 2, 2)], workers=2)
    lost = LostRank(1, T0 + 0.5, "has not answered for 7 s, holding 1 task, past the task timeout of 3 s",
                    "worker rank 1 has not answered ...", 1, True, ())
    (exp / "summary.json").write_text(json.dumps({"exit_status": 0, "runs": 1, "lost_ranks": [lost.to_json()]}))
    proc = EmewsCommand(tmp_path)("status", str(exp), check=True)
    said = ("rank 1 lost at 2023-11-14 22:13:20 UTC: has not answered for 7 s, holding 1 task, past the task "
            "timeout of 3 s; its task 1 was queued again for another worker")
    lines = proc.stdout.splitlines()
    assert lines[lines.index(said) - 1].startswith("0 failed; workers busy: 0/2; rate "), lines
    assert ("last run went on without", said) in header(data.load(exp))


def test_a_resume_on_fewer_workers_is_what_status_counts_while_it_runs(emews_cmd, tmp_path: Path) -> None:
    """Launched on 3 workers, resumed on 2: ``emews status`` of the resumed run said 'workers busy:
    2/3' with both of its workers busy (the count came from the launch). Now the resume records its
    workers: 2/2 while it runs; a later plain resume takes 2 too."""
    from gated_job import launch_gated

    gated = launch_gated(emews_cmd, tmp_path, evaluations=3, timeout=120, workers=3)
    gated.gate.touch()
    _, err = gated.job.communicate(timeout=240)
    assert gated.job.returncode == 0, err
    gated.gate.unlink()  # the resumed run's tasks wait at it
    job = emews_cmd.popen("resume", str(gated.exp), "--workers", "2", "--set", "budget.evaluations=5")
    try:
        assert wait_until(lambda: len(gated.started()) == 5 or job.poll() is not None, timeout=180), said(job)
        # rank 0 records a running task in the store half a second after it started it (later under load)
        status_comes_to_say(emews_cmd, "workers busy: 2/2", exp=str(gated.exp))
    finally:
        gated.gate.touch()
    _, err = job.communicate(timeout=240)
    assert job.returncode == 0, err
    assert json.loads((gated.exp / "experiment.json").read_text())["workers"] == 2
