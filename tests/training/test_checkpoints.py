"""Checkpoint files: atomic, verified on read, written in the background; staged ones never restored."""

from __future__ import annotations

import errno
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from emews.training.checkpoints import (CheckpointWriter, CorruptCheckpoint, checkpoint_path, frame, framed_size, local_tier,
                               read_checkpoint, remove_dead_temps, remove_inside, snapshot, unset_variables,
                               write_atomic, write_checkpoint_file)
from emews.core.textfiles import TempWriter, temp_name, temp_writer
from emews.store.trial_store import TrialStore
from emews.training.messages import CheckpointNote, Report
from testutil import wait_until


@given(st.recursive(st.none() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=20))
def test_an_object_comes_back_as_it_was(tmp_path_factory, value) -> None:
    path = tmp_path_factory.mktemp("ck") / "a.ckpt"
    write_atomic(path, frame(*snapshot(value)))
    assert read_checkpoint(path) == value


@given(st.binary(min_size=1, max_size=2000), st.data())
def test_any_cut_or_flipped_byte_is_refused(tmp_path_factory, payload, data) -> None:
    path = tmp_path_factory.mktemp("ck") / "a.ckpt"
    write_atomic(path, frame(*snapshot(payload)))
    whole = path.read_bytes()
    cut = data.draw(st.integers(0, len(whole) - 1))
    path.write_bytes(whole[:cut])
    with pytest.raises(CorruptCheckpoint):
        read_checkpoint(path)
    flipped = bytearray(whole)
    at = data.draw(st.integers(0, len(whole) - 1))
    flipped[at] ^= 0xFF
    path.write_bytes(bytes(flipped))
    with pytest.raises(CorruptCheckpoint):
        read_checkpoint(path)


@pytest.mark.parametrize("value", [{"w": list(range(100))}, b"raw", None])
def test_the_size_noted_is_the_size_written(tmp_path: Path, value) -> None:
    kind, payload, name = snapshot(value)
    path = tmp_path / "a.ckpt"
    write_atomic(path, frame(kind, payload, name))
    assert path.stat().st_size == framed_size(kind, payload, name)


def test_a_file_checkpoint_is_copied_and_extracted(tmp_path: Path) -> None:
    model = tmp_path / "model.bin"
    model.write_bytes(b"\x00weights" * 100)
    path = tmp_path / "ck" / "a.ckpt"
    write_atomic(path, frame(*snapshot(model)))
    model.write_bytes(b"changed after the snapshot")
    restored = read_checkpoint(path, tmp_path / "restore")
    assert restored == tmp_path / "restore" / "model.bin"
    assert restored.read_bytes() == b"\x00weights" * 100


def test_no_temporary_file_is_left_and_the_final_name_appears_whole(tmp_path: Path) -> None:
    path = checkpoint_path(tmp_path, 7, 3, 0)
    assert path == tmp_path / "000007" / "step-00000003-000.ckpt"
    write_atomic(path, frame(*snapshot({"w": list(range(1000))})))
    assert os.listdir(path.parent) == [path.name]


def test_the_background_writer_returns_before_the_write_and_reports_it_done(tmp_path: Path) -> None:
    """A writer thread blocked on a gate: submit returns at once, done() names the file once written."""
    gate = threading.Event()
    writer = CheckpointWriter()
    real_write = writer._write

    def gated(*job):
        gate.wait(60)
        real_write(*job)

    writer._write = gated  # hold the thread, not the caller
    target = tmp_path / "x.ckpt"
    writer.submit(target, *snapshot("state"))
    assert not target.exists() and writer.done() == ()
    gate.set()
    writer.flush()
    assert writer.done() == (str(target),) and read_checkpoint(target) == "state"



