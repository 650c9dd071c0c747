"""A child for tests/processes/test_subprocess_channel.py: ``serve(conn, config)`` behaves as ``config`` says."""

from __future__ import annotations

import os

from emews.processes.channel import Ready


def serve(conn, config: str) -> int:
    if config == "cannot start":
        conn.send(Ready("no licence for this model"))
        return 3
    if config == "ready after the parent left":
        conn.poll(None)   # returns on end-of-file: the parent closed its end
    conn.send(Ready())
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return 0
        if message == "fork, then die":
            if os.fork() == 0:   # the grandchild keeps the socket open after the child died,
                try:             # until the parent closes its end
                    conn.recv()
                finally:
                    os._exit(0)
            os._exit(7)
        conn.send(("echo", message))
