"""DiscountingChain-bsuite in pure torch: bsuite's ``environments/discounting_chain.py``.

The first action picks one of five chains; chain ``k`` pays once, at step
``REWARD_TIMESTEPS[k]`` = 1, 3, 10, 30 or 100, a reward of 1, except the chain
``bonus_action`` (bsuite's ``mapping_seed % 5``), which pays ``bonus_reward`` (1.1). Later
actions do nothing. The episode terminates after 100 steps. Observation: [chosen chain
(-1 before the first step), t / 100] (bsuite's [1, 2] array, flattened).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import specs, tree
from fxrl.envs import _index
from fxrl.envs.bsuite._grid import cell_mask, palette_image
from fxrl.envs.core import Env, TimeStep, params_as_tensors

__all__ = [
    "REWARD_TIMESTEPS",
    "DiscountingChain",
    "DiscountingChainParams",
    "DiscountingChainState",
]

REWARD_TIMESTEPS = (1, 3, 10, 30, 100)
EPISODE_LEN = 100


@tree.dataclass
class DiscountingChainParams:
    bonus_action: Any = 0  # the chain paying bonus_reward (bsuite's mapping_seed % 5)
    bonus_reward: Any = 1.1


@tree.dataclass
class DiscountingChainState:
    context: Tensor  # [] int64 chosen chain, -1 before the first step
    t: Tensor  # [] int64
    key: Tensor  # [2] int64 (unused: the chain is deterministic)
    params: DiscountingChainParams


class DiscountingChain(Env):
    """DiscountingChain: observation float [2], action Discrete(5)."""

    vectorized = True  # step and observe are elementwise: batch() skips vmap

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        self.dtype = dtype
        self.observation_spec = specs.Box([-1.0, 0.0], [4.0, 1.0], dtype=dtype)
        self.action_spec = specs.Discrete(len(REWARD_TIMESTEPS))
        self.default_params = DiscountingChainParams()

    def reset(
        self, key: Tensor, params: DiscountingChainParams | None = None
    ) -> tuple[DiscountingChainState, TimeStep]:
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        context, t = torch.full_like(key[..., 0], -1), torch.zeros_like(key[..., 0])
        state = DiscountingChainState(context, t, key, params)
        flag = torch.zeros_like(t, dtype=torch.bool)
        reward = torch.zeros(t.shape, dtype=self.dtype, device=t.device)
        return state, TimeStep(self.observe(state), reward, flag, flag.clone(), {})

    def step(
        self, state: DiscountingChainState, action: Tensor
    ) -> tuple[DiscountingChainState, TimeStep]:
        """The first action fixes the chain; reward when t reaches its reward step."""
        p = state.params
        context = torch.where(state.t == 0, action.long(), state.context)
        t = state.t + 1
        when = _index.rows(torch.tensor(REWARD_TIMESTEPS, device=t.device), context.clamp(min=0))
        value = torch.where(context == p.bonus_action, p.bonus_reward, 1.0).to(self.dtype)
        reward = torch.where(t == when, value, torch.zeros_like(value))
        moved = state.replace(context=context, t=t)
        terminated = t == EPISODE_LEN
        return moved, TimeStep(
            self.observe(moved), reward, terminated, torch.zeros_like(terminated), {}
        )

    def observe(self, state: DiscountingChainState) -> Tensor:
        time = state.t.double() / EPISODE_LEN
        return torch.stack([state.context.double(), time], dim=-1).to(self.dtype)

    def render(self, state: DiscountingChainState) -> Tensor:
        """uint8 [5 * 8, 101 * 4, 3]: one row per chain, one column per step; each
        chain's reward step gold (the bonus chain's orange), the agent red (on every row
        before it chooses)."""
        n = len(REWARD_TIMESTEPS)
        rows = torch.arange(n, device=state.t.device)
        when = torch.tensor(REWARD_TIMESTEPS, device=state.t.device)
        payoff = cell_mask(rows, when, n, EPISODE_LEN + 1).any(-3)  # [5, 101]
        bonus = (rows == state.params.bonus_action)[..., :, None]
        chosen = (rows == state.context[..., None]) | (state.context[..., None] < 0)
        steps = torch.arange(EPISODE_LEN + 1, device=state.t.device)
        agent = chosen[..., :, None] & (steps == state.t[..., None, None])
        cells = torch.where(agent, 3, torch.where(payoff, torch.where(bonus, 2, 1), 0))
        colors = [(30, 30, 30), (240, 200, 40), (255, 130, 0), (230, 40, 40)]
        img = palette_image(cells, colors, 4)  # [20, 404, 3]: stretch rows to 8 px
        return img.repeat_interleave(2, dim=-3)
