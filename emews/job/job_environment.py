"""The job's seconds from the environment, checked once: by ``emews launch``, ``resume`` and ``attach``
before anything is made or submitted, and by rank 0 (a batch job's environment is the batch system's)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from emews.job.job_start import start_bound
from emews.runtime.backoff import spin_seconds
from emews.runtime.distributor import abort_grace
from emews.runtime.setup_bound import setup_seconds
from emews.runtime.teams import stranded_grace


def check_job_environment(environ: Mapping[str, str] = os.environ) -> None:
    """Each of the job's seconds that ``environ`` sets is a number of seconds (else a
    :class:`~emews.core.errors.ConfigError` naming the variable and what it allows):
    ``EMEWS_STRANDED_GRACE`` (inline teams, workers that stop answering), ``EMEWS_ABORT_GRACE``,
    ``EMEWS_SPIN_SECONDS``, ``EMEWS_SETUP_TIMEOUT`` (which the workers took as unset) and
    ``EMEWS_START_TIMEOUT`` (which the start's watch took as unset)."""
    stranded_grace(environ)  # also the grace of a worker that stops answering or never says it is ready
    abort_grace(environ)
    spin_seconds(environ)
    setup_seconds(environ)
    start_bound(environ)
