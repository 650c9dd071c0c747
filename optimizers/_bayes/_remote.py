"""The surrogate engine in a process of its own, taking over from the in-process engine.

Model fits and predictions run long stretches of C code that hold the GIL (tens of
milliseconds measured here). On the optimizer rank that held up the distributor thread, so
workers sat idle with their next task already queued. In a child process the model competes
only for a core, never for the GIL.

The child (``python -m emews.optimizers._bayes._server``) is started at once but needs about a
second to import scikit-learn. Until it says it is ready, the proposer thread goes on with the
in-process :class:`~._engine.Engine`; at the first fit after that, the engine (observations,
kernel, random state, everything) is pickled over and the child carries on from exactly there.
Nothing waits on the start-up, and no proposal is lost or repeated at the handover.

The child is a :class:`~emews.processes.channel.ChildProcess`: it dies with the optimizer
rank (parent-death signal, and end-of-file on its connection). If it fails or dies during the run,
the engine falls back to the in-process copy, which has been told every observation all along.
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from emews.core.errors import EmewsError
from emews.processes.channel import ChildExited, ChildProcess

if TYPE_CHECKING:  # the engine (scikit-optimize, scikit-learn) is imported where a model is built
    from ._engine import Engine

log = logging.getLogger("emews.optimizers.bayes")

#: seconds ``close`` waits for the child to exit before killing it
_EXIT_WAIT = 5.0


class ModelProcessError(EmewsError, RuntimeError):
    """The engine raised in the model process (the child's traceback is in the message)."""


class ModelProcess:
    """A child process that will host the engine. Starting it does not wait for it."""

    def __init__(self) -> None:
        try:
            self._proc: ChildProcess | None = ChildProcess(
                "emews.optimizers._bayes._server",
                env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
            )
        except OSError as exc:
            log.warning("bayes: could not start the model process (%s); the model stays in this process", exc)
            self._proc = None
        self._state = "starting" if self._proc is not None else "failed"
        self.started_at = time.monotonic()
        self.ready_after: float | None = None  # seconds from start to ready

    def ready(self) -> bool:
        """Whether the child has imported the engine and waits for one (never blocks)."""
        if self._state == "starting" and self._proc is not None:
            try:
                ready = self._proc.wait_ready(0)
            except ChildExited as exc:
                self._fail(f"it exited during start-up ({exc})")
                return False
            if ready is not None and ready.error:
                self._fail(f"it could not start: {ready.error}")
            elif ready is not None:
                self._state = "ready"
                self.ready_after = time.monotonic() - self.started_at
        return self._state == "ready"

    @property
    def failed(self) -> bool:
        return self._state == "failed"

    def adopt(self, engine: Engine) -> RemoteEngine:
        """Hand ``engine`` over to the child; the returned engine proposes there from now on.
        Raises ``ModelProcessError`` when the engine cannot be sent (a part of it that pickle
        cannot carry, such as a local function): nothing reached the child then."""
        try:
            state = pickle.dumps(engine)  # here, so that a failure leaves the channel unused
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise ModelProcessError(f"the model cannot be sent to the model process: {exc}") from exc
        self.call("adopt", state)
        self._state = "adopted"
        return RemoteEngine(self, engine)

    def call(self, kind: str, *args: Any) -> Any:
        """One request, one reply. Raises ``ModelProcessError`` for an error in the engine,
        ``EOFError``/``OSError`` when the child is gone."""
        if self._proc is None:
            raise EOFError("the model process did not start")
        status, payload = self._proc.request((kind, *args))
        if status == "error":
            raise ModelProcessError(f"the bayes model process failed:\n{payload}")
        return payload

    def _fail(self, why: str) -> None:
        self._state = "failed"
        log.warning("bayes: the model process is unavailable, %s; the model stays in this process", why)

    def close(self) -> None:
        """Stop the child (it exits on end-of-file, or is killed in the middle of a long fit)."""
        if self._proc is not None:
            self._proc.close(_EXIT_WAIT)


class RemoteEngine:
    """Stands in for :class:`Engine` in the proposer thread, proposing in the model process.

    ``tell`` costs no round trip: observations go with the next ``propose``. They also go into
    the local engine, which takes over again if the child dies.
    """

    def __init__(self, process: ModelProcess, local: Engine) -> None:
        self.process = process
        self.local = local
        self.n_initial_points = local.n_initial_points
        self.fits = local.fits
        self.hyperfits = local.hyperfits
        self.remote_fits = 0
        self.reserve: list[list[Any]] = list(local.reserve)
        self.adopted_at = local.n_told
        self._estimator = local.estimator_name()
        self._unsent_x: list[list[Any]] = []
        self._unsent_y: list[float] = []
        self._lost = False

    def tell(self, xs: Sequence[list[Any]], ys: Sequence[float]) -> None:
        self.local.tell(xs, ys)
        if not self._lost:
            self._unsent_x.extend(xs)
            self._unsent_y.extend(ys)

    @property
    def n_told(self) -> int:
        return self.local.n_told

    def estimator_name(self) -> str:
        return self.local.estimator_name() if self._lost else self._estimator

    def propose(self, n: int, pending: Sequence[list[Any]] = ()) -> list[list[Any]]:
        if self._lost:
            return self._propose_locally(n, pending)
        try:
            reply = self.process.call("propose", self._unsent_x, self._unsent_y, n, list(pending))
        except (EOFError, OSError) as exc:
            self._lost = True
            log.warning("bayes: the model process died (%r); the model goes on in this process", exc)
            return self._propose_locally(n, pending)
        self._unsent_x, self._unsent_y = [], []
        self.remote_fits += reply["fits"] - self.fits
        self.fits, self.hyperfits = reply["fits"], reply["hyperfits"]
        self.reserve, self._estimator = reply["reserve"], reply["estimator"]
        self.local.n_proposed = reply["n_proposed"]  # the local copy would go on from here
        return reply["points"]

    def _propose_locally(self, n: int, pending: Sequence[list[Any]]) -> list[list[Any]]:
        self.local.fits, self.local.hyperfits = self.fits, self.hyperfits
        points = self.local.propose(n, pending)
        self.fits, self.hyperfits, self.reserve = self.local.fits, self.local.hyperfits, self.local.reserve
        return points
