"""Action distributions as frozen pytrees of their parameters.

``normal``, ``tanh_normal``, ``categorical`` and ``delta`` build small frozen dataclasses
(``fxrl.tree.dataclass``), so a distribution passes through ``vmap``, ``grad`` and
``torch.export`` like any other pytree. Methods are pure:

    dist = distributions.tanh_normal(loc, scale)          # loc, scale [*B, A]
    action = dist.sample(key)                             # [*B, A], reparameterised
    action, logp = dist.sample_and_log_prob(key)          # logp [*B], stable at |a| -> 1
    action = distributions.draw(dist, key, mode="mode")   # "random" | "mode" | "mean"

Continuous distributions treat the last ``event_ndims`` dims (default 1, the action
vector) as one event: ``log_prob`` and ``entropy`` sum over them, as TorchRL's
``TanhNormal`` and ``IndependentNormal`` do. One key ``[2]`` gives independent noise for
every element; to draw per env under vmap, split the key outside.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from fxrl import random, tree

__all__ = [
    "MODES",
    "Categorical",
    "Delta",
    "Normal",
    "TanhNormal",
    "categorical",
    "delta",
    "draw",
    "normal",
    "normal_param_extractor",
    "tanh_normal",
]

Tensor = torch.Tensor
MODES = ("random", "mode", "mean")
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _check_key(name: str, key: Any) -> None:
    if not isinstance(key, Tensor) or key.dtype != torch.int64 or tuple(key.shape) != (2,):
        got = f"shape {list(key.shape)} {key.dtype}" if isinstance(key, Tensor) else repr(key)
        raise ValueError(
            f"{name}: key must be one int64 key of shape [2] (fxrl.random.key); got "
            f"{got}. One key already gives independent noise per element."
        )


def _sum_event(x: Tensor, event_ndims: int) -> Tensor:
    return x.sum(dim=tuple(range(-event_ndims, 0))) if event_ndims else x


def _sample_shape(shape: int | tuple[int, ...]) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(shape)


@tree.dataclass
class Normal:
    """Gaussian with mean ``loc`` and standard deviation ``scale`` (broadcast together)."""

    loc: Tensor
    scale: Tensor
    event_ndims: int = tree.field(static=True, default=1)

    @property
    def batch_shape(self) -> torch.Size:
        return torch.broadcast_shapes(self.loc.shape, self.scale.shape)

    def sample(self, key: Tensor, shape: int | tuple[int, ...] = ()) -> Tensor:
        """Reparameterised draw ``[*shape, *batch_shape]``: ``loc + scale * eps``."""
        _check_key("Normal.sample", key)
        eps = random.normal(key, (*_sample_shape(shape), *self.batch_shape), self.loc.dtype)
        return self.loc + self.scale * eps

    def log_prob(self, x: Tensor) -> Tensor:
        """Log density, summed over the event dims: ``[*batch_shape[:-event_ndims]]``."""
        lp = -((x - self.loc) ** 2) / (2 * self.scale**2) - self.scale.log() - _HALF_LOG_2PI
        return _sum_event(lp, self.event_ndims)

    def sample_and_log_prob(self, key: Tensor) -> tuple[Tensor, Tensor]:
        x = self.sample(key)
        return x, self.log_prob(x)

    def entropy(self, key: Tensor | None = None) -> Tensor:
        """Closed form ``1/2 + log(sqrt(2 pi) scale)`` per dim, summed over the event."""
        h = 0.5 + _HALF_LOG_2PI + torch.log(self.scale).expand(self.batch_shape)
        return _sum_event(h, self.event_ndims)

    def mode(self) -> Tensor:
        return self.loc.expand(self.batch_shape)

    def mean(self, key: Tensor | None = None) -> Tensor:
        return self.loc.expand(self.batch_shape)


@tree.dataclass
class TanhNormal:
    """``low + (high - low) * (tanh(u) + 1) / 2`` with ``u ~ Normal(loc, scale)``.

    The squashed Gaussian of SAC (Haarnoja et al. 2018, appendix C). ``log_prob`` uses
    ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))``, finite for any ``u``; an action
    exactly on the bound is first moved inside by one float epsilon.
    """

    loc: Tensor
    scale: Tensor
    low: Tensor
    high: Tensor
    event_ndims: int = tree.field(static=True, default=1)

    @property
    def batch_shape(self) -> torch.Size:
        return torch.broadcast_shapes(self.loc.shape, self.scale.shape)

    def _squash(self, u: Tensor) -> Tensor:
        # mid + half * tanh(u): exact for the default [-1, 1] (mid 0, half 1).
        return (self.high + self.low) / 2 + (self.high - self.low) / 2 * torch.tanh(u)

    def _log_det(self, u: Tensor) -> Tensor:
        # log |d action / d u| = log((high - low) / 2) + log(1 - tanh(u)^2)
        log_1m_tanh2 = 2 * (math.log(2.0) - u - F.softplus(-2 * u))
        return torch.log((self.high - self.low) / 2) + log_1m_tanh2

    def _base_log_prob(self, u: Tensor) -> Tensor:
        return -((u - self.loc) ** 2) / (2 * self.scale**2) - self.scale.log() - _HALF_LOG_2PI

    def sample(self, key: Tensor, shape: int | tuple[int, ...] = ()) -> Tensor:
        """Reparameterised draw ``[*shape, *batch_shape]``."""
        _check_key("TanhNormal.sample", key)
        eps = random.normal(key, (*_sample_shape(shape), *self.batch_shape), self.loc.dtype)
        return self._squash(self.loc + self.scale * eps)

    def sample_and_log_prob(self, key: Tensor) -> tuple[Tensor, Tensor]:
        """A draw and its log density from the pre-squash value (no atanh, no clamping)."""
        _check_key("TanhNormal.sample_and_log_prob", key)
        u = self.loc + self.scale * random.normal(key, self.batch_shape, self.loc.dtype)
        lp = self._base_log_prob(u) - self._log_det(u)
        return self._squash(u), _sum_event(lp, self.event_ndims)

    def log_prob(self, x: Tensor) -> Tensor:
        """Log density of actions ``x`` (values on the bounds are moved inside by 1 eps)."""
        eps = torch.finfo(x.dtype).eps
        a = (x - (self.high + self.low) / 2) / ((self.high - self.low) / 2)
        a = a.clamp(-1 + eps, 1 - eps)
        u = torch.atanh(a)
        return _sum_event(self._base_log_prob(u) - self._log_det(u), self.event_ndims)

    def mode(self) -> Tensor:
        """``squash(loc)``, the image of the Gaussian's mode (what SAC evaluates with)."""
        return self._squash(self.loc.expand(self.batch_shape))

    def mean(self, key: Tensor | None = None, num_samples: int = 1000) -> Tensor:
        """Monte Carlo estimate of the mean from ``num_samples`` draws (no closed form)."""
        if key is None:
            raise ValueError(
                "TanhNormal.mean: the mean has no closed form; pass a key for the "
                "sampled estimate, or use mode()."
            )
        return self.sample(key, (num_samples,)).mean(0)

    def entropy(self, key: Tensor | None = None, num_samples: int = 16) -> Tensor:
        """Sampled estimate: the Gaussian's entropy plus ``E[log |d action / d u|]``."""
        if key is None:
            raise ValueError(
                "TanhNormal.entropy: no closed form; pass a key for the sampled "
                "estimate (or use -sample_and_log_prob(key)[1], as SAC does)."
            )
        _check_key("TanhNormal.entropy", key)
        eps = random.normal(key, (num_samples, *self.batch_shape), self.loc.dtype)
        u = self.loc + self.scale * eps
        h = 0.5 + _HALF_LOG_2PI + self.scale.log() + self._log_det(u).mean(0)
        return _sum_event(h.expand(self.batch_shape), self.event_ndims)


