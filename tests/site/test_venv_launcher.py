"""The local site's ``{python_bin}/mpiexec`` from a virtual environment made over the Python that
holds the mpich wheel (``python -m venv --system-site-packages``, the usual way on an HPC machine)."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

from testutil import stored_rows, write_workflow

BASE_BIN = Path(sys.base_prefix) / "bin"


@pytest.mark.skipif(
    sys.prefix != sys.base_prefix or not (BASE_BIN / "mpiexec").is_file(),
    reason="needs the tests' Python to be a base interpreter with the mpich wheel's mpiexec",
)
def test_a_venv_over_the_python_with_mpich_launches_on_the_local_site(emews_cmd, tmp_path: Path) -> None:
    """pip put mpiexec in the base's bin, not the venv's: the launch found no VENV/bin/mpiexec and said
    'cannot start VENV/bin/mpiexec: not found (is the mpich wheel installed?)', though it is."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(env_dir)
    assert not (env_dir / "bin" / "mpiexec").exists()
    wf = write_workflow(tmp_path, budget={"evaluations": 3})
    proc = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "emews", "launch", str(wf), "--workers", "1", "--exp-dir", "exp"],
        cwd=tmp_path,
        env=emews_cmd.env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "not found" not in proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert len(rows) == 3 and {r["status"] for r in rows} == {"ok"}
