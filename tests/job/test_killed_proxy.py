"""``kill -9`` of Hydra's proxy (``hydra_pmi_proxy``) while the job runs: its ranks run on and the
run ends and records its summary, but what they printed went through the proxy, and ``emews launch``
showed only mpiexec's assert: no summary, no line, exit status 0. Now launch says the run ended
and where its summary is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from gated_job import launch_gated

from testutil import said, wait_until


def _proxy_of(exp: Path) -> int | None:
    """The pid of the Hydra proxy under the job's mpiexec (the one whose command names ``exp``)."""
    found = subprocess.run(["pgrep", "-f", f"mpiexec .*{exp} "], capture_output=True, text=True).stdout.split()
    for mpiexec in found:
        children = subprocess.run(["pgrep", "-P", mpiexec, "hydra_pmi_proxy"], capture_output=True, text=True)
        if children.stdout.split():
            return int(children.stdout.split()[0])
    return None


def test_a_run_whose_proxy_was_killed_says_it_ended_and_where_its_summary_is(emews_cmd, tmp_path: Path) -> None:
    gated = launch_gated(emews_cmd, tmp_path, evaluations=3, timeout=60)
    job, exp = gated.job, gated.exp
    assert wait_until(lambda: len(gated.started()) >= 2, timeout=180), said(job)
    proxy = _proxy_of(exp)
    assert proxy is not None, said(job)
    os.kill(proxy, signal.SIGKILL)
    gated.gate.touch()
    out, err = job.communicate(timeout=240)
    assert job.returncode == 0, err
    assert json.loads((exp / "summary.json").read_text())["completed"] == 3
    lines = [line for line in err.splitlines() if line.startswith("emews")]
    assert len(lines) == 1 and lines[0].startswith("emews: the run ended (exit status 0) but mpiexec exited with status "), err
    assert lines[0].endswith(f": what the run printed at its end may be lost; its summary: emews status {exp}"), err