def test_a_local_tier_stages_the_file_then_flushes_it_to_the_experiment(tmp_path: Path) -> None:
    """With ``local_dir`` the file is staged on the local tier; the flush thread (held on a gate
    here) copies it to the experiment directory, and only then is it done (durable)."""
    gate = threading.Event()
    local, exp = tmp_path / "local", tmp_path / "exp"
    writer = CheckpointWriter(local_dir=local)
    staged = local / "000007" / "step-00000003-000.ckpt"
    real_copy = writer._flush_files

    def gated() -> None:
        gate.wait(60)
        real_copy()

    writer._flush_files = gated
    target = checkpoint_path(exp, 7, 3, 0)
    writer.submit(target, *snapshot({"w": [1, 2, 3]}))
    assert wait_until(staged.exists, timeout=60)          # staged locally: the memory is free
    assert not target.exists() and writer.done() == ()      # not durable yet: never a restore candidate
    gate.set()
    writer.flush()
    assert writer.done() == (str(target),) and read_checkpoint(target) == {"w": [1, 2, 3]}
    assert not staged.exists()                              # the local copy is gone once flushed
    assert not local.exists()                               # and its folders: the tier keeps nothing


@pytest.mark.parametrize("tier", [None, "tier"])
def test_a_checkpoint_queued_when_the_experiment_moves_is_written_where_it_went(
    tmp_path: Path, monkeypatch, tier: str | None
) -> None:
    """``ctx.report(checkpoint=...)`` returns once the snapshot is taken; its writer thread (held on
    a gate here, as a loaded machine holds it: it runs at a lower priority) wrote the file under the
    name the experiment had at the report, so ``mv EXP EXP2`` before the write lost it ('checkpoint
    not written': no such folder) and a retry restored nothing. Now it is written where the
    experiment went (directly, or flushed there from a local tier)."""
    from emews.core.followed_dir import FollowedDir
    from emews.training.session import TrialSession

    exp, moved = tmp_path / "exp", tmp_path / "exp2"
    exp.mkdir()
    session = TrialSession(1, None, experiment=FollowedDir(exp), run_dir=None,
                           local_dir=None if tier is None else str(tmp_path / tier))
    writer = session._writer
    writer.flush(), writer.done(), writer.failures()  # the process's writer: nothing of another test
    gate, real_write = threading.Event(), writer._write

    def gated(*job):
        gate.wait(60)
        real_write(*job)

    monkeypatch.setattr(writer, "_write", gated)
    session.report(1, {"loss": 1.0}, checkpoint={"step": 1})
    exp.rename(moved)
    gate.set()
    writer.flush()
    written = moved / "checkpoints" / "000001" / "step-00000001-000.ckpt"
    assert (writer.done(), writer.failures()) == ((str(written),), ())
    assert read_checkpoint(written) == {"step": 1}
    assert not exp.exists()


def test_a_checkpoint_being_written_when_the_experiment_moves_lands_where_it_went(tmp_path: Path) -> None:
    """The experiment is moved between two pieces of a checkpoint's write: the rename into place
    named the old path and failed (the file lost, its temporary file left in EXP2); now the whole
    file is in EXP2 under its final name, and nothing else is."""
    from emews.core.followed_dir import FollowedDir

    exp, moved = tmp_path / "exp", tmp_path / "exp2"
    exp.mkdir()
    followed, inside = FollowedDir(exp), checkpoint_path(Path("checkpoints"), 1, 1, 0)

    def pieces():
        yield b"written before the move, "
        exp.rename(moved)
        yield b"and after it"

    path = write_checkpoint_file(lambda: followed.current() / inside, pieces())
    assert path == moved / inside and path.read_bytes() == b"written before the move, and after it"
    assert os.listdir(path.parent) == [path.name] and not exp.exists()


def test_a_flush_that_fails_never_makes_the_checkpoint_durable(tmp_path: Path) -> None:
    (tmp_path / "exp").write_text("a file where the experiment's directory should be")
    writer = CheckpointWriter(local_dir=tmp_path / "local")
    writer.submit(tmp_path / "exp" / "000001" / "step-00000001-000.ckpt", *snapshot("state"))
    writer.flush()
    assert writer.done() == () and len(writer.failures()) == 1

