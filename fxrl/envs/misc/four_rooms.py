"""FourRooms-misc in pure torch: gymnax's ``misc/rooms.py`` (Sutton, Precup & Singh 1999).

A 13 x 13 grid of four rooms joined by doorways. Actions move up (0), right (1), down
(2), left (3); with probability ``fail_prob * 4 / 3`` the action is replaced by a uniform
one (so another action is taken with probability ``fail_prob``, gymnax's rule). A move
into a wall stays put. Reaching the goal pays 1 and terminates. The start and goal are
``params.start_*`` / ``params.goal_*`` (gymnax's fixed (4, 1) and (8, 9)) unless
``resample_init_pos`` / ``resample_goal_pos``: then each reset draws them uniformly over
the open cells (the start never on the goal). ``sample_params`` draws one task (a goal
and a start) for one-agent-per-task training. Observation: [row, col, goal row, goal col].
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import random, specs, tree
from fxrl.envs import _index
from fxrl.envs.bsuite._grid import cell_mask, palette_image
from fxrl.envs.core import Env, TimeStep, params_as_tensors

__all__ = ["FOUR_ROOMS_MAP", "FourRooms", "FourRoomsParams", "FourRoomsState"]

FOUR_ROOMS_MAP = """\
xxxxxxxxxxxxx
x     x     x
x     x     x
x           x
x     x     x
x     x     x
xx xxxx     x
x     xxx xxx
x     x     x
x     x     x
x           x
x     x     x
xxxxxxxxxxxxx"""

# up, right, down, left as (row, col) offsets, gymnax's order
DIRECTIONS = [[-1, 0], [0, 1], [1, 0], [0, -1]]


@tree.dataclass
class FourRoomsParams:
    fail_prob: Any = 1.0 / 3
    resample_init_pos: Any = False
    resample_goal_pos: Any = False
    goal_row: Any = 8
    goal_col: Any = 9
    start_row: Any = 4
    start_col: Any = 1


@tree.dataclass
class FourRoomsState:
    pos: Tensor  # [2] int64 (row, col)
    goal: Tensor  # [2] int64
    t: Tensor  # [] int64
    key: Tensor  # [2] int64, advanced every step
    params: FourRoomsParams


def open_cells(text: str) -> tuple[Tensor, Tensor]:
    """(bool [H, W] open map, int64 [n, 2] open cells in row-major order) of a map text."""
    rows = text.split("\n")
    # host-side tables, made on the CPU and moved to the state's device at use
    free = torch.tensor([[c == " " for c in row] for row in rows], device="cpu")
    return free, free.nonzero()


def cell_at(free: Tensor, cell: Tensor) -> Tensor:
    """``free[cell[..., 0], cell[..., 1]]`` for cells ``[..., 2]``, on ``cell``'s device."""
    return _index.cells(free, cell[..., 0], cell[..., 1])


def draw_goal(key: Tensor, coords: Tensor) -> Tensor:
    """A uniform open cell (gymnax's ``reset_goal``): int64 [2]."""
    return _index.rows(coords, random.randint(key, (), 0, coords.shape[0]))


def draw_start(key: Tensor, coords: Tensor, goal: Tensor) -> Tensor:
    """gymnax's ``reset_pos``: a uniform index below n - 1, the last open cell where it
    would be the goal, so the start is never the goal."""
    n = coords.shape[0]
    cell = _index.rows(coords, random.randint(key, (), 0, n - 1))
    last = coords[n - 1].to(key.device)
    return torch.where((cell == goal).all(-1, keepdim=True), last, cell)


