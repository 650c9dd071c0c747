"""An EQ/Py model exploration algorithm (ME) run unchanged as an emews optimizer.

The ME is a Python file whose ``run()`` talks to its Swift/T workflow through ``eqpy.OUT_put``
and ``eqpy.IN_get`` (:mod:`emews.optimizers.eqpy_api` is the ``eqpy`` it imports here). This
optimizer plays the workflow's part, as EMEWS' ``workflow.swift`` does: it answers the ME's first
message (the handshake: ga0's ``"Settings"``, the EMEWS template's request for its configuration
file, Supervisor's ``"Params"``) with ``settings`` or ``reply``, turns every later message, a batch
of parameter strings (``;``-separated, or a JSON list), into tasks whose point is
``{"params": STRING}``, and answers with their results, ``;``-separated in the same order (the
objective as the model returned it, ``nan`` for a failed one). What the ME puts after its last
``IN_get`` (``"DONE"``/``"FINAL"`` and its final results) goes to ``EXP/eqpy_final.txt``.
"""

from __future__ import annotations

import json
import logging
import sys
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from emews.core.errors import EmewsError, KeyedValueError
from emews.core.evaluator import BudgetExhausted
from emews.core.imports import UserImportError, import_user_module
from emews.core.optimizer import Optimizer
from emews.core.results import Result
from emews.core.space import Space

from . import eqpy_api

log = logging.getLogger(__name__)

#: the key of every point: the parameter string, as the workflow passed it to the model
PARAMS = "params"
#: where the ME's messages after its last ``IN_get`` are written, in the experiment directory
FINAL_FILE = "eqpy_final.txt"


class MEFailed(EmewsError, RuntimeError):
    """The ME raised, or called ``sys.exit``, in its ``run()``."""


class EQPy(Optimizer):
    """Runs an EQ/Py ME's ``run()`` on the optimizer rank, its batches as tasks.

    Options (workflow ``optimizer.options``): ``me`` (the ME's file, relative to the current or
    the workflow's folder; its folder goes on ``sys.path``, as EQ/Py's ``PYTHONPATH`` had it),
    ``settings`` (a file: its absolute path answers the ME's first message, as ``workflow.swift``
    answers with ``settings_filename`` / ``me_config_file``) or ``reply`` (a string that answers
    it: Supervisor's GA parameter tuple); neither: the first message is a batch. ``batch``:
    ``semicolon`` (EQ/Py's ``"p1;p2"``, split as ``split(message, ";")``) or ``json`` (a JSON
    list, as the EMEWS template's ``parse_json_list``; an item that is not a string is passed as
    its JSON text).

    The budget caps the evaluations: a batch that does not fit ends the run (with a warning)
    before the ME ends. A resumed run replays the ME from its start: a parameter string an earlier
    run evaluated is answered from the store (or waits for its requeued task), not run again, so
    a seeded ME picks up where it stopped.
    """

    def __init__(
        self,
        me: Path,
        settings: Path | None = None,
        reply: str | None = None,
        batch: Literal["semicolon", "json"] = "semicolon",
    ) -> None:
        if settings is not None and reply is not None:
            raise KeyedValueError(
                "optimizer.options.reply",
                "settings and reply both answer the ME's first message: give one",
                "settings (a file, answered with its path) or reply (a string)",
            )
        self.me = Path(me)
        self.handshake = str(Path(settings).resolve()) if settings is not None else reply
        self.batch = batch

    @classmethod
    def takes_open_points(cls, options: Mapping[str, Any]) -> bool:
        """Points are ``{"params": STRING}``: the ME owns its space, the workflow needs none."""
        return True

    @classmethod
    def point_keys(cls, options: Mapping[str, Any]) -> frozenset[str]:
        """Every point is ``{"params": STRING}``: a command's ``{name}`` other than ``{params}`` is a slip."""
        return frozenset({PARAMS})

    @classmethod
    def describe_plan(cls, options: Mapping[str, Any], space: Space) -> str:
        """The ME's points (it owns its space): ``points {"params": STRING} from the ME deap_ga.py``."""
        return f'points {{"{PARAMS}": STRING}} from the ME {Path(str(options.get("me"))).name}'

    def check(self, space: Space) -> None:
        """The ME imports (with this ``eqpy``) and has a ``run()`` taking no arguments."""
        self._load()

    def _load(self) -> ModuleType:
        with eqpy_api.installed():
            return import_me(self.me, "EQ/Py")

    def run(self, evaluator: Any) -> None:
        module = self._load()
        exchange = _Exchange(self, evaluator)
        with eqpy_api.installed(exchange):
            call_me(self.me, "EQ/Py", module.run, lambda: f"after {exchange.answered} answers")
        exchange.write_finals(evaluator.exp_dir)


def import_me(me: Path, protocol: str) -> ModuleType:
    """The ME's module (its stand-in ``eqpy``/``eqsql`` installed by the caller), which has a ``run``."""
    try:
        module = import_user_module(str(me), what=f"{protocol} ME")
    except UserImportError as exc:
        raise KeyedValueError("optimizer.options.me", str(exc), f"an {protocol} ME file that imports") from None
    if not callable(getattr(module, "run", None)):
        raise KeyedValueError(
            "optimizer.options.me",
            f"{protocol} ME {me} has no run() function",
            f"the {protocol} ME's file, with its run()",
        )
    return module


