"""What a training objective and the optimizer rank say to each other about a running trial.

An objective reports progress with ``ctx.report(step, metrics, checkpoint)``; the optimizer
rank stores the report, asks the trial scheduler and answers with a :class:`Decision`.
``ctx.restore()`` asks where the trial's latest durable checkpoint is. These slotted
dataclasses are the messages (a trial is identified by its task id); :class:`TrialLink` is
how they travel from the process that runs the objective (the worker rank, or the isolated
child through its parent).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol


class Action(str, Enum):
    """What a trial does after a report."""

    CONTINUE = "continue"
    STOP = "stop"  # stopped early: the objective returns its metrics now
    COMPLETE = "complete"  # the trial reached its scheduler's budget (``max_t``): it returns now
    PAUSE = "pause"  # stop now, checkpoint kept: ``emews resume`` (or a promotion) continues it
    EXPLOIT = "exploit"  # PBT: stop, then run again with ``params`` from the clone's checkpoint


@dataclass(frozen=True, slots=True)
class Decision:
    """The scheduler's answer to one report. ``stop`` is what the objective checks."""

    action: Action = Action.CONTINUE
    params: Mapping[str, Any] | None = None  # EXPLOIT: the explored parameters to run with
    clone_from: int | None = None  # EXPLOIT: the trial whose checkpoint is cloned

    @property
    def stop(self) -> bool:
        return self.action is not Action.CONTINUE


CONTINUE = Decision()


class Ending(str, Enum):
    """How a training trial with a successful result ended: the one vocabulary of ``results.csv``
    (``t:ended``), ``emews status``, ``emews report`` and the end-of-run line."""

    STOPPED_EARLY = "stopped early"  # its scheduler stopped it (``stop``)
    COMPLETED = "completed"  # it trained its full course: reached ``max_t``, or returned on its own

    @classmethod
    def after(cls, action: str, released: bool = False) -> Ending:
        """The ending of a trial whose last answer at its last step was ``action`` (``""``: continue);
        ``released``: it paused there for a promotion that never came (ASHA's promotion variant)."""
        return cls.STOPPED_EARLY if action == Action.STOP.value or released else cls.COMPLETED


def endings_text(counts: Mapping[str, int]) -> str:
    """``72 stopped early, 28 completed`` (endings with no trial left out; ``""`` when none)."""
    return ", ".join(f"{counts[e.value]} {e.value}" for e in Ending if counts.get(e.value))


@dataclass(slots=True)
class CheckpointNote:
    """A checkpoint handed to the background writer (staged) with the report that made it."""

    path: str
    size: int


@dataclass(frozen=True, slots=True)
class Following:
    """``ctx.report`` on a team member other than rank 0: it takes part in its leader's report, so
    the task is a training trial and a stop signal waits for the leader's decision at the next
    report instead of abandoning the member (and the team with it). Kept by the worker, not sent on."""


FOLLOWING = Following()


@dataclass(slots=True)
class Report:
    """``ctx.report``: one step of a trial. ``durable`` names checkpoints written since the last message,
    ``failed`` those whose write failed since (``PATH: ERROR``)."""

    trial: int
    session: int
    step: int
    metrics: dict[str, Any]
    time: float
    checkpoint: CheckpointNote | None = None
    durable: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()


@dataclass(slots=True)
class RestoreRequest:
    """``ctx.restore``: where are this trial's checkpoints (its own, or its PBT parent's)?"""

    trial: int
    session: int
    durable: tuple[str, ...] = ()


@dataclass(slots=True)
class CheckpointsDurable:
    """Checkpoints whose background write finished, or failed (sent when the objective returns; no reply)."""

    trial: int
    session: int
    durable: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()


@dataclass(slots=True)
class Restorable:
    """A checkpoint that may be restored: its file and the step it was taken at."""

    path: str
    step: int


@dataclass(slots=True)
class Reply:
    """The optimizer rank's answer to a :class:`Report` (a decision) or a
    :class:`RestoreRequest` (candidates, newest first), tagged with the asking session."""

    session: int
    decision: Decision = CONTINUE
    candidates: list[Restorable] = field(default_factory=list)


#: the messages that expect a :class:`Reply`
ASKS = (Report, RestoreRequest)


class TrialLink(Protocol):
    """How trial messages reach the optimizer rank from the process running the objective."""

    def post(self, message: Any) -> None:
        """Send ``message``; never waits for an answer."""

    def take(self, session: int, block: bool = True) -> Reply | None:
        """The next :class:`Reply` for ``session`` (``None`` at once when ``block`` is false and
        none is there). Raises :class:`LinkClosed` when the task is being abandoned."""


class LinkClosed(BaseException):
    """The task is being abandoned (a stop or an abort) while it waited for the optimizer rank
    (a BaseException, so that the objective's ``except Exception`` does not swallow it)."""
