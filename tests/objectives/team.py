"""Test objectives for multi-rank tasks (``task.ranks``): every member runs them; team rank 0's value counts.

``run``        records (task id, team rank, team size, rank) in the shared event log when run in
               worker threads, and returns ``x`` (other members return a different number, which
               must never be the recorded value).
``allreduce``  inline under MPI: the sum of ``team_rank + 1`` over ``ctx.comm`` (team rank 0 returns
               it; the other members return ``None``).
``stranded``   inline under MPI: team rank 1 raises, returns early or sleeps past any timeout
               (``mode``; ``ok`` does none of these) while team rank 0 waits for it in ``ctx.comm``.
``members``    process isolation: writes its pid and team rank into the run dir, joins
               ``ctx.process_group()`` and all-reduces; with ``mode: segv`` team rank 1 dies of SIGSEGV
               first, with ``mode: hang`` it sleeps past any timeout, and in both the other members
               wait past any timeout too (as in a collective with it), without importing torch;
               ``mode: quick`` returns the team's size at once (no torch).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any


def run(params: dict, ctx: Any) -> float:
    from testutil import EVENTS

    EVENTS.record("member", (ctx.task_id, ctx.team_rank, ctx.team_size, ctx.rank))
    return float(params["x"]) if ctx.team_rank == 0 else -1000.0 - ctx.team_rank


def allreduce(params: dict, ctx: Any) -> dict:
    total = ctx.comm.allreduce(ctx.team_rank + 1)
    ranks = ctx.comm.allgather(ctx.rank)
    if ctx.team_rank:  # the others return nothing, as torchrun-style code does
        return None
    return {"value": float(total), "size": ctx.comm.Get_size(), "world_ranks": ranks}


def stranded(params: dict, ctx: Any) -> float:
    mode = params["mode"]
    if ctx.team_rank == 1 and mode == "raise":
        raise RuntimeError("member 1 failed")
    if ctx.team_rank == 1 and mode == "early":
        return 0.0
    if ctx.team_rank == 1 and mode == "hang":
        time.sleep(3600)
    return float(ctx.comm.allreduce(ctx.team_rank + 1))


def members(params: dict, ctx: Any) -> dict:
    (ctx.run_dir / f"member{ctx.team_rank}.pid").write_text(f"{os.getpid()} {ctx.rank}")
    mode = params.get("mode")
    if mode == "segv" and ctx.team_rank == 1:
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode in ("segv", "hang"):  # the faulty member, and the others stuck waiting for it: a team that
        time.sleep(3600)          # never finishes costs no torch imports (4.5 s of CPU each)
    if mode == "quick":
        return {"value": float(ctx.team_size), "world_size": ctx.team_size}
    import torch  # after the faults: the faulty member has no use for its seconds of CPU
    import torch.distributed as dist

    ctx.process_group()
    value = torch.tensor([float(ctx.team_rank + 1)])
    dist.all_reduce(value)
    env = {k: os.environ[k] for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")}
    return {"value": float(value.item()), "size": dist.get_world_size(), "env_rank": int(env["RANK"]),
            "world_size": int(env["WORLD_SIZE"])}


# one write(2) per line: ``print`` with several arguments writes in pieces, and mpiexec interleaves
# the pieces of its ranks' outputs ("1" + "0 2 yes\n" + " 2 yes\n" was seen in CI)
PROGRAM = ("from mpi4py import MPI; import os; c = MPI.COMM_WORLD; "
           "os.write(1, f'{c.Get_rank()} {c.Get_size()} {os.environ.get(\"EMEWS_LAUNCHED\")}\\n'.encode())")


def launcher(params: dict, ctx: Any) -> dict:
    """Team rank 0 launches a 2-rank MPI program with ``ctx.launch``; the others return at once."""
    import sys

    done = ctx.launch([sys.executable, "-c", PROGRAM], ranks=int(params.get("program_ranks", ctx.team_size)),
                      capture_output=True, text=True, timeout=120, env={"EMEWS_LAUNCHED": "yes"})
    if done is None:
        return {"value": -1.0}
    lines = sorted(done.stdout.split("\n")[:-1])
    return {"value": float(done.returncode), "lines": lines, "stderr": done.stderr[-500:]}


def restore_first(params: dict, ctx: Any) -> float:
    """Process isolation: ``ctx.restore`` before ``ctx.process_group()`` (the training example's order);
    each member writes what it restored into the run dir."""
    state, step = ctx.restore(default=("default", 0))
    (ctx.run_dir / f"restored{ctx.team_rank}").write_text(f"{state} {step}")
    return float(ctx.team_size)


def member_raises(params: dict, ctx: Any) -> float:
    """Team rank 1 raises a ``ValueError``; the others return the team's size."""
    if ctx.team_rank == 1:
        raise ValueError(f"member {ctx.team_rank} broke at x={params['x']}")
    return float(ctx.team_size)


def printer(params: dict, ctx: Any) -> float:
    """Process isolation: every member prints ``lines`` lines naming it, then returns once all have
    printed (a file each in the run dir): the members' outputs are moved into the run dir together."""
    for i in range(int(params["lines"])):
        print(f"member {ctx.team_rank} line {i} " + "x" * 80)
    (ctx.run_dir / f"printed{ctx.team_rank}").touch()
    while not all((ctx.run_dir / f"printed{r}").exists() for r in range(ctx.team_size)):
        time.sleep(0.01)
    return float(ctx.team_size)

