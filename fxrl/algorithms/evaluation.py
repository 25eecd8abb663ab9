"""Evaluation: an algorithm's policy played for whole episodes, greedy by default.

``evaluate(algo, params)`` plays in gymnasium's own env of the Config's id (the judge of
learning) or in fxrl's pure env; ``fxrl.algorithms.core`` re-exports it
(``core.evaluate``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import random, tree
from fxrl._optional import require

__all__ = ["evaluate", "params_device"]


def _env_id(algo: Any) -> str:
    env_id = getattr(algo.config, "env", None)
    if not isinstance(env_id, str):
        raise ValueError(f"evaluate: algo.config has no env id (got env={env_id!r}).")
    return env_id


def evaluate(
    algo: Any,
    params: Any,
    episodes: int = 10,
    *,
    seed: int = 0,
    mode: str = "mode",
    gymnasium: bool = True,
) -> Tensor:
    """Returns of ``episodes`` episodes played by ``algo.policy(params, obs, mode=mode)``
    (``algo``: an ``Algorithm``, ``make(config)``'s result). A recurrent policy
    (``algo.initial_carry`` set) gets its carry back each step, from
    ``algo.initial_carry()`` with ``is_init`` True on each episode's first observation.

    With ``gymnasium=True`` the episodes run in gymnasium's own env of the config's id
    (``gymnasium.make(id)``, reset with seeds ``seed, seed+1, ...``): the judge of
    learning. Otherwise in fxrl's pure env. ``params`` are one seed's (index a batched
    TrainState's params with ``fxrl.tree.index(state.params, i)``).

    Returns:
      float64 [episodes] the undiscounted returns.
    """
    env_id = _env_id(algo)
    returns = []
    with torch.no_grad():
        for e in range(episodes):
            if gymnasium:
                returns.append(_gym_episode(algo, params, env_id, seed + e, mode))
            else:
                returns.append(_pure_episode(algo, params, seed + e, mode))
    return torch.tensor(returns, dtype=torch.float64, device=params_device(params))


class _Actor:
    """``act(obs, key) -> action`` for one episode of ``algo.policy``; a recurrent policy's
    carry is kept between calls, starting from zeros with ``is_init`` True."""

    def __init__(self, algo: Any, params: Any, mode: str, device: torch.device) -> None:
        self.algo, self.params, self.mode = algo, params, mode
        self.carry = None if algo.initial_carry is None else algo.initial_carry((), device)
        self.is_init = torch.tensor(True, device=device)

    def __call__(self, obs: Tensor, key: Tensor) -> Tensor:
        key_ = key if self.mode != "mode" else None
        if self.carry is None:
            return self.algo.policy(self.params, obs, key_, mode=self.mode)
        action, self.carry = self.algo.policy(
            self.params, obs, self.carry, self.is_init, key_, mode=self.mode
        )
        self.is_init = torch.zeros_like(self.is_init)
        return action


def params_device(params: Any) -> torch.device:
    """Where ``params`` are (their first tensor's device; the CPU for none): evaluation
    against a host env moves each observation there and each action back."""
    leaves = [x for x in tree.leaves(params) if isinstance(x, Tensor)]
    return leaves[0].device if leaves else torch.device("cpu")


def _gym_episode(algo: Any, params: Any, env_id: str, seed: int, mode: str) -> float:
    import numpy as np

    env = require("gymnasium", "fxrl.algorithms.evaluation.evaluate").make(env_id)
    obs, _ = env.reset(seed=seed)
    device = params_device(params)
    act = _Actor(algo, params, mode, device)
    key, total, done = random.key(seed, device=device), 0.0, False
    while not done:
        key, sub = random.split(key).unbind(0)
        x = torch.as_tensor(np.asarray(obs), dtype=algo.env.dtype, device=device)
        action = act(x, sub).cpu().numpy()
        if action.ndim == 0:
            action = action.item()
        obs, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        done = terminated or truncated
    env.close()
    return total


def _pure_episode(algo: Any, params: Any, seed: int, mode: str) -> float:
    env = algo.env
    device = params_device(params)
    act = _Actor(algo, params, mode, device)
    key = random.key(seed, device=device)
    key, reset_key = random.split(key).unbind(0)
    state, ts = env.reset(reset_key)
    total = 0.0
    while True:
        key, sub = random.split(key).unbind(0)
        state, ts = env.step(state, act(ts.obs, sub))
        total += float(ts.reward)
        if bool(ts.terminated | ts.truncated):
            return total
