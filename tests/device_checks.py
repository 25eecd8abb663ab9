"""Device-follows-data checks: each runs public fxrl functions on inputs on ``DEVICE``.

``tests/test_device.py`` runs them two ways, so that a tensor fxrl makes without asking
its inputs' device is caught on a machine without a GPU:

- in a fresh process whose default device is ``meta``, set before fxrl is imported, with
  CPU inputs: a factory call without ``device=`` (or a constant made at import or by a
  constructor on the default device) makes a meta tensor, which fails when mixed with a
  CPU input or shows up as a meta leaf of a result;
- in the test process (default device CPU) with ``DEVICE = meta`` inputs: a constant kept
  on the CPU and not moved to the inputs' device at use fails the same way, and so does
  a 0-dim tensor used as an index or read with ``bool``/``int`` (on a GPU, a host sync).

On a GPU the same mistakes put a CPU tensor beside CUDA ones. Every check takes a key on
``DEVICE`` and returns what it computed. Cheap: eager, tiny shapes, one update each.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from typing import Any

import torch

from fxrl import (
    buffers,
    distributions,
    envs,
    exploration,
    nn,
    objectives,
    optim,
    random,
    rollout,
    schedules,
    specs,
    transforms,
    tree,
)
from fxrl.algorithms import core, dqn, maml, ppo, recurrent_ppo, sac, tasks, td3
from fxrl.collector import collector
from fxrl.envs.registry import _BUILTIN

DEVICE = torch.device("cpu")  # where the inputs are (tests/test_device.py: also meta)
LIGHT = False  # True: leave out batched envs, vmapped seeds, sweeps, whole-training loops
CHECKS: dict[str, Callable[[torch.Tensor], Any]] = {}


def check(name: str) -> Callable:
    def register(fn: Callable) -> Callable:
        CHECKS[name] = fn
        return fn

    return register


def t(x: Any, **kw: Any) -> torch.Tensor:
    """An input tensor on ``DEVICE``, whatever the default device."""
    return torch.tensor(x, device=DEVICE, **kw)


def keys(key: torch.Tensor, n: int) -> list[torch.Tensor]:
    return list(random.split(key, n).unbind(-2))


# ------------------------------------------------------------------------------ random, specs


@check("random")
def _random(key: torch.Tensor) -> Any:
    k = keys(key, 10)
    return [
        random.key(t(7)),
        random.key(3, device=DEVICE),
        random.split(key, 3),
        random.fold_in(key, 5),
        random.bits(k[0], (3,)),
        random.uniform(k[1], (3,), minval=-1.0, maxval=t(2.0)),
        random.normal(k[2], (3,), dtype=torch.float64),
        random.randint(k[3], (3,), 0, t([2, 5, 9])),
        random.bernoulli(k[4], 0.3, (3,)),
        random.bernoulli(k[4], t([0.1, 0.9])),
        random.categorical(k[5], t([0.0, 1.0, -1.0]), (4,)),
        random.permutation(k[6], 5),
        random.choice(k[7], 5, (3,)),
        random.choice(k[8], 5, (3,), replace=False),
        random.choice(k[9], 3, (4,), p=t([0.2, 0.3, 0.5])),
        random.ndtri(t([0.01, 0.3, 0.5, 0.999], dtype=torch.float64)),
    ]


def _spec_checks(spec: Any, key: torch.Tensor) -> list[Any]:
    x = spec.sample(key, (2,))
    out = [x, spec.contains(x), spec.project(x), spec.zeros((2,), device=DEVICE)]
    return out


@check("specs")
def _specs(key: torch.Tensor) -> Any:
    k = keys(key, 6)
    box = specs.Box(-1.0, 2.0, (3,))
    out = []
    for spec, kk in [
        (box, k[0]),
        (specs.Box(float("-inf"), 0.0, (2,)), k[1]),
        (specs.Box(0, 5, (2,), dtype=torch.int64), k[2]),
        (specs.Discrete(4), k[3]),
        (specs.MultiDiscrete([2, 3]), k[4]),
        (specs.Binary(3), k[5]),
    ]:
        out += _spec_checks(spec, kk)
    composite = specs.Composite({"a": box, "b": specs.Discrete(2)})
    x = composite.sample(key, (2,))
    out += [x, composite.contains(x), composite.project(x), composite.zeros((2,), device=DEVICE)]
    out.append(box.contains(t([0.5, 0.5])))  # wrong shape: a False on the input's device
    return out


# ------------------------------------------------------------------------------ envs


def _env_checks(env: envs.Env, key: torch.Tensor) -> list[Any]:
    k_reset, k_act, k_act2, k_params = keys(key, 4)
    state, ts = env.reset(k_reset)
    out = [state, ts]
    for k in (k_act, k_act2):
        state, ts = env.step(state, env.action_spec.sample(k, env.batch_shape))
        out += [state, ts]
    out.append(env.observe(state))
    if hasattr(env, "sample_params"):
        params = env.sample_params(k_params)
        out += [params, env.reset(k_reset, params)]
    out.append(env.render(state))
    return out


def _env_check(env_id: str) -> Callable[[torch.Tensor], Any]:
    def run(key: torch.Tensor) -> Any:
        out = _env_checks(envs.make(env_id), key)
        if not LIGHT:
            out += _env_checks(envs.batch(envs.make(env_id), 2), key)
        return out

    return run


# the built-in ids only: a test module may have registered its own envs by now
for _id in sorted(_BUILTIN):
    CHECKS[f"env[{_id}]"] = _env_check(_id)


@check("env wrappers and transforms")
def _wrappers(key: torch.Tensor) -> Any:
    base = envs.make("CartPole-v1", auto_reset=False, episode_stats=False, max_steps=None)
    wrapped = envs.episode_stats(
        envs.auto_reset(
            envs.time_limit(
                envs.transform(
                    base,
                    transforms.observation_norm(running=True),
                    transforms.observation_norm([0.0, 0.1, 0.0, 0.2], [1.0, 2.0, 1.0, 2.0]),
                    transforms.clip(-5.0, 5.0),
                    transforms.reward_scale(0.5, 0.1),
                    transforms.frame_stack(2),
                    transforms.step_counter(3),
                ),
                3,
            )
        )
    )
    out = _env_checks(wrapped, key) + _env_checks(envs.batch(wrapped, 2), key)
    breakout = envs.make("Breakout-MinAtar", auto_reset=False, episode_stats=False)
    pixels = envs.auto_reset(
        envs.transform(breakout, transforms.select([0, 1]), transforms.noop_reset(2))
    )
    out += _env_checks(pixels, key)
    frames = t([[[10, 20, 30]] * 6] * 4, dtype=torch.uint8)
    image = transforms.compose(
        transforms.to_tensor_image(), transforms.resize(2, 3), transforms.grayscale()
    )
    out.append(image(frames))
    return out


@check("env checked")
def _checked(key: torch.Tensor) -> Any:
    return _env_checks(envs.checked(envs.make("Pendulum-v1")), key)


# ------------------------------------------------------------------------------ nn, optim


@check("nn")
def _nn(key: torch.Tensor) -> Any:
    k = keys(key, 8)
    out = []
    for model, x in [
        (nn.linear(3, 2), t([[1.0, 2.0, 3.0]])),
        (nn.mlp(3, 2, (4,), "relu"), t([[1.0, 2.0, 3.0]])),
        (nn.layer_norm(3), t([[1.0, 2.0, 3.0]])),
        (nn.conv2d(1, 2, 3), torch.ones(1, 1, 5, 5, device=DEVICE)),
        (nn.convnet(1, (2, 3), (3, 2), (1, 1)), torch.ones(1, 1, 5, 5, device=DEVICE)),
        (nn.atari_dqn(3), torch.zeros(1, 4, 84, 84, dtype=torch.uint8, device=DEVICE)),
        (nn.sequential(nn.linear(3, 4), torch.tanh, nn.linear(4, 1)), t([[1.0, 2.0, 3.0]])),
    ]:
        params = model.init(k[len(out) % 8])
        out += [params, model.apply(params, x)]
    for cell in (nn.gru(3, 4), nn.lstm(3, 4, num_layers=2)):
        params = cell.init(k[7])
        xs = torch.ones(2, 5, 3, device=DEVICE)
        is_init = t([[True] * 5, [False] * 5])
        out += [params, cell.apply(params, xs), cell.apply(params, xs, None, is_init)]
        out += [cell.initial_carry((5,), device=DEVICE)]
    init_keys = keys(k[6], 10)
    for i, initializer in enumerate(
        [
            nn.initializers.zeros,
            nn.initializers.ones,
            nn.initializers.constant(0.3),
            nn.initializers.uniform(-1.0, 1.0),
            nn.initializers.normal(0.5),
            nn.initializers.torch_default(),
            nn.initializers.lecun_uniform(),
            nn.initializers.kaiming_normal(),
            nn.initializers.xavier_uniform(),
            nn.initializers.orthogonal(),
        ]
    ):
        out.append(initializer(init_keys[i], (3, 4), torch.float32))
    return out


def _optimizer_checks(opt: optim.GradientTransformation) -> list[Any]:
    params = {"w": t([[1.0, -2.0], [0.5, 3.0]]), "b": t([0.1, -0.1])}
    grads = tree.map(lambda x: 0.1 * x + 0.2, params)
    state = opt.init(params)
    out = [state]
    for _ in range(2):
        updates, state = opt.update(grads, state, params)
        params = optim.apply_updates(params, updates)
        out += [updates, state, params]
    return out


@check("optim")
def _optim(key: torch.Tensor) -> Any:
    out = []
    for opt in [
        optim.sgd(0.1),
        optim.sgd(0.1, momentum=0.9, nesterov=True),
        optim.adam(1e-3),
        optim.adam(schedules.linear_schedule(1e-3, 1e-4, 10)),
        optim.adamw(1e-3, weight_decay=0.01),
        optim.rmsprop(1e-3, momentum=0.5, centered=True),
        optim.chain(optim.clip_by_global_norm(0.5), optim.adam(1e-3)),
        optim.adam(t(1e-3)),
    ]:
        out += _optimizer_checks(opt)
    return out


@check("schedules")
def _schedules(key: torch.Tensor) -> Any:
    count = t(3)
    return [
        s(count)
        for s in (
            schedules.constant_schedule(0.1),
            schedules.linear_schedule(1.0, 0.1, 10),
            schedules.cosine_decay_schedule(1.0, 10, 0.1),
            schedules.join_schedules(
                [schedules.constant_schedule(1.0), schedules.linear_schedule(1.0, 0.0, 5)], [2]
            ),
            schedules.warmup_cosine_decay_schedule(0.0, 1.0, 2, 10),
        )
    ] + [exploration.linear_anneal(count, 1.0, 0.05, 10)]


# ------------------------------------------------------------------------------ distributions


@check("distributions")
def _distributions(key: torch.Tensor) -> Any:
    k1, k2 = keys(key, 2)
    loc, scale = t([[0.1, -0.2]]), t([[0.5, 1.5]])
    out = []
    for dist in (
        distributions.normal(loc, scale),
        distributions.normal(loc, 0.3),
        distributions.tanh_normal(loc, scale),
        distributions.tanh_normal(loc, scale, low=-2.0, high=t([1.0, 3.0])),
        distributions.categorical(t([[0.0, 1.0, -1.0]])),
        distributions.delta(loc),
    ):
        x, log_prob = dist.sample_and_log_prob(k1)
        out += [dist.sample(k1, 2), x, log_prob, dist.log_prob(x), dist.entropy(k2), dist.mode()]
        out.append(distributions.draw(dist, k2, "random"))
        if not isinstance(dist, distributions.Categorical):
            out.append(distributions.draw(dist, k2, "mean"))
    out.append(distributions.normal_param_extractor(t([[0.1, -0.2, 0.3, 0.0]])))
    return out


# ------------------------------------------------------------------------------ objectives


def _trajectory(key: torch.Tensor, steps: int = 5, width: int = 2) -> dict:
    k = keys(key, 4)
    return {
        "reward": random.normal(k[0], (steps, width)),
        "value": random.normal(k[1], (steps, width)),
        "next_value": random.normal(k[2], (steps, width)),
        "terminated": random.bernoulli(k[3], 0.2, (steps, width)),
        "truncated": t([[False, True]] + [[False, False]] * (steps - 1)),
    }


@check("value estimators")
def _values(key: torch.Tensor) -> Any:
    tr = _trajectory(key)
    r, v, nv, term, trunc = (
        tr["reward"],
        tr["value"],
        tr["next_value"],
        tr["terminated"],
        tr["truncated"],
    )
    return [
        objectives.td0(r, nv, term, gamma=0.9),
        objectives.td_lambda(r, nv, term, trunc, gamma=0.9, lmbda=0.95),
        objectives.td_lambda(r, nv, term, trunc, gamma=t(0.9, dtype=torch.float64), lmbda=0.5),
        objectives.gae(r, v, nv, term, trunc, gamma=0.9, lmbda=0.95),
        objectives.n_step(r, nv, term, trunc, gamma=0.9, n=3),
        objectives.n_step_transitions(r, term, trunc, gamma=0.9, n=2),
        objectives.vtrace(r, v, nv, term, trunc, 0.1 * r, gamma=0.9),
    ]


def _transitions(key: torch.Tensor, action: torch.Tensor, obs_dim: int = 3) -> dict:
    k = keys(key, 4)
    n = action.shape[0]
    return {
        "obs": random.normal(k[0], (n, obs_dim)),
        "action": action,
        "reward": random.normal(k[1], (n,)),
        "next_obs": random.normal(k[2], (n, obs_dim)),
        "terminated": random.bernoulli(k[3], 0.3, (n,)),
        "truncated": t([False, True, False, False]),
    }


@check("losses")
def _losses(key: torch.Tensor) -> Any:
    k = keys(key, 12)
    out = []
    # DQN
    q = nn.mlp(3, 2, (4,))
    qp, qt = q.init(k[0]), q.init(k[1])
    batch = _transitions(k[2], t([0, 1, 1, 0]))
    out += [objectives.dqn_loss(q.apply, qp, qt, batch, double=True)]
    out += [objectives.dqn_loss(q.apply, qp, qt, {**batch, "weight": t([1.0, 0.5, 1.0, 2.0])},
                                loss="mse")]  # fmt: skip
    # continuous actor-critic
    actor = nn.mlp(3, 2, (4,))
    critic_net = nn.mlp(5, 1, (4,))

    def critic(p: Any, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return critic_net.apply(p, torch.cat([obs, action], -1)).squeeze(-1)

    def det_actor(p: Any, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(actor.apply(p, obs))

    twin = torch.func.vmap(critic_net.init)(random.split(k[3], 2))
    params = {"actor": actor.init(k[4]), "critic": twin}
    cbatch = _transitions(k[5], random.uniform(k[6], (4, 2), minval=-1.0))
    one = {"actor": params["actor"], "critic": critic_net.init(k[7])}
    out += [objectives.ddpg_loss(det_actor, critic, one, one, cbatch)]
    out += [objectives.td3_loss(det_actor, critic, params, params, cbatch, k[8])]
    out += [objectives.td3_loss(det_actor, critic, params, params, cbatch, k[8],
                                update_actor=t(False), action_high=t([1.0, 0.5]))]  # fmt: skip
    sac_actor = nn.mlp(3, 4, (4,))

    def stochastic(p: Any, obs: torch.Tensor) -> Any:
        loc, log_std = sac_actor.apply(p, obs).chunk(2, -1)
        return distributions.tanh_normal(loc, log_std.exp())

    sac_params = {"actor": sac_actor.init(k[9]), "critic": twin, "log_alpha": t(0.0)}
    out += [objectives.sac_loss(stochastic, critic, sac_params, sac_params, cbatch, k[10])]
    out += [objectives.sac_loss(stochastic, critic, sac_params, sac_params, cbatch, k[10],
                                alpha=0.2)]  # fmt: skip
    dq = torch.func.vmap(q.init)(random.split(k[11], 2))
    disc = {"actor": q.init(k[0]), "critic": dq, "log_alpha": t(0.0)}

    def cat_actor(p: Any, obs: torch.Tensor) -> Any:
        return distributions.categorical(q.apply(p, obs))

    out += [objectives.discrete_sac_loss(cat_actor, q.apply, disc, disc, batch)]
    # policy gradient
    pg_batch = {
        "obs": batch["obs"],
        "action": batch["action"],
        "log_prob": t([-0.7, -0.6, -0.8, -0.7]),
        "advantage": batch["reward"],
        "value_target": batch["reward"],
        "value": 0.5 * batch["reward"],
    }
    value = nn.mlp(3, 1, (4,))
    pg_params = {"policy": q.init(k[1]), "value": value.init(k[2])}

    def policy_apply(p: Any, obs: torch.Tensor) -> Any:
        return distributions.categorical(q.apply(p["policy"], obs))

    def value_apply(p: Any, obs: torch.Tensor) -> torch.Tensor:
        return value.apply(p["value"], obs).squeeze(-1)

    out += [objectives.ppo_loss(policy_apply, value_apply, pg_params, pg_batch, clip_value=0.2)]
    out += [objectives.a2c_loss(policy_apply, value_apply, pg_params, pg_batch)]
    # building blocks
    x = batch["reward"]
    out += [
        objectives.huber(x),
        objectives.l2(x),
        objectives.normalize(x),
        objectives.bootstrap_discount(batch["terminated"], 0.9),
        objectives.clipped_surrogate(x.exp(), x, 0.2),
        objectives.smoothed_target_action(cbatch["action"], k[3], 0.2, 0.5, -1.0, t([1.0, 0.5])),
        objectives.soft_update(qt, qp, 0.01),
        objectives.soft_update(qt, qp, t(0.01)),
        objectives.hard_update(qt, qp),
    ]
    return out


# ------------------------------------------------------------------------------ exploration


@check("exploration")
def _exploration(key: torch.Tensor) -> Any:
    k = keys(key, 5)
    box = specs.Box(-1.0, 1.0, (2,))
    action = t([[0.5, -0.5], [0.9, 0.0]])
    state = exploration.ou_init(box, (2,), device=DEVICE)
    moved, state2 = exploration.ornstein_uhlenbeck(
        k[0], action, state, box, is_init=t([True, False])
    )
    q = t([[0.1, 0.5, 0.2], [0.3, 0.0, 0.9]])
    greedy, _ = exploration.q_value(q, mask=t([[True, False, True], [True, True, True]]))
    return [
        state,
        moved,
        state2,
        exploration.egreedy(k[1], greedy, specs.Discrete(3), 0.5),
        exploration.egreedy(
            k[2],
            greedy,
            specs.Discrete(3),
            t(0.5),
            mask=t([[True, False, True], [True, True, True]]),
        ),
        exploration.egreedy(
            k[2],
            exploration.q_value(q, one_hot=True)[0].long(),
            specs.Discrete(3),
            0.5,
            one_hot=True,
        ),
        exploration.gaussian_noise(k[3], action, box, 0.1),
        exploration.gaussian_noise(k[4], action, box, t(0.1)),
    ]


# ------------------------------------------------------------------------------ buffers


def _buffer_checks(buf: Any, batch: dict, key: torch.Tensor) -> list[Any]:
    k1, k2, k3 = keys(key, 3)
    for _ in range(3):
        buf = buffers.add(buf, batch)
    sampled, info = buffers.sample(buf, k1, 4)
    out = [buf, sampled, info, buffers.sample(buf, k2, 3, replace=False)]
    if buf.prioritized:
        buf = buffers.update_priorities(buf, info["index"], t([1.0, 2.0, 0.5, 0.1]))
        out += [buf, buffers.sample(buf, k3, 4, beta=t(0.5))]
    else:
        out.append(buffers.sample_sequences(buf, k3, 2, 2))
    return out


@check("buffers")
def _buffers(key: torch.Tensor) -> Any:
    k1, k2, k3 = keys(key, 3)
    example = {
        "obs": t([0.0, 0.0, 0.0]),
        "action": t(0),
        "reward": t(0.0),
        "next_obs": t([0.0, 0.0, 0.0]),
        "terminated": t(False),
        "truncated": t(False),
    }
    batch = tree.map(lambda x: torch.stack([x, x]), example)
    out = _buffer_checks(buffers.init(example, 8), batch, k1)
    out += _buffer_checks(buffers.init(example, 8, prioritized=True), batch, k2)
    stacked = {
        **example,
        "obs": torch.zeros(2, 3, device=DEVICE),
        "next_obs": torch.ones(2, 3, device=DEVICE),
    }
    frames = buffers.init(stacked, 8, frame_stack=2)
    out += _buffer_checks(frames, tree.map(lambda x: torch.stack([x, x]), stacked), k3)
    return out


# ------------------------------------------------------------------------------ rollout


def _random_policy(env: envs.Env) -> Callable:
    def policy(params: Any, obs: Any, key: torch.Tensor) -> Any:
        return env.action_spec.sample(key, env.batch_shape), {"value": params * 0.0}

    return policy


@check("rollout")
def _rollout(key: torch.Tensor) -> Any:
    k1, k2 = keys(key, 2)
    env = envs.batch(envs.make("CartPole-v1"), 2)
    state, _ = env.reset(k1)
    return list(rollout.rollout(env, _random_policy(env), t([1.0, 2.0]), state, k2, 3))


@check("collector")
def _collector(key: torch.Tensor) -> Any:
    env = envs.batch(envs.make("CartPole-v1"), 2)
    c = collector(env, _random_policy(env), t([1.0, 2.0]), key, 4, total_frames=8,
                  learning_starts=4)  # fmt: skip
    out = list(c)

    def with_state(params: Any, obs: Any, state: Any, is_init: torch.Tensor, key: torch.Tensor):
        push_right = torch.ones(2, dtype=torch.int64, device=obs.device)
        return (push_right, {"v": obs[..., 0]}), {"n": state["n"] + is_init}

    stateful = collector(env, with_state, None, key, 4, total_frames=4,
                         policy_state={"n": torch.zeros(2, device=DEVICE)})  # fmt: skip
    return out + list(stateful)


# ------------------------------------------------------------------------------ algorithms

PPO = {"num_envs": 2, "num_steps": 2, "update_epochs": 1, "num_minibatches": 1, "total_steps": 8}
OFF = {"num_envs": 2, "num_steps": 2, "gradient_steps": 1, "buffer_size": 16, "batch_size": 4,
       "learning_starts": 2}  # fmt: skip


def _algorithm_checks(algo: Any, key: torch.Tensor, seeds: int = 0) -> tuple:
    """``init`` and one update (it runs every part: off-policy updates learn and act
    through ``torch.where``, not branches), and ``seeds`` vmapped agents' update."""
    k1, k2, k3 = keys(key, 3)
    state = algo.init(k1)
    state, metrics = algo.update(state)
    out = [state, metrics]
    obs = algo.env.observe(algo.env.reset(k2)[0])
    if seeds and not LIGHT:
        init, update = core.batched(algo, seeds, compile=False)
        out += [update(init(k3))]
    return out, state, obs


