"""The allocation's end as each batch system tells it (fake environments and client outputs)."""

from __future__ import annotations

import time

from emews.site.job_end import job_end_time, pbs_end

TORQUE = """Job Id: 548.moab
    Job_Name = STDIN
    Resource_List.walltime = 01:00:00
    Walltime.Remaining = 3593
"""
PBS_PRO = """Job Id: 77.pbs
    Job_Name = emews
    stime = Mon Nov 23 18:00:00 2026
    Resource_List.walltime = 02:30:00
    Resource_List.select = 2:ncpus=64
"""


def test_slurm_end_time_comes_from_its_variable() -> None:
    assert job_end_time(0.0, {"SLURM_JOB_END_TIME": "1800000000"}, lambda argv: None) == 1_800_000_000.0


def test_pbs_end_from_torques_remaining_walltime() -> None:
    asked = []
    before = time.time()
    end = job_end_time(0.0, {"PBS_JOBID": "548.moab"}, lambda argv: asked.append(list(argv)) or TORQUE)
    assert asked == [["qstat", "-f", "548.moab"]]
    assert before + 3593 <= end <= time.time() + 3593


def test_pbs_pro_end_is_its_start_plus_the_requested_walltime() -> None:
    start = time.mktime(time.strptime("Mon Nov 23 18:00:00 2026", "%a %b %d %H:%M:%S %Y"))
    assert pbs_end(PBS_PRO, 0.0) == start + 2.5 * 3600
    assert pbs_end("Job Id: 1\n    Resource_List.walltime = 01:00:00\n", 0.0) is None   # no start time


def test_lsf_run_limit_counts_from_the_jobs_start() -> None:
    asked = []
    end = job_end_time(1000.0, {"LSB_JOBID": "4242"}, lambda argv: asked.append(list(argv)) or "02:00:00\n")
    assert asked == [["bjobs", "-noheader", "-hms", "-o", "runtimelimit", "4242"]] and end == 1000.0 + 7200
    assert job_end_time(1000.0, {"LSB_JOBID": "4242"}, lambda argv: "-\n") is None        # no run limit


def test_no_batch_job_or_no_answer_gives_none() -> None:
    assert job_end_time(0.0, {}, lambda argv: "01:00:00") is None
    assert job_end_time(0.0, {"PBS_JOBID": "1"}, lambda argv: None) is None
