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
    (``algo``: an ``Algorithm``, ``make(config)``'s result).

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


def _act(algo: Any, params: Any, obs: Tensor, key: Tensor, mode: str) -> Tensor:
    return algo.policy(params, obs, key if mode != "mode" else None, mode=mode)


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
    key, total, done = random.key(seed, device=device), 0.0, False
    while not done:
        key, sub = random.split(key).unbind(0)
        x = torch.as_tensor(np.asarray(obs), dtype=algo.env.dtype, device=device)
        action = _act(algo, params, x, sub, mode).cpu().numpy()
        if action.ndim == 0:
            action = action.item()
        obs, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        done = terminated or truncated
    env.close()
    return total


def _pure_episode(algo: Any, params: Any, seed: int, mode: str) -> float:
    env = algo.env
    key = random.key(seed, device=params_device(params))
    key, reset_key = random.split(key).unbind(0)
    state, ts = env.reset(reset_key)
    total = 0.0
    while True:
        key, sub = random.split(key).unbind(0)
        state, ts = env.step(state, _act(algo, params, ts.obs, sub, mode))
        total += float(ts.reward)
        if bool(ts.terminated | ts.truncated):
            return total
