"""Per-type behaviour lives with the dimension type: each class provides the whole interface, its
YAML form reads back as itself, and every optional-library registry (R, skopt, Optuna) covers it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from emews.core.space import Categorical, Constant, DimensionType, Float, Int, Ordered, Space, registered
from emews.config.space_section import build_space

EXAMPLES = {
    Int: Int(1, 64, log=True, sigma=0.5),
    Float: Float(-2.0, 3.0),
    Categorical: Categorical(("relu", None, True, 2.5)),
    Ordered: Ordered((16, 32, 64)),
    Constant: Constant("adam"),
}


def _types(base: type) -> set[type]:
    found = set()
    for sub in base.__subclasses__():
        if not sub.__name__.startswith("_"):
            found.add(sub)
        found |= _types(sub)
    return found


def test_every_dimension_type_has_an_example():
    assert _types(DimensionType) == set(EXAMPLES)


@pytest.mark.parametrize("dim", EXAMPLES.values(), ids=lambda d: type(d).__name__)
def test_each_type_provides_the_whole_interface(dim):
    rng = random.Random(0)
    value = dim.sample(rng)
    assert dim.contains(value)
    assert dim.contains(dim.from_unit(dim.to_unit(value)))
    assert all(dim.contains(v) for v in dim.grid(3))
    assert dim.contains(dim.decode(dim.encode(value)))
    assert all(dim.contains(dim.mutate(value, rng)) for _ in range(20))
    assert dim.contains(dim.first)
    assert dim.is_single == (type(dim) is Constant)
    assert dim.free == (type(dim) is not Constant)
    assert dim.to_spec()["type"] == dim.kind


def test_the_yaml_form_reads_back_as_the_same_space():
    space = Space({type(d).__name__: d for d in EXAMPLES.values()})
    raw = {name: dim.to_spec() for name, dim in space.dimensions.items()}
    assert build_space(raw, "workflow.yaml", Path.cwd()) == space
    assert space.constants == {"Constant": "adam"}


def test_optional_library_registries_cover_every_type():
    from emews.optimizers._bayes._space import SKOPT_DIMENSIONS
    from emews.contrib.rbridge import R_TYPES
    optuna = pytest.importorskip("emews.contrib.optuna")
    for dim in EXAMPLES.values():
        registered(R_TYPES, dim)
        if dim.free:
            registered(SKOPT_DIMENSIONS, dim)
            optuna.OptunaSampler.distribution(dim)


def test_registered_uses_the_nearest_base_class_and_names_what_it_lacks():
    registry = {Categorical: "choice"}
    assert registered(registry, Ordered((1, 2))) == "choice"
    with pytest.raises(TypeError, match="unsupported dimension"):
        registered(registry, Int(0, 1))


def test_a_new_type_must_provide_the_whole_contract():
    """``DimensionType`` is an ABC: a type that leaves a method out cannot be built."""

    class Half(DimensionType):
        kind = "half"

        def sample(self, rng):
            return 0.5

    with pytest.raises(TypeError, match="abstract"):
        Half()
