"""MetaMaze-misc in pure torch: gymnax's ``misc/meta_maze.py`` (Miconi et al. 2019,
"Backpropamine", the uber-research ``simplemaze``).

A ``maze_size`` x ``maze_size`` maze (walls on every other cell of every other row) inside
an outer wall. The agent starts at the centre; the goal is a cell drawn per episode
(gymnax) unless ``resample_goal=False``, when it is ``params.goal_row/goal_col`` (what
``sample_params`` returns: a maze whose goal is sampled per task). Actions move up (0),
right (1), down (2), left (3). Reaching the goal pays ``reward`` and teleports the agent to
a uniform open cell; bumping a wall costs ``punishment``. As in gymnax, the episode
terminates only when that teleport lands on the goal itself; otherwise it runs to the
time limit (200). Observation: the ``rf_size`` x ``rf_size`` walls around the agent
(flattened), one-hot last action, last reward, time (``t``, or ``2 t / 100 - 1``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from fxrl import random, specs, tree
from fxrl.envs import _index
from fxrl.envs.core import Env, TimeStep, params_as_tensors
from fxrl.envs.misc._common import one_hot, time_feature
from fxrl.envs.misc.four_rooms import (
    DIRECTIONS,
    cell_at,
    draw_goal,
    grid_render,
    open_cells,
)

__all__ = ["MetaMaze", "MetaMazeParams", "MetaMazeState", "maze_layout"]


@tree.dataclass
class MetaMazeParams:
    reward: Any = 10.0  # paid on reaching the goal
    punishment: Any = 0.0  # paid on bumping into a wall
    normalize_time: Any = False
    goal_row: Any = 1  # the task when resample_goal is False
    goal_col: Any = 1
    resample_goal: Any = True  # draw the goal at every reset (gymnax); False: use goal_*


@tree.dataclass
class MetaMazeState:
    pos: Tensor  # [2] int64 (row, col)
    goal: Tensor  # [2] int64
    last_action: Tensor  # [] int64
    last_reward: Tensor  # [] float
    t: Tensor  # [] int64
    key: Tensor  # [2] int64, advanced every step
    params: MetaMazeParams


def maze_layout(maze_size: int, rf_size: int) -> str:
    """gymnax's ``generate_maze_layout`` as text ('x' wall, ' ' open)."""
    off = (rf_size - 1) // 2
    width = maze_size + 2 * off
    walls = "x" * off + " x" * ((maze_size + 1) // 2) + "x" * (off - 1)
    plain = "x" * off + " " * maze_size + "x" * off
    rows = ["x" * width] * off
    rows += [plain if r % 2 == 0 else walls for r in range(maze_size)]
    return "\n".join(rows + ["x" * width] * off)


class MetaMaze(Env):
    """MetaMaze: observation float [rf_size**2 + 6], action Discrete(4).

    Args:
      maze_size, rf_size: odd ints (gymnax's defaults 9 and 3); rf_size > 1.
      dtype: float dtype of observations and rewards.
    """

    vectorized = True  # step and observe are elementwise: batch() skips vmap

    def __init__(self, maze_size: int = 9, rf_size: int = 3, dtype: torch.dtype = torch.float32):
        if maze_size % 2 == 0 or rf_size % 2 == 0 or rf_size < 3:
            raise ValueError(
                f"MetaMaze: maze_size={maze_size}, rf_size={rf_size}; both must be odd and "
                "rf_size >= 3 (the view is centred on the agent)."
            )
        self.maze_size, self.rf_size, self.dtype = maze_size, rf_size, dtype
        self.free, self.coords = open_cells(maze_layout(maze_size, rf_size))
        self.wall = (~self.free).to(dtype)  # the tables: on the CPU, moved at use
        self.rf_off = (rf_size - 1) // 2
        centre = (self.free.shape[0] - 1) // 2 + self.rf_off - 1
        self.centre = torch.tensor([centre, centre], device="cpu")
        self.directions = torch.tensor(DIRECTIONS, device="cpu")
        inf = math.inf
        n = rf_size**2 + 4
        self.observation_spec = specs.Box(
            [0.0] * n + [-inf, -inf], [1.0] * n + [inf, inf], dtype=dtype
        )
        self.action_spec = specs.Discrete(4)
        self.default_params = MetaMazeParams()

    def sample_params(self, key: Tensor, params: MetaMazeParams | None = None) -> MetaMazeParams:
        """One task: a goal drawn as a reset draws it (uniform open cell), kept fixed."""
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        goal = draw_goal(key, self.coords)
        row, col = (x.clone() for x in goal.unbind(-1))  # own leaves, not views of one tensor
        resample = torch.tensor(False, device=key.device)
        return params.replace(goal_row=row, goal_col=col, resample_goal=resample)

    def reset(
        self, key: Tensor, params: MetaMazeParams | None = None
    ) -> tuple[MetaMazeState, TimeStep]:
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        key, k_goal = random.split(key).unbind(-2)
        fixed = torch.stack([params.goal_row, params.goal_col], -1)
        goal = torch.where(params.resample_goal[..., None], draw_goal(k_goal, self.coords), fixed)
        pos = self.centre.to(goal.device).expand_as(goal).clone()
        last_action, t = torch.zeros_like(key[..., 0]), torch.zeros_like(key[..., 0])
        reward = torch.zeros(t.shape, dtype=self.dtype, device=t.device)
        state = MetaMazeState(pos, goal, last_action, reward, t, key, params)
        flag = torch.zeros_like(t, dtype=torch.bool)
        return state, TimeStep(self.observe(state), reward.clone(), flag, flag.clone(), {})

    def step(self, state: MetaMazeState, action: Tensor) -> tuple[MetaMazeState, TimeStep]:
        """Move unless a wall is in the way; on the goal, pay and teleport."""
        p = state.params
        key, k_pos = random.split(state.key).unbind(-2)
        action = action.long()
        target = state.pos + _index.rows(self.directions, action)
        free = cell_at(self.free, target)
        pos = torch.where(free[..., None], target, state.pos)
        reached = (pos == state.goal).all(-1)
        reward = reached.to(self.dtype) * p.reward + (~free).to(self.dtype) * p.punishment
        teleport = _index.rows(self.coords, random.randint(k_pos, (), 0, self.coords.shape[0]))
        pos = torch.where(reached[..., None], teleport, pos)
        moved = state.replace(
            pos=pos, last_action=action, last_reward=reward, t=state.t + 1, key=key
        )
        terminated = (pos == state.goal).all(-1)  # gymnax: the new position on the goal
        return moved, TimeStep(
            self.observe(moved), reward.clone(), terminated, torch.zeros_like(terminated), {}
        )

    def observe(self, state: MetaMazeState) -> Tensor:
        offsets = torch.arange(-self.rf_off, self.rf_off + 1, device=state.pos.device)
        rows = state.pos[..., 0, None] + offsets
        cols = state.pos[..., 1, None] + offsets
        view = self.wall.to(rows.device)[rows[..., :, None], cols[..., None, :]].flatten(-2)
        time = time_feature(state.t, state.params.normalize_time, self.dtype)
        return torch.cat(
            [
                view,
                one_hot(state.last_action, 4, self.dtype),
                state.last_reward[..., None],
                time[..., None],
            ],
            dim=-1,
        )

    def render(self, state: MetaMazeState) -> Tensor:
        """uint8 [H * 8, W * 8, 3] of the whole maze: gray walls, green goal, red agent."""
        return grid_render(self.free, state.pos, state.goal)

    def _repr_args(self) -> str:
        args = (
            []
            if (self.maze_size, self.rf_size) == (9, 3)
            else [f"{self.maze_size}, {self.rf_size}"]
        )
        if self.dtype != torch.float32:
            args.append(f"dtype={self.dtype}")
        return ", ".join(args)
