"""MountainCar-v0 in pure torch: gymnasium's ``envs/classic_control/mountain_car.py``.

Drive an underpowered car up the right hill: accelerate left (0), coast (1) or right (2).
Reward -1 per step; terminated when ``position >= 0.5`` and ``velocity >= 0``. The
200-step time limit is a wrapper added by ``fxrl.envs.make``. Moore (1990).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import specs, tree
from fxrl.envs import draw
from fxrl.envs.core import Env, TimeStep, params_as_tensors
from fxrl.envs.noise import uniforms

__all__ = ["MountainCar", "MountainCarParams", "MountainCarState"]


@tree.dataclass
class MountainCarParams:
    min_position: Any = -1.2
    max_position: Any = 0.6
    max_speed: Any = 0.07
    goal_position: Any = 0.5
    goal_velocity: Any = 0.0
    force: Any = 0.001
    gravity: Any = 0.0025


@tree.dataclass
class MountainCarState:
    position: Tensor  # []
    velocity: Tensor  # []
    t: Tensor  # [] int64
    key: Tensor  # [2] int64
    params: MountainCarParams


def _move(s: MountainCarState, push: Tensor) -> tuple[Tensor, Tensor]:
    """Velocity then position, each clipped; the car stops dead at the left wall."""
    p = s.params
    velocity = s.velocity + (push + torch.cos(3 * s.position) * (-p.gravity))
    velocity = torch.clamp(velocity, -p.max_speed, p.max_speed)
    position = torch.clamp(s.position + velocity, p.min_position, p.max_position)
    stopped = (position == p.min_position) & (velocity < 0)
    return position, torch.where(stopped, torch.zeros_like(velocity), velocity)


def reset_position(key: Tensor, dtype: torch.dtype) -> Tensor:
    """Start position uniform in [-0.6, -0.4), velocity 0 (both MountainCar envs)."""
    return uniforms(key, 1, -0.6, -0.4, dtype)[0]


class MountainCar(Env):
    """MountainCar-v0: observation [position, velocity], action Discrete(3).

    Actions outside 0..2 are clipped into range (gymnasium asserts instead; use
    ``fxrl.envs.checked`` to get an error).
    """

    vectorized = True  # elementwise: batch() steps it without vmap

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        self.dtype = dtype
        p = MountainCarParams()
        self.observation_spec = specs.Box(
            [p.min_position, -p.max_speed], [p.max_position, p.max_speed], dtype=dtype
        )
        self.action_spec = specs.Discrete(3)
        self.default_params = p

    def reset(
        self, key: Tensor, params: MountainCarParams | None = None
    ) -> tuple[MountainCarState, TimeStep]:
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        position = reset_position(key, self.dtype)
        t = torch.zeros_like(key[..., 0])
        state = MountainCarState(position, torch.zeros_like(position), t, key, params)
        flag = torch.zeros_like(t, dtype=torch.bool)
        return state, TimeStep(self.observe(state), torch.zeros_like(position), flag, flag, {})

    def step(self, state: MountainCarState, action: Tensor) -> tuple[MountainCarState, TimeStep]:
        p = state.params
        push = (torch.clamp(action, 0, 2) - 1).to(self.dtype) * p.force
        position, velocity = _move(state, push)
        moved = state.replace(position=position, velocity=velocity, t=state.t + 1)
        terminated = (position >= p.goal_position) & (velocity >= p.goal_velocity)
        return moved, TimeStep(
            self.observe(moved),
            -torch.ones_like(position),
            terminated,
            torch.zeros_like(terminated),
            {},
        )

    def observe(self, state: MountainCarState) -> Tensor:
        return torch.stack([state.position, state.velocity], dim=-1)

    def render(self, state: MountainCarState) -> Tensor:
        """gymnasium's picture of the state: uint8 [*batch, 400, 600, 3] (see
        ``render_mountain_car``)."""
        return render_mountain_car(state.position, state.params)


def render_mountain_car(position: Tensor, params: Any) -> Tensor:
    """The hill ``0.45 sin(3 x) + 0.55`` as an antialiased black line, the black car tilted along it
    with its two grey wheels, the goal flag (a yellow triangle on a pole): uint8
    [*batch, 400, 600, 3] as gymnasium draws MountainCar-v0 and MountainCarContinuous-v0."""
    height, width = 400, 600
    low, high = params.min_position.float(), params.max_position.float()
    scale = width / (high - low)
    x, y = draw.grid(height, width, device=position.device)
    image = draw.canvas(height, width, device=position.device)

    def hill(pos: Tensor) -> Tensor:
        return torch.sin(3 * pos) * 0.45 + 0.55

    at = x / scale[..., None, None] + low[..., None, None]  # each column's position
    slope = 3 * 0.45 * torch.cos(3 * at)  # d(hill * scale) / d(column)
    image = draw.blend(image, draw.curve(y, hill(at) * scale[..., None, None], slope), draw.BLACK)
    pos = position.float()
    tilt = torch.cos(3 * pos)
    base_x, base_y = (pos - low) * scale, 10 + hill(pos) * scale
    car = []
    for cx, cy in [(-20.0, 0.0), (-20.0, 20.0), (20.0, 20.0), (20.0, 0.0)]:
        rx, ry = draw.rotate(cx, cy, tilt)
        car.append((rx + base_x, ry + base_y))
    image = draw.paint(image, draw.polygon(x, y, car), draw.BLACK)
    for cx in (10.0, -10.0):
        rx, ry = draw.rotate(cx, 0.0, tilt)
        wheel = draw.circle(x, y, torch.trunc(rx + base_x), torch.trunc(ry + base_y), 8)
        image = draw.paint(image, wheel, (128, 128, 128))
    goal = params.goal_position.float()
    flag_x = torch.trunc((goal - low) * scale)
    flag_y1 = torch.trunc(hill(goal) * scale)
    flag_y2 = flag_y1 + 50
    pole = draw.segment(x, y, flag_x, flag_y1, flag_x, flag_y2, 1.0)
    image = draw.paint(image, pole, draw.BLACK)
    flag = [(flag_x, flag_y2), (flag_x, flag_y2 - 10), (flag_x + 25, flag_y2 - 5)]
    return draw.paint(image, draw.polygon(x, y, flag), (204, 204, 0))
