"""Transforms of values: observation normalisation (fixed or running), clipping, reward
scaling."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import specs, tree
from fxrl._errors import unknown
from fxrl.timestep import TimeStep
from fxrl.transforms.base import Transform, as_box

__all__ = ["RunningStats", "clip", "observation_norm", "reward_scale"]


class ObservationNorm(Transform):
    def __init__(self, loc: Any, scale: Any) -> None:
        # constants on the CPU (read here and by repr), moved to the observation's at use
        self.loc = torch.as_tensor(loc, dtype=torch.float64, device="cpu")
        self.scale = torch.as_tensor(scale, dtype=torch.float64, device="cpu")
        if bool((self.scale == 0).any()):
            raise ValueError("observation_norm: scale has zeros; it divides the observation.")

    def __call__(self, obs: Tensor, state: Any = None) -> Tensor:
        loc, scale = self.loc.to(obs.device, obs.dtype), self.scale.to(obs.device, obs.dtype)
        return (obs - loc) / scale

    def observation_spec(self, spec: Any) -> specs.Box:
        spec = as_box("observation_norm", spec)
        a = (spec.low.double() - self.loc) / self.scale
        b = (spec.high.double() - self.loc) / self.scale
        return specs.Box(torch.minimum(a, b), torch.maximum(a, b), spec.shape, dtype=spec.dtype)

    def __repr__(self) -> str:
        return f"observation_norm(loc={self.loc.tolist()}, scale={self.scale.tolist()})"


@tree.dataclass
class RunningStats:
    mean: Tensor  # [*obs_shape] float64
    var: Tensor  # [*obs_shape] float64
    count: Tensor  # [] float64


class RunningObservationNorm(Transform):
    persistent = True
    vectorized = False  # over leading dims it pools statistics; under vmap each env has its own

    def __init__(self, eps: float, initial_count: float) -> None:
        self.eps, self.initial_count = eps, initial_count

    def init(self, obs: Tensor, spec: Any) -> RunningStats:
        shape, device = as_box("observation_norm", spec).shape, obs.device
        prior = RunningStats(
            torch.zeros(shape, dtype=torch.float64, device=device),
            torch.ones(shape, dtype=torch.float64, device=device),
            torch.tensor(self.initial_count, dtype=torch.float64, device=device),
        )
        return self._absorb(prior, obs, len(shape))

    def update(self, state: RunningStats, ts: TimeStep) -> RunningStats:
        return self._absorb(state, ts.obs, state.mean.ndim)

    @staticmethod
    def _absorb(s: RunningStats, obs: Tensor, event_ndim: int) -> RunningStats:
        """Chan et al.'s parallel update with all leading dims of ``obs`` as the batch
        (gymnasium's ``RunningMeanStd``), so a batch env shares one set of statistics."""
        x = obs.double().reshape(-1, *obs.shape[obs.ndim - event_ndim :])
        n = x.shape[0]
        batch_mean, batch_var = x.mean(0), x.var(0, correction=0)
        delta = batch_mean - s.mean
        total = s.count + n
        m2 = s.var * s.count + batch_var * n + delta.square() * s.count * n / total
        return RunningStats(s.mean + delta * n / total, m2 / total, total)

    def __call__(self, obs: Tensor, state: RunningStats | None = None) -> Tensor:
        if state is None:
            raise ValueError(
                "observation_norm(running=True) needs its statistics: call it as t(obs, stats) "
                "with the stats kept in the env state, or freeze them: t.freeze(stats)(obs)."
            )
        return ((obs - state.mean) / torch.sqrt(state.var + self.eps)).to(obs.dtype)

    def observation_spec(self, spec: Any) -> specs.Box:
        spec = as_box("observation_norm", spec)
        return specs.Box(-torch.inf, torch.inf, spec.shape, dtype=spec.dtype)

    def freeze(self, state: RunningStats) -> Transform:
        """A fixed ``observation_norm`` with these statistics (for a deployed policy)."""
        return ObservationNorm(state.mean, torch.sqrt(state.var + self.eps))

    def __repr__(self) -> str:
        return f"observation_norm(running=True, eps={self.eps:g})"


def observation_norm(
    loc: Any = None,
    scale: Any = None,
    *,
    running: bool = False,
    eps: float = 1e-8,
    initial_count: float = 1e-4,
) -> Transform:
    """``(obs - loc) / scale``, with fixed ``loc``/``scale`` or running statistics.

    ``running=True`` keeps mean, variance and count in the env state (float64, persistent
    across episodes) and normalises by ``sqrt(var + eps)`` after absorbing each new
    observation, as gymnasium's ``NormalizeObservation`` (prior mean 0, var 1, count
    ``initial_count``). Outside ``batch`` the statistics are shared by the whole batch;
    inside (``batch(transform(env, t), N)``) each env keeps its own.
    """
    if running:
        if loc is not None or scale is not None:
            raise ValueError("observation_norm: give loc/scale or running=True, not both.")
        return RunningObservationNorm(eps, initial_count)
    if loc is None or scale is None:
        raise ValueError("observation_norm: give loc and scale, or running=True.")
    return ObservationNorm(loc, scale)


class Clip(Transform):
    def __init__(self, low: float, high: float, of: str) -> None:
        if of not in ("obs", "reward"):
            raise ValueError(unknown(of, ("obs", "reward"), "of (what to clip)", where="clip"))
        if low > high:
            raise ValueError(f"clip: low {low} > high {high}.")
        self.low, self.high, self.of = low, high, of

    def __call__(self, obs: Tensor, state: Any = None) -> Tensor:
        return torch.clamp(obs, self.low, self.high) if self.of == "obs" else obs

    def timestep(self, state: Any, ts: TimeStep) -> TimeStep:
        if self.of == "reward":
            return ts.replace(reward=torch.clamp(ts.reward, self.low, self.high))
        return ts

    def observation_spec(self, spec: Any) -> Any:
        if self.of == "reward":
            return spec
        spec = as_box("clip", spec)
        return specs.Box(
            spec.low.double().clamp(self.low, self.high),
            spec.high.double().clamp(self.low, self.high),
            spec.shape,
            spec.dtype,
        )

    def __repr__(self) -> str:
        return f"clip({self.low}, {self.high}, of={self.of!r})"


def clip(low: float, high: float, of: str = "obs") -> Transform:
    """Clamp the observation (``of="obs"``) or the reward (``of="reward"``) to [low, high]."""
    return Clip(low, high, of)


class RewardScale(Transform):
    def __init__(self, scale: float, loc: float) -> None:
        self.scale, self.loc = scale, loc

    def timestep(self, state: Any, ts: TimeStep) -> TimeStep:
        return ts.replace(reward=ts.reward * self.scale + self.loc)

    def __repr__(self) -> str:
        return f"reward_scale({self.scale}, loc={self.loc})"


def reward_scale(scale: float, loc: float = 0.0) -> Transform:
    """``reward * scale + loc``; observations pass through."""
    return RewardScale(scale, loc)
