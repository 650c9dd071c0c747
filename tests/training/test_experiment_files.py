"""An experiment's files under a real ``mpiexec``: a copied or moved experiment reads and deletes
only its own checkpoints, and a full disk or an unset ``local_dir`` variable ends the run with
one clear line."""

from __future__ import annotations

import hashlib
import os
import resource
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

from emews.output.catalog import load_best
from emews.training.checkpoints import frame, read_checkpoint, snapshot, write_atomic
from emews.store.trial_store import TrialStore
from test_trial_runs import launch, trainer_workflow
from testutil import events, query, stored_rows, wait_until, write_workflow


def checkpoint_files(exp: Path) -> dict[str, str]:
    """``checkpoints/...`` path -> SHA-256 of every checkpoint file of ``exp``."""
    return {p.relative_to(exp).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in (exp / "checkpoints").rglob("*.ckpt")}


def mark_as_copy(exp: Path) -> None:
    """Rewrite every checkpoint of ``exp`` with ``"copy"`` at the end of its trail: a trial that
    restores one of these shows it (the trainer logs the trail it restored)."""
    for path in (exp / "checkpoints").rglob("*.ckpt"):
        state = read_checkpoint(path)
        write_atomic(path, frame(*snapshot({**state, "trail": [*state["trail"], "copy"]})))


def count(exp: Path, sql: str) -> int:
    """The number ``sql`` selects from ``exp``'s store, 0 while the store or its table is not there yet."""
    try:
        return query(exp, sql)[0][0] or 0 if (exp / "results.db").exists() else 0
    except sqlite3.Error:
        return 0


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(done.stdout)


def starts(log: Path) -> dict[int, dict]:
    """Task -> its first ``start`` event in ``log``."""
    found: dict[int, dict] = {}
    for event in events(log):
        if event["event"] == "start":
            found.setdefault(event["task"], event)
    return found


