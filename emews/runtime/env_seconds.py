"""A duration a job takes from an environment variable (a grace period, a wait), checked."""

from __future__ import annotations

import math
from collections.abc import Mapping

from emews.core.errors import ConfigError


def seconds_from_environment(variable: str, default: float, environ: Mapping[str, str]) -> float:
    """``variable``'s seconds where it is set (a number >= 0), else ``default``; anything else is a
    :class:`ConfigError` naming the variable and what it allows."""
    text = environ.get(variable, "").strip()
    if not text:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigError(
            f"{text!r} is not a number of seconds",
            key=variable,
            allowed=f"a number of seconds >= 0; unset: {default:g}",
        )
    return seconds