class FourRooms(Env):
    """FourRooms: observation float [4] (agent and goal cells), action Discrete(4)."""

    vectorized = True  # step and observe are elementwise: batch() skips vmap

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        self.dtype = dtype
        self.free, self.coords = open_cells(FOUR_ROOMS_MAP)
        self.directions = torch.tensor(DIRECTIONS, device="cpu")
        self.observation_spec = specs.Box(1.0, 11.0, shape=(4,), dtype=dtype)
        self.action_spec = specs.Discrete(4)
        self.default_params = FourRoomsParams()

    def sample_params(self, key: Tensor, params: FourRoomsParams | None = None) -> FourRoomsParams:
        """One task: a goal and a start drawn as a resampling reset draws them, kept fixed."""
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        k_goal, k_pos = random.split(key).unbind(-2)
        goal = draw_goal(k_goal, self.coords)
        start = draw_start(k_pos, self.coords, goal)
        # copies, not views of one tensor: each task param is its own leaf
        row, col, start_row, start_col = (x.clone() for x in (*goal.unbind(-1), *start.unbind(-1)))
        return params.replace(
            goal_row=row, goal_col=col, start_row=start_row, start_col=start_col,
            resample_init_pos=torch.tensor(False, device=key.device),
            resample_goal_pos=torch.tensor(False, device=key.device),
        )  # fmt: skip

    def reset(
        self, key: Tensor, params: FourRoomsParams | None = None
    ) -> tuple[FourRoomsState, TimeStep]:
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        key, k_goal, k_pos = random.split(key, 3).unbind(-2)
        fixed_goal = torch.stack([params.goal_row, params.goal_col], -1)
        resample_goal = params.resample_goal_pos[..., None]  # [..., 1]: elementwise over batches
        goal = torch.where(resample_goal, draw_goal(k_goal, self.coords), fixed_goal)
        fixed_start = torch.stack([params.start_row, params.start_col], -1)
        start = draw_start(k_pos, self.coords, goal)
        pos = torch.where(params.resample_init_pos[..., None], start, fixed_start)
        t = torch.zeros_like(key[..., 0])
        state = FourRoomsState(pos, goal, t, key, params)
        flag = torch.zeros_like(t, dtype=torch.bool)
        reward = torch.zeros(t.shape, dtype=self.dtype, device=t.device)
        return state, TimeStep(self.observe(state), reward, flag, flag.clone(), {})

    def step(self, state: FourRoomsState, action: Tensor) -> tuple[FourRoomsState, TimeStep]:
        """Slip to a uniform action with probability ``fail_prob * 4 / 3``, move unless
        a wall is in the way, pay 1 and terminate on the goal."""
        key, k_fail, k_action = random.split(state.key, 3).unbind(-2)
        slip = random.uniform(k_fail, (), dtype=torch.float64) < state.params.fail_prob * 4 / 3
        action = torch.where(slip, random.randint(k_action, (), 0, 4), action.long())
        target = state.pos + _index.rows(self.directions, action)
        free = cell_at(self.free, target)
        pos = torch.where(free[..., None], target, state.pos)
        at_goal = (pos == state.goal).all(-1)
        moved = state.replace(pos=pos, t=state.t + 1, key=key)
        return moved, TimeStep(
            self.observe(moved), at_goal.to(self.dtype), at_goal, torch.zeros_like(at_goal), {}
        )

    def observe(self, state: FourRoomsState) -> Tensor:
        return torch.cat([state.pos, state.goal], dim=-1).to(self.dtype)

    def render(self, state: FourRoomsState) -> Tensor:
        """uint8 [13 * 8, 13 * 8, 3]: gray walls, black floor, green goal, red agent."""
        return grid_render(self.free, state.pos, state.goal)


def grid_render(free: Tensor, pos: Tensor, goal: Tensor, scale: int = 8) -> Tensor:
    """A maze frame: gray walls, black floor, green goal, red agent (on top)."""
    h, w = free.shape
    free = free.to(pos.device)
    agent = cell_mask(pos[..., 0], pos[..., 1], h, w)
    target = cell_mask(goal[..., 0], goal[..., 1], h, w)
    cells = torch.where(agent, 3, torch.where(target, 2, torch.where(free, 0, 1)))
    return palette_image(cells, [(0, 0, 0), (128, 128, 128), (40, 190, 70), (230, 40, 40)], scale)
