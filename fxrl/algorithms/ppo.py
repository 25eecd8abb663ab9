"""Proximal Policy Optimization (Schulman et al. 2017) as a pure ``(init, update)`` pair.

PureJaxRL's ``ppo.py`` recipe on fxrl's pieces: a batch of pure envs, an actor-critic MLP
(separate or shared torso; categorical or Gaussian policy), GAE, epochs of shuffled
minibatches, the clipped objective with optional value clipping, an entropy bonus,
global-norm gradient clipping and a linearly annealed Adam learning rate.

    algo = ppo.make(ppo.Config(env="CartPole-v1"))
    state = algo.init(key)
    state, metrics = algo.update(state)          # collect num_envs x num_steps, then learn

One ``update`` = a rollout (``core.scan`` over ``num_steps``), GAE, and
``update_epochs`` x ``num_minibatches`` gradient steps (``core.scan`` again), so under
``torch.compile`` each loop body is traced once, whatever the budget.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from fxrl import (
    _errors,
    distributions,
    envs,
    nn,
    objectives,
    optim,
    random,
    specs,
    transforms,
    tree,
)
from fxrl.algorithms import core
from fxrl.algorithms.core import Algorithm, check_config
from fxrl.nn import initializers as inits

__all__ = ["SWEEPABLE", "TUNED", "Config", "TrainState", "make", "train"]

# Config fields that enter the update only as numbers: a sweep (``core.batched(...,
# sweep=)``, ``fxrl train ppo --sweep lr=1e-4,3e-4``) vmaps the update over tensors of them.
SWEEPABLE = ("lr", "gamma", "gae_lambda", "clip_eps", "ent_coef", "vf_coef", "max_grad_norm")
# swept as float64: they meet float64 math (a schedule) or only tensors with dims
SWEEP_FLOAT64 = ("lr",)
# core.batched(..., compile=True, sweep=...) compiles the vmapped sweep update
SWEEP_COMPILES = True


@dataclasses.dataclass(frozen=True)
class Config:
    """PPO's settings; field names are PureJaxRL's where it has them.

    Defaults are PureJaxRL's for CartPole-v1 (4 envs x 128 steps, 4 epochs x 4
    minibatches, lr 2.5e-4 annealed, clip 0.2, entropy 0.01, 500k steps).
    """

    env: str = "CartPole-v1"  # a pure env id (fxrl.envs.registered())
    # overrides of the env's default params, passed to fxrl.envs.make(env, **env_params):
    # (name, value) pairs or a dict, e.g. {"sticky_action_prob": 0.0} (CLI: --env-params
    # sticky_action_prob 0 minimal_action_set True)
    env_params: tuple[tuple[str, bool | int | float], ...] = ()
    num_envs: int = 4  # envs stepped together per seed
    num_steps: int = 128  # steps per env per update
    total_steps: int = 500_000  # env steps per seed for train()
    update_epochs: int = 4  # passes over each rollout
    num_minibatches: int = 4  # minibatches per pass; divides num_envs * num_steps
    lr: float = 2.5e-4  # Adam learning rate (eps 1e-5)
    anneal_lr: bool = True  # decay lr linearly to 0 over total_steps
    gamma: float = 0.99  # discount
    gae_lambda: float = 0.95  # GAE's lambda
    clip_eps: float = 0.2  # ratio clip (and value clip)
    clip_value: bool = True  # clip the value update around the rollout's values
    ent_coef: float = 0.01  # entropy bonus weight
    vf_coef: float = 0.5  # value loss weight
    max_grad_norm: float = 0.5  # global gradient norm clip
    hidden: tuple[int, ...] = (64, 64)  # hidden layer sizes
    activation: str = "tanh"  # hidden activation ("tanh", "relu"...)
    shared: bool = False  # one torso for actor and critic
    normalize_obs: bool = False  # running observation normalisation (fxrl.transforms)
    normalize_advantages: bool = True  # per minibatch

    def __post_init__(self) -> None:
        core.check_env_id(self)
        _check_env_params(self)
        core.check_positive(
            self, "num_envs", "num_steps", "total_steps", "update_epochs", "num_minibatches"
        )
        batch = self.num_envs * self.num_steps
        divisors = [d for d in range(1, batch + 1) if batch % d == 0][:8]
        check_config(
            self,
            "num_minibatches",
            batch % self.num_minibatches == 0,
            f"a divisor of num_envs * num_steps = {batch} ({', '.join(map(str, divisors))}...)",
            "Change num_minibatches, num_envs or num_steps.",
        )
        for f in ("lr", "clip_eps", "max_grad_norm"):
            check_config(self, f, float(getattr(self, f)) > 0, "a positive number")
        for f in ("gamma", "gae_lambda"):
            check_config(self, f, 0.0 <= float(getattr(self, f)) <= 1.0, "a number in [0, 1]")
        ok = all(isinstance(h, int) and h > 0 for h in self.hidden) and len(self.hidden) > 0
        check_config(self, "hidden", ok, "a non-empty tuple of positive ints, e.g. (64, 64)")

    @classmethod
    def tuned(cls, env: str = "CartPole-v1", **overrides: Any) -> Config:
        """The settings fxrl's recorded runs use for ``env`` (``TUNED``), then
        ``overrides``; envs without an entry get the defaults (PureJaxRL's CartPole)."""
        return cls(env=env, **{**TUNED.get(env, {}), **overrides})


def _check_env_params(config: Config) -> None:
    """``env_params`` as a tuple of (name, value) pairs sorted by name (a dict given is
    converted), each name one of the env's params."""
    given = config.env_params
    pairs = given.items() if isinstance(given, Mapping) else given
    ok = isinstance(pairs, tuple | list | type({}.items())) and all(
        isinstance(p, tuple | list) and len(p) == 2 and isinstance(p[0], str) for p in pairs
    )
    check_config(config, "env_params", ok, "a dict or (name, value) pairs of env params")
    pairs = tuple(sorted((str(n), v) for n, v in pairs))
    object.__setattr__(config, "env_params", pairs)
    if not pairs:
        return
    names = [f.name for f in dataclasses.fields(envs.make(config.env).default_params)]
    for name, _ in pairs:
        if name not in names:
            raise ValueError(_errors.unknown(name, names, f"{config.env} param",
                                             where="ppo.Config.env_params"))  # fmt: skip


# PureJaxRL's MinAtar settings (examples/brax_minatar.ipynb, "PPO Gymnax MinAtar"): 64 envs
# x 128 steps, 4 epochs x 8 minibatches, lr 5e-3 annealed, relu 64-64, 1e7 steps.
_MINATAR = {
    "num_envs": 64,
    "num_steps": 128,
    "total_steps": 10_000_000,
    "update_epochs": 4,
    "num_minibatches": 8,
    "lr": 5e-3,
    "activation": "relu",
}

# Settings per env behind the recorded runs (docs/results); Config.tuned(env) applies them.
TUNED: dict[str, dict[str, Any]] = {
    **{
        f"{game}-MinAtar": dict(_MINATAR)
        for game in ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
    },
    # Pendulum-v1: many more samples per update, a short horizon, normalised observations.
    "Pendulum-v1": {
        "num_envs": 16,
        "num_steps": 256,
        "total_steps": 1_000_000,
        "update_epochs": 10,
        "num_minibatches": 16,
        "lr": 1e-3,
        "gamma": 0.9,
        "ent_coef": 0.0,
        "normalize_obs": True,
    },
}


@tree.dataclass
class TrainState:
    """Everything PPO needs between updates (all tensors: a checkpoint is its leaves)."""

    params: dict  # {"net": network params[, "obs_norm": RunningStats if normalize_obs]}
    opt_state: Any
    env_state: Any  # the batch env's state [num_envs]
    obs: Tensor  # [num_envs, *obs_shape] what the policy acts on next
    key: Tensor  # [2]
    steps: Tensor  # [] int64 env steps so far
    updates: Tensor  # [] int64 updates so far


# ------------------------------------------------------------------------------ network


def _network(config: Config, obs_shape: tuple[int, ...], out_dim: int) -> nn.Model:
    """``apply(net, x [..., *obs_shape]) -> (policy head [..., out_dim], value [...])``;
    observations flattened to ``prod(obs_shape)`` inputs (PureJaxRL's
    ``FlattenObservationWrapper`` for MinAtar's [10, 10, C]); orthogonal init (sqrt 2
    hidden, 0.01 policy head, 1 value head) as PureJaxRL."""
    obs_dim = math.prod(obs_shape)
    flatten = len(obs_shape) > 1
    w, b, act, hid = inits.orthogonal(math.sqrt(2)), inits.zeros, config.activation, config.hidden
    if config.shared:
        torso = nn.mlp(obs_dim, hid[-1], hid[:-1], act, output_activation=act, w_init=w, b_init=b)
        heads = [nn.linear(hid[-1], n, w_init=inits.orthogonal(s), b_init=b) for n, s in
                 ((out_dim, 0.01), (1, 1.0))]  # fmt: skip
    else:
        torso = None
        heads = [nn.mlp(obs_dim, n, hid, act, w_init=w, b_init=b, output_w_init=inits.orthogonal(s))
                 for n, s in ((out_dim, 0.01), (1, 1.0))]  # fmt: skip

    def init(key: Tensor) -> dict:
        k_torso, k_actor, k_critic = random.split(key, 3).unbind(-2)
        net = {"actor": heads[0].init(k_actor), "critic": heads[1].init(k_critic)}
        if torso is not None:
            net["torso"] = torso.init(k_torso)
        return net

    def apply(net: dict, x: Tensor) -> tuple[Tensor, Tensor]:
        x = x.flatten(-len(obs_shape)) if flatten else x
        h = torso.apply(net["torso"], x) if torso is not None else x
        return heads[0].apply(net["actor"], h), heads[1].apply(net["critic"], h).squeeze(-1)

    return nn.Model(init, apply)


def _distribution(net: dict, head: Tensor, discrete: bool) -> Any:
    if discrete:
        return distributions.categorical(head)
    return distributions.normal(head, net["log_std"].exp())


# ------------------------------------------------------------------------------ make


def make(config: Config) -> Algorithm:
    """PPO for ``config``: ``Algorithm(init, update, policy, config, env, steps_per_update)``."""
    if not isinstance(config, Config):
        raise TypeError(f"ppo.make: expected a ppo.Config, got {type(config).__name__}.")
    env = core.make_env(config.env, **dict(config.env_params))
    benv = envs.batch(env, config.num_envs)
    obs_spec, action_spec = env.observation_spec, env.action_spec
    if not isinstance(obs_spec, specs.Box) or len(obs_spec.shape) == 0:
        raise ValueError(f"ppo.make: {config.env} has observations {obs_spec!r}; PPO's MLP "
                         "needs a Box (flattened to prod(shape) inputs).")  # fmt: skip
    discrete = isinstance(action_spec, specs.Discrete)
    if not discrete and not (isinstance(action_spec, specs.Box) and len(action_spec.shape) == 1):
        raise ValueError(f"ppo.make: {config.env} has actions {action_spec!r}; PPO handles "
                         "Discrete(n) and flat Box [A] action specs.")  # fmt: skip
    out_dim = action_spec.n if discrete else action_spec.shape[0]
    net = _network(config, tuple(obs_spec.shape), out_dim)
    norm = transforms.observation_norm(running=True) if config.normalize_obs else None
    batch_size = config.num_envs * config.num_steps
    mb_size = batch_size // config.num_minibatches
    steps_per_update = batch_size
    num_updates = max(1, config.total_steps // steps_per_update)
    grad_steps = config.update_epochs * config.num_minibatches

    def lr_schedule(count: Tensor) -> Tensor:
        done = torch.div(count, grad_steps, rounding_mode="floor").double()
        return config.lr * (1.0 - done / num_updates).clamp(min=0.0)

    opt = optim.chain(
        optim.clip_by_global_norm(config.max_grad_norm),
        core.adam(lr_schedule if config.anneal_lr else config.lr, eps=1e-5),
    )

    def preprocess(params: dict, obs: Tensor) -> Tensor:
        return obs if norm is None else norm(obs, params["obs_norm"])

    def policy(params: dict, obs: Tensor, key: Tensor | None = None, mode: str = "mode") -> Tensor:
        """Action for raw observations ``obs [..., *obs_shape]``; continuous actions are
        clipped into the action spec (the rollout keeps the unclipped sample)."""
        head, _ = net.apply(params["net"], preprocess(params, obs))
        action = distributions.draw(_distribution(params["net"], head, discrete), key, mode)
        return action if discrete else action_spec.project(action)

    def init(key: Tensor, env_params: Any = None) -> TrainState:
        """A fresh agent; ``env_params`` (the env's params dataclass, e.g. a
        ``CartPoleParams`` with another pole ``length``) sets the task its envs run, kept
        in the env state (default: ``env.default_params``). Leaves are shared by the
        ``num_envs`` envs, or per env with a leading [num_envs] dim."""
        k_net, k_env, k_state = random.split(key, 3).unbind(-2)
        params = {"net": net.init(k_net)}
        if not discrete:
            params["net"]["log_std"] = torch.zeros(out_dim, dtype=env.dtype)
        env_state, ts = benv.reset(k_env, env_params)
        if norm is not None:
            params["obs_norm"] = norm.init(ts.obs, obs_spec)
        zero = torch.zeros((), dtype=torch.int64)
        return TrainState(params, opt.init(params["net"]), env_state, ts.obs, k_state, zero, zero)

    # -------------------------------------------------------------------------- collect

    def env_step(carry: tuple, _: Any) -> tuple[tuple, dict]:
        net_params, env_state, obs, stats, key = carry
        key, k_act = random.split(key).unbind(-2)
        x = obs if norm is None else norm(obs, stats)
        dist, value = forward(net_params, x)
        action, logp = dist.sample_and_log_prob(k_act)
        env_state, ts = benv.step(env_state, action)
        final = ts.obs if norm is None else norm(ts.obs, stats)
        next_obs = ts.info["next_obs"]
        if norm is not None:
            stats = norm.update(stats, ts.replace(obs=next_obs))
        info = ts.info
        out = {"obs": x, "action": action, "log_prob": logp, "value": value, "reward": ts.reward,
               "terminated": ts.terminated, "truncated": ts.truncated, "final_x": final,
               "episode_return": info["episode_return"],
               "episode_length": info["episode_length"]}  # fmt: skip
        return (net_params, env_state, next_obs, stats, key), out

    # -------------------------------------------------------------------------- learn

    def forward(net_params: dict, x: Tensor) -> tuple[Any, Tensor]:
        head, value = net.apply(net_params, x)
        return _distribution(net_params, head, discrete), value

    def loss_fn(net_params: dict, mb: dict) -> tuple[Tensor, dict]:
        return objectives.ppo_loss(
            forward, None, net_params, mb, clip_eps=config.clip_eps, vf_coef=config.vf_coef,
            ent_coef=config.ent_coef, clip_value=config.clip_eps if config.clip_value else None,
            normalize_advantage=config.normalize_advantages,
        )  # fmt: skip

    def permutation(key: Tensor, _: Any) -> tuple[Tensor, Tensor]:
        key, k_perm = random.split(key).unbind(-2)
        return key, random.permutation(k_perm, batch_size)

    def grad_step(carry: tuple, index: Tensor) -> tuple[tuple, dict]:
        net_params, opt_state, batch = carry
        minibatch = tree.map(lambda v: v[index], batch)
        grads, metrics = torch.func.grad(loss_fn, has_aux=True)(net_params, minibatch)
        updates, opt_state = opt.update(grads, opt_state, net_params)
        return (optim.apply_updates(net_params, updates), opt_state, batch), metrics

    def advantages(net_params: dict, traj: dict) -> dict:
        _, next_value = net.apply(net_params, traj["final_x"])
        advantage, target = _gae(config, traj, next_value)
        batch = {k: traj[k].flatten(0, 1) for k in ("obs", "action", "log_prob", "value")}
        batch["advantage"], batch["value_target"] = advantage.flatten(0, 1), target.flatten(0, 1)
        return batch

    # -------------------------------------------------------------------------- update

    def update(state: TrainState) -> tuple[TrainState, dict]:
        params = state.params
        # collect num_envs x num_steps transitions
        carry = (params["net"], state.env_state, state.obs, params.get("obs_norm", ()), state.key)
        (_, env_state, obs, stats, key), traj = core.scan(env_step, carry, config.num_steps)
        batch = advantages(params["net"], traj)
        # update_epochs passes of num_minibatches shuffled minibatches: one loop over all
        key, perms = core.scan(permutation, key, config.update_epochs)
        indices = perms.reshape(grad_steps, mb_size)
        (net_params, opt_state, _), metrics = core.scan(
            grad_step, (params["net"], state.opt_state, batch), indices
        )
        # report
        done = traj["terminated"] | traj["truncated"]
        out = core.episode_metrics(done, traj["episode_return"], traj["episode_length"])
        out.update({k: v.mean() for k, v in metrics.items()})
        out["lr"] = lr_schedule(state.updates * grad_steps).float() if config.anneal_lr else (
            torch.as_tensor(config.lr, dtype=torch.float32))  # fmt: skip
        steps = state.steps + steps_per_update
        out["steps"] = steps
        new_params = {"net": net_params} if norm is None else {"net": net_params, "obs_norm": stats}
        new = TrainState(new_params, opt_state, env_state, obs, key, steps, state.updates + 1)
        return new, out

    return Algorithm(init, update, policy, config, env, steps_per_update)


def _split(key: Tensor) -> tuple[Tensor, Tensor]:
    # Dense copies: a compiled piece called again with its own key output sees the strides
    # it was compiled for (a view into the split would have other strides: a recompile).
    keys = random.split(key).clone(memory_format=torch.contiguous_format)
    return keys[..., 0, :].clone(), keys[..., 1, :].clone()


# recurrent_ppo's loops (core.scan takes an int count itself)
_scan_loop = core.scan


def _gae(config: Config, traj: dict, next_value: Tensor) -> tuple[Tensor, Tensor]:
    return objectives.gae(
        traj["reward"], traj["value"], next_value, traj["terminated"], traj["truncated"],
        gamma=config.gamma, lmbda=config.gae_lambda,
    )  # fmt: skip


def train(config: Config, key: Tensor, num_seeds: int = 1, *, compile: bool | str = True,
          callback: Any = None) -> tuple[TrainState, dict]:  # fmt: skip
    """Train for ``config.total_steps`` env steps per seed, seeds vmapped in one program.

    Returns ``(state, metrics)``: the final TrainState (leading [num_seeds] dim when
    ``num_seeds > 1``) and each metric stacked per iteration ``[iterations, (seeds)]``.
    ``compile``: True (inductor), a backend name, or False (eager).
    """
    return core.train(make(config), key, num_seeds, compile=compile, callback=callback)
