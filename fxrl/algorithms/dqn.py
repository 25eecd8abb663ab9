"""DQN (Mnih et al. 2015) as a pure ``(init, update)`` pair, read top to bottom.

    algo = dqn.make(dqn.Config(env="CartPole-v1"))
    state = algo.init(key)
    state, metrics = algo.update(state)     # collect num_envs x num_steps, then learn

One ``update`` steps ``num_envs`` pure envs ``num_steps`` times with epsilon-greedy
actions (uniform random before ``learning_starts``, then ``exploration.linear_anneal``
of the env step count), adds the transitions (n-step ones with ``n_step > 1``) to the
replay buffer in the TrainState, then takes ``gradient_steps`` steps of
``objectives.dqn_loss`` (MSE or Huber; double DQN as an option) with Adam, moving the
target net with ``soft_update`` (``tau=1``: a copy) every ``target_update_every``
gradient steps. This file holds DQN's own pieces (the Config, the Q-net, epsilon-greedy
``act``, the gradient step); the collect / store / sample / learn / report loop around
them, with its warm-up before ``learning_starts``, is
``fxrl.algorithms.offpolicy.make_update``, shared with SAC and TD3. The loops are
``fxrl.scan`` (compiled as one program, each body traced once), except the gradient
steps of prioritized replay, whose priorities are written in place (a Python loop).

The replay storage is written in place (DESIGN's one exception to purity): after
``update(state)``, ``state.buffer``'s storage is the new state's; every other leaf of
``state`` is left as it was. Host envs (gymnasium, ALE) cannot live in a pure TrainState:
``make_learner`` is the gradient half on its own, driven by ``fxrl.collector`` in
``examples/dqn_pong_export.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from fxrl import buffers, envs, exploration, nn, objectives, optim, random, tree
from fxrl.algorithms import core
from fxrl.algorithms.core import Algorithm, check_config
from fxrl.algorithms.offpolicy import (
    TrainState,
    check_hidden,
    discrete_env,
    greedy_or_noisy,
    init_state,
    make_update,
)

__all__ = ["HYPERPARAMS", "Config", "TrainState", "make", "make_learner", "train"]

# Config fields the update reads only as numbers, with the dtype each is computed in
# (``update(state, hyperparams)``; a sweep vmaps over them); the epsilons meet float64
# math (the anneal). ``max_grad_norm`` switches clipping on or off, so it is structural.
HYPERPARAMS = {
    "lr": torch.float64,
    "gamma": torch.float32,
    "tau": torch.float32,
    "eps_start": torch.float64,
    "eps_end": torch.float64,
}

Learn = Callable[..., tuple[Any, Any, Any, Tensor, Any, dict[str, Tensor]]]


@dataclasses.dataclass(frozen=True)
class Config:
    """DQN's settings. Defaults are PureJaxRL's DQN for CartPole-v1: 10 envs, buffer 10k,
    batch 128, lr 2.5e-4, MSE loss, epsilon 1 -> 0.05 over 250k steps, 10k random steps,
    one gradient step per 10 env steps and a hard target copy every 500 env steps.
    ``loss="huber"`` (the Nature paper's) diverged with these settings on CartPole (Q
    values past 10^4 by 50k steps, every seed tried): keep MSE here or lower ``lr``."""

    env: str = "CartPole-v1"  # an env id with Discrete actions (registered, gymnasium:, ale:)
    total_steps: int = 500_000  # env steps per seed for train()
    num_envs: int = 10  # envs stepped together per seed
    num_steps: int = 10  # steps per env per update
    gradient_steps: int = 10  # gradient steps per update (one per 10 env steps)
    buffer_size: int = 10_000  # replay capacity, transitions
    batch_size: int = 128  # transitions per gradient step
    lr: float = 2.5e-4  # Adam learning rate
    gamma: float = 0.99  # discount
    n_step: int = 1  # bootstrap after n steps (n-step returns cut at episode ends)
    double: bool = False  # double DQN: the online net picks the next action
    loss: str = "mse"  # "mse" or "huber" (smooth L1)
    eps_start: float = 1.0  # epsilon-greedy: epsilon at step 0 ...
    eps_end: float = 0.05  # ... annealed linearly to this ...
    eps_decay_steps: int = 250_000  # ... over this many env steps
    learning_starts: int = 10_000  # env steps of random actions before learning
    target_update_every: int = 50  # gradient steps between target updates
    tau: float = 1.0  # target <- target + tau (online - target); 1 copies
    max_grad_norm: float = 0.0  # clip gradients to this global norm (0: no clipping)
    prioritized: bool = False  # prioritized replay (Schaul et al. 2016)
    alpha: float = 0.6  # priority exponent (prioritized)
    beta: float = 0.4  # importance-weight exponent (prioritized)
    hidden: tuple[int, ...] = (120, 84)  # Q-network hidden sizes (ReLU MLP)

    def __post_init__(self) -> None:
        core.check_env_id(self, host=True)
        positive = ("total_steps", "num_envs", "num_steps", "gradient_steps", "buffer_size")
        core.check_positive(self, *positive, "batch_size", "n_step", "eps_decay_steps")
        core.check_positive(self, "target_update_every")
        check_config(self, "loss", self.loss in ("huber", "mse"), "'huber' or 'mse'")
        check_config(self, "lr", float(self.lr) > 0, "a positive number")
        fix = "TorchRL's SoftUpdate(eps=0.99) is tau=0.01."
        check_config(self, "tau", 0.0 < float(self.tau) <= 1.0, "a number in (0, 1]", fix)
        for f in ("gamma", "eps_start", "eps_end"):
            check_config(self, f, 0.0 <= float(getattr(self, f)) <= 1.0, "a number in [0, 1]")
        check_config(self, "max_grad_norm", float(self.max_grad_norm) >= 0, "0 (off) or more")
        ok = isinstance(self.learning_starts, int) and self.learning_starts >= 0
        check_config(self, "learning_starts", ok, "an int >= 0")
        check_hidden(self)


# ------------------------------------------------------------------------------ learn


def _gradient_step(
    q_apply: Callable[[Any, Tensor], Tensor],
    opt: optim.GradientTransformation,
    *,
    gamma: float,
    double: bool,
    loss: str,
    tau: float,
    target_update_every: int,
) -> Callable[[tuple, dict], tuple[tuple, dict[str, Tensor]]]:
    """``step(learner, batch) -> (learner, aux)``: one ``opt`` step on
    ``objectives.dqn_loss`` of ``batch`` (a ``"weight"`` in it: importance weights; an
    ``"index"``: ignored), the target moved when the new count is due."""

    def step(learner: tuple, batch: dict) -> tuple[tuple, dict[str, Tensor]]:
        params, target_params, opt_state, gradient_steps = learner
        batch = {k: v for k, v in batch.items() if k != "index"}

        def loss_fn(p: Any) -> tuple[Tensor, dict[str, Tensor]]:
            return objectives.dqn_loss(
                q_apply, p, target_params, batch, gamma=gamma, double=double, loss=loss
            )

        grads, aux = torch.func.grad(loss_fn, has_aux=True)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = optim.apply_updates(params, updates)
        gradient_steps = gradient_steps + 1
        moved = objectives.soft_update(target_params, params, tau)
        if target_update_every > 1:  # a Python int: no branch on a tensor
            due = gradient_steps % target_update_every == 0
            moved = tree.where(due, moved, target_params)
        return (params, moved, opt_state, gradient_steps), aux

    return step


def _sample(batch_size: int, prioritized: bool) -> Callable[[Any, Tensor], tuple[dict, Tensor]]:
    """``sample(buffer, key) -> (batch, key)``: with prioritized replay the batch carries
    the importance ``weight`` and the slots' ``index`` (for the new priorities)."""

    def sample(buffer: Any, key: Tensor) -> tuple[dict, Tensor]:
        batch, info = buffers.sample(buffer, key, batch_size)
        if prioritized:
            batch = {**batch, "weight": info["weight"], "index": info["index"]}
        return batch, key

    return sample


