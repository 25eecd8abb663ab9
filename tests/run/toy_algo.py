"""A tiny algorithm following fxrl.algorithms.core's contract, for testing the run loop.

A linear softmax policy on a pure env, trained by REINFORCE on one-step rewards (it does
not learn much; it exercises every part of a TrainState: params, optimizer state, env
state, key, counters). ``poison_iteration=k`` makes the loss NaN at iteration k (the
NaN test), computed with torch.where so ``update`` stays pure and vmappable.
"""

from __future__ import annotations

import dataclasses

import torch

from fxrl import distributions, envs, optim, random, tree
from fxrl.algorithms.core import Algorithm
from fxrl.rollout import rollout


@dataclasses.dataclass(frozen=True)
class Config:
    env: str = "CartPole-v1"
    """Pure env id."""
    total_steps: int = 256
    """Env steps per seed."""
    num_envs: int = 4
    """Envs per seed."""
    num_steps: int = 16
    """Steps per env per update."""
    lr: float = 0.01
    """Adam learning rate."""
    poison_iteration: int = 0
    """Make the loss and its gradient NaN at this iteration (0: never)."""


@tree.dataclass
class TrainState:
    params: dict
    opt_state: object
    env_state: object
    key: torch.Tensor
    iteration: torch.Tensor
    steps: torch.Tensor


def make(config: Config) -> Algorithm:
    env = envs.make(config.env)
    many = envs.batch(env, config.num_envs)
    obs_dim, num_actions = env.observation_spec.shape[-1], env.action_spec.n
    opt = optim.adam(config.lr)

    def policy(params, obs, key=None, mode="mode"):
        logits = obs @ params["w"] + params["b"]
        return distributions.draw(distributions.categorical(logits), key, mode)

    def init(key):
        k_env, k_w, key = random.split(key, 3)
        params = {
            "w": 0.01 * random.normal(k_w, (obs_dim, num_actions)),
            "b": torch.zeros(num_actions),
        }
        env_state, _ = many.reset(k_env)
        zero = torch.zeros((), dtype=torch.int64)
        return TrainState(params, opt.init(params), env_state, key, zero, zero)

    def loss_fn(params, traj, poison):
        logits = traj["obs"] @ params["w"] + params["b"]
        logp = distributions.categorical(logits).log_prob(traj["action"])
        loss = -(logp * (traj["reward"] - 0.5)).mean()
        # NaN times the loss: the loss and its gradient are NaN, so the params go NaN too,
        # as in a run that diverged
        return loss * torch.where(poison, float("nan"), 1.0)

    def update(state):
        key, k_roll = random.split(state.key)
        act = lambda p, o, k: policy(p, o, k, mode="random")
        env_state, traj = rollout(
            many, act, state.params, state.env_state, k_roll, config.num_steps
        )
        iteration = state.iteration + 1
        poison = iteration == config.poison_iteration
        loss, grads = torch.func.grad_and_value(loss_fn)(state.params, traj, poison)[::-1]
        updates, opt_state = opt.update(grads, state.opt_state, state.params)
        params = optim.apply_updates(state.params, updates)
        done = traj["terminated"] | traj["truncated"]
        n = done.sum()
        ret = torch.where(done, traj["info"]["episode_return"], 0.0).sum() / n
        length = torch.where(done, traj["info"]["episode_length"].float(), 0.0).sum() / n
        steps = state.steps + config.num_steps
        metrics = {
            "steps": steps,
            "episodes": n,
            "episode_return": torch.where(n > 0, ret, float("nan")),
            "episode_length": torch.where(n > 0, length, float("nan")),
            "loss": loss,
        }
        return TrainState(params, opt_state, env_state, key, iteration, steps), metrics

    return Algorithm(init, update, policy, config, env, config.num_steps)
