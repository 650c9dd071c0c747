"""An optimizer that fixes its own in-flight count (one per worker: ``bayes``, ``ga``'s ``async``
strategy, ``hyperspace``, the R ``mbo``) keeps at least what the pools can hold in flight, read
before each proposal (``Evaluator.room``): a pool that joins while every task of the first
runs gets a task for each of its workers before any result comes (docs/postgres.md, "Pools").
Before, such an optimizer kept its launch-time count and the new pool's workers idled."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from pgserver import PgServer
from pooled import join_while_gated, running_on

OPTIMIZERS: dict[str, dict[str, Any]] = {
    "bayes": {"name": "bayes", "options": {"seed": 1, "n_initial_points": 16}},
    "ga": {"name": "ga", "options": {"seed": 1, "strategy": "async", "population": 8}},
    "hyperspace": {"name": "hyperspace", "options": {"seed": 1, "n_initial_points": 16}},
    # the R bridge (the fallback loop: mlrMBO's batches are synchronous, as a generation is)
    "mbo": {"name": "mbo", "options": {"seed": 1, "n_initial": 2, "implementation": "fallback"}},
}


@pytest.mark.parametrize("optimizer", [
    pytest.param(name, marks=pytest.mark.skipif(
        name == "mbo" and importlib.util.find_spec("rpy2") is None, reason="rpy2 is not installed"))
    for name in sorted(OPTIMIZERS)])
def test_a_pool_that_joins_gets_work_from_an_optimizer_of_fixed_in_flight(
        pg_server: PgServer, tmp_path: Path, optimizer: str) -> None:
    """The first pool (1 worker) runs a task at the gate; a pool of 3 workers attaches, and its 3
    workers must each start a task while no result is stored (the gate holds them all)."""
    join_while_gated(tmp_path, pg_server.url(), 16, OPTIMIZERS[optimizer], first_holds=lambda exp: running_on(exp, 1))
