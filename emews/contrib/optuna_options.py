"""The options of :class:`emews.contrib.optuna.OptunaSampler` checked against Optuna itself: the
sampler's name and its constructor's keywords, each refused in one line naming its key
(``optimizer.options.KEY``) and what is allowed. An Optuna pruner, named as the sampler or as a
``pruner`` option, says which emews trial scheduler stops trials in its place."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import optuna

from emews.core.errors import KeyedValueError, did_you_mean

#: the trial scheduler that does the work of each Optuna pruner (the others: asha)
PRUNER_SCHEDULERS = {
    "MedianPruner": "median",
    "PercentilePruner": "median",
    "SuccessiveHalvingPruner": "asha",
    "HyperbandPruner": "hyperband",
}
#: the options of the adapter itself, before the sampler's own
ADAPTER_OPTIONS = ("sampler", "seed")


def samplers() -> dict[str, type]:
    """The samplers the adapter builds, by name: every class of ``optuna.samplers`` that takes a seed."""
    return {
        name: cls for name, cls in _classes(optuna.samplers, optuna.samplers.BaseSampler).items() if _takes(cls, "seed")
    }


def sampler_class(sampler: str, options: Mapping[str, Any]) -> type:
    """The class of ``optuna.samplers`` named ``sampler``, once every key of ``options`` (the
    sampler's own keywords) is one of its constructor's; else :class:`KeyedValueError`."""
    offered = samplers()
    cls = offered.get(sampler)
    if cls is None:
        raise KeyedValueError("optimizer.options.sampler", _not_offered(sampler, offered), ", ".join(sorted(offered)))
    keywords = [name for name, p in inspect.signature(cls).parameters.items() if _keyword(p) and name != "seed"]
    for key in options:
        if key not in keywords:
            message = (
                _pruner_hint(options[key] if isinstance(options[key], str) else "a pruner")
                if key == "pruner"
                else f"unknown key {key!r} of {sampler}" + did_you_mean(key, keywords)
            )
            raise KeyedValueError(f"optimizer.options.{key}", message, ", ".join([*ADAPTER_OPTIONS, *keywords]))
    return cls


def _not_offered(sampler: str, offered: Mapping[str, type]) -> str:
    if sampler in _classes(optuna.pruners, optuna.pruners.BasePruner):
        return _pruner_hint(sampler)
    if sampler in _classes(optuna.samplers, optuna.samplers.BaseSampler):
        return f"{sampler} takes no seed: not one of the samplers the adapter builds"
    return f"unknown Optuna sampler {sampler!r}" + did_you_mean(str(sampler).rpartition(".")[2], offered)


def _pruner_hint(pruner: str) -> str:
    scheduler = PRUNER_SCHEDULERS.get(pruner, "asha")
    return (
        f"{pruner} is an Optuna pruner; in emews a trial scheduler stops trials: "
        f"trial_scheduler: {{name: {scheduler}}} (asha, hyperband, median, pbt), beside the optimizer"
    )


def _classes(module: Any, base: type) -> dict[str, type]:
    return {
        name: cls
        for name, cls in vars(module).items()
        if inspect.isclass(cls) and issubclass(cls, base) and not name.startswith(("Base", "_"))
    }


def _takes(cls: type, name: str) -> bool:
    return name in inspect.signature(cls).parameters


def _keyword(parameter: inspect.Parameter) -> bool:
    return parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
