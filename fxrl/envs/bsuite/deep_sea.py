"""DeepSea-bsuite in pure torch: bsuite's ``environments/deep_sea.py`` (bsuite 0.3.6).

An agent descends one row per step down a ``size`` x ``size`` grid from the top-left
cell, moving one column left or right (clipped). Which of the actions 0 and 1 means
"right" differs per cell (``params.action_mapping``, fixed per env as bsuite's
``mapping_seed`` fixes it). Going right costs ``unscaled_move_cost / size``; going right
from the last column pays +1, so only the one all-right path earns ``1 - cost``. The
episode terminates after ``size`` steps (observation: all zeros). The stochastic version
(``deterministic=False``) moves right only with probability ``1 - 1/size`` and adds N(0, 1)
noise to the reward of the bottom row's two edge cells. Osband et al. (2019), "Behaviour
Suite for Reinforcement Learning"; Osband et al. (2017), arXiv:1703.07608.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import random, specs, tree
from fxrl.envs.bsuite._grid import cell_mask, palette_image
from fxrl.envs.core import Env, TimeStep, params_as_tensors

__all__ = ["DeepSea", "DeepSeaParams", "DeepSeaState"]


@tree.dataclass
class DeepSeaParams:
    action_mapping: Any  # [size, size] int64: the action that moves right in each cell
    deterministic: Any = True  # False: bsuite's stochastic ('windy', noisy) version
    unscaled_move_cost: Any = 0.01  # cost of moving right, times size


@tree.dataclass
class DeepSeaState:
    row: Tensor  # [] int64, 0 at the top; size once the episode is over
    column: Tensor  # [] int64
    bad_episode: Tensor  # [] bool: left the all-right path (bsuite's logging flag)
    t: Tensor  # [] int64 steps since reset
    key: Tensor  # [2] int64, advanced every step (the stochastic version draws from it)
    params: DeepSeaParams


class DeepSea(Env):
    """DeepSea: observation float [size, size] one-hot (zeros at the end), Discrete(2).

    Args:
      size: N of the N x N grid (gymnax's default 8; bsuite's sweep uses 10 to 50).
      mapping_key: key of the default action mapping (Bernoulli(0.5) per cell); the
        default is ``fxrl.random.key(0)``.
      dtype: float dtype of observations and rewards.
    """

    vectorized = True  # step and observe are elementwise: batch() skips vmap

    def __init__(
        self, size: int = 8, mapping_key: Tensor | None = None, dtype: torch.dtype = torch.float32
    ):
        if size < 1:
            raise ValueError(f"DeepSea: size={size}; expected a positive int.")
        self.size, self.dtype = size, dtype
        self.observation_spec = specs.Box(0.0, 1.0, shape=(size, size), dtype=dtype)
        self.action_spec = specs.Discrete(2)
        # default params live on the CPU; reset puts them on its key's device
        key = random.key(0, device="cpu") if mapping_key is None else mapping_key
        self.default_params = DeepSeaParams(self._mapping(key))

    def _mapping(self, key: Tensor) -> Tensor:
        """gymnax's ``sample_action_map``: Bernoulli(0.5) per cell, int64 [size, size]."""
        return random.bernoulli(key, 0.5, (self.size, self.size)).long()

    def sample_params(self, key: Tensor, params: DeepSeaParams | None = None) -> DeepSeaParams:
        """One task: params with a fresh action mapping, Bernoulli(0.5) per cell (gymnax's
        ``sample_action_map``); other fields from ``params`` (default: the env's default
        params), all as tensors, so ``vmap(env.sample_params)(keys)`` gives a batch of tasks."""
        base = self.default_params if params is None else params
        mapping = self._mapping(key)
        return params_as_tensors(base, self.dtype, key.device).replace(action_mapping=mapping)

    def reset(
        self, key: Tensor, params: DeepSeaParams | None = None
    ) -> tuple[DeepSeaState, TimeStep]:
        """Start in the top-left cell (deterministic: ``key`` seeds the step noise)."""
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        # one tensor per leaf: fxrl.compile traces aliased input leaves as one input
        row, column, t = (torch.zeros_like(key[..., 0]) for _ in range(3))
        flag = torch.zeros_like(row, dtype=torch.bool)
        state = DeepSeaState(row, column, flag.clone(), t, key, params)
        reward = torch.zeros(row.shape, dtype=self.dtype, device=row.device)
        return state, TimeStep(self.observe(state), reward, flag, flag.clone(), {})

    def step(self, state: DeepSeaState, action: Tensor) -> tuple[DeepSeaState, TimeStep]:
        """bsuite's ``_step``: reward for the move, then the move, then one row down."""
        p, n = state.params, self.size
        key, k_move, k_noise = random.split(state.key, 3).unbind(-2)
        row, col = state.row, state.column
        # the mapping of this cell by a mask, not an index, so leading batch dims work
        here = cell_mask(row.clamp(max=n - 1), col, n, n)
        right = action.long() == (p.action_mapping * here).sum((-1, -2))
        reward = (right & (col == n - 1)).to(self.dtype)
        at_edge = (row == n - 1) & ((col == 0) | (col == n - 1))
        noisy = at_edge & ~p.deterministic
        reward = reward + torch.where(noisy, random.normal(k_noise, (), self.dtype), 0.0)
        reward = reward - right.to(self.dtype) * p.unscaled_move_cost / n
        moves = p.deterministic | (random.uniform(k_move, (), dtype=torch.float64) > 1.0 / n)
        new_col = torch.where(right & moves, (col + 1).clamp(max=n - 1), col)
        new_col = torch.where(right, new_col, (col - 1).clamp(min=0))
        bad = state.bad_episode | (~right & (row == col))
        moved = state.replace(row=row + 1, column=new_col, bad_episode=bad, t=state.t + 1, key=key)
        terminated = moved.row == n
        return moved, TimeStep(
            self.observe(moved), reward, terminated, torch.zeros_like(terminated), {}
        )

    def observe(self, state: DeepSeaState) -> Tensor:
        return cell_mask(state.row, state.column, self.size, self.size).to(self.dtype)

    def render(self, state: DeepSeaState) -> Tensor:
        """uint8 [size * s, size * s, 3] (s = max(4, 128 // size)): blue sea, the rewarding
        bottom-right cell gold, the agent white (gone once the episode is over)."""
        n = self.size
        agent = cell_mask(state.row, state.column, n, n)
        corner = torch.full_like(state.row, n - 1)
        treasure = cell_mask(corner, corner, n, n)
        cells = torch.where(agent, 2, torch.where(treasure, 1, 0))
        return palette_image(
            cells, [(20, 40, 110), (240, 190, 40), (255, 255, 255)], max(4, 128 // n)
        )

    def _repr_args(self) -> str:
        args = [] if self.size == 8 else [str(self.size)]
        if self.dtype != torch.float32:
            args.append(f"dtype={self.dtype}")
        return ", ".join(args)
