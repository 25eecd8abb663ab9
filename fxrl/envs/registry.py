"""``make(id)``: the built-in pure envs by their gymnasium ids, with gymnasium's time limits."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from fxrl._errors import unknown
from fxrl.envs.acrobot import Acrobot
from fxrl.envs.bsuite import Catch, DeepSea, DiscountingChain, MemoryChain, UmbrellaChain
from fxrl.envs.cartpole import CartPole
from fxrl.envs.continuous_mountain_car import ContinuousMountainCar
from fxrl.envs.core import Env
from fxrl.envs.minatar import registered as _minatar_ids
from fxrl.envs.misc import BernoulliBandit, FourRooms, GaussianBandit, MetaMaze, PointRobot
from fxrl.envs.mountain_car import MountainCar
from fxrl.envs.pendulum import Pendulum
from fxrl.envs.wrappers import auto_reset as _auto_reset
from fxrl.envs.wrappers import episode_stats as _episode_stats
from fxrl.envs.wrappers import time_limit

__all__ = ["make", "registered"]

# id -> (env class, gymnasium's max_episode_steps; None: the env ends its episodes itself)
_REGISTRY: dict[str, tuple[type[Env], int | None]] = {
    "CartPole-v1": (CartPole, 500),
    "Pendulum-v1": (Pendulum, 200),
    "MountainCar-v0": (MountainCar, 200),
    "MountainCarContinuous-v0": (ContinuousMountainCar, 999),
    "Acrobot-v1": (Acrobot, 500),
    # MinAtar: gymnax's max_steps_in_episode (the package has none); see fxrl/envs/minatar
    **_minatar_ids(),
    # bsuite and misc tasks: gymnax's ids and max_steps_in_episode
    "Catch-bsuite": (Catch, 1000),
    "DeepSea-bsuite": (DeepSea, 2000),
    "DiscountingChain-bsuite": (DiscountingChain, 100),
    "MemoryChain-bsuite": (MemoryChain, 1000),
    "UmbrellaChain-bsuite": (UmbrellaChain, 100),
    "BernoulliBandit-misc": (BernoulliBandit, 100),
    "GaussianBandit-misc": (GaussianBandit, 100),
    "FourRooms-misc": (FourRooms, 500),
    "MetaMaze-misc": (MetaMaze, 200),
    "PointRobot-misc": (PointRobot, 100),
}

_DEFAULT: Any = object()


def registered() -> list[str]:
    """The ids ``make`` knows."""
    return list(_REGISTRY)


def make(
    id: str,
    *,
    dtype: torch.dtype = torch.float32,
    max_steps: int | None = _DEFAULT,
    auto_reset: bool = True,
    episode_stats: bool = True,
    **params: Any,
) -> Env:
    """A pure env by gymnasium id, wrapped as gymnasium's ``gym.make`` would (time limit)
    plus fxrl's auto-reset and episode statistics.

    Args:
      id: one of ``registered()``: "CartPole-v1", "Pendulum-v1", "MountainCar-v0",
        "MountainCarContinuous-v0", "Acrobot-v1".
      dtype: float dtype of states, observations and rewards; ``torch.float64`` matches
        gymnasium to ~1e-10.
      max_steps: truncate episodes after this many steps; defaults to gymnasium's limit
        (500, 200, 200, 999, 500); ``None`` for no limit.
      auto_reset: start the next episode inside ``step`` (``fxrl.envs.auto_reset``).
      episode_stats: report ``info["episode_return"]`` and ``info["episode_length"]``.
      params: overrides of the env's default params, e.g. ``gravity=9.81``.
    Returns:
      ``episode_stats(auto_reset(time_limit(Env(dtype), max_steps)))`` (parts as asked).
    """
    if id not in _REGISTRY:
        message = unknown(id, _REGISTRY, "env id", where="fxrl.envs.make", cutoff=0.4)
        raise ValueError(f"{message} Host envs: fxrl.envs.gym(id).")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"fxrl.envs.make: dtype must be a float torch dtype, got {dtype!r}.")
    cls, limit = _REGISTRY[id]
    env = cls(dtype=dtype)
    if params:
        names = [f.name for f in dataclasses.fields(env.default_params)]
        for name in params:
            if name not in names:
                where = f"fxrl.envs.make({id!r})"
                raise TypeError(unknown(name, names, f"{cls.__name__} param", where=where))
        env.default_params = env.default_params.replace(**params)
    limit = limit if max_steps is _DEFAULT else max_steps
    if limit is not None:
        env = time_limit(env, limit)
    if auto_reset:
        env = _auto_reset(env)
    if episode_stats:
        env = _episode_stats(env)
    return env