def test_resuming_a_copy_of_a_killed_experiment_never_touches_the_original(emews_cmd, tmp_path: Path) -> None:
    """Finding 1. Trial 0 is held after its step-4 report (``keep_last: 1``; a checkpoint is known
    durable with the next report, so step 2's is, step 3's may be), the whole job is killed
    (kill -9), the experiment copied (``cp -a``). Resuming the copy
    restores trial 0 from the copy's files (marked), removes the temp file a writer killed
    mid-write left, and deletes none of the original's files; resuming the original then
    continues trial 0 from its own step, never from scratch."""
    log, gate = tmp_path / "log.jsonl", tmp_path / "gate"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_HOLD_AT="4", TRAINER_GATE=str(gate))
    wf = trainer_workflow(tmp_path, task={"isolation": "process"}, checkpoints={"keep_last": 1})
    orig, copy = tmp_path / "orig", tmp_path / "copy"
    job = emews_cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", "orig")
    durable_step = "SELECT MAX(step) FROM checkpoints WHERE trial = 0 AND state = 'durable'"
    # held, not past the hold: waiting for step 3's checkpoint to be durable sat out the trainer's
    # 120 s hold whenever its write ended after report 4 (nothing announces it until report 5)
    held = gate.with_name("gate.held")
    assert wait_until(lambda: held.exists() and count(orig, durable_step) >= 2, timeout=180), \
        job.communicate(timeout=60)
    emews_cmd.kill_all()
    job.wait()
    assert emews_cmd.leftovers_after_exit() == []
    kept = query(orig, durable_step)[0][0]
    subprocess.run(["cp", "-a", str(orig), str(copy)], check=True)
    before = checkpoint_files(orig)
    assert before
    mark_as_copy(copy)
    fragment = copy / "checkpoints" / "000000" / f".step-00000005-000.ckpt.{dead_pid()}.140213.tmp"
    fragment.write_bytes(b"half a checkpoint")

    del emews_cmd.env["TRAINER_HOLD_AT"]
    emews_cmd.env["TRAINER_LOG"] = str(copy_log := tmp_path / "copy.jsonl")
    resumed = emews_cmd("resume", "copy", timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    assert "not restoring" not in resumed.stderr
    assert checkpoint_files(orig) == before                       # not one file of the original deleted or altered
    first = starts(copy_log)[0]
    assert first["restored"] >= kept and first["trail"][-1] == "copy", first   # the copy's own file
    assert not fragment.exists()
    assert len(stored_rows(copy)) == 5
    assert all(Path(p).parts[0] == "checkpoints" for (p,) in query(copy, "SELECT path FROM checkpoints"))

    emews_cmd.env["TRAINER_LOG"] = str(orig_log := tmp_path / "orig.jsonl")
    again = emews_cmd("resume", "orig", timeout=240)
    assert again.returncode == 0, again.stderr
    assert "not restoring" not in again.stderr
    first = starts(orig_log)[0]
    assert first["restored"] >= kept and "copy" not in first["trail"], first
    assert len(stored_rows(orig)) == 5


def finished_experiment(emews_cmd, tmp_path: Path, name: str) -> Path:
    wf = trainer_workflow(tmp_path, rates=[0.5, 0.2], epochs=3, task={"isolation": "inline"})
    return launch(emews_cmd, wf, exp=name)


def test_a_moved_experiment_lists_and_loads_its_checkpoints(emews_cmd, tmp_path: Path) -> None:
    """After ``mv``, ``emews checkpoints`` names the files where they are now, and
    ``catalog.load_best`` loads them."""
    moved = tmp_path / "moved"
    finished_experiment(emews_cmd, tmp_path, "before").rename(moved)
    listing = emews_cmd("checkpoints", "moved", check=True).stdout.splitlines()[1:]
    paths = [Path(line.split()[-1]) for line in listing]
    assert len(paths) == 6 and all(p.is_relative_to(moved) and p.is_file() for p in paths), paths
    best = load_best(moved, k=2)
    assert len(best) == 2 and all(state["trail"] == list(range(1, row.step + 1)) for row, state in best)


def test_an_older_store_with_absolute_paths_still_resolves_after_a_move(emews_cmd, tmp_path: Path) -> None:
    """A store written before paths were relative holds absolute ones, under the directory the
    experiment was created in: after ``mv`` they are read at their place in the new directory,
    and opening the store for writing rewrites them relative."""
    before = finished_experiment(emews_cmd, tmp_path, "before")
    db = sqlite3.connect(before / "results.db")
    with db:
        db.execute("UPDATE checkpoints SET path = ? || '/' || path", (str(before),))
    db.close()
    assert all(Path(p).is_absolute() for (p,) in query(before, "SELECT path FROM checkpoints"))
    moved = tmp_path / "moved"
    before.rename(moved)
    listing = emews_cmd("checkpoints", "moved", check=True).stdout.splitlines()[1:]
    assert all(Path(line.split()[-1]).is_relative_to(moved) for line in listing) and len(listing) == 6
    assert [row.path for row, _ in load_best(moved, k=6)] and all(state["trail"] for _, state in load_best(moved, k=6))

    db = sqlite3.connect(moved / "results.db", isolation_level=None)
    store = TrialStore(db, root=moved)
    assert [Path(c.path) for c in store.candidates(1)] == [
        moved / "checkpoints" / "000001" / f"step-{s:08d}-{s - 1:03d}.ckpt" for s in (3, 2, 1)]
    db.close()
    assert {p for (p,) in query(moved, "SELECT path FROM checkpoints")} == {
        f"checkpoints/{t:06d}/step-{s:08d}-{s - 1:03d}.ckpt" for t in (0, 1) for s in (1, 2, 3)}


def test_an_unset_variable_in_local_dir_is_a_configuration_error(emews_cmd, tmp_path: Path) -> None:
    """Finding 9: ``local_dir: $NOPE_UNSET/stage`` refuses the run (exit 2, one line naming the
    file, the key and the variable) instead of staging in a literal ``$NOPE_UNSET`` folder."""
    emews_cmd.env.pop("NOPE_UNSET", None)
    wf = trainer_workflow(tmp_path, rates=[0.2], epochs=2, checkpoints={"local_dir": "$NOPE_UNSET/stage"})
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=120)
    assert proc.returncode == 2, proc.stderr
    said = [line for line in proc.stderr.splitlines() if line.startswith("emews")]
    assert len(said) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "workflow.yaml: checkpoints.local_dir" in said[0] and "NOPE_UNSET" in said[0], said
    assert not [p for p in tmp_path.rglob("*") if "NOPE_UNSET" in p.name]


def rank_zero(emews_cmd) -> int | None:
    """The process id of the job's rank 0."""
    for pid, command in emews_cmd.processes().items():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if "emews run" in command and b"PMI_RANK=0" in environ:
            return pid
    return None


