"""SAC (Haarnoja et al. 2018, "SAC v2") as a pure ``(init, update)`` pair, read top to bottom.

    algo = sac.make(sac.Config(env="Pendulum-v1"))
    state = algo.init(key)
    state, metrics = algo.update(state)     # collect num_envs x rollout_steps, then learn

One ``update`` steps ``num_envs`` pure envs ``rollout_steps`` times with actions drawn
from the tanh-squashed Gaussian policy (uniform in the action Box for the first
``learning_starts`` env steps), adds the transitions to the uniform replay buffer in the
TrainState, then takes ``gradient_steps`` steps of ``objectives.sac_loss``: twin critics
(a 2-member ensemble, every critic leaf with a leading dim 2), a learned temperature
``log_alpha`` aiming at the entropy ``-|A|``, one Adam per part, and the target critics
moved by ``soft_update(target, online, tau)`` after every gradient step. Before
``learning_starts`` the gradient steps are computed and discarded with ``torch.where``
(no Python branch on a tensor), so one function serves every iteration under vmap.

``make_offpolicy`` is the collect / add / learn / report skeleton shared with
``fxrl.algorithms.td3``: given an ``act`` and a ``learn`` piece it builds ``update`` and
its ``staged(num_seeds, compile)`` form, in which the env step and the gradient step are
each ``fxrl.compile(vmap(piece))`` and the loops and the (in-place) buffer write stay in
Python. The replay storage is written in place (DESIGN's one exception to purity): after
``update(state)``, ``state.buffer``'s storage is the new state's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from fxrl import buffers, distributions, envs, nn, objectives, optim, random, specs, tree
from fxrl.algorithms import core
from fxrl.algorithms.core import Algorithm, check_config

__all__ = ["SWEEPABLE", "Config", "TrainState", "make", "make_offpolicy", "train", "train_host"]

# Config fields that enter the update only as numbers (see ``core.batched``'s ``sweep``);
# ``alpha_init`` is read by ``init``, so it is not among them.
SWEEPABLE = ("actor_lr", "critic_lr", "alpha_lr", "gamma", "tau")
# swept as float64: they meet float64 math (a schedule) or only tensors with dims
SWEEP_FLOAT64 = ("actor_lr", "critic_lr", "alpha_lr")

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0  # the actor's log-std range (CleanRL's, SB3's is -20..2)


@dataclasses.dataclass(frozen=True)
class Config:
    """SAC's settings. Defaults suit Pendulum-v1 (RL Zoo's SAC there: lr 1e-3, batch 256,
    2x256 ReLU nets, tau 0.005, one gradient step per env step; 20k steps)."""

    env: str = "Pendulum-v1"  # a pure env id (fxrl.envs.registered()) with Box actions
    total_steps: int = 20_000  # env steps per seed for train()
    num_envs: int = 1  # envs stepped together per seed
    rollout_steps: int = 1  # steps per env per update
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
        core.check_env_id(self)
        core.check_positive(
            self, "total_steps", "num_envs", "rollout_steps", "gradient_steps", "buffer_size",
            "batch_size",
        )  # fmt: skip
        for f in ("actor_lr", "critic_lr", "alpha_lr", "alpha_init"):
            check_config(self, f, float(getattr(self, f)) > 0, "a positive number")
        check_config(self, "gamma", 0.0 <= float(self.gamma) <= 1.0, "a number in [0, 1]")
        check_config(self, "tau", 0.0 < float(self.tau) <= 1.0, "a number in (0, 1]",
                     "TorchRL's SoftUpdate(eps=0.995) is tau=0.005.")  # fmt: skip
        ok = isinstance(self.learning_starts, int) and self.learning_starts >= 0
        check_config(self, "learning_starts", ok, "an int >= 0")
        ok = self.target_entropy is None or isinstance(self.target_entropy, (int, float))
        check_config(self, "target_entropy", ok, "None (-|A|) or a number")
        _check_hidden(self)


def _check_hidden(config: Any) -> None:
    ok = len(config.hidden) > 0 and all(isinstance(h, int) and h > 0 for h in config.hidden)
    check_config(config, "hidden", ok, "a non-empty tuple of positive ints, e.g. (256, 256)")


@tree.dataclass
class TrainState:
    """Everything one off-policy actor-critic agent is between updates (SAC and TD3)."""

    params: Any  # {"actor", "critic" [2, ...] (twin critics), ("log_alpha" [] for SAC)}
    target_params: Any  # {"critic"} for SAC, {"actor", "critic"} for TD3
    opt_state: Any  # one Adam state per part of params
    env_state: Any  # the batch env's state [num_envs]
    obs: Tensor  # [num_envs, obs_dim] what the policy acts on next
    noise: Any  # acting-noise state: {} (SAC, TD3's Gaussian) or OUState [num_envs, A]
    buffer: Any  # replay (fxrl.buffers, uniform), storage written in place
    key: Tensor  # [2]
    steps: Tensor  # [] int64 env steps so far
    gradient_steps: Tensor  # [] int64 gradient steps taken (discarded ones not counted)


# ------------------------------------------------------------------------------ networks


def continuous_env(config: Any) -> envs.Env:
    """The pure env of ``config.env``, checked: flat Box observations and actions."""

    def check(env: envs.Env) -> None:
        spec = env.action_spec
        ok = isinstance(spec, specs.Box) and len(spec.shape) == 1
        ok = ok and bool(torch.isfinite(spec.low).all() and torch.isfinite(spec.high).all())
        check_config(
            config, "env", ok, f"an env with bounded Box [A] actions; it has {spec!r}",
            "Use fxrl.algorithms.dqn or ppo for discrete actions: CartPole-v1, Acrobot-v1.",
        )  # fmt: skip
        obs = env.observation_spec
        ok = isinstance(obs, specs.Box) and len(obs.shape) == 1
        check_config(config, "env", ok, f"flat Box observations for the MLPs; it has {obs!r}")

    return core.make_env(config.env, check)


def critic_model(obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> nn.Model:
    """``Q(params, obs [*B, O], action [*B, A]) -> q [*B]``, a ReLU MLP on ``[obs, action]``."""
    net = nn.mlp(obs_dim + action_dim, 1, hidden, "relu")

    def apply(params: Any, obs: Tensor, action: Tensor) -> Tensor:
        return net.apply(params, torch.cat([obs, action], -1)).squeeze(-1)

    return nn.Model(net.init, apply)


def twin_init(critic: nn.Model, key: Tensor) -> Any:
    """Two critics stacked on a leading dim 2: the ensemble the losses expect."""
    return tree.stack([critic.init(k) for k in random.split(key, 2).unbind(-2)])


def adam_parts(lrs: dict[str, float]) -> tuple[Callable, Callable]:
    """One Adam per top-level part of params: ``(init(params), step(grads, state, params))``."""
    opts = {name: core.adam(lr) for name, lr in lrs.items()}

    def init(params: dict) -> dict:
        return {name: opt.init(params[name]) for name, opt in opts.items()}

    def step(grads: dict, opt_state: dict, params: dict) -> tuple[dict, dict]:
        new_params, new_state = dict(params), {}
        for name, opt in opts.items():
            updates, new_state[name] = opt.update(grads[name], opt_state[name], params[name])
            new_params[name] = optim.apply_updates(params[name], updates)
        return new_params, new_state

    return init, step


# ------------------------------------------------------------------------------ skeleton


def _split(key: Tensor, num: int) -> list[Tensor]:
    # Dense copies: a compiled piece called again with its own key output sees the strides
    # it was compiled for (a view into the split would have other strides: a recompile).
    keys = random.split(key, num)
    return [k.clone(memory_format=torch.contiguous_format) for k in keys.unbind(-2)]


def _own_memory(state: Any, key: Tensor) -> Any:
    """Every leaf copied so that it depends on ``key``. Under ``vmap(init)`` the empty
    replay storage would be a stride-0 expand over seeds, which in-place writes refuse."""
    always = key[..., 0] == key[..., 0]
    return tree.map(lambda x: torch.where(always, x, x).contiguous(), state)


def make_offpolicy(
    config: Any,
    benv: envs.Env,
    act: Callable[[Any, Tensor, Tensor, Tensor, Any], tuple[Tensor, Any]],
    learn: Callable[..., tuple[tuple, dict[str, Tensor]]],
) -> Callable[[TrainState], tuple[TrainState, dict[str, Tensor]]]:
    """The update of an off-policy agent from its two pieces (shared by SAC and TD3).

    Args:
      act: ``act(params, obs [N, O], key [2], random_phase [] bool, noise) ->
        (action [N, A], noise)``; ``noise`` is the acting-noise state carried in the
        TrainState (``{}`` for none; every leaf ``[N, ...]``, zeroed where an episode
        ended, so that correlated noise starts afresh with each episode).
      learn: ``learn(learner, batch, key, learning) -> (learner, metrics)``, one
        gradient step on a sampled ``batch``; ``learner = (params, target_params,
        opt_state, gradient_steps)``; with ``learning`` False it returns ``learner``
        unchanged. The batch is drawn outside ``learn`` (eagerly in the staged form:
        ``buffers.sample``'s emptiness check reads the buffer size as a Python int).
    Returns:
      ``update(state) -> (state, metrics)`` with ``update.staged(num_seeds, compile)``
      and ``update.learn``, ``update.act`` (the pieces ``train_host`` drives).
    """
    steps_per_update = config.num_envs * config.rollout_steps

    def env_step(params: Any, random_phase: Tensor, carry: tuple) -> tuple[tuple, dict]:
        env_state, obs, noise, key = carry
        key, k_act = _split(key, 2)
        action, noise = act(params, obs, k_act, random_phase, noise)
        env_state, ts = benv.step(env_state, action)
        done = ts.terminated | ts.truncated
        noise = tree.where(done, tree.map(torch.zeros_like, noise), noise)
        out = {"obs": obs, "action": action, "reward": ts.reward, "next_obs": ts.obs,
               "terminated": ts.terminated, "truncated": ts.truncated,
               "episode_return": ts.info["episode_return"],
               "episode_length": ts.info["episode_length"]}  # fmt: skip
        return (env_state, ts.info["next_obs"], noise, key), out

    def add(buffer: Any, traj: dict) -> Any:
        fields = ("obs", "action", "reward", "next_obs", "terminated")
        return buffers.add(buffer, {k: traj[k].flatten(0, 1) for k in fields})

    def sample(buffer: Any, key: Tensor) -> tuple[dict, Tensor]:
        k_sample, k_learn = _split(key, 2)
        batch, _ = buffers.sample(buffer, k_sample, config.batch_size)
        return batch, k_learn

    def report(traj: dict, steps: Tensor, count: Tensor, learning: Tensor, m: dict) -> dict:
        done = traj["terminated"] | traj["truncated"]
        out = core.episode_metrics(done, traj["episode_return"], traj["episode_length"])
        nan = torch.tensor(float("nan"))
        out.update({k: torch.where(learning, v.float().nanmean(), nan) for k, v in m.items()})
        out.update(steps=steps, gradient_steps=count)
        return out

    def build(wrap: Callable, wrap_eager: Callable, loop: Callable) -> Callable:
        step_, learn_, report_ = wrap(env_step), wrap(learn), wrap(report)
        add_, sample_ = wrap_eager(add), wrap_eager(sample)

        def grad_step(c: tuple, key: Tensor, buffer: Any, learning: Tensor) -> tuple:
            batch, k_learn = sample_(buffer, key)
            return learn_(c, batch, k_learn, learning)

        def update(state: TrainState) -> tuple[TrainState, dict[str, Tensor]]:
            key, k_roll, k_learn = _split(state.key, 3)
            random_phase = state.steps < config.learning_starts
            # collect: rollout_steps steps of num_envs envs, into the replay buffer
            carry = (state.env_state, state.obs, state.noise, k_roll)
            carry, traj = loop(lambda c, _: step_(state.params, random_phase, c), carry,
                               config.rollout_steps)  # fmt: skip
            env_state, obs, noise, _ = carry
            buffer = add_(state.buffer, traj)
            steps = state.steps + steps_per_update
            learning = steps >= config.learning_starts
            # learn: gradient_steps steps, discarded (not branched over) before learning_starts
            learner = (state.params, state.target_params, state.opt_state, state.gradient_steps)
            keys = random.split(k_learn, config.gradient_steps)
            learner, m = loop(lambda c, k: grad_step(c, k, buffer, learning), learner, keys)
            params, target, opt_state, count = learner
            # report
            metrics = report_(traj, steps, count, learning, m)
            new = TrainState(params, target, opt_state, env_state, obs, noise, buffer, key, steps,
                             count)  # fmt: skip
            return new, metrics

        return update

    def scan_loop(body: Callable, carry: Any, xs: Any) -> tuple[Any, Any]:
        return core.scan(body, carry, torch.arange(xs) if isinstance(xs, int) else xs)

    def identity(fn: Callable) -> Callable:
        return fn

    def staged(num_seeds: int, compile: bool | str) -> Callable:
        eager = torch.func.vmap if num_seeds > 1 else identity
        wrap = core.staged_wrap(num_seeds, compile)
        return build(wrap, eager, core.staged_loop(num_seeds))

    update = build(identity, identity, scan_loop)
    update.staged = staged  # type: ignore[attr-defined]
    update.learn = learn  # type: ignore[attr-defined]  # the gradient half, for train_host
    update.act = act  # type: ignore[attr-defined]  # acting with a noise state, for train_host
    return update


def init_state(
    config: Any,
    benv: envs.Env,
    key: Tensor,
    params: dict,
    target: dict,
    opt_state: dict,
    noise: Any = None,
) -> TrainState:
    """A fresh TrainState: env reset, an empty uniform buffer, counters at 0, the acting
    noise state ``noise`` (default ``{}``: none)."""
    k_env, k_state = random.split(key).unbind(-2)
    env_state, ts = benv.reset(k_env)
    spec = benv.action_spec
    one = {"obs": ts.obs[0], "action": spec.zeros().to(ts.obs.dtype), "reward": ts.reward[0],
           "next_obs": ts.obs[0], "terminated": ts.terminated[0]}  # fmt: skip
    buffer = buffers.init(one, config.buffer_size)
    zero = torch.zeros((), dtype=torch.int64)
    noise = {} if noise is None else noise
    state = TrainState(params, target, opt_state, env_state, ts.info["next_obs"], noise,
                       buffer, k_state, zero, zero)  # fmt: skip
    return _own_memory(state, key)


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
    lrs = {"actor": config.actor_lr, "critic": config.critic_lr}
    if config.learn_alpha:
        lrs["log_alpha"] = config.alpha_lr
    opt_init, opt_step = adam_parts(lrs)
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

    def act(params: Any, obs: Tensor, key: Tensor, random_phase: Tensor, noise: Any) -> tuple:
        k_uniform, k_policy = random.split(key).unbind(-2)
        uniform = spec.sample(k_uniform, (config.num_envs,)).to(env.dtype)
        drawn = actor_dist(params["actor"], obs).sample(k_policy)
        return torch.where(random_phase, uniform, drawn), noise  # SAC's noise is its policy

    def loss_fn(params: Any, target: Any, batch: dict, key: Tensor) -> tuple[Tensor, dict]:
        return objectives.sac_loss(
            actor_dist, critic.apply, params, target, batch, key, gamma=config.gamma,
            alpha=alpha, target_entropy=target_entropy,
        )  # fmt: skip

    def learn(learner: tuple, batch: dict, key: Tensor, learning: Tensor) -> tuple[tuple, dict]:
        params, target, opt_state, count = learner
        grads, aux = torch.func.grad(loss_fn, has_aux=True)(params, target, batch, key)
        new_params, new_opt = opt_step(grads, opt_state, params)
        new_target = objectives.soft_update(target, {"critic": new_params["critic"]}, config.tau)
        new = (new_params, new_target, new_opt, count + 1)
        m = {k: aux[k] for k in ("loss", "critic_loss", "actor_loss", "alpha_loss", "alpha",
                                 "entropy", "q")}  # fmt: skip
        return tree.where(learning, new, learner), m

    def init(key: Tensor) -> TrainState:
        k_actor, k_critic, k_rest = random.split(key, 3).unbind(-2)
        params = {"actor": actor.init(k_actor), "critic": twin_init(critic, k_critic)}
        if config.learn_alpha:
            params["log_alpha"] = torch.full((), math.log(config.alpha_init), dtype=env.dtype)
        target = {"critic": tree.map(torch.clone, params["critic"])}
        return init_state(config, benv, k_rest, params, target, opt_init(params))

    update = make_offpolicy(config, benv, act, learn)
    return Algorithm(init, update, policy, config, env, config.num_envs * config.rollout_steps)


def train(config: Config, key: Tensor, num_seeds: int = 1, *, compile: bool | str = True,
          callback: Any = None) -> tuple[TrainState, dict]:  # fmt: skip
    """Train for ``config.total_steps`` env steps per seed, seeds vmapped in one program.

    Returns ``(state, metrics)``: the final TrainState (leading [num_seeds] dim when
    ``num_seeds > 1``) and each metric stacked per iteration ``[iterations, (seeds)]``.
    ``compile``: True (the env step and the gradient step compiled by ``fxrl.compile``),
    a backend name, or False (eager).
    """
    return core.train(make(config), key, num_seeds, compile=compile, callback=callback)


def train_host(
    algo: Algorithm,
    env: envs.Env,
    key: Tensor,
    total_steps: int | None = None,
    *,
    callback: Callable[[int, dict], None] | None = None,
) -> tuple[TrainState, list[dict]]:
    """Train SAC or TD3 on a host env (gymnasium, through ``fxrl.collector``).

    A host env cannot live in the pure TrainState, so the collect half is
    ``fxrl.collector`` (uniform random actions for the first ``learning_starts`` frames,
    then ``algo.policy(params, obs, key, mode="random")``; TD3 with ``noise_type="ou"``:
    the update's own acting step, its noise state carried by the collector and restarted
    with each episode) and the learn half is the very
    ``learn`` step ``algo.update`` takes: per batch of ``num_envs * rollout_steps``
    frames, ``gradient_steps`` steps on batches drawn uniformly from the replay buffer.

        algo = sac.make(sac.Config(env="Pendulum-v1", num_envs=4))
        state, history = sac.train_host(algo, envs.gym("Pendulum-v1", num_envs=4), key)

    Args:
      algo: ``sac.make(...)`` or ``td3.make(...)``; its config sets the budget and sizes.
      env: an auto-resetting env with ``config.num_envs`` envs (``envs.gym(id, num_envs=N)``).
      total_steps: frames to collect; default ``config.total_steps``.
      callback: ``callback(i, metrics)`` after each batch.
    Returns:
      ``(state, history)``: a TrainState whose params, targets, optimizer states, buffer
      and counters are trained (its ``env_state``/``obs`` are the unused pure env's), and
      per batch ``{"steps", "gradient_steps", "episode_return" [E], losses...}``.
    """
    from fxrl.collector import collector

    config = algo.config
    learn = getattr(algo.update, "learn", None)
    if learn is None or not isinstance(algo, Algorithm):
        raise TypeError(f"train_host: expected sac.make(...) or td3.make(...), got {algo!r:.80}.")
    if env.batch_shape != (config.num_envs,):
        raise ValueError(
            f"train_host: env has batch shape {tuple(env.batch_shape)}; the config expects "
            f"({config.num_envs},). Use fxrl.envs.gym({config.env!r}, num_envs={config.num_envs})."
        )
    total = config.total_steps if total_steps is None else total_steps
    k_init, k_collect, k_learn = random.split(key, 3).unbind(-2)
    state = algo.init(k_init)
    learner = (state.params, state.target_params, state.opt_state, state.gradient_steps)
    buffer = state.buffer
    ou = getattr(config, "noise_type", "gaussian") == "ou"  # a noise state per env
    batches = collector(
        env, _host_policy(algo, ou), lambda: learner[0], k_collect,
        config.num_envs * config.rollout_steps, total, config.learning_starts,
        policy_state=state.noise if ou else None,
    )  # fmt: skip
    fields = ("obs", "action", "reward", "next_obs", "terminated")
    history = []
    for i, (batch, stats) in enumerate(batches):
        # collect (the collector), add, then learn exactly as algo.update does
        buffer = buffers.add(buffer, {f: batch[f] for f in fields})
        learning = torch.tensor(stats["frames"] >= config.learning_starts)
        metrics: dict[str, Any] = {}
        for k in random.split(random.fold_in(k_learn, i), config.gradient_steps).unbind(-2):
            k_sample, k_step = _split(k, 2)
            sampled, _ = buffers.sample(buffer, k_sample, config.batch_size)
            learner, metrics = learn(learner, sampled, k_step, learning)
        metrics = {k: v.float().mean() if bool(learning) else torch.tensor(float("nan"))
                   for k, v in metrics.items()}  # fmt: skip
        metrics.update(steps=stats["frames"], gradient_steps=int(learner[3]),
                       episode_return=stats["episode_return"])  # fmt: skip
        history.append(metrics)
        if callback is not None:
            callback(i, metrics)
    params, target, opt_state, count = learner
    steps = torch.tensor(batches.frames)
    state = state.replace(params=params, target_params=target, opt_state=opt_state,
                          buffer=buffer, steps=steps, gradient_steps=count)  # fmt: skip
    if ou:  # the noise as the pure update leaves it: zero where an episode just ended
        noise = batches.policy_state
        state = state.replace(noise=tree.where(batches.is_init, tree.map(torch.zeros_like, noise),
                                               noise))  # fmt: skip
    return state, history


def _host_policy(algo: Algorithm, ou: bool) -> Callable[..., Any]:
    """``train_host``'s acting policy: ``algo.policy``'s random mode, or with ``ou`` the
    update's own ``act`` with the noise state the collector carries, restarted at 0 where
    ``is_init`` marks an episode's first step (the pure update zeroes it where one ended)."""
    if not ou:
        return lambda p, obs, k: algo.policy(p, obs, k, mode="random")
    act, off = algo.update.act, torch.tensor(False)  # type: ignore[attr-defined]

    def policy(p: Any, obs: Tensor, noise: Any, is_init: Tensor, k: Tensor) -> tuple:
        noise = tree.where(is_init, tree.map(torch.zeros_like, noise), noise)
        return act(p, obs, k, off, noise)

    return policy
