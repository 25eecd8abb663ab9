"""Specs: the sets that observations and actions live in.

A spec knows its shape and dtype and offers pure tensor functions:
``sample(key, batch_shape=())``, ``contains(x)`` (a bool tensor, so it works under vmap
and compile), ``zeros(batch_shape=())`` and ``project(x)`` (the nearest point of the set:
clipping, what TorchRL's ``SafeModule(safe=True)`` does). ``Composite`` holds a pytree
(dict or tuple) of specs. ``from_gymnasium`` / ``to_gymnasium`` convert spaces.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import torch

from fxrl import random, tree
from fxrl._optional import require

__all__ = [
    "Binary",
    "Box",
    "Composite",
    "Discrete",
    "MultiDiscrete",
    "Spec",
    "from_gymnasium",
    "to_gymnasium",
]

Shape = Sequence[int] | torch.Size


def _batch(name: str, batch_shape: int | Shape) -> tuple[int, ...]:
    if isinstance(batch_shape, int):
        batch_shape = (batch_shape,)
    try:
        return tuple(int(s) for s in batch_shape)
    except TypeError:
        raise TypeError(
            f"{name}: batch_shape must be a tuple of ints, got {batch_shape!r}"
        ) from None


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class Spec:
    """Base class of the leaf specs: ``shape``, ``dtype`` and the four set operations."""

    shape: tuple[int, ...]
    dtype: torch.dtype

    def sample(self, key: torch.Tensor, batch_shape: int | Shape = ()) -> torch.Tensor:
        raise NotImplementedError  # abstract: every spec defines it

    def _in_set(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError  # abstract: every spec defines it

    def project(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError  # abstract: every spec defines it

    def zeros(
        self, batch_shape: int | Shape = (), device: torch.device | str | None = None
    ) -> torch.Tensor:
        """A tensor of zeros ``[*batch_shape, *shape]`` in the spec's dtype, on ``device``
        (default: torch's default device)."""
        shape = _batch("zeros", batch_shape) + self.shape
        return torch.zeros(shape, dtype=self.dtype, device=device)

    def contains(self, x: Any) -> torch.Tensor:
        """``True`` (a bool tensor) iff ``x`` has the dtype, trailing shape and values of the set.

        Any leading dims of ``x`` are treated as batch dims; all elements must be inside.
        """
        if (
            not isinstance(x, torch.Tensor)
            or x.dtype != self.dtype
            or tuple(x.shape[x.ndim - len(self.shape) :]) != self.shape
            or x.ndim < len(self.shape)
        ):
            return torch.tensor(False, device=x.device if isinstance(x, torch.Tensor) else None)
        return self._in_set(x).all()

    def __contains__(self, x: Any) -> bool:
        return bool(self.contains(x))

    def _check_batch(self, fn: str, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{self!r}.{fn}: expected a tensor, got {type(x).__name__}.")
        if x.ndim < len(self.shape) or tuple(x.shape[x.ndim - len(self.shape) :]) != self.shape:
            raise ValueError(
                f"{self!r}.{fn}: input has shape {list(x.shape)}; expected [..., "
                f"{', '.join(map(str, self.shape))}] (any batch dims, then the spec's shape)."
            )


class Box(Spec):
    """A box ``low <= x <= high`` (bounds broadcast to ``shape``; may be infinite).

    Float boxes sample uniformly when bounded, normally when unbounded, and shifted
    exponentially when bounded on one side, as gymnasium does. Integer boxes sample
    uniformly from ``low..high`` inclusive.
    """

    def __init__(
        self, low: Any, high: Any, shape: Shape | None = None, dtype: torch.dtype = torch.float32
    ) -> None:
        if not isinstance(dtype, torch.dtype) or dtype == torch.bool or dtype.is_complex:
            raise ValueError(f"Box: dtype must be a float or int torch dtype, got {dtype!r}.")
        # bounds are host-side metadata (read in Python by repr, checks and transforms):
        # kept on the CPU whatever the default device, moved to the input's at use
        low_t = torch.as_tensor(low, dtype=torch.float64, device="cpu")
        high_t = torch.as_tensor(high, dtype=torch.float64, device="cpu")
        if shape is None:
            shape = torch.broadcast_shapes(low_t.shape, high_t.shape)
        self.shape = tuple(int(s) for s in shape)
        try:
            low_t = torch.broadcast_to(low_t, self.shape).clone()
            high_t = torch.broadcast_to(high_t, self.shape).clone()
        except RuntimeError:
            raise ValueError(
                f"Box: low {list(low_t.shape)} and high {list(high_t.shape)} do not broadcast "
                f"to shape {list(self.shape)}."
            ) from None
        if bool((low_t > high_t).any()):
            raise ValueError(
                f"Box: low must be <= high everywhere; got low={low_t}, high={high_t}."
            )
        self.dtype = dtype
        if not dtype.is_floating_point:
            info = torch.iinfo(dtype)
            low_t = low_t.clamp(info.min, info.max).ceil()
            high_t = high_t.clamp(info.min, info.max).floor()
        self.low = low_t.to(dtype)
        self.high = high_t.to(dtype)

    def __repr__(self) -> str:
        def bound(t: torch.Tensor) -> str:
            flat = t.flatten()
            if flat.numel() > 0 and bool((flat == flat[0]).all()):
                return f"{flat[0].item():g}"
            return str(t.tolist())

        return (
            f"Box(low={bound(self.low)}, high={bound(self.high)}, shape={self.shape}, "
            f"dtype={_dtype_name(self.dtype)})"
        )

    def sample(self, key: torch.Tensor, batch_shape: int | Shape = ()) -> torch.Tensor:
        """Draw ``[*key_batch, *batch_shape, *shape]`` points of the box."""
        shape = _batch("Box.sample", batch_shape) + self.shape
        low, high = self.low.to(key.device), self.high.to(key.device)
        if not self.dtype.is_floating_point:
            return random.randint(key, shape, low.long(), high.long() + 1, dtype=self.dtype)
        lo, hi = low.double(), high.double()
        lo_ok, hi_ok = torch.isfinite(lo), torch.isfinite(hi)
        k_u, k_n, k_e = random.split(key, 3).unbind(-2)
        u = random.uniform(k_u, shape, dtype=torch.float64)
        bounded = torch.where(lo_ok & hi_ok, lo + (hi - lo) * u, torch.zeros_like(u))
        expo = -torch.log(1.0 - random.uniform(k_e, shape, dtype=torch.float64))
        out = torch.where(lo_ok & hi_ok, bounded, random.normal(k_n, shape, dtype=torch.float64))
        out = torch.where(lo_ok & ~hi_ok, torch.where(lo_ok, lo, 0.0) + expo, out)
        out = torch.where(~lo_ok & hi_ok, torch.where(hi_ok, hi, 0.0) - expo, out)
        return self.project(out.to(self.dtype))

    def _in_set(self, x: torch.Tensor) -> torch.Tensor:
        low, high = self.low.to(x.device), self.high.to(x.device)
        return (x >= low) & (x <= high)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """Clip ``x`` into the box (and cast to its dtype, rounding for integer boxes)."""
        self._check_batch("project", x)
        if not self.dtype.is_floating_point and x.dtype.is_floating_point:
            x = torch.round(x)
        low, high = self.low.to(x.device), self.high.to(x.device)
        return torch.clamp(x.to(self.dtype), low, high)


class Discrete(Spec):
    """Integers ``0 <= x < n``, shape ``()`` (an action index)."""

    def __init__(self, n: int, dtype: torch.dtype = torch.int64) -> None:
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"Discrete: n must be a positive int, got {n!r}.")
        if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
            raise ValueError(f"Discrete: dtype must be an integer dtype, got {dtype}.")
        self.n, self.shape, self.dtype = n, (), dtype

    def __repr__(self) -> str:
        return f"Discrete(n={self.n}, dtype={_dtype_name(self.dtype)})"

    def sample(self, key: torch.Tensor, batch_shape: int | Shape = ()) -> torch.Tensor:
        return random.randint(key, _batch("Discrete.sample", batch_shape), 0, self.n, self.dtype)

    def _in_set(self, x: torch.Tensor) -> torch.Tensor:
        return (x >= 0) & (x < self.n)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """Clip into ``0..n-1`` (rounding floats first)."""
        self._check_batch("project", x)
        if x.dtype.is_floating_point:
            x = torch.round(x)
        return torch.clamp(x, 0, self.n - 1).to(self.dtype)


class MultiDiscrete(Spec):
    """Integers ``0 <= x[i] < nvec[i]``, shape ``nvec.shape``."""

    def __init__(self, nvec: Any, dtype: torch.dtype = torch.int64) -> None:
        nvec_t = torch.as_tensor(nvec, device="cpu")  # metadata, as Box's bounds
        if nvec_t.dtype.is_floating_point or nvec_t.numel() == 0 or bool((nvec_t < 1).any()):
            raise ValueError(f"MultiDiscrete: nvec must be positive ints, got {nvec!r}.")
        self.nvec, self.shape, self.dtype = nvec_t.long(), tuple(nvec_t.shape), dtype

    def __repr__(self) -> str:
        return f"MultiDiscrete(nvec={self.nvec.tolist()}, dtype={_dtype_name(self.dtype)})"

    def sample(self, key: torch.Tensor, batch_shape: int | Shape = ()) -> torch.Tensor:
        shape = _batch("MultiDiscrete.sample", batch_shape) + self.shape
        return random.randint(key, shape, 0, self.nvec.to(key.device), self.dtype)

    def _in_set(self, x: torch.Tensor) -> torch.Tensor:
        return (x >= 0) & (x < self.nvec.to(x.device))

    def project(self, x: torch.Tensor) -> torch.Tensor:
        self._check_batch("project", x)
        if x.dtype.is_floating_point:
            x = torch.round(x)
        upper = (self.nvec - 1).to(x.device)
        return torch.minimum(torch.clamp(x.long(), min=0), upper).to(self.dtype)


class Binary(Spec):
    """``n`` independent bits (gymnasium's MultiBinary); int8 by default, or bool."""

    def __init__(self, n: int | Sequence[int], dtype: torch.dtype = torch.int8) -> None:
        shape = (n,) if isinstance(n, int) else tuple(n)
        if any(not isinstance(s, int) or s < 0 for s in shape):
            raise ValueError(f"Binary: n must be a non-negative int (or shape), got {n!r}.")
        if dtype.is_complex:
            raise ValueError(f"Binary: dtype must be bool, int or float, got {dtype}.")
        self.n, self.shape, self.dtype = n, shape, dtype

    def __repr__(self) -> str:
        return f"Binary(n={self.n}, dtype={_dtype_name(self.dtype)})"

    def sample(self, key: torch.Tensor, batch_shape: int | Shape = ()) -> torch.Tensor:
        shape = _batch("Binary.sample", batch_shape) + self.shape
        return random.bernoulli(key, 0.5, shape).to(self.dtype)

    def _in_set(self, x: torch.Tensor) -> torch.Tensor:
        return (x == 0) | (x == 1)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """Threshold at 0.5 (the nearest bit)."""
        self._check_batch("project", x)
        return (x.double() > 0.5).to(self.dtype) if x.dtype != torch.bool else x.to(self.dtype)


class Composite:
    """A pytree (dict, possibly nested, or tuple) of specs; operations act leafwise."""

    def __init__(self, specs: Any = None, /, **kwargs: Any) -> None:
        if specs is None:
            specs = kwargs
        elif kwargs:
            raise TypeError("Composite: pass a dict/tuple of specs or keywords, not both.")
        if not isinstance(specs, dict | tuple | list):
            raise TypeError(f"Composite: expected a dict or tuple of specs, got {specs!r}.")
        if isinstance(specs, list):
            specs = tuple(specs)
        self.specs = specs
        for path, leaf in self._leaves():
            if not isinstance(leaf, Spec):
                raise TypeError(f"Composite: entry {path} is {leaf!r}, not a spec.")

    def _leaves(self) -> list[tuple[str, Any]]:
        flat = tree.flatten_with_paths(self._as_tree())
        return [(".".join(map(str, p)), leaf) for p, leaf in flat]

    def _as_tree(self) -> Any:
        def conv(x: Any) -> Any:
            if isinstance(x, Composite):
                return conv(x.specs)
            if isinstance(x, dict):
                return {k: conv(v) for k, v in x.items()}
            if isinstance(x, tuple | list):
                return tuple(conv(v) for v in x)
            return x

        return conv(self.specs)

    def _map(self, fn: Any, *rest: Any) -> Any:
        return tree.map(fn, self._as_tree(), *rest)

    def __getitem__(self, k: Any) -> Any:
        return self.specs[k]

    def keys(self) -> Any:
        return self.specs.keys() if isinstance(self.specs, dict) else range(len(self.specs))

    @property
    def shape(self) -> Any:
        return self._map(lambda s: s.shape)

    @property
    def dtype(self) -> Any:
        return self._map(lambda s: s.dtype)

    def __repr__(self) -> str:
        if isinstance(self.specs, dict):
            inner = ", ".join(f"{k!r}: {v!r}" for k, v in self.specs.items())
            return f"Composite({{{inner}}})"
        return (
            f"Composite(({', '.join(map(repr, self.specs))}{',' if len(self.specs) == 1 else ''}))"
        )

    def sample(self, key: torch.Tensor, batch_shape: int | Shape = ()) -> Any:
        """One independent draw per leaf spec, each with its own key."""
        specs = tree.leaves(self._as_tree())
        keys = random.split(key, max(len(specs), 1)).unbind(-2)
        out = [s.sample(k, batch_shape) for s, k in zip(specs, keys, strict=False)]
        return tree.unflatten(tree.structure(self._as_tree()), out)

    def zeros(self, batch_shape: int | Shape = (), device: torch.device | str | None = None) -> Any:
        return self._map(lambda s: s.zeros(batch_shape, device))

    def contains(self, x: Any) -> torch.Tensor:
        """``True`` iff ``x`` has the same keys (in any order) and every leaf is inside."""
        sub = self.specs
        if isinstance(sub, dict):
            if not isinstance(x, dict) or set(x) != set(sub):
                return torch.tensor(False)
            parts = [sub[k].contains(x[k]) for k in sub]
        else:
            if not isinstance(x, tuple | list) or len(x) != len(sub):
                return torch.tensor(False)
            parts = [s.contains(v) for s, v in zip(sub, x, strict=True)]
        return torch.stack(parts).all()

    def __contains__(self, x: Any) -> bool:
        return bool(self.contains(x))

    def project(self, x: Any) -> Any:
        return self._map(lambda s, v: s.project(v), x)


# ---------------------------------------------------------------------------- gymnasium


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def from_gymnasium(space: Any) -> Spec | Composite:
    """The fxrl spec of a gymnasium space (Box, Discrete, MultiDiscrete, MultiBinary,
    Dict, Tuple). Discrete spaces with ``start != 0`` are rejected: fxrl indices start at 0.
    """
    gs = require("gymnasium.spaces", "fxrl.specs.from_gymnasium")
    import numpy as np

    if isinstance(space, gs.Box):
        dtype = torch.from_numpy(np.zeros((), dtype=space.dtype)).dtype
        return Box(
            torch.from_numpy(np.asarray(space.low, dtype=np.float64)),
            torch.from_numpy(np.asarray(space.high, dtype=np.float64)),
            shape=space.shape,
            dtype=dtype,
        )
    if isinstance(space, gs.Discrete):
        if int(space.start) != 0:
            raise ValueError(
                f"from_gymnasium: {space} starts at {space.start}; fxrl's Discrete "
                "starts at 0. Shift actions with a wrapper."
            )
        return Discrete(int(space.n))
    if isinstance(space, gs.MultiDiscrete):
        if bool(np.any(space.start != 0)):
            raise ValueError(f"from_gymnasium: {space} has a non-zero start.")
        return MultiDiscrete(torch.as_tensor(np.asarray(space.nvec, dtype=np.int64)))
    if isinstance(space, gs.MultiBinary):
        return Binary(space.n if isinstance(space.n, int) else tuple(space.n))
    if isinstance(space, gs.Dict):
        return Composite({k: from_gymnasium(v) for k, v in space.spaces.items()})
    if isinstance(space, gs.Tuple):
        return Composite(tuple(from_gymnasium(v) for v in space.spaces))
    raise TypeError(
        f"from_gymnasium: unsupported space {space!r}; supported: Box, Discrete, MultiDiscrete, "
        "MultiBinary, Dict, Tuple."
    )


def to_gymnasium(spec: Spec | Composite) -> Any:
    """The gymnasium space of an fxrl spec (the inverse of ``from_gymnasium``)."""
    gs = require("gymnasium.spaces", "fxrl.specs.to_gymnasium")
    import numpy as np

    def np_dtype(dtype: torch.dtype) -> Any:
        return torch.zeros((), dtype=dtype).numpy().dtype

    if isinstance(spec, Box):
        return gs.Box(
            spec.low.numpy(),
            spec.high.numpy(),
            shape=spec.shape,
            dtype=np_dtype(spec.dtype),
        )
    if isinstance(spec, Discrete):
        return gs.Discrete(spec.n)
    if isinstance(spec, MultiDiscrete):
        return gs.MultiDiscrete(spec.nvec.numpy().astype(np.int64))
    if isinstance(spec, Binary):
        return gs.MultiBinary(spec.n if isinstance(spec.n, int) else list(spec.n))
    if isinstance(spec, Composite):
        if isinstance(spec.specs, dict):
            # An OrderedDict: gymnasium sorts the keys of a plain dict, fxrl keeps their order.
            return gs.Dict(OrderedDict((k, to_gymnasium(v)) for k, v in spec.specs.items()))
        return gs.Tuple(tuple(to_gymnasium(v) for v in spec.specs))
    raise TypeError(f"to_gymnasium: unsupported spec {spec!r}.")