def make_learner(
    q_apply: Callable[[Any, Tensor], Tensor],
    opt: optim.GradientTransformation,
    *,
    batch_size: int,
    gamma: float = 0.99,
    double: bool = False,
    loss: str = "huber",
    tau: float = 1.0,
    target_update_every: int = 1,
    prioritized: bool = False,
) -> Learn:
    """DQN's gradient step on a replay buffer, for host-env loops (``fxrl.collector``).

    ``learn(params, target_params, opt_state, gradient_steps, buffer, key)`` samples
    ``batch_size`` transitions (``obs, action, reward, next_obs, terminated`` and, n-step,
    ``discount``), takes one ``opt`` step on ``objectives.dqn_loss`` and moves the target
    by ``soft_update(target, online, tau)`` when the new ``gradient_steps`` [] int64 is a
    multiple of ``target_update_every`` (TorchRL's ``SoftUpdate(eps)`` is ``tau=1-eps``).
    Returns ``(params, target_params, opt_state, gradient_steps, buffer, metrics)``;
    prioritized buffers get ``|td| + 1e-6`` as priorities; metrics: ``loss``, ``q`` [].
    ``update`` takes the very same step.
    """
    step = _gradient_step(
        q_apply,
        opt,
        gamma=gamma,
        double=double,
        loss=loss,
        tau=tau,
        target_update_every=target_update_every,
    )
    sample = _sample(batch_size, prioritized)

    def learn(
        params: Any,
        target_params: Any,
        opt_state: Any,
        gradient_steps: Tensor,
        buffer: Any,
        key: Tensor,
    ) -> tuple[Any, Any, Any, Tensor, Any, dict]:
        batch, _ = sample(buffer, key)
        learner, aux = step((params, target_params, opt_state, gradient_steps), batch)
        if prioritized:
            buffer = buffers.update_priorities(buffer, batch["index"], aux["td_error"].abs() + 1e-6)
        return (*learner, buffer, {"loss": aux["loss"], "q": aux["q"]})

    return learn


