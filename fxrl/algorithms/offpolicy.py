"""The off-policy skeleton DQN, SAC and TD3 share: act, store, sample, learn, report.

One off-policy ``update`` is, for every such algorithm here:

    explore = exploration(state.steps)            # DQN: epsilon; SAC/TD3: "still uniform?"
    for t in range(num_steps):                    # collect num_envs x num_steps transitions
        action, noise = act(params, obs, key, explore, noise)
        env_state, ts = env.step(env_state, action)
    buffer = buffers.add(buffer, transitions(traj))   # in place (DESIGN's one exception)
    for k in range(gradient_steps):               # learn, discarded before learning_starts
        batch, key = sample(buffer, key)
        learner, metrics = learn(learner, batch, key, learning)
    metrics = report(...)                         # the metrics contract of fxrl.algorithms.core

An algorithm file writes only its own pieces (``act``, ``learn``, its networks and its
Config) and calls ``make_update``; the loops, the replay buffer, the warm-up before
``learning_starts`` (gradient steps computed and discarded with ``torch.where``, no
Python branch on a tensor, so one function serves every iteration under vmap and
compile) and the report live here. So do the
pieces more than one of them builds: the checked env (``continuous_env``,
``discrete_env``), the twin critics (``critic_model``, ``twin_init``), one Adam per part
of the params (``adam_parts``), the fresh ``TrainState`` (``init_state``) and training
on a host env through ``fxrl.collector`` (``train_host``).

Config fields the skeleton reads: ``num_envs``, ``num_steps`` (steps per env per
update), ``gradient_steps``, ``batch_size``, ``buffer_size``, ``learning_starts``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from fxrl import buffers, envs, nn, objectives, optim, random, specs, tree
from fxrl.algorithms import core
from fxrl.algorithms.core import Algorithm, check_config
from fxrl.scan import scan

__all__ = [
    "TRANSITION_FIELDS",
    "TrainState",
    "adam_parts",
    "check_hidden",
    "continuous_env",
    "critic_model",
    "discrete_env",
    "greedy_or_noisy",
    "init_state",
    "make_update",
    "sample_uniform",
    "train_host",
    "transitions",
    "twin_init",
]

TRANSITION_FIELDS = ("obs", "action", "reward", "next_obs", "terminated")

Learner = tuple  # (params, target_params, opt_state, gradient_steps [] int64)


@tree.dataclass
class TrainState:
    """Everything one off-policy agent is between updates (DQN, SAC and TD3)."""

    params: Any  # DQN: the Q-net; SAC/TD3: {"actor", "critic" [2, ...], ("log_alpha")}
    target_params: Any  # DQN: the target Q-net; SAC: {"critic"}; TD3: {"actor", "critic"}
    opt_state: Any  # the optimizer's state (SAC/TD3: one Adam state per part of params)
    env_state: Any  # the batch env's state [num_envs]
    obs: Tensor  # [num_envs, obs_dim] what the policy acts on next
    noise: Any  # acting-noise state: {} (none: DQN, SAC, TD3's Gaussian) or OUState [N, A]
    buffer: Any  # replay (fxrl.buffers), storage written in place
    key: Tensor  # [2]
    steps: Tensor  # [] int64 env steps so far
    gradient_steps: Tensor  # [] int64 gradient steps taken (discarded ones not counted)


# ------------------------------------------------------------------------------ checks


def check_hidden(config: Any) -> None:
    """``config.hidden`` is a non-empty tuple of positive ints (the example: its default)."""
    default = {f.name: f.default for f in dataclasses.fields(config)}["hidden"]
    ok = len(config.hidden) > 0 and all(isinstance(h, int) and h > 0 for h in config.hidden)
    check_config(config, "hidden", ok, f"a non-empty tuple of positive ints, e.g. {default}")


def _check_flat_obs(config: Any, env: envs.Env, images: bool = False) -> None:
    obs = env.observation_spec
    ok = isinstance(obs, specs.Box) and len(obs.shape) == 1
    if images:  # DQN: uint8 frames [C, 84, 84] go through the Nature DQN network
        ok = ok or (isinstance(obs, specs.Box) and obs.dtype == torch.uint8 and
                    len(obs.shape) == 3 and tuple(obs.shape[1:]) == (84, 84))  # fmt: skip
    want = "flat Box observations for the MLPs" + (" (or uint8 frames [C, 84, 84])" * images)
    check_config(config, "env", ok, f"{want}; it has {obs!r}")


def continuous_env(config: Any) -> envs.Env:
    """The pure env of ``config.env``, checked: flat Box observations, bounded Box actions."""

    def check(env: envs.Env) -> None:
        spec = env.action_spec
        ok = isinstance(spec, specs.Box) and len(spec.shape) == 1
        ok = ok and bool(torch.isfinite(spec.low).all() and torch.isfinite(spec.high).all())
        fix = "Use fxrl.algorithms.dqn or ppo for discrete actions: CartPole-v1, Acrobot-v1."
        check_config(
            config, "env", ok, f"an env with bounded Box [A] actions; it has {spec!r}", fix
        )
        _check_flat_obs(config, env)

    return core.make_env(config.env, check)


def discrete_env(config: Any) -> envs.Env:
    """The env of ``config.env``, checked: flat Box observations (or uint8 frames [C, 84,
    84]), Discrete actions."""

    def check(env: envs.Env) -> None:
        spec = env.action_spec
        want = f"an env with Discrete actions (DQN has one Q-value per action); it has {spec!r}"
        fix = (
            "Use fxrl.algorithms.sac or td3 for continuous actions, or a discrete env: "
            "CartPole-v1, Acrobot-v1, MountainCar-v0."
        )
        check_config(config, "env", isinstance(spec, specs.Discrete), want, fix)
        _check_flat_obs(config, env, images=True)

    return core.make_env(config.env, check)


# ------------------------------------------------------------------------------ networks


def critic_model(obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> nn.Model:
    """``Q(params, obs [*B, O], action [*B, A]) -> q [*B]``, a ReLU MLP on ``[obs, action]``."""
    net = nn.mlp(obs_dim + action_dim, 1, hidden, "relu")

    def apply(params: Any, obs: Tensor, action: Tensor) -> Tensor:
        return net.apply(params, torch.cat([obs, action], -1)).squeeze(-1)

    return nn.Model(net.init, apply)


def twin_init(critic: nn.Model, key: Tensor) -> Any:
    """Two critics stacked on a leading dim 2: the ensemble the losses expect."""
    return tree.stack([critic.init(k) for k in random.split(key, 2).unbind(-2)])


def adam_parts(lrs: dict[str, Any]) -> tuple[Callable, Callable]:
    """One Adam per top-level part of params: ``(init(params), step(grads, state, params))``."""
    opts = {name: optim.adam(lr) for name, lr in lrs.items()}

    def init(params: dict) -> dict:
        return {name: opt.init(params[name]) for name, opt in opts.items()}

    def step(grads: dict, opt_state: dict, params: dict) -> tuple[dict, dict]:
        new_params, new_state = dict(params), {}
        for name, opt in opts.items():
            updates, new_state[name] = opt.update(grads[name], opt_state[name], params[name])
            new_params[name] = optim.apply_updates(params[name], updates)
        return new_params, new_state

    return init, step


def greedy_or_noisy(
    name: str,
    action: Tensor,
    noisy: Callable[[Tensor], Tensor],
    key: Tensor | None,
    mode: str,
) -> Tensor:
    """A policy's action by ``mode``: ``"mode"``/``"mean"`` the greedy ``action``,
    ``"random"`` ``noisy(key)`` (DQN: epsilon-greedy; TD3: Gaussian noise); anything
    else, or ``"random"`` without a key, is a one-line ``ValueError``."""
    if mode in ("mode", "mean"):
        return action
    if mode != "random" or key is None:
        raise ValueError(
            f"{name} policy: mode={mode!r} with key={key!r}; expected mode='mode' (greedy) "
            "or 'random' with a key [2]."
        )
    return noisy(key)


# ------------------------------------------------------------------------------ pieces


def transitions(traj: dict[str, Tensor], n_step: int = 1, gamma: float = 0.99) -> dict:
    """A rollout's ``[T, N]`` steps as ``[T * N]`` replay transitions (``TRANSITION_FIELDS``);
    with ``n_step > 1``, n-step transitions (cut at episode and rollout ends) with their
    own ``discount``."""
    fields = {k: traj[k] for k in TRANSITION_FIELDS}
    if n_step > 1:
        tr = objectives.n_step_transitions(
            traj["reward"], traj["terminated"], traj["truncated"], gamma=gamma, n=n_step
        )
        index = tr.next_index.unsqueeze(-1).expand_as(traj["next_obs"])
        fields.update(
            reward=tr.reward,
            next_obs=traj["next_obs"].gather(0, index),
            terminated=tr.terminated,
            discount=tr.discount,
        )
    return tree.map(lambda x: x.flatten(0, 1), fields)


def sample_uniform(batch_size: int) -> Callable[[Any, Tensor], tuple[dict, Tensor]]:
    """``sample(buffer, key) -> (batch, learn_key)``: ``batch_size`` transitions drawn with
    one half of ``key``, the other half left for the gradient step (SAC's, TD3's)."""

    def sample(buffer: Any, key: Tensor) -> tuple[dict, Tensor]:
        k_sample, k_learn = random.split(key, 2).unbind(-2)
        batch, _ = buffers.sample(buffer, k_sample, batch_size)
        return batch, k_learn

    return sample


def init_state(
    config: Any,
    benv: envs.Env,
    env_key: Tensor,
    state_key: Tensor,
    params: Any,
    target: Any,
    opt_state: Any,
    *,
    noise: Any = None,
    n_step: int = 1,
    prioritized: bool = False,
    alpha: float = 0.6,
    beta: float = 0.4,
) -> TrainState:
    """A fresh TrainState: the env reset with ``env_key``, an empty replay buffer of
    ``config.buffer_size`` (with a ``discount`` field for ``n_step > 1``; prioritized
    with ``alpha``, ``beta`` if asked), counters at 0, the acting noise state ``noise``
    (default ``{}``: none) and ``state_key`` for the updates."""
    env_state, ts = benv.reset(env_key)
    action = benv.action_spec.zeros(device=env_key.device)
    if action.is_floating_point():
        action = action.to(ts.obs.dtype)
    one = {
        "obs": ts.obs[0],
        "action": action,
        "reward": ts.reward[0],
        "next_obs": ts.obs[0],
        "terminated": ts.terminated[0],
    }
    if n_step > 1:
        one["discount"] = ts.reward[0]
    buffer = buffers.init(one, config.buffer_size, prioritized=prioritized, alpha=alpha, beta=beta)
    zero = torch.zeros((), dtype=torch.int64, device=env_key.device)
    obs = ts.info["next_obs"]
    noise = {} if noise is None else noise
    return TrainState(
        params, target, opt_state, env_state, obs, noise, buffer, state_key, zero, zero
    )


# ------------------------------------------------------------------------------ update


def make_update(
    config: Any,
    benv: envs.Env,
    exploration: Callable[[dict, Tensor], Tensor],
    act: Callable[[dict, Any, Tensor, Tensor, Tensor, Any], tuple[Tensor, Any]],
    learn: Callable[[dict, Learner, dict, Tensor, Tensor], tuple[Learner, dict[str, Tensor]]],
    *,
    hyperparam_dtypes: dict[str, torch.dtype],
    sample: Callable[[Any, Tensor], tuple[dict, Tensor]] | None = None,
    n_step: int = 1,
    prioritized: bool = False,
    exploration_metric: str | None = None,
) -> Callable[[TrainState], tuple[TrainState, dict[str, Tensor]]]:
    """The update of an off-policy agent from its pieces.

    Every piece takes ``hp`` first: the update's hyperparameters (``core.hyperparams``:
    the Config's numbers, or a sweep's tensors for some).

    Args:
      exploration: ``exploration(hp, steps [] int64) -> explore``, read once per update
        from the env steps before it: DQN's epsilon, SAC's and TD3's "uniform actions
        still?".
      act: ``act(hp, params, obs [N, O], key [2], explore, noise) -> (action [N, ...],
        noise)``; ``noise`` is the acting-noise state carried in the TrainState (``{}``
        for none; every leaf ``[N, ...]``, zeroed where an episode ended, so that
        correlated noise starts afresh with each episode).
      learn: ``learn(hp, learner, batch, key, learning) -> (learner, metrics)``, one
        gradient step on a sampled ``batch``; ``learner = (params, target_params,
        opt_state, gradient_steps)``; with ``learning`` False it returns ``learner``
        unchanged.
      hyperparam_dtypes: the algorithm's ``HYPERPARAMS`` (``{field: dtype}``, ``gamma``
        among them): what ``core.hyperparams`` reads of the Config.
      sample: ``sample(buffer, key) -> (batch, learn_key)``; default ``sample_uniform``.
      n_step: the replay's n-step returns (``transitions``).
      prioritized: the replay is prioritized: ``learn``'s metric ``"priority"``
        [batch_size] is written into the buffer at the sampled ``batch["index"]``
        (learning or not) and not reported; the gradient steps are then a Python loop
        (the next sample reads the priorities just written), not a ``fxrl.scan``.
      exploration_metric: report ``explore`` under this name (DQN: ``"epsilon"``).
    Returns:
      ``update(state, hyperparams=None) -> (state, metrics)`` with ``update.learn`` and
      ``update.act`` (the pieces ``train_host`` drives). ``fxrl.compile`` (or
      ``core.batched``) compiles the whole update, seeds vmapped, as one program with both
      loops rolled.
    """
    steps_per_update = config.num_envs * config.num_steps
    sample = sample_uniform(config.batch_size) if sample is None else sample

    def act_step(hp: dict, params: Any, explore: Tensor, c: tuple) -> tuple[tuple, Tensor, dict]:
        obs, noise, key = c
        key, k_act = random.split(key, 2).unbind(-2)
        action, noise = act(hp, params, obs, k_act, explore, noise)
        return (obs, noise, key), action, {"obs": obs, "action": action}

    def observe_step(c: tuple, ts: Any) -> tuple[tuple, dict]:
        _, noise, key = c
        done = ts.terminated | ts.truncated
        noise = tree.where(done, tree.map(torch.zeros_like, noise), noise)
        out = {"reward": ts.reward, "next_obs": ts.obs, "terminated": ts.terminated,
               "truncated": ts.truncated, "episode_return": ts.info["episode_return"],
               "episode_length": ts.info["episode_length"]}  # fmt: skip
        return (ts.info["next_obs"], noise, key), out

    def env_step(hp: dict, params: Any, explore: Tensor, carry: tuple) -> tuple[tuple, dict]:
        env_state, obs, noise, key = carry
        c, action, record = act_step(hp, params, explore, (obs, noise, key))
        env_state, ts = benv.step(env_state, action)
        (obs, noise, key), seen = observe_step(c, ts)
        return (env_state, obs, noise, key), {**record, **seen}

    def add(buffer: Any, traj: dict, hp: dict) -> Any:
        return buffers.add(buffer, transitions(traj, n_step, hp["gamma"]))

    def prioritize(buffer: Any, batch: dict, m: dict) -> tuple[Any, dict]:
        m = dict(m)
        return buffers.update_priorities(buffer, batch["index"], m.pop("priority")), m

    def report(traj: dict, steps: Tensor, count: Tensor, learning: Tensor, m: dict) -> dict:
        done = traj["terminated"] | traj["truncated"]
        out = core.episode_metrics(done, traj["episode_return"], traj["episode_length"])
        out.update({k: torch.where(learning, v.float().nanmean(), torch.nan) for k, v in m.items()})
        out.update(steps=steps, gradient_steps=count)
        return out

    def loop(body: Callable, carry: Any, xs: Any) -> tuple[Any, Any]:
        return scan(body, carry, xs)  # an int: 0..xs-1 on the carry's device

    def begin(hp: dict, state: TrainState) -> tuple[tuple, tuple]:
        key, k_roll, k_learn = random.split(state.key, 3).unbind(-2)
        explore = exploration(hp, state.steps)
        return (state.params, explore, k_learn, key), (state.obs, state.noise, k_roll)

    def update(
        state: TrainState, hyperparams: dict | None = None
    ) -> tuple[TrainState, dict[str, Tensor]]:
        hp = core.hyperparams(config, hyperparam_dtypes, hyperparams)
        ctx, (obs, noise, k_roll) = begin(hp, state)
        params, explore = ctx[0], ctx[1]
        # collect: num_steps steps of num_envs envs, into the replay buffer
        carry = (state.env_state, obs, noise, k_roll)
        carry, traj = loop(lambda c, _: env_step(hp, params, explore, c), carry, config.num_steps)
        env_state, obs, noise, k_roll = carry
        return finish(hp, state.replace(env_state=env_state), ctx, (obs, noise, k_roll), traj)

    def finish(
        hp: dict, state: TrainState, ctx: tuple, c: tuple, traj: dict
    ) -> tuple[TrainState, dict]:
        _, explore, k_learn, key = ctx
        obs, noise, _ = c
        buffer = add(state.buffer, traj, hp)
        steps = state.steps + steps_per_update
        learning = steps >= config.learning_starts
        # learn: gradient_steps steps, discarded (not branched over) before learning_starts
        learner = (state.params, state.target_params, state.opt_state, state.gradient_steps)
        keys = random.split(k_learn, config.gradient_steps)
        if prioritized:  # priorities are written between the steps: a Python loop
            history = []
            for k in keys.unbind(-2):
                batch, k_step = sample(buffer, k)
                learner, m = learn(hp, learner, batch, k_step, learning)
                buffer, m = prioritize(buffer, batch, m)
                history.append(m)
            m = tree.stack(history)
        else:

            def grad_step(c: Learner, k: Tensor) -> tuple[Learner, dict]:
                batch, k_step = sample(buffer, k)
                return learn(hp, c, batch, k_step, learning)

            learner, m = loop(grad_step, learner, keys)
        params, target, opt_state, count = learner
        # report
        metrics = report(traj, steps, count, learning, m)
        if exploration_metric is not None:
            metrics[exploration_metric] = explore.float()
        new = TrainState(
            params, target, opt_state, state.env_state, obs, noise, buffer, key, steps, count
        )
        return new, metrics

    update.in_place = True  # type: ignore[attr-defined]  # writes the replay storage in place
    update.learn = learn  # type: ignore[attr-defined]  # the gradient half, for train_host
    update.act = act  # type: ignore[attr-defined]  # acting with a noise state, for train_host
    update.collect = core.Collect(  # type: ignore[attr-defined]  # for host envs
        begin,
        lambda hp, ctx, c: act_step(hp, ctx[0], ctx[1], c),
        lambda hp, ctx, c, ts: observe_step(c, ts),
        finish,
        config.num_steps,
    )
    return update


# ------------------------------------------------------------------------------ host envs


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
    with each episode) and the learn half is the very ``learn`` step ``algo.update``
    takes: per batch of ``num_envs * num_steps`` frames, ``gradient_steps`` steps on
    batches drawn uniformly from the replay buffer.

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

    learn = getattr(algo.update, "learn", None) if isinstance(algo, Algorithm) else None
    if learn is None or not isinstance(algo.env.action_spec, specs.Box):
        raise TypeError(f"train_host: expected sac.make(...) or td3.make(...), got {algo!r:.80}.")
    config = algo.config
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
        env,
        _host_policy(algo, ou),
        lambda: learner[0],
        k_collect,
        config.num_envs * config.num_steps,
        total,
        config.learning_starts,
        policy_state=state.noise if ou else None,
    )
    history = []
    for i, (batch, stats) in enumerate(batches):
        # collect (the collector), add, then learn exactly as algo.update does
        buffer = buffers.add(buffer, {f: batch[f] for f in TRANSITION_FIELDS})
        learning = torch.tensor(stats["frames"] >= config.learning_starts)
        metrics: dict[str, Any] = {}
        for k in random.split(random.fold_in(k_learn, i), config.gradient_steps).unbind(-2):
            k_sample, k_step = random.split(k, 2).unbind(-2)
            sampled, _ = buffers.sample(buffer, k_sample, config.batch_size)
            learner, metrics = learn(algo.hyperparams, learner, sampled, k_step, learning)
        nan = torch.tensor(float("nan"))
        metrics = {k: v.float().mean() if bool(learning) else nan for k, v in metrics.items()}
        metrics.update(
            steps=stats["frames"],
            gradient_steps=int(learner[3]),
            episode_return=stats["episode_return"],
        )
        history.append(metrics)
        if callback is not None:
            callback(i, metrics)
    params, target, opt_state, count = learner
    steps = torch.tensor(batches.frames)
    state = state.replace(
        params=params,
        target_params=target,
        opt_state=opt_state,
        buffer=buffer,
        steps=steps,
        gradient_steps=count,
    )
    if ou:  # the noise as the pure update leaves it: zero where an episode just ended
        noise = batches.policy_state
        zeros = tree.map(torch.zeros_like, noise)
        state = state.replace(noise=tree.where(batches.is_init, zeros, noise))
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
        return act(algo.hyperparams, p, obs, k, off, noise)

    return policy
