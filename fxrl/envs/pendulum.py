"""Pendulum-v1 in pure torch: gymnasium's ``envs/classic_control/pendulum.py``.

Swing a pendulum up and keep it upright with a torque in [-2, 2]. Semi-implicit Euler
with dt = 0.05; the cost ``angle^2 + 0.1 velocity^2 + 0.001 torque^2`` uses the angle
and velocity before the step, as gymnasium does. Never terminates; the 200-step time
limit is a wrapper added by ``fxrl.envs.make``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from fxrl import specs, tree
from fxrl.envs import draw
from fxrl.envs.core import Env, TimeStep, params_as_tensors
from fxrl.envs.noise import uniforms

__all__ = ["Pendulum", "PendulumParams", "PendulumState"]


@tree.dataclass
class PendulumParams:
    max_speed: Any = 8.0
    max_torque: Any = 2.0
    dt: Any = 0.05
    gravity: Any = 10.0
    mass: Any = 1.0
    length: Any = 1.0


@tree.dataclass
class PendulumState:
    angle: Tensor  # [] rad, 0 is upright; not wrapped (as gymnasium)
    velocity: Tensor  # [] rad/s
    t: Tensor  # [] int64
    key: Tensor  # [2] int64
    params: PendulumParams


def angle_normalize(x: Tensor) -> Tensor:
    """Wrap an angle into [-pi, pi)."""
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


def _cost(s: PendulumState, torque: Tensor) -> Tensor:
    return angle_normalize(s.angle).square() + 0.1 * s.velocity.square() + 0.001 * torque.square()


def _integrate(s: PendulumState, torque: Tensor) -> tuple[Tensor, Tensor]:
    p = s.params
    acc = (
        3 * p.gravity / (2 * p.length) * torch.sin(s.angle) + 3.0 / (p.mass * p.length**2) * torque
    )
    velocity = torch.clamp(s.velocity + acc * p.dt, -p.max_speed, p.max_speed)
    return s.angle + velocity * p.dt, velocity


class Pendulum(Env):
    """Pendulum-v1: observation [cos angle, sin angle, velocity], action Box(-2, 2, (1,)).

    Torques outside [-max_torque, max_torque] are clipped, as gymnasium does.
    """

    vectorized = True  # elementwise: batch() steps it without vmap

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        self.dtype = dtype
        p = PendulumParams()
        self.observation_spec = specs.Box(
            [-1.0, -1.0, -p.max_speed], [1.0, 1.0, p.max_speed], dtype=dtype
        )
        self.action_spec = specs.Box(-p.max_torque, p.max_torque, shape=(1,), dtype=dtype)
        self.default_params = p

    def reset(
        self, key: Tensor, params: PendulumParams | None = None
    ) -> tuple[PendulumState, TimeStep]:
        """Angle uniform in [-pi, pi), velocity uniform in [-1, 1), as gymnasium."""
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        angle, velocity = uniforms(key, 2, [-math.pi, -1.0], [math.pi, 1.0], self.dtype)
        t = torch.zeros_like(key[..., 0])
        state = PendulumState(angle, velocity, t, key, params)
        flag = torch.zeros_like(t, dtype=torch.bool)
        return state, TimeStep(self.observe(state), torch.zeros_like(angle), flag, flag, {})

    def step(self, state: PendulumState, action: Tensor) -> tuple[PendulumState, TimeStep]:
        p = state.params
        torque = torch.clamp(action[..., 0].to(self.dtype), -p.max_torque, p.max_torque)
        angle, velocity = _integrate(state, torque)
        moved = state.replace(angle=angle, velocity=velocity, t=state.t + 1)
        flag = torch.zeros_like(state.t, dtype=torch.bool)
        return moved, TimeStep(self.observe(moved), -_cost(state, torque), flag, flag, {})

    def observe(self, state: PendulumState) -> Tensor:
        return torch.stack([torch.cos(state.angle), torch.sin(state.angle), state.velocity], -1)

    def render(self, state: PendulumState) -> Tensor:
        """gymnasium's picture of the state: uint8 [*batch, 500, 500, 3], a red rod of
        length 1 from the centre (pointing up at angle 0, turning counterclockwise with
        the angle), round ends, a black axle. gymnasium's torque arrow is not drawn: it
        shows the last action, which the state does not hold."""
        size = 500
        scale = size / (2 * 2.2)
        offset = float(size // 2)
        red = (204, 77, 77)
        x, y = draw.grid(size, size, device=state.angle.device)
        turn = state.angle.float() + math.pi / 2
        half = 0.1 * scale
        rod = []
        for cx, cy in [(0.0, -half), (0.0, half), (scale, half), (scale, -half)]:
            rx, ry = draw.rotate(cx, cy, turn)
            rod.append((rx + offset, ry + offset))
        image = draw.canvas(size, size, device=state.angle.device)
        image = draw.paint(image, draw.polygon(x, y, rod), red)
        image = draw.paint(image, draw.circle(x, y, offset, offset, int(half)), red)
        end_x, end_y = draw.rotate(scale, 0.0, turn)
        end = draw.circle(x, y, torch.trunc(end_x + offset), torch.trunc(end_y + offset), int(half))
        image = draw.paint(image, end, red)
        return draw.paint(image, draw.circle(x, y, offset, offset, int(0.05 * scale)), draw.BLACK)
