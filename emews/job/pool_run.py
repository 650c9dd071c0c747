"""One pool's rank 0: a distributor for this job's workers fed from the experiment's shared queue
(docs/postgres.md, "Pools").

The first job of an experiment launched with ``--pools`` runs one of these beside its optimizer
(:func:`emews.job.wiring.run_optimizer_rank`); a job started by ``emews attach`` runs only this
(:mod:`emews.job.pool_lead`). The distributor is today's, over a
:class:`~emews.runtime.pool_feeder.PoolQueuePair`; it writes nothing to the store itself: the
feeder stores each outcome once (:meth:`~emews.store.pool_queue.PoolQueue.complete`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from emews.config.lease import Owner
from emews.core.errors import TaskOutOfSpace
from emews.core.queues import DistributorFailed
from emews.runtime.distributor import Distributor
from emews.runtime.fail_fast import FailFast
from emews.runtime.full_disk import FullDisk
from emews.runtime.pool_feeder import PoolFeeder, PoolQueuePair
from emews.runtime.progress import Progress
from emews.runtime.shared_trials import SharedTrials
from emews.runtime.transport import Transport
from emews.runtime.trial_reports import TrialService
from emews.store.pool_queue import PoolQueue, StoreLost

log = logging.getLogger("emews")

#: the batch systems' variables that name the job a pool runs in (``emews status`` shows it)
JOB_ID_VARIABLES = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "COBALT_JOBID")


def current_job_id(environ: Mapping[str, str] = os.environ) -> str | None:
    """The batch job this process runs in, if any."""
    return next((environ[v] for v in JOB_ID_VARIABLES if environ.get(v)), None)


#: seconds a stopping pool waits for its feeder (a batch system's kill grace is short)
STOP_PATIENCE = 10.0
#: a pool of short tasks holds up to this many per worker (its read-ahead grows to it as needed)
READ_AHEAD = 64


class PoolRun:
    """This job's distributor and its feeder, registered as one pool of the experiment.

    ``queue`` is the feeder's own connection; the pool holds a task per worker and a quarter more
    on their way (at least one), under leases of ``lease_s`` seconds: enough that a freed worker
    finds its next task here, few enough that other pools find work in the queue. For tasks
    shorter than a claim's round trip the read-ahead grows, up to :data:`READ_AHEAD` per worker.

    ``exp_dir`` (the experiment's folder, whose file system its tasks write to): a task that fails
    for want of disk space there stops the pool with that cause
    (:class:`~emews.core.errors.TaskOutOfSpace`, as it stops a job's run) and is handed back to the
    queue without a result, instead of every task after it failing alike."""

    def __init__(
        self,
        queue: PoolQueue,
        transport: Transport,
        worker_ranks: Sequence[int],
        *,
        site: str,
        sign: float,
        lease_s: float,
        gang: bool = False,
        nodes: Mapping[int, str] | None = None,
        inline_timeout: float | None = None,
        task_timeout: float | None = None,
        fail_fast: int = 0,
        trials: TrialService | None = None,
        on_error: Callable[[BaseException], None] = lambda error: None,
        exp_dir: Path | None = None,
    ) -> None:
        self.queue = queue
        hold = len(worker_ranks) + max(1, len(worker_ranks) // 4)
        me = Owner.me()  # its pid and start time: emews status on this host sees it end, killed or not
        self.pool = queue.register(
            site,
            len(worker_ranks),
            job_id=current_job_id(),
            host=me.host,
            hold=hold,
            process=(me.pid, me.started) if me.started else None,
        )
        self.queues = PoolQueuePair()
        self.progress = Progress(budget=None, workers=len(worker_ranks))
        self.feeder = PoolFeeder(
            queue,
            self.queues,
            self.pool,
            hold=hold,
            lease_s=lease_s,
            max_hold=READ_AHEAD * len(worker_ranks),
            fits=len(worker_ranks),
            busy=lambda: self.progress.busy,
            lost_ranks=lambda: self.distributor.lost_ranks,  # the summary counts every pool's
        )
        self.distributor = Distributor(
            transport,
            self.queues,
            worker_ranks,
            sign=sign,
            progress=self.progress,
            fail_fast=FailFast(fail_fast),
            gang=gang,
            nodes=nodes,
            inline_timeout=inline_timeout,
            task_timeout=task_timeout,  # a worker silent far past it is run without
            trials=trials,
            on_start=self.feeder.started,  # a task handed back counts an attempt only if a worker started it
            on_unstarted=self.feeder.unstarted,
            full_disk=None if exp_dir is None else FullDisk(exp_dir),
        ).start()
        if isinstance(trials, SharedTrials):  # a report counts only while this pool holds its task
            trials.lease_to(self.pool, self.feeder.drop)
        self._on_error = on_error
        self._thread: threading.Thread | None = None
        #: what ended the feeder (the store lost for good, say)
        self.error: BaseException | None = None
        #: the tasks :meth:`close` handed back to the shared queue
        self.handed_back: list[int] = []

    def until_finished(self) -> bool:
        """Whether this pool may end: the optimizer said it is done and the pool holds nothing."""
        return self.feeder.held == 0 and self.queue.finished()

    def run(self) -> None:
        """Feed on this thread until the experiment is finished (or :meth:`stop`); a task that found
        the disk full ends it with :class:`~emews.core.errors.TaskOutOfSpace`."""
        try:
            self.feeder.run(until=self.until_finished)
        except StoreLost as exc:
            self.error = exc
            raise
        except DistributorFailed:
            if isinstance(self.distributor.error, TaskOutOfSpace):  # said as the disk's, as a job's run says it
                raise self.distributor.error from None
            raise

    def start(self) -> PoolRun:
        """Feed on a thread of its own (beside the optimizer, in the first job)."""
        self._thread = threading.Thread(target=self._run_noting, name="emews-pool-feeder", daemon=True)
        self._thread.start()
        return self

    def _run_noting(self) -> None:
        try:
            self.run()
        except BaseException as exc:
            log.error("pool %s stopped: %s", self.pool, exc)
            self.error = exc
            self._on_error(exc)  # the first job's optimizer must not wait for results that cannot come

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def stop(self) -> None:
        """Stop claiming and storing now (a stop signal); what the pool held is handed back by
        :meth:`close`. Waits for the feeder at most :data:`STOP_PATIENCE` seconds (it may be
        retrying a lost connection). A pool stopped before it fed records its end here (it stayed
        running in ``emews status`` until its heartbeat ended)."""
        self.feeder.stop()
        self.join(STOP_PATIENCE)
        if not self.feeder.ran:  # stopped before it fed (a stop signal as it started): its end is recorded here
            try:
                self.queue.stop(self.pool)
            except StoreLost as exc:  # its heartbeat ends by itself
                log.warning("pool %s: could not record its stop: %s", self.pool, exc)

    def close(self, *, abort: bool = False, pause: float | None = None) -> None:
        """Stop the workers (after :meth:`run` ended or :meth:`stop`), then hand back to the shared
        queue the tasks held here without a result (unstarted, stopped or paused), so that another
        pool continues them at once instead of when their leases end."""
        self.distributor.close(abort=abort, pause=pause)
        self._hand_back()
        self.queues.close()

    def _hand_back(self) -> None:
        """:meth:`PoolFeeder.hand_back`, unless the feeder still runs (its connection busy retrying)
        or lost the store: then the leases end by themselves."""
        if (self._thread is not None and self._thread.is_alive()) or isinstance(self.error, StoreLost):
            return
        try:
            self.handed_back = self.feeder.hand_back()
        except Exception as exc:  # the store away: the leases end by themselves
            log.warning("pool %s: could not hand back its tasks (their leases end by themselves): %s", self.pool, exc)
