"""The child-process toolkit shared by the objective child and the bayes model process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from emews.processes.tree import children
from emews.processes.channel import Aborted, ChildExited, ChildProcess, ReplyTimeout
from testutil import TESTS

ENV = {"PYTHONPATH": os.pathsep.join([str(TESTS / "processes"), os.environ.get("PYTHONPATH", "")])}


def _child(config: str = "serve") -> ChildProcess:
    return ChildProcess("channel_child", config, env=ENV)


def test_ready_then_request_and_reply_then_exit_on_close():
    child = _child()
    try:
        ready = child.wait_ready(120)
        assert ready is not None and ready.error is None
        assert child.request({"x": 1}, timeout=120) == ("echo", {"x": 1})
    finally:
        child.close()
    assert child.returncode == 0   # it left on end-of-file, not killed
    assert child.pid not in children(os.getpid())


def test_a_child_whose_parent_closed_first_exits_quietly(capfd):
    """A run that ended before its model process was ready: the child's ``Ready`` finds the
    connection closed; it exits 0 without a traceback on the run's stderr."""
    child = _child("ready after the parent left")
    child.close(timeout=120)
    assert child.returncode == 0
    assert "Traceback" not in capfd.readouterr().err


def test_a_child_that_cannot_start_says_why():
    child = _child("cannot start")
    try:
        ready = child.wait_ready(120)
        assert ready is not None and ready.error == "no licence for this model"
        assert child.wait_exit(120) == 3
    finally:
        child.close()


@pytest.fixture
def ready_child():
    child = _child()
    assert child.wait_ready(120) is not None
    yield child
    child.close()


def test_death_is_seen_while_a_grandchild_holds_the_socket(ready_child):
    """No end-of-file comes (the grandchild has the socket): the wait on the process sees the death."""
    with pytest.raises(ChildExited) as died:
        ready_child.request("fork, then die", timeout=120)   # ReplyTimeout here would be the bug
    assert died.value.returncode == 7


def test_abort_is_checked_before_anything_else(ready_child):
    with pytest.raises(Aborted):
        ready_child.receive(timeout=120, should_abort=lambda: True)
    with pytest.raises(ReplyTimeout):
        ready_child.receive(timeout=0)
    assert ready_child.request("still there", timeout=120) == ("echo", "still there")


def test_a_child_whose_parent_died_before_the_death_signal_was_armed_exits():
    """The getppid race: the parent is gone before ``die_with`` runs, so no signal would ever come."""
    script = textwrap.dedent("""
        import os, time
        from emews.processes.tree import die_with
        parent = os.getpid()
        r, w = os.pipe()
        if os.fork() == 0:
            os.close(w)
            os.read(r, 1)                   # end-of-file: the parent is exiting
            while os.getppid() == parent:   # until this process is re-parented
                time.sleep(0.001)
            die_with(parent)
            print("outlived its parent", flush=True)
        os._exit(0)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.stdout == "" and out.returncode == 0
