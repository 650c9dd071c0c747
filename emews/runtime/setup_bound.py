"""How long an objective's ``setup()`` may run before its worker gives up on it.

A setup that hangs (a dataset on a file system that does not answer, a GPU that never comes free)
held its worker for good under inline isolation and 300 s under process isolation, whatever the
task timeout. The bound is ``EMEWS_SETUP_TIMEOUT`` seconds (default :data:`SETUP_TIMEOUT`), or the
task timeout where that is longer: a setup loads what every task then uses, and may take as long
as one. The worker's tasks then fail with "objective setup did not finish within N s".
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from emews.core.errors import ConfigError
from emews.runtime.env_seconds import seconds_from_environment

SETUP_TIMEOUT_VARIABLE = "EMEWS_SETUP_TIMEOUT"
#: seconds a setup may run unless the task timeout is longer
SETUP_TIMEOUT = 300.0


def setup_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """``EMEWS_SETUP_TIMEOUT``'s seconds (default :data:`SETUP_TIMEOUT`); :class:`ConfigError`
    naming the variable when it is no number of seconds (rank 0 refuses the run with it)."""
    return seconds_from_environment(SETUP_TIMEOUT_VARIABLE, SETUP_TIMEOUT, environ)


def setup_bound(task_timeout: float | None, environ: Mapping[str, str] = os.environ) -> float:
    """The seconds a worker's setup may run: :func:`setup_seconds`, or ``task_timeout`` where
    longer. A value that is no number of seconds counts as unset here (rank 0 refuses it, once)."""
    try:
        bound = setup_seconds(environ)
    except ConfigError:
        bound = SETUP_TIMEOUT
    return max(bound, task_timeout or 0.0)
