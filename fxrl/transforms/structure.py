"""Transforms of structure: concatenating dict entries, selecting features, composing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from fxrl import specs
from fxrl.transforms.base import Transform, as_box

__all__ = ["Compose", "cat", "compose", "select"]


class Cat(Transform):
    def __init__(self, keys: Sequence[str], out: str, dim: int) -> None:
        if dim >= 0:
            raise ValueError(f"cat: dim must be negative (batch dims may lead), got {dim}.")
        self.keys, self.out, self.dim = tuple(keys), out, dim

    def __call__(self, obs: dict[str, Any], state: Any = None) -> dict[str, Any]:
        if not isinstance(obs, dict) or any(k not in obs for k in self.keys):
            got = list(obs) if isinstance(obs, dict) else type(obs).__name__
            raise ValueError(
                f"cat: expects a dict observation with keys {list(self.keys)}, got {got}."
            )
        rest = {k: v for k, v in obs.items() if k not in self.keys}
        return {**rest, self.out: torch.cat([obs[k] for k in self.keys], dim=self.dim)}

    def observation_spec(self, spec: Any) -> specs.Composite:
        if not isinstance(spec, specs.Composite) or not isinstance(spec.specs, dict):
            raise TypeError(f"cat: expects a dict (Composite) observation spec, got {spec!r}.")
        parts = [as_box("cat", spec[k]) for k in self.keys]
        low = torch.cat([p.low.double() for p in parts], dim=self.dim)
        high = torch.cat([p.high.double() for p in parts], dim=self.dim)
        rest = {k: v for k, v in spec.specs.items() if k not in self.keys}
        return specs.Composite({**rest, self.out: specs.Box(low, high, dtype=parts[0].dtype)})

    def __repr__(self) -> str:
        return f"cat({list(self.keys)}, out={self.out!r}, dim={self.dim})"


def cat(keys: Sequence[str], out: str = "obs", dim: int = -1) -> Transform:
    """Concatenate the entries ``keys`` of a dict observation into one entry ``out``."""
    return Cat(keys, out, dim)


class Select(Transform):
    def __init__(self, indices: Sequence[int]) -> None:
        idx = tuple(indices)
        if not idx or not all(isinstance(i, int) and not isinstance(i, bool) for i in idx):
            raise ValueError(
                f"select: indices must be a non-empty sequence of ints, got {indices!r}."
            )
        if len(set(idx)) != len(idx):
            raise ValueError(f"select: indices {list(idx)} repeat an entry; give each once.")
        self.indices = idx

    def _index(self, size: int, device: torch.device) -> Tensor:
        bad = [i for i in self.indices if not -size <= i < size]
        if bad:
            raise ValueError(
                f"select: indices {bad} are out of range for an observation of {size} "
                f"entries; expected indices in [-{size}, {size})."
            )
        return torch.tensor([i % size for i in self.indices], dtype=torch.int64, device=device)

    def __call__(self, obs: Tensor, state: Any = None) -> Tensor:
        if not isinstance(obs, Tensor) or obs.ndim < 1:
            got = list(obs.shape) if isinstance(obs, Tensor) else type(obs).__name__
            raise ValueError(f"select: expects a [..., features] observation, got {got}.")
        # index_select with a constant index: no data-dependent shapes, so it vmaps,
        # compiles and exports (as a Gather in ONNX).
        return obs.index_select(-1, self._index(obs.shape[-1], obs.device))

    def observation_spec(self, spec: Any) -> specs.Box:
        spec = as_box("select", spec)
        if len(spec.shape) < 1:
            raise ValueError(f"select: expects a [..., features] Box, got {spec!r}.")
        low = spec.low.expand(spec.shape).double()
        high = spec.high.expand(spec.shape).double()
        index = self._index(spec.shape[-1], spec.low.device)
        return specs.Box(low.index_select(-1, index), high.index_select(-1, index),
                         dtype=spec.dtype)  # fmt: skip

    def __repr__(self) -> str:
        return f"select({list(self.indices)})"


def select(indices: Sequence[int]) -> Transform:
    """Keep the observation entries ``indices`` (last dim), in that order:
    ``[..., n] -> [..., len(indices)]``.

    Makes a partially observable task from a full one: ``select([0, 2])`` keeps
    CartPole-v1's cart position and pole angle and drops both velocities.
    """
    return Select(indices)


class Compose(Transform):
    def __init__(self, transforms: Sequence[Transform]) -> None:
        flat: list[Transform] = []
        for t in transforms:
            flat.extend(t.transforms if isinstance(t, Compose) else [t])
        self.transforms = tuple(flat)

    def __call__(self, obs: Any, state: Sequence[Any] | None = None) -> Any:
        states = [None] * len(self.transforms) if state is None else list(state)
        for t, s in zip(self.transforms, states, strict=True):
            obs = t(obs, s)
        return obs

    def observation_spec(self, spec: Any) -> Any:
        for t in self.transforms:
            spec = t.observation_spec(spec)
        return spec

    def __repr__(self) -> str:
        return f"compose({', '.join(map(repr, self.transforms))})"


def compose(*transforms: Transform) -> Compose:
    """Apply ``transforms`` first to last: ``compose(a, b)(obs) == b(a(obs))``.

    As an env wrapper it is the same as listing them: ``transform(env, compose(a, b))``.
    ``state``, when given, is one state per transform.
    """
    return Compose(transforms)
