"""The watch of a job's start stops a job past its bound only when it could tell that rank 0 had not
joined (emews/job/job_start.py): a look that fails (a pool's store that does not answer the watch,
whose rank 0 may well have registered) is asked again, and the job is not stopped on it.

Found in review: an attached pool's watch took a store that did not answer for "not registered" and
stopped a pool that may have been running; a batch pool's watch (beside its launcher, maybe on
another node than rank 0) reads the store over the network."""

from __future__ import annotations

import subprocess
import threading

from emews.core.errors import EmewsError
from emews.job.job_start import JobStart
from testutil import wait_until


def test_a_look_that_fails_does_not_stop_the_job(tmp_path) -> None:
    """Its bound already past, the watch's looks fail: the job (a sleeping process) runs on; once a
    look answers (rank 0 has not joined) it is stopped, with why."""
    answers = threading.Event()
    looks = []

    def rank_zero():
        looks.append(answers.is_set())
        if not answers.is_set():
            raise EmewsError("cannot connect to the store")
        return None

    job = subprocess.Popen(["sleep", "300"])
    start = JobStart(rank_zero, bound=lambda environ: 0.0)
    try:
        start.begin(job.pid, {})
        assert wait_until(lambda: len(looks) >= 5, timeout=120)
        assert job.poll() is None and start.stuck is None  # not stopped on looks that could not tell
        answers.set()
        assert wait_until(lambda: job.poll() is not None, timeout=120)
        assert start.stuck is not None and "did not all start within 0 s" in start.stuck
    finally:
        start.close()
        job.kill()
        job.wait()
