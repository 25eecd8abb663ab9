"""Initializers: pure functions ``init(key, shape, dtype=float32) -> tensor``.

Every initializer draws from an explicit key with ``fxrl.random``, so
``torch.func.vmap(model.init)(random.split(key, n))`` builds an ensemble. Fan sizes follow
torch's convention for a weight of shape ``[out, in, *kernel]``: ``fan_in = in * prod(kernel)``
and ``fan_out = out * prod(kernel)``. Bounds and gains are torch.nn.init's, so a layer
initialised here has the same distribution as the torch.nn layer it mirrors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from fxrl import random

__all__ = [
    "Initializer",
    "constant",
    "fans",
    "gain",
    "kaiming_normal",
    "kaiming_uniform",
    "lecun_uniform",
    "normal",
    "ones",
    "orthogonal",
    "torch_default",
    "uniform",
    "xavier_uniform",
    "zeros",
]

Initializer = Callable[..., torch.Tensor]


def fans(shape: Sequence[int]) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight ``[out, in, *kernel]`` (a vector ``[n]``: ``(n, n)``)."""
    shape = tuple(shape)
    if len(shape) == 0:
        raise ValueError(
            "initializers.fans: a scalar has no fan; give a weight shape [out, in, ...]."
        )
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def gain(nonlinearity: str, param: float | None = None) -> float:
    """torch.nn.init.calculate_gain: the std gain that keeps activations' scale."""
    if nonlinearity in ("linear", "identity", "sigmoid") or nonlinearity.startswith("conv"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    known = ["linear", "conv2d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"]
    raise ValueError(f"initializers.gain: unknown nonlinearity {nonlinearity!r}; known: {known}.")


def zeros(
    key: torch.Tensor, shape: Sequence[int], dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """All zeros (the key is unused; kept for a uniform signature)."""
    return torch.zeros(*key.shape[:-1], *shape, dtype=dtype, device=key.device)


def ones(
    key: torch.Tensor, shape: Sequence[int], dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """All ones."""
    return torch.ones(*key.shape[:-1], *shape, dtype=dtype, device=key.device)


def constant(value: float) -> Initializer:
    """Every element equal to ``value``."""

    def init(
        key: torch.Tensor, shape: Sequence[int], dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        return torch.full((*key.shape[:-1], *shape), value, dtype=dtype, device=key.device)

    return init


def uniform(minval: float, maxval: float) -> Initializer:
    """Uniform in ``[minval, maxval)``."""

    def init(
        key: torch.Tensor, shape: Sequence[int], dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        return random.uniform(key, tuple(shape), minval, maxval, dtype)

    return init


def normal(stddev: float = 1.0, mean: float = 0.0) -> Initializer:
    """Normal with the given mean and standard deviation."""

    def init(
        key: torch.Tensor, shape: Sequence[int], dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        z = random.normal(key, tuple(shape), torch.float64)
        return (mean + stddev * z).to(dtype)

    return init


def _fan_uniform(scale: Callable[[int, int], float]) -> Initializer:
    def init(
        key: torch.Tensor, shape: Sequence[int], dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        bound = scale(*fans(shape))
        return random.uniform(key, tuple(shape), -bound, bound, dtype)

    return init


def torch_default() -> Initializer:
    """torch.nn.Linear/Conv2d's default: ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``.

    (torch writes it as ``kaiming_uniform_(a=sqrt(5))``, whose bound is the same.)
    """
    return _fan_uniform(lambda fan_in, _: 1.0 / math.sqrt(fan_in))


def lecun_uniform() -> Initializer:
    """LeCun uniform: ``U(-sqrt(3/fan_in), sqrt(3/fan_in))`` (variance ``1/fan_in``)."""
    return _fan_uniform(lambda fan_in, _: math.sqrt(3.0 / fan_in))


def kaiming_uniform(
    a: float = 0.0, nonlinearity: str = "leaky_relu", mode: str = "fan_in"
) -> Initializer:
    """He uniform, torch.nn.init.kaiming_uniform_: bound ``gain * sqrt(3 / fan)``."""
    g = gain(nonlinearity, a)
    _check_mode(mode)
    return _fan_uniform(lambda fi, fo: g * math.sqrt(3.0 / (fi if mode == "fan_in" else fo)))


def kaiming_normal(
    a: float = 0.0, nonlinearity: str = "leaky_relu", mode: str = "fan_in"
) -> Initializer:
    """He normal, torch.nn.init.kaiming_normal_: std ``gain / sqrt(fan)``."""
    g = gain(nonlinearity, a)
    _check_mode(mode)

    def init(
        key: torch.Tensor, shape: Sequence[int], dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        fan_in, fan_out = fans(shape)
        std = g / math.sqrt(fan_in if mode == "fan_in" else fan_out)
        return (std * random.normal(key, tuple(shape), torch.float64)).to(dtype)

    return init


def xavier_uniform(gain_: float = 1.0) -> Initializer:
    """Glorot uniform: bound ``gain * sqrt(6 / (fan_in + fan_out))``."""
    return _fan_uniform(lambda fi, fo: gain_ * math.sqrt(6.0 / (fi + fo)))


def orthogonal(scale: float = 1.0) -> Initializer:
    """A (semi-)orthogonal matrix times ``scale`` (Saxe et al. 2014; torch.nn.init.orthogonal_).

    The weight is viewed as ``[shape[0], prod(shape[1:])]``; its rows (or columns, when
    there are more rows than columns) are orthonormal. QR runs in float64 and rounds once.
    PPO implementations use ``orthogonal(sqrt(2))`` for hidden layers.
    """

    def init(
        key: torch.Tensor, shape: Sequence[int], dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        shape = tuple(shape)
        if len(shape) < 2:
            raise ValueError(
                f"initializers.orthogonal: shape {list(shape)} has fewer than 2 "
                "dims; use it for weights, and zeros or constant for biases."
            )
        rows, cols = shape[0], math.prod(shape[1:])
        flat = random.normal(key, (max(rows, cols), min(rows, cols)), torch.float64)
        q, r = torch.linalg.qr(flat)
        # Fix the signs so that q is uniformly distributed (Mezzadri 2007).
        q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
        if rows < cols:
            q = q.transpose(-2, -1)
        # dense row-major like every other init: kernels pick their path by layout, so a
        # transposed weight would round differently from the same values stored densely
        out = (scale * q).reshape(*key.shape[:-1], *shape)
        return out.to(dtype, memory_format=torch.contiguous_format)

    return init


def _check_mode(mode: str) -> None:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"initializers: mode must be 'fan_in' or 'fan_out', got {mode!r}.")