@tree.dataclass
class Categorical:
    """Distribution over ``0..n-1`` with normalised ``logits [*B, n]``."""

    logits: Tensor

    @property
    def probs(self) -> Tensor:
        return self.logits.softmax(-1)

    def sample(self, key: Tensor, shape: int | tuple[int, ...] = ()) -> Tensor:
        """int64 indices ``[*shape, *B]`` (Gumbel-max via ``fxrl.random.categorical``)."""
        _check_key("Categorical.sample", key)
        return random.categorical(
            key, self.logits, (*_sample_shape(shape), *self.logits.shape[:-1])
        )

    def log_prob(self, x: Tensor) -> Tensor:
        """Log probability of indices ``x [*B]`` (int)."""
        if x.dtype.is_floating_point or x.dtype == torch.bool:
            raise ValueError(
                f"Categorical.log_prob: x has dtype {x.dtype}; expected integer "
                "indices. One-hot actions? Pass x.argmax(-1)."
            )
        x, logits = torch.broadcast_tensors(x.long().unsqueeze(-1), self.logits)
        return logits.gather(-1, x[..., :1]).squeeze(-1)

    def sample_and_log_prob(self, key: Tensor) -> tuple[Tensor, Tensor]:
        x = self.sample(key)
        return x, self.log_prob(x)

    def entropy(self, key: Tensor | None = None) -> Tensor:
        logits = self.logits.clamp(min=torch.finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def mode(self) -> Tensor:
        return self.logits.argmax(-1)

    def mean(self, key: Tensor | None = None) -> Tensor:
        raise ValueError(
            "Categorical: an index has no meaningful mean; use mode='mode' for the "
            "most likely action or mode='random' to sample."
        )


@tree.dataclass
class Delta:
    """All mass on ``value`` (a deterministic policy as a distribution)."""

    value: Tensor
    event_ndims: int = tree.field(static=True, default=1)

    def sample(self, key: Tensor, shape: int | tuple[int, ...] = ()) -> Tensor:
        _check_key("Delta.sample", key)
        return self.value.expand(*_sample_shape(shape), *self.value.shape)

    def log_prob(self, x: Tensor) -> Tensor:
        """0 where ``x`` equals ``value`` on the whole event, ``-inf`` elsewhere."""
        hit = _sum_event((x != self.value).long(), self.event_ndims) == 0
        dtype = self.value.dtype if self.value.dtype.is_floating_point else torch.float32
        return torch.where(hit, 0.0, -math.inf).to(dtype)

    def sample_and_log_prob(self, key: Tensor) -> tuple[Tensor, Tensor]:
        x = self.sample(key)
        return x, self.log_prob(x)

    def entropy(self, key: Tensor | None = None) -> Tensor:
        return torch.zeros_like(_sum_event(self.value, self.event_ndims))

    def mode(self) -> Tensor:
        return self.value

    def mean(self, key: Tensor | None = None) -> Tensor:
        return self.value


def _as(x: float | Tensor, like: Tensor) -> Tensor:
    return torch.as_tensor(x, dtype=like.dtype, device=like.device)


def normal(loc: Tensor, scale: Tensor | float, event_ndims: int = 1) -> Normal:
    """A Gaussian; ``event_ndims`` trailing dims form one event (0: independent scalars)."""
    return Normal(loc, _as(scale, loc), event_ndims)


def tanh_normal(
    loc: Tensor,
    scale: Tensor | float,
    low: float | Tensor = -1.0,
    high: float | Tensor = 1.0,
    event_ndims: int = 1,
) -> TanhNormal:
    """A Gaussian squashed by tanh into ``[low, high]`` (a Box action spec's bounds)."""
    return TanhNormal(loc, _as(scale, loc), _as(low, loc), _as(high, loc), event_ndims)


def categorical(logits: Tensor) -> Categorical:
    """A categorical over the last dim of ``logits [*B, n]`` (normalised here)."""
    if not isinstance(logits, Tensor) or not logits.dtype.is_floating_point or logits.ndim == 0:
        raise ValueError("categorical: logits must be a float tensor [*B, n].")
    return Categorical(logits - logits.logsumexp(-1, keepdim=True))


def delta(value: Tensor, event_ndims: int = 1) -> Delta:
    """A point mass at ``value``."""
    return Delta(value, event_ndims)


def draw(dist: Any, key: Tensor | None, mode: str = "random") -> Tensor:
    """The action a policy emits: ``"random"`` samples, ``"mode"`` and ``"mean"`` don't.

    ``mode="mean"`` of a TanhNormal is a sampled estimate and needs the key.
    """
    if mode == "random":
        if key is None:
            raise ValueError("draw: mode='random' needs a key.")
        return dist.sample(key)
    if mode == "mode":
        return dist.mode()
    if mode == "mean":
        return dist.mean(key)
    raise ValueError(f"draw: unknown mode {mode!r}; expected one of {list(MODES)}.")


def _mapping(name: str) -> Any:
    if name == "softplus":
        return F.softplus
    if name == "exp":
        return torch.exp
    if name == "relu":
        return torch.relu
    if name.startswith("biased_softplus_"):
        parts = name.removeprefix("biased_softplus_").split("_")
        try:
            bias, min_val = float(parts[0]), float(parts[1]) if len(parts) > 1 else 0.01
        except ValueError:
            bias = min_val = float("nan")
        if len(parts) <= 2 and bias > min_val >= 0:
            # softplus(x + c) + min_val equals `bias` at x = 0.
            c = math.log(math.expm1(bias - min_val))
            return lambda x: F.softplus(x + c) + min_val
    raise ValueError(
        f"normal_param_extractor: unknown scale_mapping {name!r}; known: 'softplus', "
        "'exp', 'relu', 'biased_softplus_<scale at 0>[_<min>]' (e.g. "
        "'biased_softplus_1.0')."
    )


def normal_param_extractor(
    x: Tensor, scale_mapping: str = "biased_softplus_1.0", scale_lb: float = 1e-4
) -> tuple[Tensor, Tensor]:
    """Split ``x [..., 2A]`` into ``loc [..., A]`` and a positive ``scale [..., A]``.

    As TorchRL's NormalParamExtractor: ``scale = max(mapping(x[..., A:]), scale_lb)``;
    the default mapping gives scale 1 at input 0.
    """
    if x.ndim == 0 or x.shape[-1] % 2:
        raise ValueError(
            f"normal_param_extractor: x has shape {list(x.shape)}; the last dim "
            "must be even (loc and scale halves)."
        )
    loc, raw = x.chunk(2, -1)
    return loc, _mapping(scale_mapping)(raw).clamp_min(scale_lb)
