import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fxrl import random, specs, tree
from fxrl.testing import all_specs, assert_trees_close, from_spec, keys


def _leaf_specs(spec):
    if isinstance(spec, specs.Composite):
        return tree.leaves(spec._as_tree())
    return [spec]


def _anything_shaped_like(spec, batch_shape):
    """Arbitrary values (mostly outside the set) with the spec's shapes and dtypes."""

    def leaf(s):
        shape = tuple(batch_shape) + s.shape
        if s.dtype.is_floating_point:
            el = st.floats(-1e4, 1e4, width=32)
            return hnp.arrays(np.float64, shape, elements=el).map(
                lambda a: torch.as_tensor(a).to(s.dtype)
            )
        if s.dtype == torch.bool:
            return hnp.arrays(np.bool_, shape).map(torch.as_tensor)
        lo, hi = (0, 255) if s.dtype == torch.uint8 else (-100, 100)
        return hnp.arrays(np.int64, shape, elements=st.integers(lo, hi)).map(
            lambda a: torch.as_tensor(a).to(s.dtype)
        )

    if isinstance(spec, specs.Composite):
        sub = spec.specs
        if isinstance(sub, dict):
            names = list(sub)
            return st.tuples(*(_anything_shaped_like(sub[k], batch_shape) for k in names)).map(
                lambda vs: dict(zip(names, vs, strict=True))
            )
        return st.tuples(*(_anything_shaped_like(v, batch_shape) for v in sub))
    return leaf(spec)


@given(spec=all_specs(), key=keys(), batch=st.sampled_from([(), (3,), (2, 2)]))
def test_samples_are_inside_the_spec_with_the_batch_shape(spec, key, batch):
    x = spec.sample(key, batch)
    assert bool(spec.contains(x)), (spec, x)
    for s, leaf in zip(_leaf_specs(spec), tree.leaves(x), strict=True):
        assert tuple(leaf.shape) == batch + s.shape and leaf.dtype == s.dtype


@given(spec=all_specs(), data=st.data())
def test_project_lands_inside_and_is_idempotent(spec, data):
    x = data.draw(_anything_shaped_like(spec, (2,)))
    p = spec.project(x)
    assert bool(spec.contains(p)), (spec, x, p)
    assert_trees_close(spec.project(p), p, rtol=0, atol=0)


@given(spec=all_specs(), data=st.data())
def test_project_leaves_points_of_the_set_unchanged(spec, data):
    x = data.draw(from_spec(spec, (3,)))
    assert_trees_close(spec.project(x), x, rtol=0, atol=0)


@given(spec=all_specs())
def test_zeros_are_inside_whenever_the_set_holds_zero(spec):
    z = spec.zeros((2,))
    holds_zero = all(
        not isinstance(s, specs.Box) or bool(((s.low <= 0) & (s.high >= 0)).all())
        for s in _leaf_specs(spec)
    )
    assert bool(spec.contains(z)) == holds_zero


@given(spec=all_specs(), data=st.data())
def test_from_spec_strategy_draws_inside_the_spec(spec, data):
    assert bool(spec.contains(data.draw(from_spec(spec, (2,)))))


@given(spec=all_specs(composite=False), key=keys())
def test_sample_with_batched_keys_equals_a_loop(spec, key):
    ks = random.split(key, 3)
    batched = spec.sample(ks, (2,))
    looped = torch.stack([spec.sample(k, (2,)) for k in ks])
    assert_trees_close(batched, looped, rtol=0, atol=0)


@given(spec=all_specs(), key=keys())
def test_to_gymnasium_space_contains_our_samples(spec, key):
    space = specs.to_gymnasium(spec)
    x = spec.sample(key)

    def as_numpy(v):
        if isinstance(v, dict):
            return {k: as_numpy(w) for k, w in v.items()}
        if isinstance(v, tuple):
            return tuple(as_numpy(w) for w in v)
        return v.numpy()

    if any(isinstance(s, specs.Binary) and s.dtype != torch.int8 for s in _leaf_specs(spec)):
        return  # gymnasium's MultiBinary is int8 only
    assert space.contains(as_numpy(x)), (spec, space, x)


@given(spec=all_specs(), key=keys())
def test_gymnasium_round_trip_keeps_shapes_dtypes_and_bounds(spec, key):
    if any(isinstance(s, specs.Binary) and s.dtype != torch.int8 for s in _leaf_specs(spec)):
        return
    back = specs.from_gymnasium(specs.to_gymnasium(spec))
    assert repr(back) == repr(spec)


def test_from_gymnasium_samples_of_gymnasium_spaces_are_inside():
    space = gym.spaces.Dict(
        {
            "pos": gym.spaces.Box(-1.0, 2.0, shape=(3,), dtype=np.float32),
            "mode": gym.spaces.Discrete(4),
            "grid": gym.spaces.MultiDiscrete([3, 5]),
            "flags": gym.spaces.MultiBinary(6),
            "pair": gym.spaces.Tuple(
                (gym.spaces.Discrete(2), gym.spaces.Box(0, 255, (2, 2), np.uint8))
            ),
        }
    )
    spec = specs.from_gymnasium(space)
    space.seed(0)
    for _ in range(20):
        sample = space.sample()
        as_torch = tree.map(torch.as_tensor, _to_tuples(sample))
        assert bool(spec.contains(as_torch)), (spec, sample)
    assert isinstance(spec["pair"], specs.Composite)
    assert spec["pair"][1].dtype == torch.uint8
    assert spec["flags"].dtype == torch.int8


