"""A tiny algorithm that steps a gymnasium env inside ``update``, for the host-env failure test.

``make`` builds ``fxrl.envs.gym("FlakyCartPole-v0", num_envs=...)``: gymnasium's CartPole
whose ``step`` raises once ``fail_at`` steps have been taken in the process (a simulator
that crashes, a lost licence server). ``update`` plays ``num_steps`` random actions in it
(not pure, not vmappable: trained with one seed, eager) and counts steps in the TrainState,
so the run loop meets the env's failure as it would a host env's in a real run.
"""

from __future__ import annotations

import dataclasses

import gymnasium
import torch
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from fxrl import envs, random, tree
from fxrl.algorithms.core import Algorithm

STEPS = {"taken": 0}  # this process's env steps, over all sub-envs


class FlakyCartPole(CartPoleEnv):
    """CartPole whose ``step`` raises after ``fail_at`` steps in this process (0: never)."""

    def __init__(self, fail_at: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.fail_at = fail_at

    def step(self, action):
        STEPS["taken"] += 1
        if self.fail_at and STEPS["taken"] > self.fail_at:
            raise ConnectionError("the simulator lost its licence server")
        return super().step(action)


if "FlakyCartPole-v0" not in gymnasium.registry:
    gymnasium.register("FlakyCartPole-v0", entry_point=FlakyCartPole, max_episode_steps=500)


@dataclasses.dataclass(frozen=True)
class Config:
    env: str = "CartPole-v1"
    """Pure env id with the host env's specs (eval and export)."""
    total_steps: int = 64
    """Env steps per env."""
    num_envs: int = 2
    """Host envs (a gymnasium vector env)."""
    num_steps: int = 4
    """Steps per env per update."""
    fail_at: int = 0
    """The host env raises after this many steps in the process (0: never)."""


@tree.dataclass
class TrainState:
    params: dict
    key: torch.Tensor
    steps: torch.Tensor


def make(config: Config) -> Algorithm:
    host = envs.gym("FlakyCartPole-v0", num_envs=config.num_envs, fail_at=config.fail_at)
    handle = {}

    def policy(params, obs, key=None, mode="mode"):
        return (obs @ params["w"]).argmax(-1)

    def init(key):
        handle["state"], _ = host.reset(key)
        zero = torch.zeros((), dtype=torch.int64)
        return TrainState({"w": torch.zeros(4, 2)}, key, zero)

    def update(state):
        key = state.key
        for _ in range(config.num_steps):
            key, k_act = random.split(key)
            action = random.randint(k_act, (config.num_envs,), 0, 2)
            handle["state"], _ = host.step(handle["state"], action)
        steps = state.steps + config.num_steps
        nan = torch.tensor(float("nan"))
        metrics = {
            "steps": steps,
            "episodes": torch.zeros((), dtype=torch.int64),
            "episode_return": nan,
            "episode_length": nan,
            "loss": torch.zeros(()),
        }
        return TrainState(state.params, key, steps), metrics

    return Algorithm(init, update, policy, config, envs.make(config.env), config.num_steps)
