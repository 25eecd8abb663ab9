"""Catch-bsuite in pure torch: bsuite's ``environments/catch.py`` (bsuite 0.3.6).

A ball falls one row per step down a ``rows`` x ``columns`` board from a random column of
the top row; the paddle on the bottom row moves left (action 0), stays (1) or moves right
(2), clipped to the board. When the ball reaches the bottom row the episode terminates
with reward +1 if the paddle is under it, else -1; every other step gives 0. The
observation is the board: 1.0 on the ball's and the paddle's cells, 0.0 elsewhere.
"""

from __future__ import annotations

import torch
from torch import Tensor

from fxrl import random, specs, tree
from fxrl.envs.bsuite._grid import cell_mask, palette_image
from fxrl.envs.core import Env, TimeStep, params_as_tensors

__all__ = ["Catch", "CatchParams", "CatchState"]


@tree.dataclass
class CatchParams:
    """Catch has no numeric params: its board size is the env's (``Catch(rows, columns)``)."""


@tree.dataclass
class CatchState:
    ball_x: Tensor  # [] int64 column of the ball
    ball_y: Tensor  # [] int64 row of the ball (0 is the top)
    paddle_x: Tensor  # [] int64 column of the paddle (its row is rows - 1)
    t: Tensor  # [] int64 steps since reset
    key: Tensor  # [2] int64
    params: CatchParams


class Catch(Env):
    """Catch: observation float [rows, columns] in {0, 1}, action Discrete(3).

    Args:
      rows, columns: the board (bsuite's defaults 10 x 5).
      dtype: float dtype of observations and rewards.
    """

    vectorized = True  # step and observe are elementwise: batch() skips vmap

    def __init__(self, rows: int = 10, columns: int = 5, dtype: torch.dtype = torch.float32):
        if rows < 2 or columns < 1:
            raise ValueError(
                f"Catch: rows={rows}, columns={columns}; need rows >= 2, columns >= 1."
            )
        self.rows, self.columns, self.dtype = rows, columns, dtype
        self.observation_spec = specs.Box(0.0, 1.0, shape=(rows, columns), dtype=dtype)
        self.action_spec = specs.Discrete(3)
        self.default_params = CatchParams()

    def reset(self, key: Tensor, params: CatchParams | None = None) -> tuple[CatchState, TimeStep]:
        """Ball in a uniform column of the top row, paddle centred (``columns // 2``)."""
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        ball_x = random.randint(key, (), 0, self.columns)
        # one tensor per leaf: fxrl.compile traces aliased input leaves as one input
        ball_y, t = torch.zeros_like(ball_x), torch.zeros_like(ball_x)
        state = CatchState(
            ball_x, ball_y, torch.full_like(ball_x, self.columns // 2), t, key, params
        )
        flag = torch.zeros_like(t, dtype=torch.bool)
        reward = torch.zeros(t.shape, dtype=self.dtype, device=t.device)
        return state, TimeStep(self.observe(state), reward, flag, flag.clone(), {})

    def step(self, state: CatchState, action: Tensor) -> tuple[CatchState, TimeStep]:
        """Move the paddle by ``action - 1``, drop the ball a row, score at the bottom."""
        paddle_x = (state.paddle_x + action.long() - 1).clamp(0, self.columns - 1)
        moved = state.replace(paddle_x=paddle_x, ball_y=state.ball_y + 1, t=state.t + 1)
        terminated = moved.ball_y == self.rows - 1
        caught = torch.where(paddle_x == moved.ball_x, 1.0, -1.0).to(self.dtype)
        reward = torch.where(terminated, caught, torch.zeros_like(caught))
        return moved, TimeStep(
            self.observe(moved), reward, terminated, torch.zeros_like(terminated), {}
        )

    def observe(self, state: CatchState) -> Tensor:
        return self._board(state).to(self.dtype)

    def _board(self, state: CatchState) -> Tensor:
        ball = cell_mask(state.ball_y, state.ball_x, self.rows, self.columns)
        paddle_y = torch.full_like(state.paddle_x, self.rows - 1)
        return ball | cell_mask(paddle_y, state.paddle_x, self.rows, self.columns)

    def render(self, state: CatchState) -> Tensor:
        """uint8 [rows * 16, columns * 16, 3]: black board, white ball, blue paddle."""
        ball = cell_mask(state.ball_y, state.ball_x, self.rows, self.columns)
        paddle_y = torch.full_like(state.paddle_x, self.rows - 1)
        paddle = cell_mask(paddle_y, state.paddle_x, self.rows, self.columns)
        cells = torch.where(ball, 1, torch.where(paddle, 2, 0))
        return palette_image(cells, [(0, 0, 0), (255, 255, 255), (66, 135, 245)], 16)

    def _repr_args(self) -> str:
        args = [] if (self.rows, self.columns) == (10, 5) else [f"{self.rows}, {self.columns}"]
        if self.dtype != torch.float32:
            args.append(f"dtype={self.dtype}")
        return ", ".join(args)
