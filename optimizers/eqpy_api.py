"""EQ/Py's module API (``eqpy.OUT_put``, ``eqpy.IN_get``) for an ME run by emews.

An EQ/Py model exploration algorithm (ME) does ``import eqpy`` and talks to its Swift/T workflow
through two calls: ``OUT_put(string)`` hands the workflow a message (a batch of parameter strings,
a handshake request, the final results) and ``IN_get()`` waits for the workflow's answer. Under
the ``eqpy`` optimizer (:mod:`emews.optimizers.eqpy`) this module is what ``import eqpy`` finds,
and the optimizer is the workflow: it answers through an :class:`Exchange` bound here.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from emews.core.imports import modules_installed

if TYPE_CHECKING:
    from emews.core.results import Result

#: what EQ/Py's ``output_q_get`` returns once the ME's thread has ended (kept for MEs that name it)
EQPY_ABORT = "EQPY_ABORT"


class Exchange(Protocol):
    """The workflow's side of an ME's messages."""

    def out_put(self, message: str) -> None:
        """The ME handed a message over."""

    def in_get(self) -> str:
        """The ME waits for the answer to its oldest unanswered message."""


_bound: list[Exchange] = []  # the exchange of the ME running now (innermost last)


def OUT_put(string_params: str) -> None:  # noqa: N802 - EQ/Py's name
    """Hand ``string_params`` to the workflow (EQ/Py's ``eqpy.OUT_put``)."""
    _exchange("OUT_put").out_put(str(string_params))


def IN_get() -> str:  # noqa: N802 - EQ/Py's name
    """The workflow's answer to the oldest unanswered message (EQ/Py's ``eqpy.IN_get``)."""
    return _exchange("IN_get").in_get()


def _exchange(call: str) -> Exchange:
    if not _bound:
        raise RuntimeError(
            f"eqpy.{call} called outside an emews run: this eqpy is emews' (the eqpy optimizer's), "
            "which answers only while the optimizer runs the ME"
        )
    return _bound[-1]


@contextlib.contextmanager
def installed(exchange: Exchange | None = None) -> Iterator[ModuleType]:
    """This module as ``eqpy`` in ``sys.modules`` (the one ``import eqpy`` finds, whatever copy of
    EQ/Py is on ``sys.path``), answering through ``exchange``; the earlier state after."""
    module = sys.modules[__name__]
    if exchange is not None:
        _bound.append(exchange)
    try:
        with modules_installed({"eqpy": module}):
            yield module
    finally:
        if exchange is not None:
            _bound.remove(exchange)


def result_text(result: Result) -> str:
    """A result as a Swift/T workflow answered it (EQ/Py's ``IN_get``, an EQ-SQL pool's report):
    the objective's text, ``nan`` when the evaluation failed."""
    value = result.objective
    return repr(float(value)) if result.ok and value is not None and math.isfinite(value) else "nan"
