"""Multi-rank tasks (``task.ranks``) under a real ``mpiexec`` with 6 ranks: team communicators in
inline mode, gang scheduling of mixed sizes with the budget exact, and a member that segfaults."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from emews.core.errors import ConfigError
from emews.job.job_start import start_bound
from emews.objective.context import task_run_dir
from emews.runtime.backoff import DEFAULT_SPIN, spin_for, spin_seconds
from emews.runtime.distributor import ABORT_GRACE, abort_grace
from emews.runtime.setup_bound import SETUP_TIMEOUT, setup_seconds
from emews.runtime.teams import STRANDED_GRACE, stranded_grace
from gated_job import write_gated
from testutil import TESTS, read_only, status_comes_to_say, stored_rows, wait_until, write_workflow

TEAM = str(TESTS / "objectives" / "team.py")
TEAM_SIZE = str(TESTS / "objectives" / "team_size.py")


ONE_POINT = {"x": {"type": "constant", "value": 1}}


def team_sweep(tmp_path: Path, function: str, space: dict[str, Any], evaluations: int, *, task: dict[str, Any]) -> Path:
    """A workflow sweeping ``space`` with ``function`` of objectives/team.py as its objective."""
    return write_workflow(tmp_path, optimizer={"name": "sweep"}, objective={"module": TEAM, "function": function},
                          space=space, budget={"evaluations": evaluations}, task=task)


def test_mixed_sizes_complete_with_a_communicator_of_their_own_ranks(emews_cmd, tmp_path: Path) -> None:
    wf = write_workflow(
        tmp_path, optimizer={"name": "random", "options": {"seed": 4}},
        objective={"module": TEAM, "function": "allreduce"},
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0},
               "k": {"type": "ordered", "values": [1, 2, 4]}},
        budget={"evaluations": 30}, task={"timeout": 60, "isolation": "inline", "ranks": "k"})
    proc = emews_cmd("launch", str(wf), "--workers", "5", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert len(rows) == 30 and sorted(r["id"] for r in rows) == list(range(30))  # the budget, exactly
    sizes = set()
    for row in rows:
        k = json.loads(row["params"])["k"]
        metrics = json.loads(row["metrics"])
        sizes.add(k)
        assert row["status"] == "ok", row["error"]
        assert row["objective"] == k * (k + 1) / 2          # allreduce over the team's ranks only
        assert metrics["size"] == k and len(set(metrics["world_ranks"])) == k
        assert row["rank"] == metrics["world_ranks"][0]       # team rank 0's result, recorded once
        assert set(metrics["world_ranks"]) <= {1, 2, 3, 4, 5}
    assert sizes == {1, 2, 4}
    assert emews_cmd.leftovers_after_exit() == []


def test_a_size_function_that_gives_no_whole_number_fails_that_task_and_the_job_goes_on(emews_cmd,
                                                                                       tmp_path: Path) -> None:
    """Finding 7 of reliability-2026-11-26: ``"2"`` (or ``True``) from the size function aborted the
    run, 0 evaluations."""
    wf = team_sweep(tmp_path, "allreduce", {"k": {"type": "ordered", "values": [1, 5, 2, 6, 7]}}, 5,
                    task={"timeout": 60, "isolation": "inline", "ranks": f"{TEAM_SIZE}:odd_types"})
    proc = emews_cmd("launch", str(wf), "--workers", "3", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    by_k = {json.loads(r["params"])["k"]: r for r in stored_rows(tmp_path / "exp")}
    assert sorted(by_k) == [1, 2, 5, 6, 7]
    for k, given in ((5, "'2'"), (6, "True")):
        refused = by_k.pop(k)
        assert refused["status"] == "failed" and f"gave {given}, not a whole number of ranks" in refused["error"]
    for k, row in by_k.items():   # 2.0 (k == 7) is 2 ranks
        assert row["status"] == "ok", row["error"]
        assert json.loads(row["metrics"])["size"] == min(k, 2)
    assert emews_cmd.leftovers_after_exit() == []


def test_a_member_that_segfaults_or_hangs_fails_its_task_and_its_ranks_serve_later_tasks(emews_cmd,
                                                                                        tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the test extra installs torch")
    # two jobs: the hanging member costs the whole task timeout, so it runs where the timeout is 5 s and
    # the task after it needs no torch; the task after the crash (four fresh children importing torch,
    # 11 s at load 11 on 2 cores) runs under a timeout it never reaches
    (tmp_path / "hang").mkdir()
    hang_wf = team_sweep(tmp_path / "hang", "members", {"mode": {"type": "categorical", "values": ["hang", "quick"]}},
                         2, task={"timeout": 5, "isolation": "process", "ranks": 2})
    proc = emews_cmd("launch", str(hang_wf), "--workers", "2", "--exp-dir", "hang_exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    by_mode = {json.loads(r["params"])["mode"]: r for r in stored_rows(tmp_path / "hang_exp")}
    hung = by_mode.pop("hang")  # the members waiting for it time out with it: the first timer to fire is named
    assert hung["status"] == "timeout" and "of 2 (rank" in hung["error"], hung["error"]
    assert "ran past the task timeout of 5 s" in hung["error"]
    quick = by_mode.pop("quick")  # the hung team's ranks (both workers) serve the next task
    assert quick["status"] == "ok" and quick["objective"] == 2.0 and quick["id"] > hung["id"], quick["error"]

    wf = team_sweep(tmp_path, "members", {"mode": {"type": "categorical", "values": ["segv", "after"]}}, 2,
                    task={"timeout": 300, "isolation": "process", "ranks": 4})
    proc = emews_cmd("launch", str(wf), "--workers", "5", "--exp-dir", "exp", timeout=600)
    assert proc.returncode == 0, proc.stderr
    exp = tmp_path / "exp"
    by_mode = {json.loads(r["params"])["mode"]: r for r in stored_rows(exp)}
    crashed = by_mode.pop("segv")
    assert crashed["status"] == "crashed"
    assert "team rank 1 of 4" in crashed["error"] and "SIGSEGV" in crashed["error"]
    assert f"on {crashed['host']})" in crashed["error"] and crashed["host"]
    run_dir = task_run_dir(exp / "runs", crashed["id"])
    members = {}   # the members whose objective started before the crash cancelled them
    for path in run_dir.glob("member*.pid"):
        pid, rank = map(int, path.read_text().split())
        members[rank] = pid
    assert (run_dir / "member1.pid").exists() and crashed["rank"] in members
    for pid in members.values():   # every member's child of the failed task is gone
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    for row in by_mode.values():   # later tasks ran, on the same ranks among others
        assert row["status"] == "ok", row["error"]
        assert row["objective"] == 10.0 and json.loads(row["metrics"])["world_size"] == 4
    later = {}     # rank -> pids of the children that ran its parts of later tasks
    for row in by_mode.values():
        if row["id"] > crashed["id"]:
            for path in task_run_dir(exp / "runs", row["id"]).glob("member*.pid"):
                pid, rank = map(int, path.read_text().split())
                later.setdefault(rank, set()).add(pid)
    assert set(members) & set(later)   # the failed team's ranks went back to the pool
    for rank in set(members) & set(later):
        assert members[rank] not in later[rank]   # with a new child: the failed task's was killed
    assert emews_cmd.leftovers_after_exit() == []


def test_a_member_restoring_before_the_process_group_fails_the_task_naming_the_call_to_make_first(
        emews_cmd, tmp_path: Path) -> None:
    # without the team's channel a member cannot get team rank 0's checkpoint: it got its default, so
    # after a retry or a resume rank 0 trained on from its checkpoint and the members from scratch
    wf = team_sweep(tmp_path, "restore_first", ONE_POINT, 1, task={"timeout": 120, "isolation": "process", "ranks": 2})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    [row] = stored_rows(tmp_path / "exp")
    assert row["status"] == "failed", row
    assert "team rank 1 of 2" in row["error"] and "ctx.process_group() before ctx.restore" in row["error"], row["error"]
    assert not (task_run_dir(tmp_path / "exp" / "runs", row["id"]) / "restored1").exists()
    assert emews_cmd.leftovers_after_exit() == []


def test_a_member_that_raises_is_named_with_its_exception_line_in_the_summary(emews_cmd, tmp_path: Path) -> None:
    # the recorded error is "team rank 1 of 2 (...) failed: Traceback (most recent call last):\n..."; its
    # first line, all the summary (and fail fast, the report) showed, named no exception
    wf = team_sweep(tmp_path, "member_raises", ONE_POINT, 1, task={"timeout": 120, "isolation": "process", "ranks": 2})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    [row] = stored_rows(tmp_path / "exp")
    assert row["status"] == "failed" and row["error"].startswith("team rank 1 of 2 (rank"), row["error"]
    [line] = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("most frequent failure")]
    assert re.fullmatch(r"most frequent failure: 1x team rank 1 of 2 \(rank \d+ on \S+\) failed: "
                        r"ValueError: member 1 broke at x=1", line), line
    assert emews_cmd.leftovers_after_exit() == []


def test_each_members_output_is_kept_whole_in_a_file_of_its_own(emews_cmd, tmp_path: Path) -> None:
    # every member appended its spool to the run dir's stdout.txt as it returned: together, in
    # 64 KiB pieces ("...xxxmember 1 line 0 xxx"); rank r's now goes to stdout.rank-r.txt
    wf = team_sweep(tmp_path, "printer", {"lines": {"type": "constant", "value": 20000}}, 1,
                    task={"timeout": 120, "isolation": "process", "ranks": 2})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    [row] = stored_rows(tmp_path / "exp")
    assert row["status"] == "ok", row["error"]
    run_dir = task_run_dir(tmp_path / "exp" / "runs", row["id"])
    for member, name in enumerate(("stdout.txt", "stdout.rank-1.txt")):
        expected = [f"member {member} line {i} " + "x" * 80 for i in range(20000)]
        assert (run_dir / name).read_text().splitlines() == expected, name
    assert emews_cmd.leftovers_after_exit() == []


def test_status_counts_every_rank_a_running_team_holds_as_busy(emews_cmd, tmp_path: Path) -> None:
    # two teams of 2 on 4 workers said "workers busy: 2/4": it counted running tasks, not their ranks
    gated = write_gated(tmp_path, evaluations=2, timeout=120, task={"ranks": 2})
    gated.arm(emews_cmd)  # every member marks its start (a line in its task's mark) and waits at the gate
    job = emews_cmd.popen("launch", str(gated.workflow), "--workers", "4", "--exp-dir", "exp")
    members = lambda: sum(p.read_text().count("\n") for p in gated.marks.iterdir())  # noqa: E731
    try:
        assert wait_until(lambda: members() == 4 or job.poll() is not None, timeout=120)
        # rank 0 records a running task in the store half a second after it started it (later under load)
        status_comes_to_say(emews_cmd, "workers busy: 4/4;")
    finally:
        gated.gate.touch()
    _, err = job.communicate(timeout=120)
    assert job.returncode == 0, err
    assert [r["status"] for r in stored_rows(tmp_path / "exp")] == ["ok", "ok"]
    assert emews_cmd.leftovers_after_exit() == []


def test_ctx_launch_runs_an_mpi_program_of_its_own_from_team_rank_0(emews_cmd, tmp_path: Path) -> None:
    wf = team_sweep(tmp_path, "launcher", ONE_POINT, 1, task={"timeout": 120, "isolation": "process", "ranks": 2})
    proc = emews_cmd("launch", str(wf), "--workers", "4", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    (row,) = stored_rows(tmp_path / "exp")
    metrics = json.loads(row["metrics"])
    assert row["status"] == "ok" and row["objective"] == 0.0, metrics  # the program exited 0
    # a world of its own (2 ranks, not the job's 5), with the environment the objective gave it
    assert metrics["lines"] == ["0 2 yes", "1 2 yes"], metrics
    assert emews_cmd.leftovers_after_exit() == []


def test_an_inline_member_that_raises_returns_early_or_hangs_ends_the_job_and_resume_goes_on(
        emews_cmd, tmp_path: Path) -> None:
    """Team rank 0 waits in ``ctx.comm.allreduce`` for a member that raised, returned or sleeps:
    MPI cannot interrupt it, so the job ends by itself (the task recorded as timed out, one line
    naming the task and the stuck member) and ``emews resume`` goes on with the next point."""
    wf = team_sweep(tmp_path, "stranded", {"mode": {"type": "categorical", "values": ["raise", "early", "hang", "ok"]}},
                    4, task={"timeout": 3, "isolation": "inline", "ranks": 2})
    exp = tmp_path / "exp"
    # rank 0 is stranded 5 s after the timeout instead of 30 where the other member hangs: time enough
    # for that member's own timeout to arrive first under load, and the message says so; 1 s where
    # it raised or returned (its outcome is in already). The timeout is 3 s (each of the three
    # stranded runs sits out timeout + grace; the ok point takes milliseconds). Points run in order.
    graces = {"raise": "1", "early": "1", "hang": "5"}
    emews_cmd.env["EMEWS_STRANDED_GRACE"] = graces["raise"]
    # the stuck rank never confirms the abort: the job waits 0.5 s for it, not 5 s (EMEWS_ABORT_GRACE)
    emews_cmd.env["EMEWS_ABORT_GRACE"] = "0.5"
    try:
        proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
        for count, after in ((1, "early"), (2, "hang"), (3, "ok")):   # one stranded team per run ends it
            assert proc.returncode == 1, proc.stderr
            rows = stored_rows(exp)
            assert len(rows) == count, rows   # its task is stored: resume does not run it again
            row = rows[-1]
            grace = graces[json.loads(row["params"])["mode"]]
            lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(f"emews: task {row['id']}: ")]
            assert len(lines) == 1, proc.stderr
            assert re.search(rf"team rank 0 of 2 \(rank [12] on {re.escape(row['host'])}\) did not end {grace} s "
                             r"after the task timeout of 3 s", lines[0]), lines[0]
            assert lines[0].endswith(f"continue with: emews resume {exp}"), lines[0]
            assert "Traceback" not in proc.stderr, proc.stderr
            emews_cmd.env["EMEWS_STRANDED_GRACE"] = graces.get(after, "1")
            proc = emews_cmd("resume", "exp", timeout=300)
    finally:
        emews_cmd.kill_all()   # only a guard: each run above ends by itself
    assert proc.returncode == 0, proc.stderr
    by_mode = {json.loads(r["params"])["mode"]: r for r in stored_rows(exp)}
    assert by_mode.pop("ok")["objective"] == 3.0
    for mode, row in by_mode.items():
        assert row["status"] == "timeout", (mode, row["error"])
    assert "team rank 0 of 2" in by_mode["raise"]["error"] and "RuntimeError: member 1 failed" in by_mode["raise"]["error"]
    assert "team rank 0 of 2" in by_mode["early"]["error"] and "team rank 1 returned" in by_mode["early"]["error"]
    hung = by_mode["hang"]["error"]   # the member whose timer fired is named
    assert hung.startswith("team rank 1 of 2") and "ran past the task timeout of 3 s" in hung, hung
    assert emews_cmd.leftovers_after_exit() == []



@pytest.mark.parametrize("variable", ["EMEWS_STRANDED_GRACE", "EMEWS_ABORT_GRACE", "EMEWS_SPIN_SECONDS",
                                      "EMEWS_SETUP_TIMEOUT", "EMEWS_START_TIMEOUT"])
@pytest.mark.parametrize("value", ["-1", "abc"])
def test_a_grace_that_is_no_number_of_seconds_is_one_line_and_exit_2(emews_cmd, tmp_path: Path, variable: str,
                                                                     value: str) -> None:
    """Refused by the launch before the experiment is made (EMEWS_START_TIMEOUT, which only the launching
    process reads, was taken as unset: found in review), and by a resume before it takes the lease."""
    wf = team_sweep(tmp_path, "allreduce", ONE_POINT, 1, task={"timeout": 5, "isolation": "inline", "ranks": 2})
    emews_cmd.env[variable] = value
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr  # one line
    assert f"{variable}: '{value}' is not a number of seconds (allowed: a number of seconds >= 0" in proc.stderr
    assert not (tmp_path / "exp").exists()  # nothing made


GRACES = [("EMEWS_STRANDED_GRACE", stranded_grace, STRANDED_GRACE), ("EMEWS_ABORT_GRACE", abort_grace, ABORT_GRACE),
          ("EMEWS_SPIN_SECONDS", spin_seconds, DEFAULT_SPIN), ("EMEWS_SETUP_TIMEOUT", setup_seconds, SETUP_TIMEOUT),
          ("EMEWS_START_TIMEOUT", start_bound, SETUP_TIMEOUT)]


@pytest.mark.parametrize("variable, grace, default", GRACES, ids=[g[0] for g in GRACES])
@pytest.mark.parametrize("value, seconds", [(None, "default"), ("", "default"), ("0", 0.0), (" 2.5 ", 2.5),
                                            ("soon", None), ("nan", None), ("inf", None), ("-0.1", None)])
def test_a_grace_is_the_variables_number_of_seconds_or_the_default(variable: str, grace, default: float,
                                                                   value: str | None, seconds) -> None:
    environ = {} if value is None else {variable: value}
    if seconds is not None:
        assert grace(environ) == (default if seconds == "default" else seconds)
    else:
        with pytest.raises(ConfigError, match=f"{variable}: .* is not a number of seconds"):
            grace(environ)


@pytest.mark.parametrize("value, seconds", [(None, None), ("0.002", 0.002), ("soon", None), ("-1", None)])
def test_a_workers_polling_window_takes_a_bad_value_as_unset(value: str | None, seconds: float | None) -> None:
    """Every rank reads EMEWS_SPIN_SECONDS; a bad value is the default there (rank 0 refuses the run, once)."""
    environ = {} if value is None else {"EMEWS_SPIN_SECONDS": value}
    assert spin_for(2, 2, environ) == (DEFAULT_SPIN if seconds is None else seconds)
    assert spin_for(4, 2, environ) == (0.0 if seconds is None else seconds)  # oversubscribed: no polling


@pytest.mark.parametrize("value", ["abc", "-1", "nan"])
def test_a_resume_refuses_a_bad_start_bound_before_it_takes_the_lease(emews_cmd, tmp_path: Path, value: str) -> None:
    wf = team_sweep(tmp_path, "allreduce", ONE_POINT, 1, task={"timeout": 5, "isolation": "inline", "ranks": 2})
    assert emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300).returncode == 0
    emews_cmd.env["EMEWS_START_TIMEOUT"] = value
    proc = emews_cmd("resume", "exp", "--set", "budget.evaluations=2", timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "EMEWS_START_TIMEOUT: " in proc.stderr, proc.stderr
    assert not (tmp_path / "exp" / "lease.json").exists()
    assert "evaluations: 1" in (tmp_path / "exp" / "workflow.yaml").read_text()  # nothing changed


DDP_COMMAND = """\
import os, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")  # MASTER_ADDR/PORT, RANK, WORLD_SIZE from emews
total = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(total)
print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} local {os.environ['LOCAL_RANK']}", flush=True)
if dist.get_rank() == 0:  # the metric on rank 0 only, as torchrun-style scripts print it
    print(f"value {total.item()}", flush=True)
