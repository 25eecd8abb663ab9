"""Hypothesis strategies for fxrl code: keys, tensors inside specs, specs, pytrees.

from hypothesis import given
from fxrl.testing import keys, from_spec

@given(key=keys(), action=from_spec(env.action_spec))
def test_step_is_pure(key, action): ...
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fxrl import random, specs

__all__ = ["all_specs", "from_spec", "keys", "tensors", "trees"]

_FLOAT_DTYPES = (torch.float32, torch.float64)


def keys(batch_shape: tuple[int, ...] = ()) -> st.SearchStrategy[torch.Tensor]:
    """fxrl random keys (int64 ``[*batch_shape, 2]``), from 64-bit seeds.

    Shrinks towards ``key(0)``; a batch draws one seed per key.
    """
    n = int(np.prod(batch_shape)) if batch_shape else 1
    seeds = st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n)
    return seeds.map(
        lambda s: random.key(torch.tensor([x - 2**64 if x >= 2**63 else x for x in s])).reshape(
            *batch_shape, 2
        )
    )


def _np_dtype(dtype: torch.dtype) -> Any:
    return torch.zeros((), dtype=dtype).numpy().dtype


def _unit(shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    """Arrays of floats in [0, 1], the edges 0 and 1 included, any shape (cheap when big)."""
    edge = st.sampled_from([0.0, 1.0])
    return hnp.arrays(np.float64, shape, elements=st.floats(0.0, 1.0) | edge)


def _box(spec: specs.Box, shape: tuple[int, ...]) -> st.SearchStrategy[torch.Tensor]:
    low, high = spec.low.double(), spec.high.double()
    lo_ok, hi_ok = torch.isfinite(low), torch.isfinite(high)
    free = hnp.arrays(np.float64, shape, elements=st.floats(-1e6, 1e6, width=32))

    def build(u_np: np.ndarray, y_np: np.ndarray) -> torch.Tensor:
        u, y = torch.as_tensor(u_np), torch.as_tensor(y_np)
        if not spec.dtype.is_floating_point:
            x = low + torch.floor(u * (high - low + 1))
        else:
            x = low + (high - low) * u
        x = torch.where(lo_ok & ~hi_ok, torch.where(lo_ok, low, 0.0) + y.abs(), x)
        x = torch.where(~lo_ok & hi_ok, torch.where(hi_ok, high, 0.0) - y.abs(), x)
        x = torch.where(~lo_ok & ~hi_ok, y, x)
        return spec.project(x.to(spec.dtype) if spec.dtype.is_floating_point else x)

    return st.builds(build, _unit(shape), free)


def from_spec(
    spec: specs.Spec | specs.Composite, batch_shape: tuple[int, ...] = ()
) -> st.SearchStrategy[Any]:
    """Tensors (or a pytree of them) inside ``spec`` with shape ``[*batch_shape, *spec.shape]``.

    Boundary values (``low``, ``high``, ``0``, ``n - 1``) are drawn often, so edge cases
    such as termination thresholds get exercised.
    """
    batch_shape = tuple(batch_shape)
    if isinstance(spec, specs.Composite):
        sub = spec.specs
        if isinstance(sub, dict):
            names = list(sub)  # keep the spec's key order: dict order is part of a pytree
            values = st.tuples(*(from_spec(sub[k], batch_shape) for k in names))
            return values.map(lambda vs: dict(zip(names, vs, strict=True)))
        return st.tuples(*(from_spec(v, batch_shape) for v in sub))
    shape = batch_shape + spec.shape
    if isinstance(spec, specs.Box):
        return _box(spec, shape)
    if isinstance(spec, specs.Discrete):
        ints = hnp.arrays(np.int64, shape, elements=st.integers(0, spec.n - 1))
        return ints.map(lambda a: torch.as_tensor(a).to(spec.dtype))
    if isinstance(spec, specs.MultiDiscrete):
        nvec = spec.nvec.double()
        return _unit(shape).map(
            lambda u: spec.project(torch.floor(torch.as_tensor(u) * nvec).long())
        )
    if isinstance(spec, specs.Binary):
        bits = hnp.arrays(np.int64, shape, elements=st.integers(0, 1))
        return bits.map(lambda a: torch.as_tensor(a).to(spec.dtype))
    raise TypeError(f"from_spec: unsupported spec {spec!r}.")


def _shapes(max_dims: int = 2, max_side: int = 4) -> st.SearchStrategy[tuple[int, ...]]:
    return hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=1, max_side=max_side)


@st.composite
def _boxes(draw: st.DrawFn) -> specs.Box:
    shape = draw(_shapes())
    dtype = draw(
        st.sampled_from([torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8])
    )
    if dtype.is_floating_point:
        bound = st.floats(-1e3, 1e3, width=32) | st.just(0.0)
        unbounded = draw(st.sampled_from(["none", "low", "high", "both"]))
    else:
        info = torch.iinfo(dtype)
        bound = st.integers(max(info.min, -1000), min(info.max, 1000))
        unbounded = "none"
    a = np.array(draw(hnp.arrays(np.float64, shape, elements=bound)), dtype=np.float64)
    b = np.array(draw(hnp.arrays(np.float64, shape, elements=bound)), dtype=np.float64)
    low, high = np.minimum(a, b), np.maximum(a, b)
    if unbounded in ("low", "both"):
        low = np.full(shape, -np.inf)
    if unbounded in ("high", "both"):
        high = np.full(shape, np.inf)
    return specs.Box(torch.as_tensor(low), torch.as_tensor(high), shape=shape, dtype=dtype)


def all_specs(composite: bool = True) -> st.SearchStrategy[Any]:
    """Specs of every kind (Box of float and int dtypes with finite and infinite bounds,
    Discrete, MultiDiscrete, Binary) and, when ``composite``, dicts/tuples of them.
    """
    leaf = st.one_of(
        _boxes(),
        st.integers(1, 10).map(specs.Discrete),
        hnp.arrays(np.int64, _shapes(1), elements=st.integers(1, 6)).map(specs.MultiDiscrete),
        st.tuples(st.integers(1, 5), st.sampled_from([torch.int8, torch.bool, torch.float32])).map(
            lambda a: specs.Binary(a[0], a[1])
        ),
    )
    if not composite:
        return leaf
    names = st.text(string.ascii_lowercase, min_size=1, max_size=4)
    return st.recursive(
        leaf,
        lambda inner: (
            st.dictionaries(names, inner, min_size=1, max_size=3).map(specs.Composite)
            | st.lists(inner, min_size=1, max_size=3).map(lambda xs: specs.Composite(tuple(xs)))
        ),
        max_leaves=5,
    )


def tensors(
    dtypes: tuple[torch.dtype, ...] = _FLOAT_DTYPES, max_dims: int = 3, max_side: int = 4
) -> st.SearchStrategy[torch.Tensor]:
    """Small tensors of the given dtypes with finite values."""

    def build(dtype: torch.dtype) -> st.SearchStrategy[torch.Tensor]:
        if dtype.is_floating_point:
            width = 32 if dtype in (torch.float32, torch.float16, torch.bfloat16) else 64
            elements = st.floats(-1e3, 1e3, width=width)
        elif dtype == torch.bool:
            elements = st.booleans()
        else:
            elements = st.integers(-100, 100) if dtype != torch.uint8 else st.integers(0, 255)
        arr = hnp.arrays(_np_dtype(dtype), _shapes(max_dims, max_side), elements=elements)
        return arr.map(lambda a: torch.from_numpy(np.array(a)))

    return st.sampled_from(dtypes).flatmap(build)


def trees(
    leaves: st.SearchStrategy[Any] | None = None, max_leaves: int = 6
) -> st.SearchStrategy[Any]:
    """Pytrees of dicts (insertion-ordered, unsorted keys), lists and tuples of tensors."""
    leaves = tensors() if leaves is None else leaves
    names = st.text(string.ascii_lowercase, min_size=1, max_size=4)
    return st.recursive(
        leaves,
        lambda inner: (
            st.dictionaries(names, inner, min_size=1, max_size=3)
            | st.lists(inner, min_size=1, max_size=3)
            | st.lists(inner, min_size=1, max_size=3).map(tuple)
        ),
        max_leaves=max_leaves,
    )