def test_only_checkpoints_whose_file_is_in_place_are_restore_candidates(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "results.db", isolation_level=None)
    store = TrialStore(db)
    paths = [checkpoint_path(tmp_path, 0, step, 0) for step in (1, 2, 3)]
    for step, path in enumerate(paths, start=1):
        store.add_report(Report(0, 1, step, {"loss": 1.0 / step}, 0.0, CheckpointNote(str(path), 10)), 1.0 / step,
                         1.0 / step)
    write_atomic(paths[0], frame(*snapshot("one")))
    write_atomic(paths[1], frame(*snapshot("two")))  # step 3 staged: its write never finished
    assert [c.step for c in store.candidates(0)] == [2, 1]
    assert {r.step: r.state for r in store.checkpoints()} == {1: "durable", 2: "durable", 3: "staged"}


# -- file hygiene: nothing partial is left behind -------------------------------------------------

#: run in a child whose files may not grow past 64 KiB (RLIMIT_FSIZE; SIGXFSZ ignored, so a write
#: past it fails with EFBIG, as a full disk fails with ENOSPC); prints the error's errno
_LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, resource.RLIM_INFINITY))
from pathlib import Path
folder = Path(sys.argv[1])
{body}
"""


def run_limited(folder: Path, body: str) -> str:
    proc = subprocess.run([sys.executable, "-c", _LIMITED.format(body=textwrap.dedent(body)), str(folder)], cwd=folder,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("writer", ["checkpoint", "summary"])
def test_a_write_that_fails_leaves_no_temporary_file(tmp_path: Path, writer: str) -> None:
    """The disk fills up mid-write: the error goes on, and neither the checkpoint's temp file
    (``.step-*.ckpt.PID.TID.tmp``) nor ``.summary.json.PID.tmp`` stays behind (one helper)."""
    call = {"checkpoint": "write_atomic(folder / 'ck' / 'a.ckpt', [b'x' * 50_000, b'y' * 50_000])",
            "summary": "write_summary(folder, {'blob': 'x' * 100_000})"}[writer]
    out = run_limited(tmp_path, f"""
        from emews.job.rank_zero import write_summary
        from emews.core.textfiles import write_atomic
        try:
            {call}
        except OSError as exc:
            print(exc.errno)
        """)
    assert out == str(errno.EFBIG)
    assert files_under(tmp_path) == []


def test_a_failed_staging_leaves_nothing_on_the_local_tier(tmp_path: Path) -> None:
    """The local tier is full: the partial staged file is removed (the write falls back to the
    experiment directory, full too here: no temp file there either) and the checkpoint is failed."""
    out = run_limited(tmp_path, """
        from emews.training.checkpoints import CheckpointWriter, checkpoint_path, snapshot
        writer = CheckpointWriter(local_dir=folder / "local")
        writer.submit(checkpoint_path(folder / "exp", 1, 1, 0), *snapshot(b"w" * 200_000))
        writer.flush()
        print(len(writer.failures()), len(writer.done()))
        """)
    assert out == "1 0"
    assert files_under(tmp_path) == []


def test_a_flush_that_fails_leaves_nothing_on_the_local_tier(tmp_path: Path) -> None:
    (tmp_path / "exp").write_text("a file where the experiment's directory should be")
    writer = CheckpointWriter(local_dir=tmp_path / "local")
    writer.submit(tmp_path / "exp" / "000001" / "step-00000001-000.ckpt", *snapshot("state"))
    writer.flush()
    assert len(writer.failures()) == 1 and not (tmp_path / "local").exists()


def test_only_the_temp_files_of_dead_writers_are_removed(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    names = {"dead": f".step-00000003-000.ckpt.{dead_pid}.140213.tmp",
             "alive": f".step-00000004-000.ckpt.{os.getpid()}.140213.tmp",
             "checkpoint": "step-00000002-000.ckpt", "other": ".notes.tmp"}
    for name in names.values():
        (tmp_path / "000007").mkdir(exist_ok=True)
        (tmp_path / "000007" / name).write_bytes(b"partial")
    assert remove_dead_temps(tmp_path) == 1
    assert sorted(p.name for p in (tmp_path / "000007").iterdir()) == sorted(
        names[k] for k in ("alive", "checkpoint", "other"))


def test_a_temp_file_names_its_writers_host_and_another_hosts_goes_once_its_trial_is_held_no_more(
        tmp_path: Path) -> None:
    """Pools: a writer on another node cannot be asked whether its process lives; its trial's lease
    tells (``held``). A job's own run (no ``held``) owns every writer: another node's are over."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    here = socket.gethostname()
    write_atomic(tmp_path / "000007" / "step-00000001-000.ckpt", [b"whole"])
    assert temp_writer(temp_name("step-00000001-000.ckpt")) == TempWriter("step-00000001-000.ckpt", here, os.getpid())
    names = {"dead here": (7, f".step-00000002-000.ckpt@{here}.{dead.stdout.strip()}.1.tmp"),
             "alive here": (7, f".step-00000003-000.ckpt@{here}.{os.getpid()}.1.tmp"),
             "elsewhere, held": (7, f".step-00000004-000.ckpt@node9.cluster.{os.getpid()}.1.tmp"),
             "elsewhere, not held": (8, ".step-00000004-000-a1.ckpt@node9.cluster.1.1.tmp"),
             "unknown host": (8, f".step-00000005-000.ckpt.{dead.stdout.strip()}.1.tmp")}

    def make() -> None:
        for trial, name in names.values():
            (tmp_path / f"{trial:06d}").mkdir(exist_ok=True)
            (tmp_path / f"{trial:06d}" / name).write_bytes(b"partial")

    def left() -> list[str]:
        return sorted(key for key, (trial, name) in names.items() if (tmp_path / f"{trial:06d}" / name).exists())

    make()
    assert remove_dead_temps(tmp_path, held=lambda: {7}) == 2
    assert left() == ["alive here", "elsewhere, held", "unknown host"]
    make()
    assert remove_dead_temps(tmp_path) == 4  # a job's own run: the last job's writers on every node are gone
    assert left() == ["alive here"]
    assert (tmp_path / "000007" / "step-00000001-000.ckpt").read_bytes() == b"whole"


