"""The cheapest algorithm the run loop takes: its update adds ``salt`` to one param and
counts steps, so compiling it costs seconds. A new ``salt`` is a constant of a new
program: a test that needs a compile inductor has never cached passes a fresh one."""

from __future__ import annotations

import dataclasses

import torch

from fxrl import envs, tree
from fxrl.algorithms.core import Algorithm


@dataclasses.dataclass(frozen=True)
class Config:
    env: str = "CartPole-v1"
    """Pure env id (only its specs are read)."""
    total_steps: int = 64
    """Env steps per seed."""
    salt: float = 0.5
    """Added to the param each update."""


@tree.dataclass
class TrainState:
    params: dict
    steps: torch.Tensor


def make(config: Config) -> Algorithm:
    env = envs.make(config.env)

    def init(key):
        return TrainState({"w": torch.zeros(2)}, torch.zeros((), dtype=torch.int64))

    def update(state):
        params = {"w": state.params["w"] + config.salt}
        steps = state.steps + 16
        metrics = {"steps": steps, "episode_return": params["w"].sum(), "loss": params["w"][0]}
        return TrainState(params, steps), metrics

    def policy(params, obs, key=None, mode="mode"):
        return torch.zeros(obs.shape[:-1], dtype=torch.int64)

    return Algorithm(init, update, policy, config, env, 16)
