"""``emews report`` where its files cannot be written (a file size limit, ``ulimit -f``, fails a write
as a full disk does): one line naming the file and the real cause, exit 2, and nothing half-written:
no empty ``report-plots/``, no temporary files, and an earlier report left as it was."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

from testutil import write_workflow

LIMIT = 16 * 1024  # bytes: below every PNG of the report


def _limited() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def _report(emews_cmd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "emews", "report", *args], cwd=emews_cmd.cwd, env=emews_cmd.env,
                          capture_output=True, text=True, timeout=300, preexec_fn=_limited)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_report_that_cannot_be_written_leaves_nothing_half_written(emews_cmd, tmp_path: Path) -> None:
    (tmp_path / "obj.py").write_text("def run(params):\n    return params['x'] ** 2\n")
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "obj.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}},
                        optimizer={"name": "random", "options": {"seed": 1}}, budget={"evaluations": 12},
                        task={"isolation": "inline"})
    assert emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240).returncode == 0
    exp = emews_cmd.cwd / "exp"
    before = _files(exp)

    proc = _report(emews_cmd, "exp")                            # the default place: the experiment
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert "the file size limit is reached (File too large: ulimit -f)" in line and "report-plots/" in line
    assert ": --out:" not in line and "or write it elsewhere: --out" in line   # no --out was given to blame
    assert "nothing was written" in line and "Traceback" not in proc.stderr
    assert _files(exp) == before and not (exp / "report-plots").exists()     # no empty plots folder, no temp files

    out = emews_cmd.cwd / "figs"
    proc = _report(emews_cmd, "exp", "--format", "png", "--out", str(out))  # a folder the user named
    assert proc.returncode == 2 and f"{out}/" in proc.stderr and ": --out:" in proc.stderr, proc.stderr
    assert not out.exists()

    # an earlier report stays as it was when the next one cannot be written
    assert emews_cmd("report", "exp", timeout=300).returncode == 0
    written = _files(exp)
    assert "report.html" in written and any(name.startswith("report-plots/") for name in written)
    assert _report(emews_cmd, "exp").returncode == 2
    assert _files(exp) == written