def _policy_out(algo: Any, params: Any, obs: Any, key: torch.Tensor) -> list[Any]:
    return [algo.policy(params, obs, key, mode="random"), algo.policy(params, obs, mode="mode")]


@check("ppo")
def _ppo(key: torch.Tensor) -> Any:
    out = []
    for extra, seeds in (
        ({"env": "CartPole-v1"}, 2),
        ({"env": "Pendulum-v1", "normalize_obs": True, "shared": True, "anneal_lr": False}, 0),
    ):
        algo = ppo.make(ppo.Config(**PPO, **extra))
        o, state, obs = _algorithm_checks(algo, key, seeds=seeds)
        out += o + _policy_out(algo, state.params, obs, key)
    if not LIGHT:
        init, update = core.batched(algo, 1, compile=False, sweep={"lr": [1e-3, 1e-4]})
        out.append(update(init(key)))
        init, train_k = core.whole_training(algo, 2, 1, compile=False)
        out.append(train_k(init(key)))
    return out


@check("recurrent_ppo")
def _recurrent_ppo(key: torch.Tensor) -> Any:
    out = []
    for cell, seeds in (("gru", 2), ("lstm", 0)):
        config = recurrent_ppo.Config(**PPO, cell=cell, rnn_hidden=4, hidden=(4,))
        algo = recurrent_ppo.make(config)
        o, state, obs = _algorithm_checks(algo, key, seeds=seeds)
        carry = algo.initial_carry((), device=DEVICE)
        out += [*o, carry, algo.policy(state.params, obs, carry, t(True), key)]
    return out


