"""``evolve`` is ``dataclasses.replace`` for the plain frozen dataclasses it is used on (issue 23)."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from fitgate.sizing import ServingConfig
from fitgate.sizing.frozen import build, evolve
from fitgate.sizing.results import KVSummary


def test_evolve_equals_replace_and_leaves_the_original_alone() -> None:
    base = ServingConfig(max_model_len=8192, tensor_parallel_size=2)
    for changes in ({}, {"gpu_memory_utilization": 0.8}, {"kv_cache_dtype": "fp8", "tensor_parallel_size": 4}):
        new = evolve(base, **changes)
        assert new == dataclasses.replace(base, **changes) and hash(new) == hash(dataclasses.replace(base, **changes))
        assert new is not base and type(new) is ServingConfig
    assert base.tensor_parallel_size == 2 and base.kv_cache_dtype == "auto"
    kv = KVSummary(16, 32, 16, 100, 1, ("full",), 1600, 1.5, 10, None, None)
    assert evolve(kv, workload_blocks=40, workload_fraction=0.4) == dataclasses.replace(
        kv, workload_blocks=40, workload_fraction=0.4
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        evolve(base, max_model_len=1).max_model_len = 2  # type: ignore[misc]


def test_evolve_refuses_what_replace_would_not_copy_the_same_way() -> None:
    with pytest.raises(TypeError, match="no field 'max_model_length'"):
        evolve(ServingConfig(), max_model_length=1)

    @dataclasses.dataclass(frozen=True)
    class Checked:
        n: int

        def __post_init__(self) -> None:
            assert self.n >= 0

    with pytest.raises(TypeError, match="not a plain dataclass"):
        evolve(Checked(1), n=2)


def test_evolve_refuses_a_class_whose_dict_holds_cached_values() -> None:
    # A cached_property's value lives in the instance's __dict__: copying it would carry the old value over.
    @dataclasses.dataclass(frozen=True)
    class Cached:
        n: int

        @functools.cached_property
        def double(self) -> int:
            return 2 * self.n

    first = Cached(1)
    assert first.double == 2
    with pytest.raises(TypeError, match="not a plain dataclass"):
        evolve(first, n=2)


def test_serving_config_compares_and_hashes_as_the_generated_methods_would() -> None:
    # ServingConfig's __eq__ / __hash__ read its __dict__ (issue 23); the generated ones compare and hash the
    # tuple of every field in field order. They must agree on objects made by __init__, replace and evolve.
    def fields_of(s: ServingConfig) -> tuple[object, ...]:
        return tuple(getattr(s, f.name) for f in dataclasses.fields(s))

    base = ServingConfig(max_model_len=8192, tensor_parallel_size=2, limit_mm_per_prompt=(("image", 2),))
    variants = [
        base,
        dataclasses.replace(base),
        evolve(base, tensor_parallel_size=4),
        evolve(evolve(base, tensor_parallel_size=4), tensor_parallel_size=2),  # equal to base again
        evolve(base, gpu_memory_utilization=0.95, kv_cache_dtype="fp8"),
        dataclasses.replace(base, kv_cache_dtype="fp8", gpu_memory_utilization=0.95),
        ServingConfig(tensor_parallel_size=2, max_model_len=8192, limit_mm_per_prompt=(("image", 2),)),
        ServingConfig(),
    ]
    for a in variants:
        assert list(a.__dict__) == [f.name for f in dataclasses.fields(a)]
        assert hash(a) == hash(fields_of(a))
        for b in variants:
            assert (a == b) is (fields_of(a) == fields_of(b))
    assert (base == ("not", "a", "config")) is False


def test_build_makes_what_the_generated_init_makes() -> None:
    # frozen.build (issue 23): a Plan made without its frozen __init__ (14 object.__setattr__ calls) is equal to
    # the one __init__ makes, field for field and in the same __dict__ order, defaults filled alike
    @dataclasses.dataclass(frozen=True)
    class Point:
        x: int
        y: int = 2
        tags: tuple[str, ...] = dataclasses.field(default_factory=tuple)

    for values in ({"x": 1, "y": 5, "tags": ("a",)}, {"x": 1}, {"tags": ("b",), "x": 3}):
        made, built = Point(**values), build(Point, **values)  # type: ignore[arg-type]
        assert built == made and type(built) is Point
        assert list(built.__dict__.items()) == list(made.__dict__.items())
    with pytest.raises(dataclasses.FrozenInstanceError):
        build(Point, x=1).x = 2  # type: ignore[misc]
    with pytest.raises(TypeError, match="has no field 'z'"):
        build(Point, x=1, z=3)
    with pytest.raises(TypeError, match="needs field 'x'"):
        build(Point, y=1)

    @dataclasses.dataclass(frozen=True)
    class Checked:
        n: int

        def __post_init__(self) -> None:
            assert self.n >= 0

    with pytest.raises(TypeError, match="not a plain dataclass"):
        build(Checked, n=1)
