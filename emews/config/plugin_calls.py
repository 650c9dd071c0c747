"""A plug-in's own code called before the run (its constructor, ``check``, the optimizer's
classmethods), and what its failures say: one line naming the file, the key and what is allowed.

:func:`refusal` turns what the code raised into that line, one way for every call;
:func:`ask_optimizer` asks the optimizer class a workflow names a question (``takes_open_points``,
``point_keys``, ``planned_evaluations``) before :func:`~emews.config.workflow_checks.check_workflow`
has loaded it: a class that cannot be loaded is that check's to report, its own errors are not
swallowed.

A plug-in names the option it refuses by raising :class:`~emews.core.errors.OptionError` (the
option, the message, what is allowed): the line then names ``optimizer.options.NAME``; a
:class:`~emews.core.errors.KeyedValueError` names its own key.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from emews.config.plugins import OPTIMIZERS, options_model
from emews.config.workflow_schema import OptimizerSection
from emews.core.errors import ConfigError, EmewsError, KeyedValueError, OptionError

T = TypeVar("T")


def refusal(
    exc: Exception, section: str, cls: type | None, options: Mapping[str, Any], file: str, doing: str
) -> EmewsError:
    """What ``exc``, raised by the plug-in ``cls`` of the workflow's ``section`` (``optimizer``,
    ``trial_scheduler``) given ``options``, says to the user: a refused option (:class:`OptionError`)
    as a ConfigError naming ``SECTION.options.NAME`` (another ValueError or TypeError: ``SECTION.options``),
    the plug-in's own EmewsError as it is, anything else as the plug-in's failure while ``doing``
    (``cannot build optimizer 'ga'``) with the place it was raised, blamed on ``SECTION``."""
    if isinstance(exc, KeyedValueError):
        return ConfigError(exc.message, file=file, key=exc.key or f"{section}.options", allowed=exc.allowed)
    if isinstance(exc, OptionError) and exc.option in _option_names(cls, options):
        return ConfigError(exc.message, file=file, key=f"{section}.options.{exc.option}", allowed=exc.allowed)
    if isinstance(exc, (TypeError, ValueError)):
        return ConfigError(str(exc), file=file, key=f"{section}.options")
    if isinstance(exc, EmewsError):  # the plug-in's own configuration error, with its file, key and allowed values
        return exc
    return ConfigError(f"{doing}: {type(exc).__name__}: {exc} (at {innermost_frame(exc)})", file=file, key=section)


def ask_optimizer(
    section: OptimizerSection, file: str, base_dir: Path | None, question: Callable[[Any], T]
) -> T | None:
    """``question(cls)`` of the optimizer class ``section`` names (``base_dir``: where a relative
    ``file.py`` is also looked for), or ``None`` when the class cannot be loaded; what the class
    raises is :func:`refusal`'s to say."""
    cls = OPTIMIZERS.resolve_or_none(section.name, base_dir)
    if cls is None:
        return None
    try:
        return question(cls)
    except Exception as exc:  # noqa: BLE001 - the plug-in's own code: said in one line, as its build is
        doing = f"optimizer {section.name!r} failed to answer before the run"
        raise refusal(exc, "optimizer", cls, section.options, file, doing) from None


def innermost_frame(exc: BaseException) -> str:
    """``file:line`` of the frame ``exc`` was raised in."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "unknown place"


def _option_names(cls: type | None, options: Mapping[str, Any]) -> set[str]:
    """The options given and the keywords ``cls`` takes."""
    names = set(options)
    if cls is not None:
        try:
            names |= set(options_model(cls).model_fields)
        except Exception:  # noqa: BLE001 - a signature pydantic cannot model: the given options still name
            pass
    return names
