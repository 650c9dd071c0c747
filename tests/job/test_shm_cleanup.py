"""A job whose ranks are killed leaves no MPICH shared-memory segment in /dev/shm (rev75).

Found: MPICH makes one segment per node per job (``/dev/shm/mpich_shm_<hash>_<node>``, MBs) and removes
it in ``MPI_Finalize`` only: a rank killed with SIGKILL (mpiexec then kills the others) left it, 1,969 of
them on this machine (4.9 GB of RAM), and a later job of the same PMI name hung on one in ``MPI_Init``.
Each job's ranks now record their node's segments after ``MPI_Init``, and where the job ends the
recorded ones that no live process maps are removed. Real ``mpiexec``, real processes; each test
looks at the segments its own job mapped (read in its ranks), never at the machine's count: other
jobs make and leave segments meanwhile.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from emews.job import shm_records
from emews.processes import mpich_shm
from testutil import (
    PlainJob,
    said,
    segments_left,
    shm_mapper_workflow,
    stopping_site,
    wait_until,
    write_gated_workflow,
    write_workflow,
)

pytestmark = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="Linux only (/proc)")

def launch_mapping(emews_cmd, tmp_path: Path, then: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """``emews launch`` of one ``shm_mapper`` evaluation on 1 worker; its exit and the segments its
    worker mapped that are still there."""
    wf, mapped = shm_mapper_workflow(tmp_path, then)
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    return proc, segments_left(mapped)


def test_a_job_whose_rank_is_killed_leaves_no_segment(emews_cmd, tmp_path: Path) -> None:
    """The worker rank kills itself (SIGKILL) in its task: mpiexec kills rank 0, the launch says a rank
    was killed, and the segment both ranks mapped is gone, the ranks' records with it (without the
    sweep at the launch's end it stayed: 1 segment, 3-4 MB, per killed job)."""
    proc, left = launch_mapping(emews_cmd, tmp_path, "kill")
    assert proc.returncode == 1 and "a rank was killed" in proc.stderr, proc.stderr
    assert left == []
    assert list((tmp_path / "exp").glob(".shm-*")) == []


def test_a_job_that_ends_normally_leaves_no_segment_nor_record(emews_cmd, tmp_path: Path) -> None:
    """A run that completes: MPICH removed its segment itself; the records are removed too."""
    proc, left = launch_mapping(emews_cmd, tmp_path, "return")
    assert proc.returncode == 0, proc.stderr
    assert left == []
    assert list((tmp_path / "exp").glob(".shm-*")) == []


def test_a_recorded_segment_that_a_live_job_maps_is_kept(tmp_path: Path) -> None:
    """A record names two segments (as when a job's PMI name is used again: srun's JOBID.STEP): one
    a live job maps, kept; one a killed job left, removed (and said, with its size)."""
    live, killed = PlainJob(tmp_path / "live", "wait"), PlainJob(tmp_path / "killed", "kill")
    try:
        kept = live.mapped()
        left = killed.mapped()
        killed.proc.wait(timeout=120)
        assert [name for name in left if (mpich_shm.SHM_DIR / name).exists()] == left  # what the fix is for
        folder = shm_records.records_folder(tmp_path, "token")
        assert folder is not None
        folder.mkdir()
        (folder / os.uname().nodename).write_text("\n".join(kept + left) + "\n")
        removed = shm_records.sweep(folder)
        assert [segment.name for segment in removed] == left and all(s.size > 0 for s in removed)
        assert all((mpich_shm.SHM_DIR / name).exists() for name in kept)
        assert not any((mpich_shm.SHM_DIR / name).exists() for name in left)
        assert not folder.exists()
    finally:
        live.end()
        killed.end()


def test_clean_shm_removes_only_this_users_old_segments_that_no_live_process_maps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """``emews clean-shm`` (for segments leaked before the fix): its dry run on /dev/shm lists the
    segment a killed job left, not the one a live job maps, and removes nothing; run on a folder of
    files named as those two plus one made now (``--older-than``: a job starting makes its own), it
    removes only the killed job's, and says how much it freed. The real /dev/shm is never swept
    here: other jobs on this machine leave segments that are not this test's."""
    from emews.cli import main

    live, killed = PlainJob(tmp_path / "live", "wait"), PlainJob(tmp_path / "killed", "kill")
    try:
        kept, left = live.mapped(), killed.mapped()
        killed.proc.wait(timeout=120)
        assert main(["clean-shm", "--dry-run", "--older-than", "0"]) == 0
        listed = capsys.readouterr().out
        assert all(f"would remove {mpich_shm.SHM_DIR / name} (" in listed for name in left), listed
        assert not any(name in listed for name in kept), listed
        assert all((mpich_shm.SHM_DIR / name).exists() for name in left + kept)

        shm = tmp_path / "shm"
        shm.mkdir()
        for name in kept + left:
            (shm / name).write_bytes(b"\0" * 4096)
            os.utime(shm / name, (time.time() - 3600,) * 2)
        (shm / "mpich_shm_fresh_0").write_bytes(b"\0" * 4096)
        (shm / "other_segment").write_bytes(b"\0")
        monkeypatch.setattr(mpich_shm, "SHM_DIR", shm)
        assert main(["clean-shm", "--older-than", "600"]) == 0
        said_lines = capsys.readouterr().out.splitlines()
        assert said_lines == [f"removed {shm / name} (4,096 bytes)" for name in left] + [
            f"{len(left)} segment{'s' if len(left) > 1 else ''}, 0.0 MB freed"
        ]
        assert sorted(os.listdir(shm)) == sorted([*kept, "mpich_shm_fresh_0", "other_segment"])
        assert main(["clean-shm"]) == 0
        assert "nothing to remove" in capsys.readouterr().out
    finally:
        mpich_shm.remove_unmapped(left)  # the killed job's, on the real /dev/shm
        live.end()
        killed.end()


