"""Acrobot-v1 in pure torch: gymnasium's ``envs/classic_control/acrobot.py``.

Two links, torque (-1, 0, +1) on the joint between them; swing the tip above the bar
(``-cos(theta1) - cos(theta1 + theta2) > 1``: terminated, reward 0; else reward -1).
One step integrates the "book" dynamics (Sutton & Barto 1998) over dt = 0.2 s with a
single classic Runge-Kutta 4 step, as gymnasium's ``rk4`` does, then wraps the angles
into [-pi, pi] and clips the velocities. The 500-step time limit is a wrapper added by
``fxrl.envs.make``.
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

__all__ = ["Acrobot", "AcrobotParams", "AcrobotState"]


@tree.dataclass
class AcrobotParams:
    dt: Any = 0.2
    link_length_1: Any = 1.0
    link_mass_1: Any = 1.0
    link_mass_2: Any = 1.0
    link_com_pos_1: Any = 0.5
    link_com_pos_2: Any = 0.5
    link_moi: Any = 1.0
    max_vel_1: Any = 4 * math.pi
    max_vel_2: Any = 9 * math.pi
    gravity: Any = 9.8


@tree.dataclass
class AcrobotState:
    theta1: Tensor  # [] rad, 0 is hanging down
    theta2: Tensor  # [] rad, relative to link 1
    dtheta1: Tensor  # []
    dtheta2: Tensor  # []
    t: Tensor  # [] int64
    key: Tensor  # [2] int64
    params: AcrobotParams


Vec = tuple[Tensor, Tensor, Tensor, Tensor]


def _derivatives(p: AcrobotParams, s: Vec, torque: Tensor) -> Vec:
    """d/dt of (theta1, theta2, dtheta1, dtheta2) under the "book" equations."""
    theta1, theta2, dtheta1, dtheta2 = s
    m1, m2, l1 = p.link_mass_1, p.link_mass_2, p.link_length_1
    lc1, lc2, i1, i2, g = p.link_com_pos_1, p.link_com_pos_2, p.link_moi, p.link_moi, p.gravity
    cos2, sin2 = torch.cos(theta2), torch.sin(theta2)
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos2) + i1 + i2
    d2 = m2 * (lc2**2 + l1 * lc2 * cos2) + i2
    phi2 = m2 * lc2 * g * torch.cos(theta1 + theta2 - math.pi / 2.0)
    phi1 = (
        -m2 * l1 * lc2 * dtheta2**2 * sin2
        - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin2
        + (m1 * lc1 + m2 * l1) * g * torch.cos(theta1 - math.pi / 2)
        + phi2
    )
    ddtheta2 = (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * sin2 - phi2) / (
        m2 * lc2**2 + i2 - d2**2 / d1
    )
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return dtheta1, dtheta2, ddtheta1, ddtheta2


def _rk4(p: AcrobotParams, s: Vec, torque: Tensor) -> Vec:
    """One classic RK4 step of length dt (the torque is held constant)."""
    dt = p.dt
    half = dt / 2.0

    def shifted(k: Vec, h: Tensor) -> Vec:
        return tuple(y + h * dy for y, dy in zip(s, k, strict=True))  # type: ignore[return-value]

    k1 = _derivatives(p, s, torque)
    k2 = _derivatives(p, shifted(k1, half), torque)
    k3 = _derivatives(p, shifted(k2, half), torque)
    k4 = _derivatives(p, shifted(k3, dt), torque)
    return tuple(  # type: ignore[return-value]
        y + dt / 6.0 * (a + 2 * b + 2 * c + d)
        for y, a, b, c, d in zip(s, k1, k2, k3, k4, strict=True)
    )


def wrap(x: Tensor, low: float, high: float) -> Tensor:
    """Shift ``x`` by whole periods into [low, high] (gymnasium subtracts one period at a
    time; for the one shift a step ever needs, the arithmetic is the same)."""
    period = high - low
    above = torch.clamp(torch.ceil((x - high) / period), min=0)
    below = torch.clamp(torch.ceil((low - x) / period), min=0)
    return x - above * period + below * period


class Acrobot(Env):
    """Acrobot-v1: observation [cos t1, sin t1, cos t2, sin t2, dt1, dt2], Discrete(3).

    Actions outside 0..2 are clipped into range (gymnasium would raise).
    """

    vectorized = True  # elementwise: batch() steps it without vmap

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        self.dtype = dtype
        p = AcrobotParams()
        high = [1.0, 1.0, 1.0, 1.0, p.max_vel_1, p.max_vel_2]
        self.observation_spec = specs.Box([-h for h in high], high, dtype=dtype)
        self.action_spec = specs.Discrete(3)
        self.default_params = p

    def reset(
        self, key: Tensor, params: AcrobotParams | None = None
    ) -> tuple[AcrobotState, TimeStep]:
        """All four uniform in [-0.1, 0.1), rounded to float32 as gymnasium stores them."""
        params = params_as_tensors(
            self.default_params if params is None else params, torch.float64, key.device
        )
        u = [x.to(self.dtype) for x in uniforms(key, 4, -0.1, 0.1, torch.float32)]
        t = torch.zeros_like(key[..., 0])
        state = AcrobotState(*u, t, key, params)
        flag = torch.zeros_like(t, dtype=torch.bool)
        return state, TimeStep(self.observe(state), torch.zeros_like(state.theta1), flag, flag, {})

    def step(self, state: AcrobotState, action: Tensor) -> tuple[AcrobotState, TimeStep]:
        """Integrates in float64 with float64 params whatever ``dtype`` is, as gymnasium
        does: at high velocities one step amplifies the float32 rounding of gravity or dt
        (~1e-8) to ~1e-4. The state is stored in ``dtype``."""
        p = state.params
        torque = (torch.clamp(action, 0, 2) - 1).double()
        s = (state.theta1, state.theta2, state.dtheta1, state.dtheta2)
        theta1, theta2, dtheta1, dtheta2 = _rk4(p, tuple(x.double() for x in s), torque)
        theta1, theta2 = wrap(theta1, -math.pi, math.pi), wrap(theta2, -math.pi, math.pi)
        terminated = -torch.cos(theta1) - torch.cos(theta2 + theta1) > 1.0
        moved = state.replace(
            theta1=theta1.to(self.dtype),
            theta2=theta2.to(self.dtype),
            dtheta1=torch.clamp(dtheta1, -p.max_vel_1, p.max_vel_1).to(self.dtype),
            dtheta2=torch.clamp(dtheta2, -p.max_vel_2, p.max_vel_2).to(self.dtype),
            t=state.t + 1,
        )
        reward = torch.where(terminated, 0.0, -1.0).to(self.dtype)
        return moved, TimeStep(
            self.observe(moved), reward, terminated, torch.zeros_like(terminated), {}
        )

    def observe(self, state: AcrobotState) -> Tensor:
        s = state
        return torch.stack(
            [
                torch.cos(s.theta1),
                torch.sin(s.theta1),
                torch.cos(s.theta2),
                torch.sin(s.theta2),
                s.dtheta1,
                s.dtheta2,
            ],
            dim=-1,
        )

    def render(self, state: AcrobotState) -> Tensor:
        """gymnasium's picture of the state: uint8 [*batch, 500, 500, 3], the two cyan
        links hanging from the centre (down at angle 0), yellow joints, and the black bar
        the tip must swing above (one link length up). Link 2 is drawn 1 long, as
        gymnasium's ``LINK_LENGTH_2`` (its dynamics do not use it)."""
        size = 500
        length_1 = state.params.link_length_1.float()
        scale = size / (2 * (length_1 + 1.0 + 0.2))
        offset = size / 2
        x, y = draw.grid(size, size, device=state.theta1.device)
        image = draw.canvas(size, size, device=state.theta1.device)
        bar_y = torch.trunc(1.0 * scale + offset)
        bar = draw.segment(x, y, -2.2 * scale + offset, bar_y, 2.2 * scale + offset, bar_y)
        image = draw.paint(image, bar, draw.BLACK)
        theta1, theta2 = state.theta1.float(), state.theta2.float()
        elbow = (length_1 * torch.sin(theta1) * scale, -length_1 * torch.cos(theta1) * scale)
        links = [
            ((0.0, 0.0), theta1 - math.pi / 2, length_1 * scale),
            (elbow, theta1 + theta2 - math.pi / 2, 1.0 * scale),
        ]
        for (jx, jy), angle, length in links:
            jx, jy = jx + offset, jy + offset
            half = 0.1 * scale
            corners = [(0.0, -half), (0.0, half), (length, half), (length, -half)]
            link = []
            for cx, cy in corners:
                rx, ry = draw.rotate(cx, cy, angle)
                link.append((rx + jx, ry + jy))
            image = draw.paint(image, draw.polygon(x, y, link), (0, 204, 204))
            joint = draw.circle(x, y, _trunc(jx), _trunc(jy), torch.trunc(half))
            image = draw.paint(image, joint, (204, 204, 0))
        return image


def _trunc(v: Any) -> Any:
    return torch.trunc(v) if isinstance(v, Tensor) else float(math.trunc(v))