def test_a_full_disk_while_training_ends_the_run_with_one_line(emews_cmd, tmp_path: Path) -> None:
    """Finding 10. Trial 0 is held after its step-2 report; then rank 0's files may grow no more
    (``prlimit`` of its file size to the store log's: a write past it fails, as on a full disk) and
    the trial goes on.
    Its next report cannot be stored: the run ends with exit 1 and one line (no thread
    traceback, no MPI abort), the store intact; once writes work again, ``emews resume``
    completes the budget with each id once."""
    log, gate = tmp_path / "log.jsonl", tmp_path / "gate"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_HOLD_AT="2", TRAINER_GATE=str(gate))
    wf = trainer_workflow(tmp_path, task={"isolation": "process"})
    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", "exp")
    assert wait_until(lambda: count(exp, "SELECT COUNT(*) FROM reports") >= 2, timeout=180), job.communicate(timeout=60)
    pid = wait_until(lambda: rank_zero(emews_cmd), timeout=30)
    assert pid is not None
    full = (exp / "results.db-wal").stat().st_size  # no byte more in the store's log, nor in any file
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (full, resource.prlimit(pid, resource.RLIMIT_FSIZE)[1]))
    gate.touch()
    _, err = job.communicate(timeout=240)
    assert job.returncode == 1, err
    for noise in ("Traceback", "Exception in thread", "BAD TERMINATION", "Abort("):
        assert noise not in err, err
    said = [line for line in err.splitlines() if line.startswith("emews")]
    assert len(said) == 1 and "cannot write the experiment" in said[0] and "emews resume" in said[0], err
    assert emews_cmd.leftovers_after_exit() == []
    db = sqlite3.connect(exp / "results.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    assert not list(exp.glob(".*.tmp"))

    del emews_cmd.env["TRAINER_HOLD_AT"]
    resumed = emews_cmd("resume", "exp", timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    ids = [r["id"] for r in stored_rows(exp)]
    assert sorted(ids) == list(range(5)) and {r["status"] for r in stored_rows(exp)} == {"ok"}


def test_checkpoints_a_full_disk_refuses_are_said_on_the_runs_stderr(emews_cmd, tmp_path: Path) -> None:
    """A checkpoint larger than the room left (here: a file size limit, ``ulimit -f``, on the whole
    run, as a quota or a disk that fills) could not be written while the small store commits still
    could: the run went on and ended ``ok`` (exit 0) with every checkpoint lost, said only in each
    task's ``stderr.txt``, so a retry or a resume would start the trials from scratch. The run's
    stderr now says the first such failure in one line (what, and what to do), the log every one."""
    log = tmp_path / "log.jsonl"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_BLOB=str(8 << 20))  # 8 MiB a checkpoint
    wf = trainer_workflow(tmp_path, epochs=3, task={"isolation": "process"})
    limit = 6 << 20  # above what MPI's shared-memory files need (~4.3 MB), below a checkpoint

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    run = subprocess.run([sys.executable, "-m", "emews", "launch", str(wf), "--workers", "1", "--exp-dir", "exp"],
                         cwd=tmp_path, env=emews_cmd.env, capture_output=True, text=True, timeout=300,
                         preexec_fn=limited)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    said = [line for line in run.stderr.splitlines() if line.startswith("emews: trial")]
    assert len(said) == 1, run.stderr
    assert "checkpoint not written" in said[0] and "File too large" in said[0] and "emews resume" in said[0]
    exp = tmp_path / "exp"
    assert count(exp, "SELECT COUNT(*) FROM checkpoints WHERE state = 'durable'") == 0
    assert (exp / "emews.log").read_text().count("checkpoint not written") == 5 * 3  # 5 trials, 3 steps


def test_a_local_tier_left_by_killed_writers_is_cleared_by_the_next_run_on_the_host(emews_cmd, tmp_path: Path) -> None:
    """A ``kill -9`` before the flush leaves the writer's staging folder on the node-local tier (the
    newest checkpoints, hundreds of MB; on ``/dev/shm`` node memory). The next run that stages on
    that tier from this host removes the folders of this host's dead writers, and only those: a live
    process's folder and another host's (a tier on shared storage) stay. Before, nothing ever
    removed them (``emews-PID`` folders piled up run after run)."""
    tier = tmp_path / "node-local"
    host = socket.gethostname()
    dead = tier / f"emews-{host}-{dead_pid()}" / "000000" / "step-00000004-003.ckpt"
    alive = tier / f"emews-{host}-{os.getpid()}" / "000000" / "step-00000001-000.ckpt"
    elsewhere = tier / f"emews-{host}-2-{dead_pid()}" / "000000" / "step-00000001-000.ckpt"  # host HOST-2's
    for path in (dead, alive, elsewhere):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"a checkpoint staged, never flushed")
    wf = trainer_workflow(tmp_path, rates=[0.2], task={"isolation": "process"},
                          checkpoints={"local_dir": str(tier)})
    exp = launch(emews_cmd, wf)
    assert [(r["status"], r["objective"]) for r in stored_rows(exp)] == [("ok", 0.2 + 1 / 9)]
    left = sorted(p.relative_to(tier).as_posix() for p in tier.rglob("*") if p.is_file())
    assert left == sorted(p.relative_to(tier).as_posix() for p in (alive, elsewhere))


