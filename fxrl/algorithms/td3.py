"""TD3 (Fujimoto et al. 2018) as a pure ``(init, update)`` pair, read top to bottom.

    algo = td3.make(td3.Config(env="Pendulum-v1"))
    state = algo.init(key)
    state, metrics = algo.update(state)     # collect num_envs x num_steps, then learn

One ``update`` steps ``num_envs`` pure envs ``num_steps`` times with the deterministic
actor's action plus exploration noise (uniform in the action Box for the first
``learning_starts`` env steps): independent Gaussian noise per step
(``exploration.gaussian_noise``, the default) or, with ``noise_type="ou"``,
Ornstein-Uhlenbeck noise (``exploration.ornstein_uhlenbeck``) whose state lives in the
TrainState's ``noise`` leaf and restarts at 0 with each episode. Then it adds the
transitions to the uniform replay buffer and takes ``gradient_steps`` steps of
``objectives.td3_loss``: twin critics (a 2-member ensemble) trained every step on the
clipped double-Q target with target policy smoothing; the actor, and both targets
(``soft_update``), only every ``policy_delay``-th gradient step, chosen with
``torch.where`` on the step count so that one graph serves every step under vmap and
compile. The collect / store / sample / learn skeleton, the TrainState and
``train_host`` (gymnasium envs through ``fxrl.collector``) are
``fxrl.algorithms.offpolicy``'s, shared with SAC and DQN.

Noise scales (``exploration_noise``, ``policy_noise``, ``noise_clip``) are in units of the
action Box's half-width, as in the paper (whose actions are in [-1, 1]): on Pendulum-v1
(torques in [-2, 2]) ``exploration_noise=0.1`` is a torque noise of std 0.2. For OU noise
``exploration_noise`` is the std of each step's innovation, in DDPG's discrete form
``x' = x - ou_theta x + exploration_noise N(0, 1)``: the noise keeps its sign for about
``1 / ou_theta`` steps and its stationary std is
``exploration_noise / sqrt(ou_theta (2 - ou_theta))``. Independent noise moves a car
like a random walk; a hill such as MountainCarContinuous-v0's needs pushes held for tens
of steps, which OU noise gives (``ou_theta=0.05, exploration_noise=0.3``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor

from fxrl import envs, exploration, nn, objectives, random, tree
from fxrl.algorithms import core
from fxrl.algorithms.core import Algorithm, check_config
from fxrl.algorithms.offpolicy import (
    TrainState,
    adam_parts,
    check_hidden,
    continuous_env,
    critic_model,
    greedy_or_noisy,
    init_state,
    make_update,
    train_host,
    twin_init,
)

__all__ = ["HYPERPARAMS", "Config", "TrainState", "make", "train", "train_host"]

# Config fields the update reads only as numbers, with the dtype each is computed in
# (``update(state, hyperparams)``; a sweep vmaps over them).
HYPERPARAMS = {
    "actor_lr": torch.float64,
    "critic_lr": torch.float64,
    "gamma": torch.float32,
    "tau": torch.float32,
    "exploration_noise": torch.float32,
    "policy_noise": torch.float32,
    "noise_clip": torch.float32,
    "ou_theta": torch.float32,
}

NOISE_TYPES = ("gaussian", "ou")


@dataclasses.dataclass(frozen=True)
class Config:
    """TD3's settings. Defaults suit Pendulum-v1 (the paper's TD3 with RL Zoo's Pendulum
    changes: lr 1e-3, gamma 0.98; batch 256, 2x256 ReLU nets, one gradient step per env
    step, 20k steps)."""

    env: str = "Pendulum-v1"  # an env id with Box actions (registered ones, "gymnasium:<id>")
    total_steps: int = 20_000  # env steps per seed for train()
    num_envs: int = 1  # envs stepped together per seed
    num_steps: int = 1  # steps per env per update
    gradient_steps: int = 1  # gradient steps per update (critic steps)
    buffer_size: int = 100_000  # replay capacity, transitions
    batch_size: int = 256  # transitions per gradient step
    actor_lr: float = 1e-3  # Adam learning rate of the actor
    critic_lr: float = 1e-3  # ... of the twin critics
    gamma: float = 0.98  # discount
    tau: float = 0.005  # target <- target + tau (online - target), with each actor step
    policy_delay: int = 2  # one actor (and target) update per this many critic updates
    exploration_noise: float = 0.1  # std of the acting noise (action half-widths)
    noise_type: str = "gaussian"  # acting noise: "gaussian" (per step) or "ou" (correlated)
    ou_theta: float = 0.15  # OU noise's pull to 0 per step: it lasts ~1/ou_theta steps
    policy_noise: float = 0.2  # std of the target smoothing noise (action half-widths)
    noise_clip: float = 0.5  # the smoothing noise is clipped to +-this (action half-widths)
    learning_starts: int = 1_000  # env steps of uniform random actions before learning
    hidden: tuple[int, ...] = (256, 256)  # actor and critic hidden sizes (ReLU MLPs)

    def __post_init__(self) -> None:
        core.check_env_id(self, host=True)
        positive = ("total_steps", "num_envs", "num_steps", "gradient_steps", "buffer_size")
        core.check_positive(self, *positive, "batch_size", "policy_delay")
        for f in ("actor_lr", "critic_lr"):
            check_config(self, f, float(getattr(self, f)) > 0, "a positive number")
        for f in ("exploration_noise", "policy_noise", "noise_clip"):
            check_config(self, f, float(getattr(self, f)) >= 0, "a number >= 0")
        check_config(self, "noise_type", self.noise_type in NOISE_TYPES, f"one of {NOISE_TYPES}")
        check_config(self, "ou_theta", 0.0 < float(self.ou_theta) <= 1.0, "a number in (0, 1]")
        check_config(self, "gamma", 0.0 <= float(self.gamma) <= 1.0, "a number in [0, 1]")
        fix = "TorchRL's SoftUpdate(eps=0.995) is tau=0.005."
        check_config(self, "tau", 0.0 < float(self.tau) <= 1.0, "a number in (0, 1]", fix)
        ok = isinstance(self.learning_starts, int) and self.learning_starts >= 0
        check_config(self, "learning_starts", ok, "an int >= 0")
        check_hidden(self)


def make(config: Config) -> Algorithm:
    """TD3 for ``config``: ``Algorithm(init, update, policy, config, env, steps_per_update)``."""
    if not isinstance(config, Config):
        raise TypeError(f"td3.make: expected a td3.Config, got {type(config).__name__}.")
    env = continuous_env(config)
    benv = envs.batch(env, config.num_envs)
    spec = env.action_spec
    obs_dim, action_dim = env.observation_spec.shape[0], spec.shape[0]
    low, high = spec.low.to(env.dtype), spec.high.to(env.dtype)  # on the CPU: moved at use
    mid, half = (high + low) / 2, (high - low) / 2
    actor_net = nn.mlp(obs_dim, action_dim, config.hidden, "relu", output_activation="tanh")
    critic = critic_model(obs_dim, action_dim, config.hidden)

    def optimizer(hp: dict) -> tuple[Any, Any]:
        """``adam_parts``: one Adam per part of the params, at ``hp``'s learning rates."""
        return adam_parts({"actor": hp["actor_lr"], "critic": hp["critic_lr"]})

    def actor(actor_params: Any, obs: Tensor) -> Tensor:
        """The deterministic action, tanh scaled into the action Box."""
        return mid.to(obs.device) + half.to(obs.device) * actor_net.apply(actor_params, obs)

    def policy(params: Any, obs: Tensor, key: Tensor | None = None, mode: str = "mode") -> Tensor:
        """Action [*B, A] for ``obs [*B, obs_dim]``: ``"mode"``/``"mean"`` the actor's,
        ``"random"`` with Gaussian noise of std ``exploration_noise`` (needs ``key``;
        stateless, also for ``noise_type="ou"``, whose state only training carries);
        inside the action Box."""
        action = actor(params["actor"], obs)

        def noisy(k: Tensor) -> Tensor:
            sigma = config.exploration_noise * half.to(action.device)
            return exploration.gaussian_noise(k, action, spec, sigma)

        return greedy_or_noisy("td3", action, noisy, key, mode)

    def uniform_phase(hp: dict, steps: Tensor) -> Tensor:
        return steps < config.learning_starts

    def act(
        hp: dict, params: Any, obs: Tensor, key: Tensor, random_phase: Tensor, noise: Any
    ) -> tuple:
        k_uniform, k_noise = random.split(key).unbind(-2)
        uniform = spec.sample(k_uniform, (config.num_envs,)).to(env.dtype)
        if config.noise_type == "ou":
            action = actor(params["actor"], obs)
            noisy, noise = exploration.ornstein_uhlenbeck(
                k_noise,
                action,
                noise,
                spec,
                half.to(action.device),
                theta=hp["ou_theta"],
                sigma=hp["exploration_noise"],
                dt=1.0,
            )
        else:
            action = actor(params["actor"], obs)
            sigma = hp["exploration_noise"] * half.to(action.device)
            noisy = exploration.gaussian_noise(k_noise, action, spec, sigma)
        return torch.where(random_phase, uniform, noisy), noise

    def learn(
        hp: dict, learner: tuple, batch: dict, key: Tensor, learning: Tensor
    ) -> tuple[tuple, dict]:
        params, target, opt_state, count = learner
        count = count + 1
        due = count % config.policy_delay == 0  # the delayed actor and targets
        scale = half.to(key.device)

        def loss_fn(p: Any) -> tuple[Tensor, dict]:
            return objectives.td3_loss(
                actor,
                critic.apply,
                p,
                target,
                batch,
                key,
                gamma=hp["gamma"],
                policy_noise=hp["policy_noise"] * scale,
                noise_clip=hp["noise_clip"] * scale,
                action_low=low.to(key.device),
                action_high=high.to(key.device),
                update_actor=due,
            )

        grads, aux = torch.func.grad(loss_fn, has_aux=True)(params)
        stepped, new_opt = optimizer(hp)[1](grads, opt_state, params)
        # Adam moves params even on a zero gradient (momentum): keep the actor as it was
        new_params = {**stepped, "actor": tree.where(due, stepped["actor"], params["actor"])}
        new_opt = {**new_opt, "actor": tree.where(due, new_opt["actor"], opt_state["actor"])}
        moved = objectives.soft_update(target, new_params, hp["tau"])
        new = (new_params, tree.where(due, moved, target), new_opt, count)
        m = {k: aux[k] for k in ("loss", "critic_loss", "q")}
        m["actor_loss"] = torch.where(due, aux["actor_loss"], torch.nan)
        return tree.where(learning, new, learner), m

    def init(key: Tensor) -> TrainState:
        k_actor, k_critic, k_rest = random.split(key, 3).unbind(-2)
        params = {"actor": actor_net.init(k_actor), "critic": twin_init(critic, k_critic)}
        target = tree.map(torch.clone, params)
        ou = config.noise_type == "ou"
        noise = exploration.ou_init(spec, (config.num_envs,), device=key.device) if ou else {}
        k_env, k_state = random.split(k_rest).unbind(-2)
        opt_state = optimizer(core.hyperparams(config, HYPERPARAMS))[0](params)
        return init_state(config, benv, k_env, k_state, params, target, opt_state, noise=noise)

    update = make_update(config, benv, uniform_phase, act, learn, hyperparam_dtypes=HYPERPARAMS)
    steps_per_update = config.num_envs * config.num_steps
    hyperparams = core.hyperparams(config, HYPERPARAMS)
    return Algorithm(init, update, policy, config, env, steps_per_update, hyperparams)


train = core.trainer(make)
