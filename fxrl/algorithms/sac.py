"""SAC (Haarnoja et al. 2018, "SAC v2") as a pure ``(init, update)`` pair, read top to bottom.

    algo = sac.make(sac.Config(env="Pendulum-v1"))
    state = algo.init(key)
    state, metrics = algo.update(state)     # collect num_envs x num_steps, then learn

One ``update`` steps ``num_envs`` pure envs ``num_steps`` times with actions drawn from
the tanh-squashed Gaussian policy (uniform in the action Box for the first
``learning_starts`` env steps), adds the transitions to the uniform replay buffer in the
TrainState, then takes ``gradient_steps`` steps of ``objectives.sac_loss``: twin critics
(a 2-member ensemble, every critic leaf with a leading dim 2), a learned temperature
``log_alpha`` aiming at the entropy ``-|A|``, one Adam per part, and the target critics
moved by ``soft_update(target, online, tau)`` after every gradient step.

This file holds SAC's own pieces (the Config, the actor, ``act`` and ``learn``); the
collect / store / sample / learn / report loop around them, with its warm-up, is
``fxrl.algorithms.offpolicy.make_update``, shared with TD3 and DQN. The replay storage is
written in place (DESIGN's one exception to purity): after ``update(state)``,
``state.buffer``'s storage is the new state's.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from torch import Tensor

from fxrl import distributions, envs, nn, objectives, random, tree
from fxrl.algorithms import core
from fxrl.algorithms.core import Algorithm, check_config
from fxrl.algorithms.offpolicy import (
    TrainState,
    adam_parts,
    check_hidden,
    continuous_env,
    critic_model,
    init_state,
    make_update,
    train_host,
    twin_init,
)

__all__ = ["HYPERPARAMS", "Config", "TrainState", "make", "train", "train_host"]

# Config fields the update reads only as numbers, with the dtype each is computed in
# (``update(state, hyperparams)``; a sweep vmaps over them); ``alpha_init`` is read by
# ``init``, so it is not among them.
HYPERPARAMS = {
    "actor_lr": torch.float64,
    "critic_lr": torch.float64,
    "alpha_lr": torch.float64,
    "gamma": torch.float32,
    "tau": torch.float32,
}

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0  # the actor's log-std range (CleanRL's, SB3's is -20..2)


@dataclasses.dataclass(frozen=True)
class Config:
    """SAC's settings. Defaults suit Pendulum-v1 (RL Zoo's SAC there: lr 1e-3, batch 256,
    2x256 ReLU nets, tau 0.005, one gradient step per env step; 20k steps)."""

    env: str = "Pendulum-v1"  # an env id with Box actions (registered ones, "gymnasium:<id>")
    total_steps: int = 20_000  # env steps per seed for train()
    num_envs: int = 1  # envs stepped together per seed
    num_steps: int = 1  # steps per env per update
    gradient_steps: int = 1  # gradient steps per update
    buffer_size: int = 100_000  # replay capacity, transitions
    batch_size: int = 256  # transitions per gradient step
    actor_lr: float = 1e-3  # Adam learning rate of the actor
    critic_lr: float = 1e-3  # ... of the twin critics
    alpha_lr: float = 1e-3  # ... of log_alpha
    gamma: float = 0.99  # discount
    tau: float = 0.005  # target <- target + tau (online - target), every gradient step
    alpha_init: float = 1.0  # the temperature at step 0
    learn_alpha: bool = True  # False keeps alpha = alpha_init
    target_entropy: float | None = None  # None: -|A| (minus the action dim)
    learning_starts: int = 1_000  # env steps of uniform random actions before learning
    hidden: tuple[int, ...] = (256, 256)  # actor and critic hidden sizes (ReLU MLPs)

    def __post_init__(self) -> None:
        core.check_env_id(self, host=True)
        positive = ("total_steps", "num_envs", "num_steps", "gradient_steps", "buffer_size")
        core.check_positive(self, *positive, "batch_size")
        for f in ("actor_lr", "critic_lr", "alpha_lr", "alpha_init"):
            check_config(self, f, float(getattr(self, f)) > 0, "a positive number")
        check_config(self, "gamma", 0.0 <= float(self.gamma) <= 1.0, "a number in [0, 1]")
        fix = "TorchRL's SoftUpdate(eps=0.995) is tau=0.005."
        check_config(self, "tau", 0.0 < float(self.tau) <= 1.0, "a number in (0, 1]", fix)
        ok = isinstance(self.learning_starts, int) and self.learning_starts >= 0
        check_config(self, "learning_starts", ok, "an int >= 0")
        ok = self.target_entropy is None or isinstance(self.target_entropy, (int, float))
        check_config(self, "target_entropy", ok, "None (-|A|) or a number")
        check_hidden(self)


# ------------------------------------------------------------------------------ make


def make(config: Config) -> Algorithm:
    """SAC for ``config``: ``Algorithm(init, update, policy, config, env, steps_per_update)``."""
    if not isinstance(config, Config):
        raise TypeError(f"sac.make: expected a sac.Config, got {type(config).__name__}.")
    env = continuous_env(config)
    benv = envs.batch(env, config.num_envs)
    spec = env.action_spec
    obs_dim, action_dim = env.observation_spec.shape[0], spec.shape[0]
    low, high = spec.low.to(env.dtype), spec.high.to(env.dtype)
    actor = nn.mlp(obs_dim, 2 * action_dim, config.hidden, "relu")
    critic = critic_model(obs_dim, action_dim, config.hidden)

    def optimizer(hp: dict) -> tuple[Any, Any]:
        """``adam_parts``: one Adam per part of the params, at ``hp``'s learning rates."""
        lrs = {"actor": hp["actor_lr"], "critic": hp["critic_lr"]}
        if config.learn_alpha:
            lrs["log_alpha"] = hp["alpha_lr"]
        return adam_parts(lrs)

    alpha = None if config.learn_alpha else config.alpha_init
    target_entropy = config.target_entropy

    def actor_dist(actor_params: Any, obs: Tensor) -> distributions.TanhNormal:
        loc, raw = actor.apply(actor_params, obs).chunk(2, dim=-1)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (torch.tanh(raw) + 1)
        return distributions.tanh_normal(loc, log_std.exp(), low, high)

    def policy(params: Any, obs: Tensor, key: Tensor | None = None, mode: str = "mode") -> Tensor:
        """Action [*B, A] for ``obs [*B, obs_dim]``: ``"mode"`` is the squashed mean,
        ``"random"`` a draw (needs ``key``); always inside the action Box."""
        return distributions.draw(actor_dist(params["actor"], obs), key, mode)

    def uniform_phase(hp: dict, steps: Tensor) -> Tensor:
        return steps < config.learning_starts

    def act(
        hp: dict, params: Any, obs: Tensor, key: Tensor, random_phase: Tensor, noise: Any
    ) -> tuple:
        k_uniform, k_policy = random.split(key).unbind(-2)
        uniform = spec.sample(k_uniform, (config.num_envs,)).to(env.dtype)
        drawn = actor_dist(params["actor"], obs).sample(k_policy)
        return torch.where(random_phase, uniform, drawn), noise  # SAC's noise is its policy

    def loss_fn(
        params: Any, target: Any, batch: dict, key: Tensor, hp: dict
    ) -> tuple[Tensor, dict]:
        return objectives.sac_loss(
            actor_dist,
            critic.apply,
            params,
            target,
            batch,
            key,
            gamma=hp["gamma"],
            alpha=alpha,
            target_entropy=target_entropy,
        )

    def learn(
        hp: dict, learner: tuple, batch: dict, key: Tensor, learning: Tensor
    ) -> tuple[tuple, dict]:
        params, target, opt_state, count = learner
        grads, aux = torch.func.grad(loss_fn, has_aux=True)(params, target, batch, key, hp)
        new_params, new_opt = optimizer(hp)[1](grads, opt_state, params)
        new_target = objectives.soft_update(target, {"critic": new_params["critic"]}, hp["tau"])
        new = (new_params, new_target, new_opt, count + 1)
        names = ("loss", "critic_loss", "actor_loss", "alpha_loss", "alpha", "entropy", "q")
        m = {k: aux[k] for k in names}
        return tree.where(learning, new, learner), m

    def init(key: Tensor) -> TrainState:
        k_actor, k_critic, k_rest = random.split(key, 3).unbind(-2)
        params = {"actor": actor.init(k_actor), "critic": twin_init(critic, k_critic)}
        if config.learn_alpha:
            log_alpha = math.log(config.alpha_init)
            params["log_alpha"] = torch.full((), log_alpha, dtype=env.dtype, device=key.device)
        target = {"critic": tree.map(torch.clone, params["critic"])}
        k_env, k_state = random.split(k_rest).unbind(-2)
        opt_init, _ = optimizer(core.hyperparams(config, HYPERPARAMS))
        return init_state(config, benv, k_env, k_state, params, target, opt_init(params))

    update = make_update(config, benv, uniform_phase, act, learn, hyperparam_dtypes=HYPERPARAMS)
    steps_per_update = config.num_envs * config.num_steps
    hyperparams = core.hyperparams(config, HYPERPARAMS)
    return Algorithm(init, update, policy, config, env, steps_per_update, hyperparams)


train = core.trainer(make)
