"""Parameter spaces: sampling, membership, unit mapping, and CANDLE GA JSON."""

from __future__ import annotations

import json
import os
import math
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testutil import CANDLE_GA

from emews.core.jsoncodec import dumps_point, loads_point
from emews.core.space import INT_RANGE, Categorical, Constant, Float, Int, Ordered, Space, SpaceError, to_builtin
from emews.core.candle_space import load_candle_json

finite = st.floats(-1e6, 1e6, allow_nan=False)


@st.composite
def dimensions(draw):
    kind = draw(st.sampled_from(["int", "float", "logfloat", "cat", "ord", "const"]))
    if kind == "int":
        lo = draw(st.integers(-1000, 1000))
        return Int(lo, lo + draw(st.integers(0, 1000)))
    if kind == "float":
        lo = draw(finite)
        return Float(lo, lo + draw(st.floats(0, 1e6)))
    if kind == "logfloat":
        lo = draw(st.floats(1e-8, 1e3))
        return Float(lo, lo * draw(st.floats(1, 1e6)), log=True)
    values = draw(st.lists(st.one_of(st.integers(*INT_RANGE), st.text(max_size=5)), min_size=1, max_size=6,
                           unique_by=repr))
    if kind == "cat":
        return Categorical(tuple(values))
    if kind == "ord":
        return Ordered(tuple(values))
    return Constant(values[0])


@settings(max_examples=200)
@given(dim=dimensions(), seed=st.integers(0, 2**32))
def test_samples_lie_inside_and_survive_the_unit_round_trip(dim, seed) -> None:
    space = Space({"p": dim})
    point = space.sample(random.Random(seed))
    assert space.contains(point)
    back = space.from_unit(space.to_unit(point)) if space.free else point
    assert space.contains(back)
    if isinstance(dim, (Categorical, Int, Constant)):
        assert back == point
    else:
        assert math.isclose(back["p"], point["p"], rel_tol=1e-6, abs_tol=1e-6 * (dim.upper - dim.lower + 1))


@given(u=st.floats(-0.5, 1.5, allow_nan=False), dim=dimensions())
def test_from_unit_always_lands_inside(u, dim) -> None:
    assert dim.contains(dim.from_unit(u))


@pytest.mark.parametrize("lower", [0, -(2**63)])
def test_an_int_range_of_64_bits_samples(lower: int) -> None:
    """``{type: int, lower: 0, upper: 9223372036854775807}`` (a 64-bit seed parameter; the space takes
    64-bit integers) ended random search, the GA's first population and check --try with
    'OverflowError: Python int too large to convert to C ssize_t'."""
    dim = Int(lower, 2**63 - 1)
    small = Int(0, 100)
    for seed in range(20):  # the same draws as before for ranges that have a len()
        assert small.sample(random.Random(seed)) == random.Random(seed).randint(0, 100)
        value = dim.sample(random.Random(seed))
        assert dim.contains(value) and value == random.Random(seed).randint(lower, 2**63 - 1)


def test_log_float_samples_spread_over_decades() -> None:
    dim = Float(1e-5, 1e-1, log=True)
    rng = random.Random(0)
    samples = [dim.sample(rng) for _ in range(4000)]
    below = sum(s < 1e-3 for s in samples) / len(samples)
    assert 0.45 < below < 0.55  # half the decades lie below 1e-3


def test_bad_dimensions_are_refused() -> None:
    with pytest.raises(ValueError, match="greater than upper"):
        Float(2.0, 1.0)
    with pytest.raises(ValueError, match="at least one value"):
        Categorical(())
    with pytest.raises(ValueError, match="lower > 0"):
        Float(0.0, 1.0, log=True)
    with pytest.raises(ValueError, match="wider than a double holds"):  # hyperspace, Optuna, Nevergrad failed mid-run
        Float(-1.7976931348623157e308, 1.7976931348623157e308)
    assert Float(-1e307, 1e307).upper == 1e307  # a wide range that fits stays allowed
    with pytest.raises(ValueError, match="1 and 1.0 are one value"):  # 1.0 was matched to 1: never proposed
        Categorical((1, "1", True, 1.0))
    assert Categorical((1, "1", True)).index(True) == 2  # True and "1" stay apart from 1