@check("dqn")
def _dqn(key: torch.Tensor) -> Any:
    algo = dqn.make(dqn.Config(**OFF, double=True))
    o, state, obs = _algorithm_checks(algo, key, seeds=2)
    return o + _policy_out(algo, state.params, obs, key)


@check("sac")
def _sac(key: torch.Tensor) -> Any:
    algo = sac.make(sac.Config(**OFF, hidden=(8,)))
    o, state, obs = _algorithm_checks(algo, key, seeds=2)
    return o + _policy_out(algo, state.params, obs, key)


@check("td3")
def _td3(key: torch.Tensor) -> Any:
    out = []
    for noise, seeds in (("gaussian", 0), ("ou", 2)):
        algo = td3.make(td3.Config(**OFF, hidden=(8,), noise_type=noise))
        o, state, obs = _algorithm_checks(algo, key, seeds=seeds)
        out += o + _policy_out(algo, state.params, obs, key)
    return out


@check("task params")
def _task_params(key: torch.Tensor) -> Any:
    env = envs.make("CartPole-v1")
    return [
        tasks.sample_params(env, key, 2, {"length": (0.25, 1.0)}),
        tasks.task_params(env, length=t([0.5, 1.0]), masspole=[0.1, 0.2]),
    ]


@check("tasks")
def _tasks(key: torch.Tensor) -> Any:
    algo = ppo.make(ppo.Config(**PPO))
    # the params as task_params makes them (it reads their values), then on the inputs' device
    length = torch.tensor([0.5, 1.0], device="cpu")
    made = tasks.task_params(envs.make("CartPole-v1"), length=length)
    params = tree.map(lambda x: x.to(DEVICE), made)
    state = tasks.init_tasks(algo, key, params)
    update = tasks.update_tasks(algo, 2, compile=False)
    return [state, update(state)]