def _to_tuples(x):
    if isinstance(x, dict):
        return {k: _to_tuples(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_to_tuples(v) for v in x)
    return np.asarray(x)


def test_discrete_with_a_start_offset_is_rejected():
    with pytest.raises(ValueError, match="starts at 1"):
        specs.from_gymnasium(gym.spaces.Discrete(3, start=1))


def test_box_samples_follow_gymnasium_shapes_for_each_kind_of_bound():
    box = specs.Box(
        torch.tensor([0.0, -np.inf, 2.0, -np.inf]), torch.tensor([1.0, 5.0, np.inf, np.inf])
    )
    x = box.sample(random.key(0), (20_000,))
    assert bool(box.contains(x))
    assert 0.45 < float(x[:, 0].mean()) < 0.55  # uniform on [0, 1]
    assert 3.9 < float(x[:, 1].mean()) < 4.1  # 5 - Exp(1)
    assert 2.9 < float(x[:, 2].mean()) < 3.1  # 2 + Exp(1)
    assert abs(float(x[:, 3].mean())) < 0.05 and 0.95 < float(x[:, 3].std()) < 1.05  # N(0, 1)


def test_integer_box_samples_every_value_including_high():
    box = specs.Box(-2, 3, shape=(), dtype=torch.int32)
    x = box.sample(random.key(1), (5000,))
    assert x.dtype == torch.int32 and sorted(set(x.tolist())) == [-2, -1, 0, 1, 2, 3]


def test_contains_checks_dtype_shape_and_values():
    box = specs.Box(-1.0, 1.0, shape=(2,))
    assert bool(box.contains(torch.zeros(5, 2)))
    assert not bool(box.contains(torch.zeros(2, dtype=torch.float64)))
    assert not bool(box.contains(torch.zeros(3)))
    assert not bool(box.contains(torch.tensor([0.0, 1.5])))
    assert not bool(box.contains([0.0, 0.0]))
    assert torch.tensor([0.5, -0.5]) in box
    d = specs.Discrete(3)
    assert bool(d.contains(torch.tensor([0, 2]))) and not bool(d.contains(torch.tensor(3)))


def test_contains_is_a_tensor_and_works_under_vmap():
    box = specs.Box(0.0, 1.0, shape=(2,))
    xs = torch.tensor([[0.5, 0.5], [2.0, 0.5]])
    inside = torch.func.vmap(box.contains)(xs)
    assert inside.tolist() == [True, False]


def test_composite_accepts_dict_keys_in_any_order_but_not_missing_keys():
    c = specs.Composite({"a": specs.Discrete(2), "b": specs.Box(0.0, 1.0, shape=(1,))})
    assert bool(c.contains({"b": torch.zeros(1), "a": torch.tensor(1)}))
    assert not bool(c.contains({"a": torch.tensor(1)}))


def test_project_rounds_floats_into_discrete_and_clips():
    d = specs.Discrete(4)
    assert d.project(torch.tensor([-3.0, 1.4, 1.6, 9.0])).tolist() == [0, 1, 2, 3]
    md = specs.MultiDiscrete([2, 5])
    assert md.project(torch.tensor([[7, -1]])).tolist() == [[1, 0]]
    assert specs.Binary(3).project(torch.tensor([0.2, 0.7, 5.0])).tolist() == [0, 1, 1]


def test_reprs_are_readable():
    assert repr(specs.Box(-1.0, 1.0, shape=(3,))) == (
        "Box(low=-1, high=1, shape=(3,), dtype=float32)"
    )
    assert repr(specs.Discrete(5)) == "Discrete(n=5, dtype=int64)"
    assert (
        repr(specs.Composite({"a": specs.Binary(2)})) == "Composite({'a': Binary(n=2, dtype=int8)})"
    )
    assert repr(specs.Box([0.0, 1.0], [2.0, 3.0])) == (
        "Box(low=[0.0, 1.0], high=[2.0, 3.0], shape=(2,), dtype=float32)"
    )


def test_bad_specs_and_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="low must be <= high"):
        specs.Box(1.0, 0.0)
    with pytest.raises(ValueError, match=r"do not broadcast to shape \[3\]"):
        specs.Box(torch.zeros(2), 1.0, shape=(3,))
    with pytest.raises(ValueError, match="n must be a positive int"):
        specs.Discrete(0)
    with pytest.raises(ValueError, match="nvec must be positive"):
        specs.MultiDiscrete([2, 0])
    with pytest.raises(TypeError, match="not a spec"):
        specs.Composite({"a": 3})
    with pytest.raises(ValueError, match=r"input has shape \[4\]; expected \[\.\.\., 2\]"):
        specs.Box(0.0, 1.0, shape=(2,)).project(torch.zeros(4))
    with pytest.raises(TypeError, match="unsupported space"):
        specs.from_gymnasium(gym.spaces.Text(5))
