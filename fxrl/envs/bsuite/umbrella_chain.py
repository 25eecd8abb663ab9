"""UmbrellaChain-bsuite in pure torch: bsuite's ``environments/umbrella_chain.py``.

Whether the agent will need an umbrella is drawn at reset; only the first action
matters (1: take the umbrella). After ``chain_length`` steps the episode terminates with
reward +1 if the umbrella choice matched the need, else -1; every step before pays a
random +-1 (noise that hides the credit assignment). Observation: [need umbrella, has
umbrella, 1 - t / chain_length, ``n_distractor`` random bits redrawn every step]
(bsuite's [1, 3 + n] array, flattened); ``has umbrella`` starts as a random bit too.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from fxrl import random, specs, tree
from fxrl.envs.bsuite._grid import palette_image
from fxrl.envs.core import Env, TimeStep, params_as_tensors

__all__ = ["UmbrellaChain", "UmbrellaChainParams", "UmbrellaChainState"]


@tree.dataclass
class UmbrellaChainParams:
    chain_length: Any = 10  # gymnax's default (bsuite's umbrella_length sweep: 1 to 100)


@tree.dataclass
class UmbrellaChainState:
    need_umbrella: Tensor  # [] int64
    has_umbrella: Tensor  # [] int64
    distractor: Tensor  # [n_distractor] float, the bits shown with this state
    t: Tensor  # [] int64
    key: Tensor  # [2] int64, advanced every step
    params: UmbrellaChainParams


class UmbrellaChain(Env):
    """UmbrellaChain: observation float [3 + n_distractor], action Discrete(2).

    Args:
      n_distractor: random distractor bits in each observation (default 0).
      dtype: float dtype of observations and rewards.
    """

    vectorized = True  # step and observe are elementwise: batch() skips vmap

    def __init__(self, n_distractor: int = 0, dtype: torch.dtype = torch.float32) -> None:
        if n_distractor < 0:
            raise ValueError(f"UmbrellaChain: n_distractor={n_distractor}; expected >= 0.")
        self.n_distractor, self.dtype = n_distractor, dtype
        low = [0.0, 0.0, -math.inf] + [0.0] * n_distractor
        high = [1.0, 1.0, 1.0] + [1.0] * n_distractor
        self.observation_spec = specs.Box(low, high, dtype=dtype)
        self.action_spec = specs.Discrete(2)
        self.default_params = UmbrellaChainParams()

    def _bits(self, key: Tensor) -> Tensor:
        return random.bernoulli(key, 0.5, (self.n_distractor,)).to(self.dtype)

    def reset(
        self, key: Tensor, params: UmbrellaChainParams | None = None
    ) -> tuple[UmbrellaChainState, TimeStep]:
        """need and has umbrella Bernoulli(0.5) (bsuite's ``_reset``), fresh distractors."""
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        key, k_need, k_has, k_bits = random.split(key, 4).unbind(-2)
        need = random.bernoulli(k_need, 0.5).long()
        has = random.bernoulli(k_has, 0.5).long()
        t = torch.zeros_like(need)
        state = UmbrellaChainState(need, has, self._bits(k_bits), t, key, params)
        flag = torch.zeros_like(t, dtype=torch.bool)
        reward = torch.zeros(t.shape, dtype=self.dtype, device=t.device)
        return state, TimeStep(self.observe(state), reward, flag, flag.clone(), {})

    def step(
        self, state: UmbrellaChainState, action: Tensor
    ) -> tuple[UmbrellaChainState, TimeStep]:
        """The first action sets the umbrella; +-1 at the end for it, random +-1 before."""
        key, k_reward, k_bits = random.split(state.key, 3).unbind(-2)
        t = state.t + 1
        has = torch.where(t == 1, action.long(), state.has_umbrella)
        final = t == state.params.chain_length
        verdict = torch.where(has == state.need_umbrella, 1.0, -1.0).to(self.dtype)
        noise = (2 * random.bernoulli(k_reward, 0.5).long() - 1).to(self.dtype)
        reward = torch.where(final, verdict, noise)
        moved = state.replace(has_umbrella=has, distractor=self._bits(k_bits), t=t, key=key)
        return moved, TimeStep(self.observe(moved), reward, final, torch.zeros_like(final), {})

    def observe(self, state: UmbrellaChainState) -> Tensor:
        left = 1 - state.t.double() / state.params.chain_length
        head = torch.stack([state.need_umbrella.double(), state.has_umbrella.double(), left], -1)
        return torch.cat([head.to(self.dtype), state.distractor], dim=-1)

    def render(self, state: UmbrellaChainState) -> Tensor:
        """uint8 [32, 16 * 11, 3] (default chain of 10): top row the chain with the agent
        red; bottom row: the weather to come (blue rain, yellow sun) and whether the
        umbrella is held (blue) or not (gray)."""
        width = 11
        cols = torch.arange(width, device=state.t.device)
        agent = cols == state.t[..., None].clamp(max=width - 1)
        top = torch.where(agent, 1, torch.where(cols <= state.params.chain_length, 2, 0))
        weather = torch.where(state.need_umbrella == 1, 3, 4)[..., None]
        held = torch.where(state.has_umbrella == 1, 3, 2)[..., None]
        bottom = torch.where(cols == 0, weather, torch.where(cols == 1, held, 0))
        colors = [(0, 0, 0), (230, 40, 40), (90, 90, 90), (40, 90, 230), (250, 210, 40)]
        return palette_image(torch.stack([top, bottom], dim=-2), colors, 16)

    def _repr_args(self) -> str:
        args = [] if self.n_distractor == 0 else [str(self.n_distractor)]
        if self.dtype != torch.float32:
            args.append(f"dtype={self.dtype}")
        return ", ".join(args)