def test_retention_deletes_nothing_outside_its_experiment(tmp_path: Path) -> None:
    exp, other = tmp_path / "exp", tmp_path / "other"
    for folder in (exp, other):
        (folder / "checkpoints" / "000001").mkdir(parents=True)
        (folder / "checkpoints" / "000001" / "a.ckpt").write_bytes(b"x")
    assert not remove_inside(other / "checkpoints" / "000001" / "a.ckpt", exp)
    assert not remove_inside(exp / ".." / "other" / "checkpoints" / "000001" / "a.ckpt", exp)
    assert (other / "checkpoints" / "000001" / "a.ckpt").exists()
    assert remove_inside(exp / "checkpoints" / "000001" / "a.ckpt", exp)
    assert not (exp / "checkpoints" / "000001" / "a.ckpt").exists()


@pytest.mark.parametrize("text, unset", [("$NOPE_UNSET/stage", ["NOPE_UNSET"]), ("${NOPE_UNSET}/x", ["NOPE_UNSET"]),
                                         ("$HOME/stage", []), ("/plain/path", [])])
def test_unset_variables_in_a_local_tier_are_named(monkeypatch, text: str, unset: list[str]) -> None:
    monkeypatch.delenv("NOPE_UNSET", raising=False)
    monkeypatch.setenv("HOME", "/home/someone")
    assert unset_variables(text) == unset
    assert (local_tier(text) is None) == bool(unset)
