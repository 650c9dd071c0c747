"""Walltime strings: ``HH:MM:SS`` or ``HH:MM`` in, seconds and scheduler formats out; durations
(``budget.time``) also in units: ``2h``, ``90m``, ``1h30m``, ``45s``, ``1d``."""

from __future__ import annotations

import re

WALLTIME_FORMS = "HH:MM:SS or HH:MM (minutes and seconds below 60, more than zero in total)"
_RX = re.compile(r"^(\d+):([0-5]?\d)(?::([0-5]?\d))?$")


def parse_walltime(text: str) -> int:
    """Return the walltime in seconds; ValueError when the text is not HH:MM[:SS] or is zero."""
    match = _RX.match(text.strip()) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"malformed walltime {text!r}")
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise ValueError(f"walltime {text!r} is zero")
    return total


DURATION_FORMS = f"{WALLTIME_FORMS}, or units: 2h, 90m, 1h30m, 45s, 1d"
_UNITS_RX = re.compile(r"^(?=\d)(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(text: str) -> int:
    """A duration in seconds: a walltime (:func:`parse_walltime`) or days, hours, minutes and seconds
    with units (``2h``, ``1h30m``); ValueError when it is neither or is zero."""
    match = _UNITS_RX.match(text.strip().lower()) if isinstance(text, str) else None
    if not match:
        try:
            return parse_walltime(text)
        except ValueError:
            raise ValueError(f"malformed duration {text!r}") from None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total <= 0:
        raise ValueError(f"duration {text!r} is zero")
    return total


def format_hms(seconds: int) -> str:
    """Seconds as ``HH:MM:SS`` (hours may exceed 99)."""
    hours, rest = divmod(seconds, 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def format_hm(seconds: int) -> str:
    """Seconds as ``HH:MM`` rounded up to the minute (LSF ``-W``)."""
    minutes = -(-seconds // 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}"