@check("maml")
def _maml(key: torch.Tensor) -> Any:
    k = keys(key, 4)
    net = nn.mlp(2, 1, (3,))
    params = {"net": net.init(k[0]), "log_std": t([-0.3])}

    def log_prob(p: Any, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return distributions.normal(net.apply(p["net"], obs), p["log_std"].exp()).log_prob(action)

    def loss_fn(p: Any, batch: dict) -> torch.Tensor:
        return maml.reinforce_loss(log_prob, p, batch)

    batches = {
        "obs": random.normal(k[1], (2, 4, 3, 2)),
        "action": random.normal(k[2], (2, 4, 3, 1)),
        "advantage": random.normal(k[3], (2, 4, 3)),
    }
    traj = {"reward": batches["advantage"][0], "terminated": t([[False] * 3] * 4),
            "truncated": t([[False] * 3] * 3 + [[True] * 3])}  # fmt: skip
    return [
        maml.adapt(loss_fn, params, tree.map(lambda x: x[:1], batches), lr=0.1),
        maml.maml_loss(loss_fn, params, batches, lr=0.1),
        maml.maml_loss(loss_fn, params, batches, lr=0.1, first_order=True),
        maml.reinforce_advantage(traj, gamma=0.9),
    ]


@check("evaluation")
def _evaluation(key: torch.Tensor) -> Any:
    """Greedy episodes against gymnasium and the pure env, params on ``DEVICE``."""
    from fxrl.run.evaluate import evaluate_gymnasium, evaluate_pure, torch_actor

    algo = ppo.make(ppo.Config(**PPO))
    params = algo.init(key).params
    rnn = recurrent_ppo.make(recurrent_ppo.Config(**PPO, rnn_hidden=4, hidden=(4,)))
    rnn_params = rnn.init(key).params
    env = envs.make("CartPole-v1")
    task = tasks.task_params(env, length=t([0.5, 1.0]))
    task_state = tasks.init_tasks(algo, key, task)
    return [
        core.evaluate(algo, params, 1),
        core.evaluate(algo, params, 1, gymnasium=False),
        core.evaluate(rnn, rnn_params, 1),
        tasks.evaluate_tasks(algo, task_state.params, task, 1),
        tasks.evaluate_gymnasium(algo, params, tree.index(task, 0), 1),
        evaluate_pure(algo, params, key, 2),
        evaluate_pure(rnn, rnn_params, key, 2),
        evaluate_gymnasium(torch_actor(algo, params), "CartPole-v1", 1),
        evaluate_gymnasium(torch_actor(rnn, rnn_params), "CartPole-v1", 1),
    ]


# ------------------------------------------------------------------------------ the runner

# Canaries: deliberate leaks both runs must report (tests/test_device.py checks they do).
_IMPORT_CONSTANT = torch.tensor([1, 2])  # made at import: meta in the meta-default process

CANARIES: dict[str, Callable[[torch.Tensor], Any]] = {
    "canary: factory without device": lambda key: key + torch.zeros(2, dtype=torch.int64),
    "canary: constant not moved": lambda key: key * _IMPORT_CONSTANT,
    "canary: result on the default device": lambda key: (key, torch.ones(())),
}
CHECKS.update(CANARIES)


def off_device(out: Any) -> list[str]:
    """The paths of ``out``'s tensors that are not on ``DEVICE``."""
    bad = []
    for path, x in tree.flatten_with_paths(out):
        if isinstance(x, torch.Tensor) and x.device != DEVICE:
            bad.append(f"{'.'.join(map(str, path)) or '<root>'} on {x.device}")
    return bad


def _where(e: BaseException) -> str:
    """The innermost fxrl frames of ``e``'s traceback, innermost first."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if "/fxrl/" in f.filename]
    return " < ".join(f"{f.filename.rsplit('/fxrl/', 1)[-1]}:{f.lineno}" for f in frames[::-1][:3])


def run(names: list[str]) -> dict[str, str | None]:
    """``{name: None}`` for a check that kept to ``DEVICE``, else what went wrong."""
    results: dict[str, str | None] = {}
    for name in names:
        try:
            out = CHECKS[name](random.key(0, device=DEVICE))
        except Exception as e:  # a mixed-device op's error, with where it happened
            message = str(e).splitlines()[0] if str(e) else ""
            results[name] = f"{type(e).__name__} at {_where(e) or '?'}: {message}"
            continue
        bad = off_device(out)
        results[name] = f"outputs not on {DEVICE}: {', '.join(bad[:5])}" if bad else None
    return results


def main() -> None:
    """``python -c "import torch; torch.set_default_device('meta'); ..."``: see test_device."""
    print(json.dumps(run(sys.argv[1:] or list(CHECKS))))
