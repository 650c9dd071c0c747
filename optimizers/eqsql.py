"""An EQ-SQL model exploration algorithm (ME) run unchanged as an emews optimizer.

The ME is a Python file whose ``run(exp_id, params)`` uses the ``eqsql`` package: it starts the
database and a worker pool, submits JSON payloads to a task queue and takes their results as they
complete. Under this optimizer the ``eqsql`` it imports is :mod:`emews.optimizers.eqsql_api`:
the queue's tasks are the experiment's (each point ``{"payload": PAYLOAD}``, run by the workflow's
objective on the job's workers, as an EQ-SQL worker pool runs its model script), and starting or
stopping the database and the pool does nothing (the store and the workers are emews').
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from emews.core.errors import KeyedValueError
from emews.core.evaluator import BudgetExhausted
from emews.core.optimizer import Optimizer
from emews.core.space import Space

from . import eqsql_api
from .eqpy import MEFailed, call_me, import_me, warn_over_budget


class EQSQL(Optimizer):
    """Runs an EQ-SQL ME's ``run(exp_id, params)`` on the optimizer rank, its tasks as emews tasks.

    Options (workflow ``optimizer.options``): ``me`` (the ME's file, relative to the current or the
    workflow's folder), ``config`` (its YAML configuration file, read as ``eqsql.cfg.parse_yaml_cfg``
    reads it and passed as ``params``, as the ME's ``__main__`` does; its database and pool keys are
    not used) and ``exp_id`` (the experiment id passed to ``run``; default: the experiment
    directory's name). The ME's tasks are of one type (one objective per workflow).
    """

    def __init__(self, me: Path, config: Path, exp_id: str | None = None) -> None:
        self.me, self.config, self.exp_id = Path(me), Path(config), exp_id

    @classmethod
    def takes_open_points(cls, options: Mapping[str, Any]) -> bool:
        """Points are ``{"payload": PAYLOAD}``: the ME owns its space, the workflow needs none."""
        return True

    @classmethod
    def point_keys(cls, options: Mapping[str, Any]) -> frozenset[str]:
        return frozenset({eqsql_api.PAYLOAD})

    @classmethod
    def describe_plan(cls, options: Mapping[str, Any], space: Space) -> str:
        """The ME's points (it owns its space): ``points {"payload": PAYLOAD} from the ME uc4.py``."""
        return f'points {{"{eqsql_api.PAYLOAD}": PAYLOAD}} from the ME {Path(str(options.get("me"))).name}'

    def check(self, space: Space) -> None:
        """The ME imports (with this ``eqsql``), has a ``run()`` and its configuration is a YAML mapping."""
        self._params()
        with eqsql_api.installed(lambda: None):  # type: ignore[arg-type,return-value]  # no queue at check
            self._load()

    def _load(self) -> ModuleType:
        return import_me(self.me, "EQ-SQL")

    def _params(self) -> dict[str, Any]:
        try:
            params = yaml.safe_load(self.config.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise KeyedValueError("optimizer.options.config", f"cannot read {self.config}: {exc}") from None
        if not isinstance(params, dict):
            raise KeyedValueError(
                "optimizer.options.config", f"{self.config} holds no mapping", "the ME's YAML configuration file"
            )
        return params

    def run(self, evaluator: Any) -> None:
        types: set[int] = set()

        def check_type(eq_type: int) -> None:
            types.add(eq_type)
            if len(types) > 1:
                raise MEFailed(
                    f"EQ-SQL ME {self.me} submitted tasks of types {sorted(types)}: an emews workflow runs "
                    "one objective (one type); run another workflow for the other type"
                )

        queue = _BudgetedQueue(self.me, evaluator, check_type)
        exp_id = self.exp_id or (Path(evaluator.exp_dir).name if evaluator.exp_dir is not None else "emews")
        params = self._params()
        with eqsql_api.installed(lambda: queue):
            module = self._load()
            call_me(
                self.me, "EQ-SQL", lambda: module.run(exp_id, params), lambda: f"after {len(queue.results)} results"
            )


class _BudgetedQueue(eqsql_api.TaskQueue):
    """The task queue, saying in the log when the ME's tasks outgrow the budget."""

    def __init__(self, me: Path, evaluator: Any, check_type: Any) -> None:
        super().__init__(evaluator, check_type)
        self.me = me

    def _put(self, eq_ids: list[int], priority: int) -> None:
        try:
            super()._put(eq_ids, priority)
        except BudgetExhausted:
            warn_over_budget(f"EQ-SQL ME {self.me}: submitting", len(eq_ids), self.evaluator)
            raise