def call_me(me: Path, protocol: str, run: Callable[[], Any], progress: Callable[[], str]) -> None:
    """Call the ME's ``run``: ``sys.exit`` or an exception in it is an :class:`MEFailed` naming the ME
    (and ``progress()``: how far it got); emews' own errors (the budget's end) pass as they are."""
    try:
        run()
    except EmewsError:  # the budget's end, a stopped distributor: emews' own, said as they are
        raise
    except SystemExit as exc:
        raise MEFailed(
            f"{protocol} ME {me} called sys.exit({exc.code!r}) in run(), {progress()} (its output before says why)"
        ) from None
    except Exception as exc:
        raise MEFailed(f"{protocol} ME {me} failed in run(): {type(exc).__name__}: {exc}") from exc


class _Exchange:
    """The workflow's side of one ME run: messages in order, each answered once."""

    def __init__(self, optimizer: EQPy, evaluator: Any) -> None:
        self.optimizer = optimizer
        self.evaluator = evaluator
        self.messages: deque[str] = deque()
        self.answered = 0
        self.ready: dict[int, Result] = {}
        # a resumed run: earlier results (and requeued task ids) by parameter string, oldest first
        self.earlier: defaultdict[str, deque[Result | int]] = defaultdict(deque)
        for result in evaluator.history:
            self.earlier[str(result.params.get(PARAMS))].append(result)
        for task in evaluator.requeued:
            self.earlier[str(task.params.get(PARAMS))].append(task.id)

    def out_put(self, message: str) -> None:
        self.messages.append(message)

    def in_get(self) -> str:
        if not self.messages:
            raise MEFailed(
                f"EQ/Py ME {self.optimizer.me} called eqpy.IN_get() with no message unanswered: "
                "it would wait forever (each IN_get answers one OUT_put)"
            )
        message = self.messages.popleft()
        first = self.answered == 0
        self.answered += 1
        if first and self.optimizer.handshake is not None:
            return self.optimizer.handshake
        return ";".join(eqpy_api.result_text(r) for r in self.evaluate(split_batch(message, self.optimizer.batch)))

    def evaluate(self, strings: list[str]) -> list[Result]:
        """The results of ``strings``, in order: earlier runs' where there are, the others run now."""
        known: list[Result | int | None] = [self.earlier[s].popleft() if self.earlier.get(s) else None for s in strings]
        fresh = [s for s, slot in zip(strings, known, strict=True) if slot is None]
        try:
            ids = iter(self.evaluator.put([{PARAMS: s} for s in fresh]) if fresh else [])
        except BudgetExhausted:
            warn_over_budget(f"EQ/Py ME {self.optimizer.me}: a batch of", len(fresh), self.evaluator)
            raise
        slots: list[Result | int] = [next(ids) if slot is None else slot for slot in known]
        waiting = {slot for slot in slots if isinstance(slot, int)}
        while not waiting <= self.ready.keys():
            for result in self.evaluator.get(1):
                self.ready[result.id] = result
        return [slot if isinstance(slot, Result) else self.ready.pop(slot) for slot in slots]

    def write_finals(self, exp_dir: Path | None) -> None:
        """The ME's messages no ``IN_get`` answered (its ``"DONE"`` and final results)."""
        if not self.messages:
            return
        text = "\n".join(self.messages) + "\n"
        if exp_dir is None:
            log.info("EQ/Py ME %s ended with:\n%s", self.optimizer.me, text)
            return
        path = Path(exp_dir) / FINAL_FILE
        path.write_text(text)
        log.info("EQ/Py ME %s ended; its final messages: %s", self.optimizer.me, path)


def warn_over_budget(what: str, asked: int, evaluator: Any) -> None:
    """Say (log and stderr) that ``asked`` evaluations do not fit the budget (not a ``emews check --try``,
    whose evaluator takes one point and ends the run alike)."""
    if asked > evaluator.remaining:
        said = (
            f"{what} {asked} points does not fit the {evaluator.remaining} evaluations left of the budget: "
            "the run ends before the ME does (raise budget.evaluations; emews resume replays the ME)"
        )
        log.warning(said)
        print(said, file=sys.stderr)  # the terminal's last word, as rank 0 says a step or time budget's end


def split_batch(message: str, batch: str) -> list[str]:
    """The parameter strings of one message: ``;``-separated, or a JSON list's items."""
    if batch == "semicolon":
        return message.split(";") if message else []
    try:
        items = json.loads(message)
    except json.JSONDecodeError as exc:
        raise MEFailed(f"batch: json, but the ME put {message[:80]!r}, not a JSON list: {exc.msg}") from None
    if not isinstance(items, list):
        raise MEFailed(f"batch: json, but the ME put a JSON {type(items).__name__}, not a list: {message[:80]!r}")
    return [item if isinstance(item, str) else json.dumps(item) for item in items]
