"""Counts in the words users read: ``1 worker``, ``2 workers``; rates: ``0.00443``, ``27,369``;
durations: ``1 h 02 min``, ``12.3 s``."""

from __future__ import annotations

import math


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, the noun plural unless the count is one (``plural``: when it is not
    ``noun + "s"``)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def noun_for(count: int, noun: str, plural: str | None = None) -> str:
    """``noun`` for a count of one, its plural otherwise (for ``busy/total workers``)."""
    return noun if count == 1 else plural or noun + "s"


def rate_text(rate: float) -> str:
    """Evaluations per second: whole ones from 10 (``27,369``), else 3 significant digits, as
    ``emews status`` says them (an NT3 training every 4 minutes is ``0.00443``, not ``0.00``; one a
    day ``0.0000116``, not ``1.16e-05``)."""
    if rate >= 10:
        return f"{rate:,.0f}"
    text = f"{rate:.3g}"
    if "e" in text:  # below 0.0001: as many decimals as 3 significant digits take, never 1e-05
        text = f"{rate:.{2 - math.floor(math.log10(rate))}f}"
    return text


def duration(seconds: float) -> str:
    """``1 h 02 min``, ``3 min 05 s``, ``12.3 s``, ``2.5 ms``."""
    if seconds >= 3600:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"
    if seconds >= 60:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    if seconds < 0.1:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:.1f} s"
