"""MountainCarContinuous-v0 in pure torch: gymnasium's
``envs/classic_control/continuous_mountain_car.py``.

Drive the car up the right hill with a force in [-1, 1]. Reward ``100`` on reaching
``position >= 0.45`` with ``velocity >= 0`` (terminated), minus ``0.1 action^2`` every
step, where gymnasium squares the action *before* clipping it (so does fxrl). The
999-step time limit is a wrapper added by ``fxrl.envs.make``.

Gymnasium keeps its state in a float32 array after the first step, and numpy's promotion
rules then make its arithmetic depend on the action: float32 throughout for a float32
force or a clipped one (a Python float), float64 for a float64 force inside [-1, 1], with
``3 * position`` in float32 either way. fxrl stores the state rounded to float32 as
gymnasium does; with ``dtype=torch.float64`` it reproduces gymnasium's float64 path
exactly (tested to 1e-10), and its float32 path to float32 tolerance.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import specs, tree
from fxrl.envs.core import Env, TimeStep, params_as_tensors
from fxrl.envs.mountain_car import render_mountain_car, reset_position

__all__ = ["ContinuousMountainCar", "ContinuousMountainCarParams", "ContinuousMountainCarState"]


@tree.dataclass
class ContinuousMountainCarParams:
    min_action: Any = -1.0
    max_action: Any = 1.0
    min_position: Any = -1.2
    max_position: Any = 0.6
    max_speed: Any = 0.07
    goal_position: Any = 0.45
    goal_velocity: Any = 0.0
    power: Any = 0.0015
    gravity: Any = 0.0025


@tree.dataclass
class ContinuousMountainCarState:
    position: Tensor  # []
    velocity: Tensor  # []
    t: Tensor  # [] int64
    key: Tensor  # [2] int64
    params: ContinuousMountainCarParams


def _move(s: ContinuousMountainCarState, force: Tensor) -> tuple[Tensor, Tensor]:
    p = s.params
    # gymnasium's state is a float32 array after its first step, and then 3 * position is a
    # float32 product (the rest mixes in float64): round it where the state is float32
    three_x = 3 * s.position
    three_x = torch.where(
        s.position == s.position.float(), three_x.float().to(three_x.dtype), three_x
    )
    velocity = s.velocity + (force * p.power - p.gravity * torch.cos(three_x))
    velocity = torch.clamp(velocity, -p.max_speed, p.max_speed)
    position = torch.clamp(s.position + velocity, p.min_position, p.max_position)
    stopped = (position == p.min_position) & (velocity < 0)
    return position, torch.where(stopped, torch.zeros_like(velocity), velocity)


class ContinuousMountainCar(Env):
    """MountainCarContinuous-v0: observation [position, velocity], action Box(-1, 1, (1,))."""

    vectorized = True  # elementwise: batch() steps it without vmap

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        self.dtype = dtype
        p = ContinuousMountainCarParams()
        self.observation_spec = specs.Box(
            [p.min_position, -p.max_speed], [p.max_position, p.max_speed], dtype=dtype
        )
        self.action_spec = specs.Box(p.min_action, p.max_action, shape=(1,), dtype=dtype)
        self.default_params = p

    def reset(
        self, key: Tensor, params: ContinuousMountainCarParams | None = None
    ) -> tuple[ContinuousMountainCarState, TimeStep]:
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        position = reset_position(key, self.dtype)
        t = torch.zeros_like(key[..., 0])
        state = ContinuousMountainCarState(position, torch.zeros_like(position), t, key, params)
        flag = torch.zeros_like(t, dtype=torch.bool)
        return state, TimeStep(self.observe(state), torch.zeros_like(position), flag, flag, {})

    def step(
        self, state: ContinuousMountainCarState, action: Tensor
    ) -> tuple[ContinuousMountainCarState, TimeStep]:
        p = state.params
        raw = action[..., 0].to(self.dtype)
        position, velocity = _move(state, torch.clamp(raw, p.min_action, p.max_action))
        terminated = (position >= p.goal_position) & (velocity >= p.goal_velocity)
        reward = 100.0 * terminated.to(self.dtype) - raw.square() * 0.1
        # gymnasium stores the state as float32 after the termination test
        position = position.to(torch.float32).to(self.dtype)
        velocity = velocity.to(torch.float32).to(self.dtype)
        moved = state.replace(position=position, velocity=velocity, t=state.t + 1)
        return moved, TimeStep(
            self.observe(moved), reward, terminated, torch.zeros_like(terminated), {}
        )

    def observe(self, state: ContinuousMountainCarState) -> Tensor:
        return torch.stack([state.position, state.velocity], dim=-1)

    def render(self, state: ContinuousMountainCarState) -> Tensor:
        """gymnasium's picture of the state: uint8 [*batch, 400, 600, 3], the hill, the
        car and the goal flag (``fxrl.envs.mountain_car.render_mountain_car``)."""
        return render_mountain_car(state.position, state.params)
