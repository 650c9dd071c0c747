"""wait_for_parent_to_end: a child learns that its parent ended, also by kill -9 (real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from testutil import wait_until

#: the parent starts a child that waits for it to end, then writes "ended" (and prints its pid)
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", '''
import os, sys
from emews.processes.tree import wait_for_parent_to_end
parent = os.getppid()
open(sys.argv[1] + ".waiting", "w").close()
wait_for_parent_to_end(parent, every=3600.0)
open(sys.argv[1], "w").write("ended")
''', sys.argv[1]])
print(child.pid, flush=True)
time.sleep(3600)
"""


def test_a_child_learns_at_once_that_its_parent_was_killed(tmp_path: Path) -> None:
    """The pidfd path: the child, asleep with a one-hour fallback poll, wakes when its parent is
    SIGKILLed (with the poll alone it would sleep the hour: the bound below fails first)."""
    flag = tmp_path / "flag"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(flag)], stdout=subprocess.PIPE, text=True)
    child_pid = int(parent.stdout.readline())
    try:
        assert wait_until(lambda: (tmp_path / "flag.waiting").exists(), timeout=120)
        assert not flag.exists()  # asleep while its parent lives
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert wait_until(flag.exists, timeout=120), "the child did not wake when its parent was killed"
        assert flag.read_text() == "ended"
    finally:
        parent.kill()
        try:
            os.kill(child_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