def test_load_best_loads_an_object_of_a_class_of_the_objectives_file(emews_cmd, tmp_path: Path) -> None:
    """A checkpoint that holds an object of a class defined in the objective's file (a
    ``torch.nn.Module`` subclass, a dataclass) names that class by the module the workers imported
    the file as (``emews_objective_<stem>``). ``load_best`` in a fresh Python, outside the launch
    folder, raised ``ModuleNotFoundError: No module named 'emews_objective_net'``; it now imports the
    experiment's objective file for it, and a file gone since is one error naming the checkpoint
    and the file."""
    (tmp_path / "net.py").write_text(
        "import dataclasses\n\n"
        "@dataclasses.dataclass\n"
        "class Weights:\n"
        "    rate: float\n"
        "    step: int\n\n"
        "def run(params, ctx):\n"
        "    for step in (1, 2):\n"
        "        ctx.report(step=step, metrics={'loss': params['rate'] / step},\n"
        "                   checkpoint=Weights(params['rate'], step))\n"
        "    return {'loss': params['rate'] / 2}\n")
    wf = write_workflow(tmp_path, objective={"module": "net.py", "metric": "loss"},
                        optimizer={"name": "sweep"}, space={"rate": {"type": "ordered", "values": [0.4, 0.2]}},
                        budget={"evaluations": 2})
    exp = launch(emews_cmd, wf)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = ("import sys\nfrom emews import load_best\n"
              "for row, state in load_best(sys.argv[1], k=2):\n"
              "    print(row.trial, row.step, type(state).__name__, state.rate, state.step)\n")
    loaded = subprocess.run([sys.executable, "-c", script, str(exp)], cwd=elsewhere, env=emews_cmd.env,
                            capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.splitlines() == ["1 2 Weights 0.2 2", "0 2 Weights 0.4 2"]

    (tmp_path / "net.py").rename(tmp_path / "net-gone.py")
    gone = subprocess.run([sys.executable, "-c", script, str(exp)], cwd=elsewhere, env=emews_cmd.env,
                          capture_output=True, text=True, timeout=120)
    assert gone.returncode == 1
    last = gone.stderr.strip().splitlines()[-1]
    assert "net.py" in last and "step-00000002" in last and "emews_objective_net" in last, gone.stderr


def test_a_run_removes_the_checkpoint_temp_files_of_writers_killed_mid_write(emews_cmd, tmp_path: Path) -> None:
    """Finding 9: after a ``kill -9`` mid-write, a ``.step-*.ckpt.PID.TID.tmp`` fragment (up to the
    checkpoint's size) stayed in ``checkpoints/`` after the resume had finished, in 8 of 10 runs.
    The next run removes those of dead writers, and only those (a live writer's stays)."""
    wf = trainer_workflow(tmp_path, rates=[0.2, 0.4], task={"isolation": "process"})
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", "--set", "budget.evaluations=1",
                     timeout=240)
    assert proc.returncode == 0, proc.stderr
    exp = tmp_path / "exp"
    trial = next((exp / "checkpoints").iterdir())
    dead = trial / f".step-00000009-008.ckpt.{dead_pid()}.140213.tmp"
    alive = trial / f".step-00000009-008.ckpt.{os.getpid()}.140213.tmp"
    for path in (dead, alive):
        path.write_bytes(b"half a checkpoint")
    proc = emews_cmd("resume", "exp", "--set", "budget.evaluations=2", timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in stored_rows(exp)] == ["ok", "ok"]
    assert not dead.exists() and alive.exists()
