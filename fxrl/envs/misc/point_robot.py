"""PointRobot-misc in pure torch: gymnax's ``misc/point_robot.py``, the 2-d semi-circle
point robot of Dorfman et al. (2021), "Offline Meta Reinforcement Learning".

A point in the plane moves by its action, clipped to ``[-max_force, max_force]`` per
axis. The goal lies on the upper half of a circle of ``circle_radius``, at an angle drawn
uniformly in [0, pi) per episode (gymnax) unless ``resample_goal=False``, when it is
``params.goal_angle`` (what ``sample_params`` returns: one goal per task). The reward
uses the position *before* the move, as gymnax does: 1 within ``goal_radius`` of the goal
(or ``-distance`` with ``dense_reward``); reaching the goal teleports the agent to a fresh
start (uniform radius and angle in the half disc, or the origin with ``center_init``).
Episodes never terminate (100 steps by ``make``'s time limit). Observation: [x, y, last
reward, last action (2), time (``2 t / 100 - 1`` with ``normalize_time``, else ``t``)].
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from fxrl import random, specs, tree
from fxrl.envs.core import Env, TimeStep, params_as_tensors
from fxrl.envs.misc._common import time_feature

__all__ = ["PointRobot", "PointRobotParams", "PointRobotState"]


@tree.dataclass
class PointRobotParams:
    max_force: Any = 0.1  # action clip per axis
    circle_radius: Any = 1.0  # radius of the goals' semi-circle
    dense_reward: Any = False  # -distance every step instead of 1 within goal_radius
    goal_radius: Any = 0.2
    center_init: Any = False  # start at the origin instead of a uniform draw
    normalize_time: Any = True
    goal_angle: Any = math.pi / 2  # the task when resample_goal is False
    resample_goal: Any = True  # draw the goal angle at every reset (gymnax)


@tree.dataclass
class PointRobotState:
    pos: Tensor  # [2]
    goal: Tensor  # [2]
    last_action: Tensor  # [2] (as given, before clipping, as gymnax keeps it)
    last_reward: Tensor  # []
    goals_reached: Tensor  # [] int64
    t: Tensor  # [] int64
    key: Tensor  # [2] int64, advanced every step
    params: PointRobotParams


def _on_circle(radius: Tensor, angle: Tensor, dtype: torch.dtype) -> Tensor:
    """[..., 2] ``radius * (cos, sin)(angle)``, in float64 and rounded once, so eager,
    compiled and exported code agree bit for bit."""
    a, r = angle.double(), radius.double()
    return torch.stack([r * torch.cos(a), r * torch.sin(a)], dim=-1).to(dtype)


class PointRobot(Env):
    """PointRobot: observation float [6], action Box([-0.1, 0.1]^2)."""

    vectorized = True  # step and observe are elementwise: batch() skips vmap

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        self.dtype = dtype
        self.observation_spec = specs.Box(-math.inf, math.inf, shape=(6,), dtype=dtype)
        self.action_spec = specs.Box(-0.1, 0.1, shape=(2,), dtype=dtype)
        self.default_params = PointRobotParams()

    def sample_params(
        self, key: Tensor, params: PointRobotParams | None = None
    ) -> PointRobotParams:
        """One task: a goal angle uniform in [0, pi), kept fixed."""
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        angle = random.uniform(key, (), 0.0, math.pi, dtype=torch.float64).to(self.dtype)
        return params.replace(
            goal_angle=angle, resample_goal=torch.tensor(False, device=key.device)
        )

    def _start(self, key: Tensor, p: PointRobotParams) -> Tensor:
        k_radius, k_angle = random.split(key).unbind(-2)
        radius = random.uniform(k_radius, (), dtype=torch.float64) * p.circle_radius.double()
        angle = random.uniform(k_angle, (), 0.0, math.pi, dtype=torch.float64)
        pos = _on_circle(radius, angle, self.dtype)
        return torch.where(p.center_init[..., None], torch.zeros_like(pos), pos)

    def reset(
        self, key: Tensor, params: PointRobotParams | None = None
    ) -> tuple[PointRobotState, TimeStep]:
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        key, k_goal, k_pos = random.split(key, 3).unbind(-2)
        drawn = random.uniform(k_goal, (), 0.0, math.pi, dtype=torch.float64)
        angle = torch.where(params.resample_goal, drawn, params.goal_angle.double())
        goal = _on_circle(params.circle_radius, angle, self.dtype)
        pos = self._start(k_pos, params)
        zeros = torch.zeros_like(pos)
        reward = torch.zeros(pos.shape[:-1], dtype=self.dtype, device=pos.device)
        count, t = torch.zeros_like(key[..., 0]), torch.zeros_like(key[..., 0])
        state = PointRobotState(pos, goal, zeros, reward, count, t, key, params)
        flag = torch.zeros_like(t, dtype=torch.bool)
        return state, TimeStep(self.observe(state), reward.clone(), flag, flag.clone(), {})

    def step(self, state: PointRobotState, action: Tensor) -> tuple[PointRobotState, TimeStep]:
        """Score the pre-move position, move by the clipped action, teleport on success."""
        p = state.params
        key, k_pos = random.split(state.key).unbind(-2)
        action = action.to(self.dtype)
        force = p.max_force[..., None]
        pos = state.pos + torch.minimum(torch.maximum(action, -force), force)
        distance = torch.linalg.vector_norm(state.goal - state.pos, dim=-1)
        reached = distance <= p.goal_radius
        reward = torch.where(p.dense_reward, -distance, reached.to(self.dtype))
        pos = torch.where(reached[..., None], self._start(k_pos, p), pos)
        moved = state.replace(
            pos=pos,
            last_action=action,
            last_reward=reward,
            goals_reached=state.goals_reached + reached.long(),
            t=state.t + 1,
            key=key,
        )
        flag = torch.zeros_like(moved.t, dtype=torch.bool)
        return moved, TimeStep(self.observe(moved), reward.clone(), flag, flag.clone(), {})

    def observe(self, state: PointRobotState) -> Tensor:
        time = time_feature(state.t, state.params.normalize_time, self.dtype)
        return torch.cat(
            [state.pos, state.last_reward[..., None], state.last_action, time[..., None]], dim=-1
        )

    def render(self, state: PointRobotState) -> Tensor:
        """uint8 [96, 160, 3] of x in [-1.25, 1.25], y in [-0.25, 1.25] (64 px per unit):
        white, the goals' semi-circle black, the goal's disc light blue, the agent red."""
        p = state.params
        x = (torch.arange(160, dtype=torch.float64, device=state.pos.device) + 0.5) / 64 - 1.25
        y = 1.25 - (torch.arange(96, dtype=torch.float64, device=state.pos.device) + 0.5) / 64
        px, py = x[None, :], y[:, None]  # [1, W], [H, 1]
        radius = torch.sqrt(px.square() + py.square())
        arc = ((radius - p.circle_radius.double()).abs() < 0.015) & (py >= 0)
        gx, gy = state.goal.double().unbind(-1)
        ax, ay = state.pos.double().unbind(-1)
        goal = (px - gx).square() + (py - gy).square() <= p.goal_radius.double().square()
        agent = (px - ax).square() + (py - ay).square() <= 0.05**2
        cells = torch.where(agent, 3, torch.where(arc, 1, torch.where(goal, 2, 0)))
        colors = torch.tensor(
            [(255, 255, 255), (0, 0, 0), (150, 200, 240), (220, 30, 30)],
            dtype=torch.uint8,
            device=cells.device,
        )
        return colors[cells]