def test_validate_converts_numpy_scalars_and_names_bad_keys() -> None:
    space = Space({"n": Int(1, 10), "lr": Float(0.0, 1.0), "act": Categorical(("relu", "tanh"))})
    clean = space.validate({"n": np.int64(3), "lr": np.float64(0.5), "act": np.str_("relu")})
    assert clean == {"n": 3, "lr": 0.5, "act": "relu"}
    assert type(clean["n"]) is int and type(clean["act"]) is str
    with pytest.raises(SpaceError) as err:
        space.validate({"n": 11, "lr": 0.5, "act": "relu"})
    assert err.value.key == "n"
    with pytest.raises(SpaceError, match="missing"):
        space.validate({"n": 1, "lr": 0.5})
    with pytest.raises(SpaceError, match="not a parameter"):
        space.validate({"n": 1, "lr": 0.5, "act": "relu", "extra": 1})


def test_booleans_are_not_integers() -> None:
    assert not Int(0, 5).contains(True)
    assert not Categorical((1, 2)).contains(True)
    assert Categorical((True, False)).contains(False)
    assert to_builtin(np.bool_(True)) is True




def test_candle_ga_json_loads_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "params.json"
    path.write_text(json.dumps(CANDLE_GA))
    space = load_candle_json(path)
    assert space.names == [p["name"] for p in CANDLE_GA]
    assert isinstance(space["batch_size"], Ordered) and space["batch_size"].values == (16, 32, 64, 128, 256)
    assert space["dropout"] == Float(0.0, 0.9, sigma=0.045)
    assert space["dense"].sigma == 50
    assert space["use_bn"].values == (True, False)
    assert space["epochs"] == Constant(5)
    point = space.sample(random.Random(3))
    assert space.contains(point) and point["epochs"] == 5


def test_candle_json_errors_name_the_parameter(tmp_path: Path) -> None:
    path = tmp_path / "params.json"
    path.write_text(json.dumps([{"name": "bs", "type": "ordered", "element_type": "quux", "values": [1]}]))
    with pytest.raises(SpaceError) as err:
        load_candle_json(path)
    assert err.value.key == "bs" and "element_type" in str(err.value)


@pytest.mark.parametrize("make", [lambda v: Categorical((1, v)), lambda v: Ordered((v,)), lambda v: Constant([v]),
                                  lambda v: Int(0, v)])
def test_integers_beyond_64_bits_are_refused(make):
    with pytest.raises(ValueError, match="64 bits"):
        make(INT_RANGE[1] + 1)
    make(INT_RANGE[1])  # the largest 64-bit integer is fine


@given(dim=dimensions(), seed=st.integers(0, 2**32))
@settings(deadline=None, max_examples=200)
def test_points_survive_the_store_codec_exactly(dim, seed):
    point = Space({"p": dim, "q": Constant("x")}).sample(random.Random(seed))
    back = loads_point(dumps_point(point))
    assert back == point and [type(v) for v in back.values()] == [type(v) for v in point.values()]


@given(dims=st.lists(dimensions(), min_size=1, max_size=4), seed=st.integers(0, 2**32),
       tweak=st.sampled_from(["as_sampled", "int_for_float", "numpy", "bool", "float_for_int", "reordered"]))
@settings(deadline=None, max_examples=300)
def test_the_quick_validation_path_agrees_with_the_full_check(dims, seed, tweak):
    space = Space({f"p{i}": d for i, d in enumerate(dims)})
    point = space.sample(random.Random(seed))
    name = "p0"
    value = point[name]
    if tweak == "int_for_float" and isinstance(value, float) and value.is_integer():
        point[name] = int(value)
    elif tweak == "numpy" and type(value) in (int, float):
        point[name] = np.float64(value) if isinstance(value, float) else np.int64(value)
    elif tweak == "bool":
        point[name] = True
    elif tweak == "float_for_int" and type(value) is int:
        point[name] = float(value)
    elif tweak == "reordered":
        point = dict(reversed(list(point.items())))

    def outcome(check):
        try:
            clean = check(point)
        except SpaceError as exc:
            return ("error", exc.key)
        return ("ok", list(clean.items()), [type(v) for v in clean.values()])

    assert outcome(space.validate) == outcome(space._validate)


def test_an_open_space_keeps_a_non_utf8_file_name_it_lists() -> None:
    """A categorical listing a file name that is not UTF-8 (``os.fsdecode(b"caf\\xe9.txt")``: lone
    surrogates): a point of an open space holding it is valid. Escaping every string (for metrics the
    store writes) turned the value into the text ``caf\\udce9.txt``, outside the list, and refused it."""
    from emews.core.space import Categorical, Space

    name = os.fsdecode(b"caf\xe9.txt")
    space = Space({"file": Categorical([name, "plain.txt"])}).opened()
    assert space.validate({"file": name, "extra": 1}) == {"file": name, "extra": 1}
