"""How often the watch of a job's start looks whether rank 0 joined (emews/job/job_start.py): a batch
job's watch (``job.sh``'s, beside its launcher) backs off from 50 ms to about a second, so that its
lease on a parallel file system is not read 20 times a second for the whole start (a minute by default).

Found in review: the batch watch read ``lease.json`` every 50 ms, as a local launch's does."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from emews.job import job_start
from testutil import wait_until

LOOKS = 10


def test_a_batch_jobs_watch_looks_about_once_a_second(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real batch watch (its launcher a sleeping process, its bound an hour): its looks at the lease
    (``joined``, spied on: it reads the real, absent lease) come at least 0.9 s apart from the 6th on
    (50 ms, doubled, up to 1 s; a busy machine only spaces them more). Was: every 50 ms throughout."""
    looks: list[float] = []
    real = job_start.joined

    def joined(*args, **kwargs):
        looks.append(time.monotonic())
        return real(*args, **kwargs)

    monkeypatch.setattr(job_start, "joined", joined)
    monkeypatch.setenv("EMEWS_START_TIMEOUT", "3600")
    launcher = subprocess.Popen(["sleep", "300"])
    watch = threading.Thread(target=job_start.watch_batch_start, args=(tmp_path, "T", 3, launcher.pid))
    watch.start()
    try:
        assert wait_until(lambda: len(looks) >= LOOKS, timeout=120)
    finally:
        launcher.kill()
        launcher.wait()
        watch.join(timeout=60)
    assert not watch.is_alive()  # it ends with its launcher
    gaps = [b - a for a, b in zip(looks, looks[1:])]
    assert min(gaps[5:LOOKS - 1]) >= 0.9, gaps
