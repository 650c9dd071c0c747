"""The facility's queue limits (``scheduler.limits``): the node counts and walltimes a queue takes.

A job the scheduler would reject at submission (Polaris' and Aurora's ``debug`` queue takes 1-2
nodes for at most an hour, ``prod`` routes only jobs of its execution queues' sizes, Frontier's
``batch`` partition takes a walltime by node count) is refused by ``emews check`` and ``emews
launch`` before anything is written, with what the queue and the site's other queues take.
"""

from __future__ import annotations

from emews.core.errors import ConfigError
from emews.core.wording import counted
from emews.site.schema import QueueLimit, SchedulerConfig


def check_queue_limits(config: SchedulerConfig) -> None:
    """ConfigError (keyed ``scheduler.nodes`` or ``scheduler.walltime``, no file: the caller names
    where the key was set) when ``config.limits`` lists its queue and none of its rows takes the job."""
    rows = config.limits.get(config.queue or "")
    if not rows:
        return
    nodes, seconds = config.nodes, config.walltime_seconds
    if any(row.takes(nodes, seconds) for row in rows):
        return
    sized = [row for row in rows if row.nodes[0] <= nodes <= row.nodes[1]]
    others = [f"{queue} ({_rows(found)})" for queue, found in config.limits.items() if queue != config.queue]
    elsewhere = f", or another scheduler.queue: {'; '.join(others)}" if others else ""
    if sized:
        key, allowed = "scheduler.walltime", _walltimes(sized)
    else:
        key, allowed = "scheduler.nodes", _nodes(rows)
    raise ConfigError(
        f"queue {config.queue!r} takes {_rows(rows)} (the facility's queue table, scheduler.limits): "
        f"the scheduler would reject a job of {counted(nodes, 'node')} for {config.walltime}",
        key=key,
        allowed=allowed + elsewhere,
    )


def _rows(rows: list[QueueLimit]) -> str:
    return ", ".join(row.describe() for row in rows)


def _walltimes(rows: list[QueueLimit]) -> str:
    return " or ".join(row.describe_walltime() for row in rows) + " at this node count"


def _nodes(rows: list[QueueLimit]) -> str:
    return " or ".join(f"{row.nodes[0]}..{row.nodes[1]} nodes" for row in rows)
