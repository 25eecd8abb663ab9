"""PPO on CartPole-v1 in one file: PureJaxRL's ppo.py, top to bottom, on fxrl's pieces.

    .venv/bin/python examples/ppo_single_file.py --num-seeds 8

A batch of pure envs (fxrl.envs), an actor and a critic MLP (fxrl.nn), a categorical
policy (fxrl.distributions), GAE and the clipped loss (fxrl.objectives), Adam with a
global-norm clip and an annealed learning rate (fxrl.optim). The whole update is one
pure function of one pytree: torch.func.vmap trains the seeds together and fxrl.compile
turns the vmapped update into one program whose loops (scan) stay rolled. It computes
what fxrl.algorithms.ppo computes with the same settings and key, bit for bit in eager
mode (tests/test_ppo_single_file.py). Copy it to try an idea on PPO.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, NamedTuple

import torch
import tyro
from torch import Tensor

import fxrl
from fxrl import distributions, envs, nn, objectives, optim, random, specs, tree
from fxrl.nn import initializers as inits
from fxrl.scan import scan


@dataclasses.dataclass(frozen=True)
class Config:
    env: str = "CartPole-v1"  # a pure env id with flat observations and Discrete actions
    num_envs: int = 4  # envs stepped together per seed
    num_steps: int = 128  # steps per env per update
    total_steps: int = 500_000  # env steps per seed
    update_epochs: int = 4  # passes over each rollout
    num_minibatches: int = 4  # minibatches per pass
    lr: float = 2.5e-4  # Adam's learning rate, annealed linearly to 0
    gamma: float = 0.99  # discount
    gae_lambda: float = 0.95  # GAE's lambda
    clip_eps: float = 0.2  # ratio clip (and value clip)
    ent_coef: float = 0.01  # entropy bonus weight
    vf_coef: float = 0.5  # value loss weight
    max_grad_norm: float = 0.5  # global gradient norm clip
    num_seeds: int = 1  # seeds trained together (vmapped)
    seed: int = 0  # the key every seed's key is split from
    compile: bool = True  # one fxrl.compile program per update (False: eager)


class TrainState(NamedTuple):
    params: dict  # {"actor": ..., "critic": ...}
    opt_state: Any
    env_state: Any  # the batch env's state [num_envs]
    obs: Tensor  # [num_envs, obs_dim] what the policy acts on next
    key: Tensor  # [2]


def make_train(config: Config) -> tuple[Any, Any, int]:
    """``(init, update, num_updates)``: ``init(key) -> state``, ``update(state) -> (state,
    metrics)``, both pure."""
    env = envs.make(config.env)  # time limit, auto-reset, episode statistics
    benv = envs.batch(env, config.num_envs)  # vmap over envs
    if not isinstance(env.action_spec, specs.Discrete) or len(env.observation_spec.shape) != 1:
        raise ValueError(f"{config.env}: this PPO needs [obs_dim] observations, Discrete actions.")
    obs_dim, num_actions = env.observation_spec.shape[0], env.action_spec.n
    batch_size = config.num_envs * config.num_steps
    minibatch_size = batch_size // config.num_minibatches
    num_updates = max(1, config.total_steps // batch_size)
    grad_steps = config.update_epochs * config.num_minibatches

    # actor and critic: two tanh MLPs, orthogonal init (sqrt 2; heads 0.01 and 1)
    def mlp(out: int, head_scale: float) -> nn.Model:
        return nn.mlp(obs_dim, out, (64, 64), "tanh", w_init=inits.orthogonal(math.sqrt(2)),
                      b_init=inits.zeros, output_w_init=inits.orthogonal(head_scale))  # fmt: skip

    actor, critic = mlp(num_actions, 0.01), mlp(1, 1.0)

    def forward(params: dict, obs: Tensor) -> tuple[Any, Tensor]:
        logits = actor.apply(params["actor"], obs)
        return distributions.categorical(logits), critic.apply(params["critic"], obs).squeeze(-1)

    def lr_schedule(count: Tensor) -> Tensor:  # linear decay to 0 over num_updates
        done = torch.div(count, grad_steps, rounding_mode="floor").double()
        return config.lr * (1.0 - done / num_updates).clamp(min=0.0)

    opt = optim.chain(optim.clip_by_global_norm(config.max_grad_norm),
                      optim.adam(lr_schedule, eps=1e-5))  # fmt: skip

    def init(key: Tensor) -> TrainState:
        k_net, k_env, k_state = random.split(key, 3).unbind(-2)
        _, k_actor, k_critic = random.split(k_net, 3).unbind(-2)  # [0]: ppo.py's shared torso
        params = {"actor": actor.init(k_actor), "critic": critic.init(k_critic)}
        env_state, ts = benv.reset(k_env)
        return TrainState(params, opt.init(params), env_state, ts.obs, k_state)

    def update(state: TrainState) -> tuple[TrainState, dict]:
        params = state.params

        # 1. collect: num_steps steps of the num_envs envs
        def env_step(carry: tuple, _: Any) -> tuple[tuple, dict]:
            env_state, obs, key = carry
            key, k_act = random.split(key).unbind(-2)
            dist, value = forward(params, obs)
            action, log_prob = dist.sample_and_log_prob(k_act)
            env_state, ts = benv.step(env_state, action)
            step = {"obs": obs, "action": action, "log_prob": log_prob, "value": value,
                    "reward": ts.reward, "terminated": ts.terminated, "truncated": ts.truncated,
                    "final_obs": ts.obs, "episode_return": ts.info["episode_return"]}  # fmt: skip
            return (env_state, ts.info["next_obs"], key), step

        carry = (state.env_state, state.obs, state.key)
        (env_state, obs, key), traj = scan(env_step, carry, config.num_steps)

        # 2. advantages: GAE, bootstrapped from the final observation of a truncated episode
        _, next_value = forward(params, traj["final_obs"])
        advantage, value_target = objectives.gae(
            traj["reward"], traj["value"], next_value, traj["terminated"], traj["truncated"],
            gamma=config.gamma, lmbda=config.gae_lambda,
        )  # fmt: skip
        batch = {k: traj[k] for k in ("obs", "action", "log_prob", "value")}
        batch |= {"advantage": advantage, "value_target": value_target}
        batch = tree.map(lambda x: x.flatten(0, 1), batch)  # [num_steps * num_envs, ...]

        # 3. learn: update_epochs passes over the batch in shuffled minibatches
        def permutation(key: Tensor, _: Any) -> tuple[Tensor, Tensor]:
            key, k_perm = random.split(key).unbind(-2)
            return key, random.permutation(k_perm, batch_size)

        def loss_fn(params: dict, minibatch: dict) -> tuple[Tensor, dict]:
            return objectives.ppo_loss(forward, None, params, minibatch, clip_eps=config.clip_eps,
                                       vf_coef=config.vf_coef, ent_coef=config.ent_coef,
                                       clip_value=config.clip_eps)  # fmt: skip

        def grad_step(carry: tuple, index: Tensor) -> tuple[tuple, dict]:
            params, opt_state = carry
            minibatch = tree.map(lambda x: x[index], batch)
            grads, metrics = torch.func.grad(loss_fn, has_aux=True)(params, minibatch)
            updates, opt_state = opt.update(grads, opt_state, params)
            return (optim.apply_updates(params, updates), opt_state), metrics

        key, perms = scan(permutation, key, config.update_epochs)
        indices = perms.reshape(grad_steps, minibatch_size)
        (params, opt_state), metrics = scan(grad_step, (params, state.opt_state), indices)

        # 4. report: the mean return of the episodes that ended (NaN if none did)
        done = traj["terminated"] | traj["truncated"]
        ended = torch.where(done, traj["episode_return"], 0.0).sum() / done.sum()
        metrics = {k: v.mean() for k, v in metrics.items()} | {"episode_return": ended.float()}
        return TrainState(params, opt_state, env_state, obs, key), metrics

    return init, update, num_updates


def train(config: Config, log_every: int = 0) -> tuple[TrainState, dict]:
    """Train ``num_seeds`` agents together; metrics stacked ``[updates, (seeds)]``."""
    init, update, num_updates = make_train(config)
    key = random.key(config.seed)
    if config.num_seeds > 1:  # one more vmap: a leading [num_seeds] dim on every leaf
        init, update = torch.func.vmap(init), torch.func.vmap(update)
        key = random.split(key, config.num_seeds)
    if config.compile:
        update = fxrl.compile(update)
    # dense leaves (a vmapped init leaves some stride-0), as fxrl.algorithms.core.batched:
    # kernels pick their path by layout, so this keeps the last bits equal to ppo.train's
    state, history = tree.map(lambda x: x.contiguous(), init(key)), []
    for i in range(num_updates):
        state, metrics = update(state)
        history.append(metrics)
        if log_every and (i % log_every == 0 or i == num_updates - 1):
            returns = metrics["episode_return"].reshape(-1).tolist()
            print(f"update {i + 1:4d}/{num_updates} return per seed", [round(r) for r in returns])
    return state, tree.stack(history)


if __name__ == "__main__":
    config = tyro.cli(Config)
    start = time.perf_counter()
    _, metrics = train(config, log_every=50)
    print(f"{config.num_seeds} seeds x {config.total_steps:,} steps in "
          f"{time.perf_counter() - start:.1f} s (compile included)")  # fmt: skip