@pytest.mark.parametrize("given", ["-1", "nan", "inf"])
def test_clean_shm_refuses_an_age_that_is_no_number_of_seconds(given: str, capsys: pytest.CaptureFixture) -> None:
    from emews.cli import main

    assert main(["clean-shm", "--dry-run", "--older-than", given]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"emews: error: --older-than: must be a finite number of seconds >= 0, not {given}"]


def test_a_job_stopped_for_a_rank_stuck_before_mpi_init_leaves_no_segment(emews_cmd, tmp_path: Path) -> None:
    """Rank 2 stops itself (SIGSTOP) before it execs Python; ranks 0 and 1 wait in MPI_Init, where MPICH
    has made the node's segment, and no rank can record it. The launch stops the job at the start's
    bound (SIGKILL to its process tree): the segment the waiting ranks map is gone too."""
    (tmp_path / "model.py").write_text("def run(params):\n    return params['x']\n")
    wf = write_workflow(
        tmp_path,
        objective={"module": str(tmp_path / "model.py"), "function": "run"},
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}},
        budget={"evaluations": 2},
    )
    emews_cmd.env["EMEWS_START_TIMEOUT"] = "20"
    site = stopping_site(tmp_path, "kill -STOP")
    job = emews_cmd.popen("launch", str(wf), "--site", str(site), "--workers", "2", "--exp-dir", "exp")
    try:
        waiting = wait_until(lambda: mpich_shm.mapped_by_pids(emews_cmd.processes()), timeout=150)
        assert waiting, said(job)
        out, err = job.communicate(timeout=240)
    finally:
        emews_cmd.kill_all()
    assert job.returncode == 1 and "did not all start within 20 s" in err, err
    assert [name for name in waiting if (mpich_shm.SHM_DIR / name).exists()] == []
    assert list((tmp_path / "exp").glob(".shm-*")) == []


#: an inline objective that kills its worker rank
KILLER = """\
import os, signal

def run(params, ctx):
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_segment_an_earlier_job_killed_with_its_launcher_left_goes_at_the_resume(
    emews_cmd, tmp_path: Path
) -> None:
    """The launcher killed too (``kill -9`` of the whole job, a node lost; found by the chaos harness,
    rev80): nobody swept, and the job's records stayed in the experiment (a copy or a moved folder
    keeps them). The next run of the experiment on this node removes the segments they name that no
    process maps, and this node's record; another node's record is left for that node."""
    wf, _, _ = write_gated_workflow(tmp_path, KILLER, budget={"evaluations": 1}, task={"isolation": "inline"})
    emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    left = Path("/dev/shm", f"mpich_shm_{os.urandom(4).hex()}_0")  # a name no job maps
    earlier = tmp_path / "exp" / ".shm-earliertoken"
    left.write_bytes(bytes(4096))
    try:
        earlier.mkdir()
        (earlier / os.uname().nodename).write_text(f"{left.name}\n")
        (earlier / "another-node").write_text(f"{left.name}\n")
        emews_cmd("resume", "exp", timeout=240)  # its task kills its rank again
        assert not left.exists()
        assert sorted(p.name for p in earlier.iterdir()) == ["another-node"]
    finally:
        left.unlink(missing_ok=True)


def test_what_a_pool_killed_whole_recorded_goes_at_the_experiments_next_run(emews_cmd, tmp_path: Path) -> None:
    """An attached pool killed whole (``kill -9`` of its ``emews attach``, its batch job SIGKILLed) runs no
    end step: its records stay in ``POOL/.shm`` with the segment they name. The experiment's next run
    (here a resume, whose task kills its rank again) removes what they name on this node that no process
    maps, and the record; a live pool's segment (mapped) stays with its record. Without it both stayed
    for good (only the pool's own end looked at its records)."""
    wf, _, _ = write_gated_workflow(tmp_path, KILLER, budget={"evaluations": 1}, task={"isolation": "inline"})
    emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    left = Path("/dev/shm", f"mpich_shm_{os.urandom(4).hex()}_0")  # a name no job maps: a killed pool's
    live = PlainJob(tmp_path / "live", "wait")  # a pool that still runs
    try:
        kept = live.mapped()
        left.write_bytes(bytes(4096))
        killed_pool, live_pool = (tmp_path / "exp" / "pools" / name / ".shm" for name in ("pool-001", "pool-002"))
        for folder, names in ((killed_pool, [left.name]), (live_pool, kept)):
            folder.mkdir(parents=True)
            (folder / os.uname().nodename).write_text("".join(f"{name}\n" for name in names))
        emews_cmd("resume", "exp", timeout=240)
        assert not left.exists() and not killed_pool.exists()
        assert all((mpich_shm.SHM_DIR / name).exists() for name in kept)
        assert (live_pool / os.uname().nodename).read_text().split() == kept
    finally:
        left.unlink(missing_ok=True)
        live.end()