dist.destroy_process_group()
"""


def test_a_command_objective_on_a_team_gets_the_torch_distributed_rendezvous(emews_cmd, tmp_path: Path) -> None:
    """A command (a DDP training script, torchrun style) with ``task.ranks: 2`` ran on both members with
    no RANK, WORLD_SIZE, MASTER_ADDR or MASTER_PORT: two copies that cannot find each other
    (``init_process_group(init_method="env://")`` failed). Each member's command now gets the team's
    rendezvous, as ``ctx.process_group()`` does for a Python objective; the metric printed on rank 0
    alone is the task's (the other member's command, which prints none, ended well: it exited 0)."""
    pytest.importorskip("torch")
    script = tmp_path / "ddp.py"
    script.write_text(DDP_COMMAND)
    import sys

    wf = write_workflow(tmp_path, optimizer={"name": "sweep"},
                        objective={"command": [sys.executable, str(script)], "metric": "value"},
                        space={"x": {"type": "ordered", "values": [1, 2, 3]}}, budget={"evaluations": 3},
                        task={"timeout": 120, "ranks": 2})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert [r["status"] for r in rows] == ["ok"] * 3, [r["error"] for r in rows]
    assert {r["objective"] for r in rows} == {3.0}  # 1 + 2: the all-reduce over both members
    for row in rows:  # each member's output in a file of its own (one file interleaved their bytes)
        run_dir = task_run_dir(tmp_path / "exp" / "runs", row["id"])
        assert (run_dir / "stdout.txt").read_text().splitlines() == ["rank 0 of 2 local 0", "value 3.0"]
        assert (run_dir / "stdout.rank-1.txt").read_text().splitlines() == ["rank 1 of 2 local 1"]
