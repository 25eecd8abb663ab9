"""An algorithm whose compiled update is cheap to compile and to run, for the long-run test.

Each update draws a batch from the TrainState's key, takes ``num_steps`` Adam steps of
least squares on it inside a rolled loop (``fxrl.scan``) and reports metrics as the real
algorithms do: the pieces of a compiled update (a key split, a draw, a loop, gradients, an
optimizer state) without an env's physics, so ``fxrl.compile`` builds it in seconds and
thousands of updates run in seconds.
"""

from __future__ import annotations

import dataclasses

import torch

from fxrl import envs, optim, random, tree
from fxrl.algorithms.core import Algorithm
from fxrl.scan import scan


@dataclasses.dataclass(frozen=True)
class Config:
    env: str = "CartPole-v1"
    """Pure env id (only its specs are used, by eval and export)."""
    total_steps: int = 4096
    """Steps per seed: ``num_steps`` per update."""
    num_steps: int = 4
    """Adam steps per update."""
    lr: float = 0.01
    """Adam learning rate."""


@tree.dataclass
class TrainState:
    params: dict
    opt_state: object
    key: torch.Tensor
    steps: torch.Tensor


def make(config: Config) -> Algorithm:
    env = envs.make(config.env)
    opt = optim.adam(config.lr)
    target = torch.linspace(-1.0, 1.0, 8 * 2).reshape(8, 2)

    def policy(params, obs, key=None, mode="mode"):
        return (obs @ params["w"][:4]).argmax(-1)

    def init(key):
        params = {"w": 0.1 * random.normal(key, (8, 2)), "b": torch.zeros(2)}
        zero = torch.zeros((), dtype=torch.int64)
        return TrainState(params, opt.init(params), key, zero)

    def loss_fn(params, x):
        return (x @ params["w"] + params["b"] - x @ target).square().mean()

    def update(state):
        key, k_batch = random.split(state.key)
        x = random.normal(k_batch, (16, 8))

        def step(carry, _):
            params, opt_state = carry
            loss, grads = torch.func.grad_and_value(loss_fn)(params, x)[::-1]
            updates, opt_state = opt.update(grads, opt_state, params)
            return (optim.apply_updates(params, updates), opt_state), {"loss": loss}

        (params, opt_state), out = scan(step, (state.params, state.opt_state), config.num_steps)
        steps = state.steps + config.num_steps
        loss = out["loss"][-1]
        metrics = {
            "steps": steps,
            "episodes": torch.ones((), dtype=torch.int64),
            "episode_return": -loss,
            "episode_length": torch.ones(()),
            "loss": loss,
        }
        return TrainState(params, opt_state, key, steps), metrics

    return Algorithm(init, update, policy, config, env, config.num_steps)
