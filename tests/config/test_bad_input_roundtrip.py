"""Whatever load_workflow accepts reloads unchanged from the workflow.yaml an experiment records."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from testutil import FAULTY
from emews.core.errors import ConfigError
from emews.config.workflow import load_workflow
from emews.config.yamlio import dump_yaml

TRICKY = st.sampled_from(["1e5", "0x1f", "1:00:00", "yes", "no", "null", "~", ".inf", ".nan", "1_000", "-0",
                          "010", "true", "", " ", "a: b", "- x", "#", "caf\u00e9", "\u2028"])
SCALARS = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.none(), st.text(max_size=8), TRICKY)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3), max_leaves=6)
NUMBERS = st.one_of(st.integers(-10**6, 10**6), st.floats(-1e6, 1e6), SCALARS)


@st.composite
def parameters(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["int", "float", "categorical", "ordered", "constant"]))
    entry: dict[str, Any] = {"type": kind}
    if kind in ("int", "float"):
        entry.update(lower=draw(NUMBERS), upper=draw(NUMBERS))
        if draw(st.booleans()):
            entry["log"] = draw(st.one_of(st.booleans(), SCALARS))
        if draw(st.booleans()):
            entry["sigma"] = draw(NUMBERS)
    elif kind == "constant":
        entry["value"] = draw(VALUES)
    else:
        entry["values"] = draw(st.lists(VALUES, min_size=0, max_size=5))
    return entry


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(space=st.dictionaries(st.one_of(st.text(min_size=1, max_size=6), TRICKY), parameters(),
                             min_size=1, max_size=4),
       seed=st.one_of(st.none(), st.integers(-2**40, 2**40), SCALARS))
def test_an_accepted_workflow_reloads_from_what_is_recorded(space: dict[str, Any], seed: Any) -> None:
    data = {"optimizer": {"name": "random"}, "objective": {"module": str(FAULTY)}, "space": space,
            "budget": {"evaluations": 5}, "seed": seed}
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "wf.yaml"
        source.write_text(yaml.safe_dump(data), encoding="utf-8")   # as a person (or a script) writes it
        try:
            first = load_workflow(str(source), check_imports=False)
        except ConfigError:
            event("refused")
            return  # refused with one clear message: nothing to reload
        recorded = Path(folder) / "workflow.yaml"
        recorded.write_text(dump_yaml(first.to_dict()), encoding="utf-8")  # as create_experiment writes it
        again = load_workflow(str(recorded), check_imports=False)
        assert again.to_dict() == first.to_dict()
        assert repr(again.space) == repr(first.space)
