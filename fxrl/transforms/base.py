"""The ``Transform`` protocol (a base class that is the identity) and the spec helpers
every transform shares. See ``fxrl.transforms`` for what a transform is."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import specs, tree
from fxrl.timestep import TimeStep

__all__ = ["Transform", "as_box", "batch_zeros", "bounds"]


class Transform:
    """Base class: the identity with no state. Subclasses override what they change."""

    persistent = False
    vectorized = True  # the same numbers with leading batch dims as under vmap

    def __call__(self, obs: Any, state: Any = None) -> Any:
        return obs

    def observation_spec(self, spec: Any) -> Any:
        return spec

    def init(self, obs: Any, spec: Any) -> Any:
        return ()

    def update(self, state: Any, ts: TimeStep) -> Any:
        return state

    def timestep(self, state: Any, ts: TimeStep) -> TimeStep:
        return ts

    def reset_env(self, env: Any, key: Tensor, params: Any) -> tuple[Any, TimeStep]:
        return env.reset(key, params)

    def needs_episode_reset(self) -> str:
        """Non-empty (the reason) when the transform must see every episode's reset."""
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__.lower()}()"


def as_box(name: str, spec: Any) -> specs.Box:
    """``spec`` if it is a Box, else a TypeError naming the transform ``name``."""
    if not isinstance(spec, specs.Box):
        raise TypeError(f"{name}: expects a Box observation spec, got {spec!r}.")
    return spec


def bounds(spec: specs.Box) -> tuple[float, float]:
    """The lowest and highest value anywhere in the Box (for a transform's new Box)."""
    return float(spec.low.double().min()), float(spec.high.double().max())


def batch_zeros(obs: Any, spec: Any, dtype: torch.dtype) -> Tensor:
    """Zeros with the leading dims of ``obs`` that are not the spec's own. Made from ``obs``
    (not ``torch.zeros``) so that under vmap they are batched like the rest of the state,
    and a compiled step sees the same strides on every call."""
    leaf = tree.leaves(obs)[0]
    shape = spec.shape if isinstance(spec, specs.Spec) else tree.leaves(spec.shape)[0]
    batch_ndim = leaf.ndim - len(shape)
    return torch.zeros_like(leaf.flatten(batch_ndim)[..., 0], dtype=dtype)
