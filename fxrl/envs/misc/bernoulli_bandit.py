"""BernoulliBandit-misc in pure torch: gymnax's ``misc/bernoulli_bandit.py``.

A two-armed Bernoulli bandit for meta-RL (Wang et al. 2017, "Learning to reinforcement
learn"): arm 0 pays 1 with probability ``p``, arm 1 with ``1 - p``. Each episode draws
its task at reset, ``p`` in {``reward_prob``, ``1 - reward_prob``} with equal chance
(gymnax), unless ``resample_task=False``, when ``p = params.prob_0`` for every episode
(what ``sample_params`` returns, for one agent per task). Episodes never terminate (100
steps by ``make``'s time limit). Observation: [last reward, one-hot last action (2),
time], time ``(max_lim - min_lim) * t / t_max + min_lim`` (``normalize_time``) or ``t``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from fxrl import random, specs, tree
from fxrl.envs.core import Env, TimeStep, params_as_tensors
from fxrl.envs.misc._common import arm_colors, bars_image, one_hot, time_feature

__all__ = ["BernoulliBandit", "BernoulliBanditParams", "BernoulliBanditState"]


@tree.dataclass
class BernoulliBanditParams:
    reward_prob: Any = 0.1  # the task distribution: p is this or 1 - this
    normalize_time: Any = True
    min_lim: Any = -1.0
    max_lim: Any = 1.0
    t_max: Any = 100
    prob_0: Any = 0.1  # the task when resample_task is False: arm 0's success probability
    resample_task: Any = True  # draw p at every reset (gymnax); False: use prob_0


@tree.dataclass
class BernoulliBanditState:
    prob_0: Tensor  # [] this episode's p (arm 0's success probability)
    last_action: Tensor  # [] int64
    last_reward: Tensor  # [] float
    t: Tensor  # [] int64
    key: Tensor  # [2] int64, advanced every step
    params: BernoulliBanditParams


class BernoulliBandit(Env):
    """BernoulliBandit: observation float [4], action Discrete(2), reward 0 or 1."""

    vectorized = True  # step and observe are elementwise: batch() skips vmap

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        self.dtype = dtype
        inf = math.inf
        self.observation_spec = specs.Box([0, 0, 0, -inf], [1, 1, 1, inf], dtype=dtype)
        self.action_spec = specs.Discrete(2)
        self.default_params = BernoulliBanditParams()

    def sample_params(
        self, key: Tensor, params: BernoulliBanditParams | None = None
    ) -> BernoulliBanditParams:
        """One task: ``prob_0`` drawn as a reset draws it, ``resample_task=False``.
        ``torch.func.vmap(env.sample_params)(random.split(key, n))`` gives n tasks."""
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        return params.replace(
            prob_0=_draw_p(key, params), resample_task=torch.tensor(False, device=key.device)
        )

    def reset(
        self, key: Tensor, params: BernoulliBanditParams | None = None
    ) -> tuple[BernoulliBanditState, TimeStep]:
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        key, k_task = random.split(key).unbind(-2)
        p = torch.where(params.resample_task, _draw_p(k_task, params), params.prob_0)
        last_action, t = torch.zeros_like(key[..., 0]), torch.zeros_like(key[..., 0])
        reward = torch.zeros(t.shape, dtype=self.dtype, device=t.device)
        state = BernoulliBanditState(p, last_action, reward, t, key, params)
        flag = torch.zeros_like(t, dtype=torch.bool)
        return state, TimeStep(self.observe(state), reward.clone(), flag, flag.clone(), {})

    def step(
        self, state: BernoulliBanditState, action: Tensor
    ) -> tuple[BernoulliBanditState, TimeStep]:
        """Pull arm ``action``: reward 1 with its probability (``p`` or ``1 - p``)."""
        key, k_pull = random.split(state.key).unbind(-2)
        action = action.long()
        p = torch.where(action == 0, state.prob_0, 1 - state.prob_0)
        reward = random.bernoulli(k_pull, p, ()).to(self.dtype)
        moved = state.replace(last_action=action, last_reward=reward, t=state.t + 1, key=key)
        flag = torch.zeros_like(moved.t, dtype=torch.bool)
        return moved, TimeStep(self.observe(moved), reward.clone(), flag, flag.clone(), {})

    def observe(self, state: BernoulliBanditState) -> Tensor:
        p = state.params
        time = time_feature(state.t, p.normalize_time, self.dtype, p.min_lim, p.max_lim, p.t_max)
        return torch.cat(
            [
                state.last_reward[..., None],
                one_hot(state.last_action, 2, self.dtype),
                time[..., None],
            ],
            dim=-1,
        )

    def render(self, state: BernoulliBanditState) -> Tensor:
        """uint8 [64, 64, 3]: each arm a bar as high as its success probability; the arm
        pulled last is green if it paid, red if not, the other gray."""
        heights = torch.stack([state.prob_0, 1 - state.prob_0], dim=-1)
        return bars_image(heights, arm_colors(state.last_action, state.last_reward > 0))


def _draw_p(key: Tensor, params: BernoulliBanditParams) -> Tensor:
    return torch.where(random.bernoulli(key, 0.5), params.reward_prob, 1 - params.reward_prob)
