"""Which way the objective's metric is better, and the sign that turns its values into losses.

Optimizers, the results store and the trial schedulers all minimize a *loss*: the metric's value
when the workflow minimizes it (``objective.direction: minimize``, the default), the value negated
when it maximizes it. :class:`Direction` is that choice and its sign, the one place both live::

    Direction.of("maximize").loss(0.9)   # -0.9
    Direction.of("max").sign             # -1.0 (a trial scheduler's ``mode: max``)
"""

from __future__ import annotations

from enum import Enum
from typing import Literal


class Direction(str, Enum):
    """``minimize`` or ``maximize``; a ``str`` (it compares, formats and is written as its name)."""

    MINIMIZE = "minimize"
    MAXIMIZE = "maximize"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def of(cls, name: str | Direction | None) -> Direction:
        """``minimize``/``maximize``, a trial scheduler's ``min``/``max``; ``None``: minimize."""
        if name is None:
            return cls.MINIMIZE
        short = _MODES.get(name) if isinstance(name, str) else None
        try:
            return short or cls(name)
        except ValueError:
            raise ValueError(f"unknown direction {name!r}; allowed: minimize, maximize (or min, max)") from None

    @property
    def sign(self) -> float:
        """``1.0`` when minimizing, ``-1.0`` when maximizing: loss = sign * value, value = sign * loss."""
        return -1.0 if self is Direction.MAXIMIZE else 1.0

    @property
    def mode(self) -> Literal["min", "max"]:
        """The short name trial schedulers use (``mode: min|max``, as in Ray Tune)."""
        return "max" if self is Direction.MAXIMIZE else "min"

    def loss(self, value: float) -> float:
        """The metric's ``value`` as a loss: smaller is better."""
        return self.sign * value

    def from_loss(self, loss: float) -> float:
        """The metric's value a ``loss`` stands for (the sign is its own inverse)."""
        return self.sign * loss


_MODES = {"min": Direction.MINIMIZE, "max": Direction.MAXIMIZE}
