"""The worker ranks a run went on without (stopped answering, or never ready): what ``summary.json``
records of each and the one line ``emews status`` and the report show of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from emews.core.wording import counted


@dataclass(frozen=True)
class LostRank:
    """Worker ``rank``, lost at ``at`` (epoch seconds) because ``reason`` (``why``: the whole line the
    run said); ``task``: the task it had begun, ``rerun`` whether that was queued again for another
    worker (else it ended as a timeout: it had run before); ``unstarted``: tasks it held, queued again;
    ``pool``: the pool whose job the rank was in (pooled experiments; ``None``: the run's own job)."""

    rank: int
    at: float
    reason: str
    why: str
    task: int | None = None
    rerun: bool = True
    unstarted: Sequence[int] = field(default_factory=tuple)
    pool: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "unstarted": list(self.unstarted)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LostRank | None:
        """The record ``data`` holds, ``None`` for one that is not (a summary edited by hand, another version's)."""
        try:
            return cls(
                int(data["rank"]),
                float(data["at"]),
                str(data["reason"]),
                str(data.get("why", data["reason"])),
                None if data.get("task") is None else int(data["task"]),
                bool(data.get("rerun", True)),
                tuple(int(i) for i in data.get("unstarted") or ()),
                None if data.get("pool") is None else int(data["pool"]),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def line(self) -> str:
        """``rank 1 lost at 2026-11-29 10:22:03 UTC: has not answered for 7 s, holding 1 task, past the
        task timeout of 3 s; its task 3 was queued again for another worker`` (``pool 2's rank 1 ...``
        for a rank of a pool)."""
        when = datetime.fromtimestamp(self.at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        whose = "" if self.pool is None else f"pool {self.pool}'s "
        parts = [f"{whose}rank {self.rank} lost at {when}: {self.reason}"]
        if self.task is not None:
            then = "was queued again for another worker" if self.rerun else "ended as a timeout (it had run before)"
            parts.append(f"its task {self.task} {then}")
        if self.unstarted:
            parts.append(f"{counted(len(self.unstarted), 'task')} it held unstarted queued again")
        return "; ".join(parts)


def lost_ranks_of(summary: Mapping[str, Any]) -> list[LostRank]:
    """The lost ranks a run's ``summary.json`` records (none in one written before they were)."""
    records = summary.get("lost_ranks")
    if not isinstance(records, list):
        return []
    found = (LostRank.from_json(r) for r in records if isinstance(r, Mapping))
    return [r for r in found if r is not None]
