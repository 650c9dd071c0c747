"""``emews status EXP | head -1``: a reader that goes away ends the command quietly (exit 141, as
after SIGPIPE), not with a BrokenPipeError traceback."""

from __future__ import annotations

import subprocess
import sys


def test_a_closed_pipe_ends_the_command_quietly() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "emews", "check", "random"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the command writes
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
