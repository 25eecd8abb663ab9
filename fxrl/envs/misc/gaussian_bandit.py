"""GaussianBandit-misc in pure torch: gymnax's ``misc/gaussian_bandit.py``.

A two-armed Gaussian bandit (Lange & Sprekeler 2022, "Learning not to learn"): arm 0
always pays 0; arm 1 pays ``mu + sigma_l * N(0, 1)``. Each episode draws its task at
reset, ``mu = mean_mu + sigma_p * N(0, 1)`` (gymnax), unless ``resample_task=False``,
when ``mu = params.mu`` (what ``sample_params`` returns). Episodes never terminate (100
steps by ``make``'s time limit). Observation: [last reward, one-hot last action (2),
time], time ``2 t / 100 - 1`` (``normalize_time``) or ``t``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from fxrl import random, specs, tree
from fxrl.envs.core import Env, TimeStep, params_as_tensors
from fxrl.envs.misc._common import arm_colors, bars_image, one_hot, time_feature

__all__ = ["GaussianBandit", "GaussianBanditParams", "GaussianBanditState"]


@tree.dataclass
class GaussianBanditParams:
    mean_mu: Any = -1.0  # the task distribution: mu ~ N(mean_mu, sigma_p^2)
    sigma_p: Any = 1.0
    sigma_l: Any = 0.1  # noise of each pull of arm 1
    normalize_time: Any = True
    mu: Any = -1.0  # the task when resample_task is False: arm 1's mean
    resample_task: Any = True  # draw mu at every reset (gymnax); False: use mu


@tree.dataclass
class GaussianBanditState:
    mu: Tensor  # [] this episode's mean of arm 1
    last_action: Tensor  # [] int64
    last_reward: Tensor  # [] float
    t: Tensor  # [] int64
    key: Tensor  # [2] int64, advanced every step
    params: GaussianBanditParams


class GaussianBandit(Env):
    """GaussianBandit: observation float [4], action Discrete(2)."""

    vectorized = True  # step and observe are elementwise: batch() skips vmap

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        self.dtype = dtype
        inf = math.inf
        self.observation_spec = specs.Box([-inf, 0, 0, -inf], [inf, 1, 1, inf], dtype=dtype)
        self.action_spec = specs.Discrete(2)
        self.default_params = GaussianBanditParams()

    def sample_params(
        self, key: Tensor, params: GaussianBanditParams | None = None
    ) -> GaussianBanditParams:
        """One task: ``mu`` drawn as a reset draws it, ``resample_task=False``.
        ``torch.func.vmap(env.sample_params)(random.split(key, n))`` gives n tasks."""
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        return params.replace(
            mu=self._draw_mu(key, params), resample_task=torch.tensor(False, device=key.device)
        )

    def _draw_mu(self, key: Tensor, params: GaussianBanditParams) -> Tensor:
        return params.mean_mu + params.sigma_p * random.normal(key, (), self.dtype)

    def reset(
        self, key: Tensor, params: GaussianBanditParams | None = None
    ) -> tuple[GaussianBanditState, TimeStep]:
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        key, k_task = random.split(key).unbind(-2)
        mu = torch.where(params.resample_task, self._draw_mu(k_task, params), params.mu)
        last_action, t = torch.zeros_like(key[..., 0]), torch.zeros_like(key[..., 0])
        reward = torch.zeros(t.shape, dtype=self.dtype, device=t.device)
        state = GaussianBanditState(mu, last_action, reward, t, key, params)
        flag = torch.zeros_like(t, dtype=torch.bool)
        return state, TimeStep(self.observe(state), reward.clone(), flag, flag.clone(), {})

    def step(
        self, state: GaussianBanditState, action: Tensor
    ) -> tuple[GaussianBanditState, TimeStep]:
        """Arm 0 pays 0, arm 1 ``mu + sigma_l * N(0, 1)``."""
        key, k_pull = random.split(state.key).unbind(-2)
        action = action.long()
        arm_1 = state.mu + state.params.sigma_l * random.normal(k_pull, (), self.dtype)
        reward = torch.where(action == 0, torch.zeros_like(arm_1), arm_1)
        moved = state.replace(last_action=action, last_reward=reward, t=state.t + 1, key=key)
        flag = torch.zeros_like(moved.t, dtype=torch.bool)
        return moved, TimeStep(self.observe(moved), reward.clone(), flag, flag.clone(), {})

    def observe(self, state: GaussianBanditState) -> Tensor:
        time = time_feature(state.t, state.params.normalize_time, self.dtype)
        return torch.cat(
            [
                state.last_reward[..., None],
                one_hot(state.last_action, 2, self.dtype),
                time[..., None],
            ],
            dim=-1,
        )

    def render(self, state: GaussianBanditState) -> Tensor:
        """uint8 [64, 64, 3]: each arm's mean as a bar over [-3, 3] (arm 0 at 0, so half
        height); the arm pulled last green if its reward was above 0, red if not."""
        means = torch.stack([torch.zeros_like(state.mu), state.mu], dim=-1)
        heights = ((means + 3) / 6).clamp(0, 1)
        return bars_image(heights, arm_colors(state.last_action, state.last_reward > 0))