# ------------------------------------------------------------------------------ make


def make(config: Config) -> Algorithm:
    """DQN for ``config``: ``Algorithm(init, update, policy, config, env, steps_per_update)``."""
    if not isinstance(config, Config):
        raise TypeError(f"dqn.make: expected a dqn.Config, got {type(config).__name__}.")
    env = discrete_env(config)
    benv = envs.batch(env, config.num_envs)
    spec = env.action_spec
    obs_shape = env.observation_spec.shape
    if len(obs_shape) == 3:  # uint8 frames (ale:<Game>): the Nature DQN network
        q = nn.atari_dqn(spec.n, in_channels=obs_shape[0])
    else:
        q = nn.mlp(obs_shape[0], spec.n, config.hidden, "relu")

    def optimizer(hp: dict) -> optim.GradientTransformation:
        opt = optim.adam(hp["lr"])
        if config.max_grad_norm > 0:
            return optim.chain(optim.clip_by_global_norm(config.max_grad_norm), opt)
        return opt

    def gradient_step(hp: dict) -> Callable[[tuple, dict], tuple[tuple, dict[str, Tensor]]]:
        return _gradient_step(
            q.apply,
            optimizer(hp),
            gamma=hp["gamma"],
            double=config.double,
            loss=config.loss,
            tau=hp["tau"],
            target_update_every=config.target_update_every,
        )

    def policy(params: Any, obs: Tensor, key: Tensor | None = None, mode: str = "mode") -> Tensor:
        """Greedy action [*B] for ``obs [*B, obs_dim]``; ``mode="random"`` is epsilon-greedy
        with ``eps_end`` and needs ``key``."""
        action, _ = exploration.q_value(q.apply(params, obs))

        def noisy(k: Tensor) -> Tensor:
            return exploration.egreedy(k, action, spec, config.eps_end)

        return greedy_or_noisy("dqn", action, noisy, key, mode)

    def epsilon(hp: dict, steps: Tensor) -> Tensor:
        """1 before ``learning_starts`` (uniform actions), then linearly annealed."""
        annealed = exploration.linear_anneal(
            steps, hp["eps_start"], hp["eps_end"], config.eps_decay_steps
        )
        return torch.where(steps < config.learning_starts, 1.0, annealed)

    def act(hp: dict, params: Any, obs: Tensor, key: Tensor, eps: Tensor, noise: Any) -> tuple:
        greedy, _ = exploration.q_value(q.apply(params, obs))
        return exploration.egreedy(key, greedy, spec, eps), noise

    def learn(
        hp: dict, learner: tuple, batch: dict, key: Tensor, learning: Tensor
    ) -> tuple[tuple, dict]:
        new, aux = gradient_step(hp)(learner, batch)
        m = {"loss": aux["loss"], "q": aux["q"]}
        if config.prioritized:
            m["priority"] = aux["td_error"].abs() + 1e-6
        return tree.where(learning, new, learner), m

    def init(key: Tensor) -> TrainState:
        k_env, k_q, k_state = random.split(key, 3).unbind(-2)
        params = q.init(k_q)
        return init_state(
            config,
            benv,
            k_env,
            k_state,
            params,
            params,
            optimizer(core.hyperparams(config, HYPERPARAMS)).init(params),
            n_step=config.n_step,
            prioritized=config.prioritized,
            alpha=config.alpha,
            beta=config.beta,
        )

    update = make_update(
        config,
        benv,
        epsilon,
        act,
        learn,
        hyperparam_dtypes=HYPERPARAMS,
        sample=_sample(config.batch_size, config.prioritized),
        n_step=config.n_step,
        prioritized=config.prioritized,
        exploration_metric="epsilon",
    )
    steps_per_update = config.num_envs * config.num_steps
    hyperparams = core.hyperparams(config, HYPERPARAMS)
    return Algorithm(init, update, policy, config, env, steps_per_update, hyperparams)


train = core.trainer(make)
