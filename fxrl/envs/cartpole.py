"""CartPole-v1 in pure torch: gymnasium's ``envs/classic_control/cartpole.py``.

A pole on a cart; push left (0) or right (1). Euler integration with tau = 0.02 s,
reward 1 per step (including the step that ends the episode), terminated when
``|x| > 2.4`` or ``|theta| > 12 degrees``. The time limit (500 steps) is a wrapper,
added by ``fxrl.envs.make``. Equations: Florian (2005), "Correct equations for the
dynamics of the cart-pole system".
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

__all__ = ["CartPole", "CartPoleParams", "CartPoleState"]


@tree.dataclass
class CartPoleParams:
    gravity: Any = 9.8
    masscart: Any = 1.0
    masspole: Any = 0.1
    length: Any = 0.5  # half the pole's length, as in gymnasium
    force_mag: Any = 10.0
    tau: Any = 0.02  # seconds per step
    theta_threshold: Any = 12 * 2 * math.pi / 360
    x_threshold: Any = 2.4


@tree.dataclass
class CartPoleState:
    x: Tensor  # [] cart position
    x_dot: Tensor  # [] cart velocity
    theta: Tensor  # [] pole angle (rad), 0 is upright
    theta_dot: Tensor  # [] pole angular velocity
    t: Tensor  # [] int64 steps since reset
    key: Tensor  # [2] int64
    params: CartPoleParams


def _integrate(s: CartPoleState, force: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One explicit Euler step (gymnasium's default ``kinematics_integrator="euler"``)."""
    p = s.params
    total_mass = p.masspole + p.masscart
    polemass_length = p.masspole * p.length
    cos, sin = torch.cos(s.theta), torch.sin(s.theta)
    temp = (force + polemass_length * s.theta_dot.square() * sin) / total_mass
    theta_acc = (p.gravity * sin - cos * temp) / (
        p.length * (4.0 / 3.0 - p.masspole * cos.square() / total_mass)
    )
    x_acc = temp - polemass_length * theta_acc * cos / total_mass
    return (
        s.x + p.tau * s.x_dot,
        s.x_dot + p.tau * x_acc,
        s.theta + p.tau * s.theta_dot,
        s.theta_dot + p.tau * theta_acc,
    )


def _terminated(s: CartPoleState) -> Tensor:
    p = s.params
    return (
        (s.x < -p.x_threshold)
        | (s.x > p.x_threshold)
        | (s.theta < -p.theta_threshold)
        | (s.theta > p.theta_threshold)
    )


class CartPole(Env):
    """CartPole-v1: observation [x, x_dot, theta, theta_dot], action Discrete(2).

    Args:
      dtype: float dtype of the state, observation and reward (float64 for exact
        parity with gymnasium, which integrates in float64).
    """

    vectorized = True  # elementwise: batch() steps it without vmap

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        self.dtype = dtype
        p = CartPoleParams()
        high = [2 * p.x_threshold, math.inf, 2 * p.theta_threshold, math.inf]
        self.observation_spec = specs.Box([-h for h in high], high, dtype=dtype)
        self.action_spec = specs.Discrete(2)
        self.default_params = p

    def reset(
        self, key: Tensor, params: CartPoleParams | None = None
    ) -> tuple[CartPoleState, TimeStep]:
        """Each of x, x_dot, theta, theta_dot uniform in [-0.05, 0.05), as gymnasium."""
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        x, x_dot, theta, theta_dot = uniforms(key, 4, -0.05, 0.05, self.dtype)
        t = torch.zeros_like(key[..., 0])
        state = CartPoleState(x, x_dot, theta, theta_dot, t, key, params)
        flag = torch.zeros_like(t, dtype=torch.bool)
        return state, TimeStep(self.observe(state), torch.zeros_like(x), flag, flag, {})

    def step(self, state: CartPoleState, action: Tensor) -> tuple[CartPoleState, TimeStep]:
        """Push right for action 1, left otherwise (gymnasium's ``force_mag if action == 1``)."""
        p = state.params
        force = torch.where(action == 1, p.force_mag, -p.force_mag)
        x, x_dot, theta, theta_dot = _integrate(state, force)
        moved = state.replace(x=x, x_dot=x_dot, theta=theta, theta_dot=theta_dot, t=state.t + 1)
        terminated = _terminated(moved)
        reward = torch.ones_like(x)
        return moved, TimeStep(
            self.observe(moved), reward, terminated, torch.zeros_like(terminated), {}
        )

    def observe(self, state: CartPoleState) -> Tensor:
        return torch.stack([state.x, state.x_dot, state.theta, state.theta_dot], dim=-1)

    def render(self, state: CartPoleState) -> Tensor:
        """gymnasium's picture of the state: uint8 [*batch, 400, 600, 3], a black cart on a
        track 100 px up, a brown pole turned by ``theta`` (positive leans right), its blue
        axle. Pure torch (``fxrl.envs.draw``): vmaps, compiles and exports."""
        height, width = 400, 600
        p = state.params
        x, y = draw.grid(height, width, device=state.x.device)
        scale = width / (2 * p.x_threshold.float())
        cart_x = state.x.float() * scale + width / 2
        cart_y, axle = 100.0, 100.0 + 30.0 / 4
        image = draw.canvas(height, width, device=state.x.device)
        cart = [(cart_x - 25, cart_y - 15), (cart_x - 25, cart_y + 15)]
        cart += [(cart_x + 25, cart_y + 15), (cart_x + 25, cart_y - 15)]
        image = draw.paint(image, draw.polygon(x, y, cart), draw.BLACK)
        pole_len = scale * 2 * p.length.float()
        corners = [(-5.0, -5.0), (-5.0, pole_len - 5), (5.0, pole_len - 5), (5.0, -5.0)]
        pole = []
        for cx, cy in corners:
            rx, ry = draw.rotate(cx, cy, -state.theta.float())
            pole.append((rx + cart_x, ry + axle))
        image = draw.paint(image, draw.polygon(x, y, pole), (202, 152, 101))
        hub = draw.circle(x, y, torch.trunc(cart_x), int(axle), 5.0)
        image = draw.paint(image, hub, (129, 132, 203))
        return draw.paint(image, y == cart_y, draw.BLACK)
