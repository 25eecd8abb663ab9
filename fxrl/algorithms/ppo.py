"""Proximal Policy Optimization (Schulman et al. 2017) as a pure ``(init, update)`` pair.

PureJaxRL's ``ppo.py`` recipe on fxrl's pieces: a batch of pure envs, an actor-critic MLP
(separate or shared torso; categorical or Gaussian policy), GAE, epochs of shuffled
minibatches, the clipped objective with optional value clipping, an entropy bonus,
global-norm gradient clipping and a linearly annealed Adam learning rate.

    algo = ppo.make(ppo.Config(env="CartPole-v1"))
    state = algo.init(key)
    state, metrics = algo.update(state)          # collect num_envs x num_steps, then learn

One ``update`` = a rollout (``fxrl.scan`` over ``num_steps``), GAE, and
``update_epochs`` x ``num_minibatches`` gradient steps (``fxrl.scan`` again), so under
``torch.compile`` each loop body is traced once, whatever the budget.

The file reads top to bottom: ``Config``, ``network``, then ``make``, which builds once
what the update needs (env, network, normaliser, sizes) and defines the update's pieces
as functions closing over them, in the order ``update`` calls them (``init``, ``policy``,
``act``, ``observe``, ``advantages``, ``minibatch_step``, ``update``, ``finish``): the
shape of every algorithm here, and of PureJaxRL's ``make_train`` and optax's factories.
What PPO shares with recurrent PPO (GAE, minibatch epochs, the clipped step, the
annealed lr) is ``fxrl.algorithms.onpolicy``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from fxrl import _errors, distributions, envs, nn, optim, random, specs, transforms, tree
from fxrl.algorithms import core, onpolicy
from fxrl.algorithms.core import Algorithm, check_config
from fxrl.envs.registry import is_host_id
from fxrl.nn import initializers as inits
from fxrl.scan import scan

__all__ = [
    "ALE_EPISODE_STEPS",
    "ATARI",
    "HYPERPARAMS",
    "TUNED",
    "Config",
    "TrainState",
    "make",
    "nature_cnn",
    "network",
    "train",
]

# Config fields the update reads only as numbers, with their dtypes: ``update(state,
# hyperparams)`` takes tensors of them, so a sweep (``core.batched(..., sweep=)``, ``fxrl
# train ppo --sweep lr=1e-4,3e-4``) vmaps the update over them.
HYPERPARAMS = onpolicy.HYPERPARAMS


@dataclasses.dataclass(frozen=True)
class Config:
    """PPO's settings; field names are PureJaxRL's where it has them.

    Defaults are PureJaxRL's for CartPole-v1 (4 envs x 128 steps, 4 epochs x 4
    minibatches, lr 2.5e-4 annealed, clip 0.2, entropy 0.01, 500k steps).
    """

    env: str = "CartPole-v1"  # an env id: fxrl.envs.registered(), "gymnasium:<id>" or "ale:<Game>"
    # overrides of the env's default params, passed to fxrl.envs.make(env, **env_params):
    # (name, value) pairs or a dict, e.g. {"sticky_action_prob": 0.0} (CLI: --env-params
    # sticky_action_prob 0 minimal_action_set True); kept as given, compared in any order
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
        core.check_env_id(self, host=True)
        _check_env_params_given(self)
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
        onpolicy.check_config(self)
        ok = all(isinstance(h, int) and h > 0 for h in self.hidden) and len(self.hidden) > 0
        check_config(self, "hidden", ok, "a non-empty tuple of positive ints, e.g. (64, 64)")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and _compared(self) == _compared(other)

    def __hash__(self) -> int:
        return hash(_compared(self))

    @classmethod
    def tuned(cls, env: str = "CartPole-v1", **overrides: Any) -> Config:
        """The settings fxrl's recorded runs use for ``env`` (``TUNED``; every
        ``"ale:<Game>"``: CleanRL's ``ppo_atari.py``, ``ATARI``), then ``overrides``; envs
        without an entry get the defaults (PureJaxRL's CartPole)."""
        tuned = ATARI if env.startswith("ale:") else TUNED.get(env, {})
        return cls(env=env, **{**tuned, **overrides})


def _check_env_params_given(config: Config) -> None:
    """``env_params`` is a dict or (name, value) pairs. Whether each name is one of the env's
    params is checked by ``make``, which builds the env."""
    given = config.env_params
    pairs = given.items() if isinstance(given, Mapping) else given
    ok = isinstance(pairs, tuple | list | type({}.items())) and all(
        isinstance(p, tuple | list) and len(p) == 2 and isinstance(p[0], str) for p in pairs
    )
    check_config(config, "env_params", ok, "a dict or (name, value) pairs of env params")


def _env_params(config: Config) -> dict[str, Any]:
    """``env_params`` as ``{name: value}``, whether a dict or (name, value) pairs was given."""
    given = config.env_params
    return dict(given.items() if isinstance(given, Mapping) else given)


def _compared(config: Config) -> tuple:
    """The Config's values as ``==`` and ``hash`` see them: ``env_params`` as (name, value)
    pairs sorted by name, so that equal settings (a dict, or pairs in any order, as the CLI
    and config.json give them) make equal, hashable Configs; the field keeps what was
    given."""
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    values["env_params"] = tuple(sorted(_env_params(config).items()))
    return tuple(values.values())


def _check_env_params(config: Config, env_params: dict[str, Any]) -> None:
    """Each name of ``env_params`` is one of the env's params (built once to read them)."""
    if not env_params or is_host_id(config.env):  # make_env refuses env params there
        return
    names = [f.name for f in dataclasses.fields(envs.make(config.env).default_params)]
    for name in env_params:
        if name not in names:
            where = "ppo.Config.env_params"
            raise ValueError(_errors.unknown(name, names, f"{config.env} param", where=where))


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

# CleanRL's ppo_atari.py: 8 envs x 128 steps, 4 epochs x 4 minibatches, lr 2.5e-4 annealed,
# clip 0.1, entropy 0.01, 10M frames (2.5M steps at 4 frames each); the Nature CNN follows
# from the uint8 frames (nature_cnn).
ATARI = {
    "num_envs": 8,
    "num_steps": 128,
    "total_steps": 2_500_000,
    "update_epochs": 4,
    "num_minibatches": 4,
    "lr": 2.5e-4,
    "clip_eps": 0.1,
}


# ale:<Game>'s longest game in env steps: 108,000 emulator frames (ale-py's default, kept by
# fxrl.envs.atari) at 4 frames a step (fxrl.algorithms.host.ALE_SETTINGS).
ALE_EPISODE_STEPS = 108_000 // 4

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


def network(config: Config, obs_shape: tuple[int, ...], out_dim: int) -> nn.Model:
    """``apply(net, x [..., *obs_shape]) -> (policy head [..., out_dim], value [...])``;
    observations flattened to ``prod(obs_shape)`` inputs (PureJaxRL's
    ``FlattenObservationWrapper`` for MinAtar's [10, 10, C]); orthogonal init (sqrt 2
    hidden, 0.01 policy head, 1 value head) as PureJaxRL."""
    obs_dim = math.prod(obs_shape)
    flatten = len(obs_shape) > 1
    w, b, act, hid = inits.orthogonal(math.sqrt(2)), inits.zeros, config.activation, config.hidden
    head_inits = ((out_dim, inits.orthogonal(0.01)), (1, inits.orthogonal(1.0)))
    if config.shared:
        torso = nn.mlp(obs_dim, hid[-1], hid[:-1], act, output_activation=act, w_init=w, b_init=b)
        heads = [nn.linear(hid[-1], n, w_init=w_out, b_init=b) for n, w_out in head_inits]
    else:
        torso = None
        heads = [
            nn.mlp(obs_dim, n, hid, act, w_init=w, b_init=b, output_w_init=w_out)
            for n, w_out in head_inits
        ]

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


def nature_cnn(obs_shape: tuple[int, ...], out_dim: int) -> nn.Model:
    """CleanRL's ``ppo_atari.py`` network for uint8 frames ``[..., C, H, W]``: / 255, the
    Nature CNN torso (conv 32x8x8 stride 4, 64x4x4 stride 2, 64x3x3 stride 1, dense 512,
    ReLU; orthogonal sqrt 2) shared by an actor head (orthogonal 0.01) and a critic head
    (orthogonal 1); zero biases. ``apply(net, x) -> (logits [..., out_dim], value [...])``."""
    channels, height, width = obs_shape
    w, b = inits.orthogonal(math.sqrt(2)), inits.zeros
    torso = nn.convnet(channels, w_init=w, b_init=b)
    fh, fw = nn.conv_output_size((height, width), (8, 4, 3), (4, 2, 1))
    dense = nn.linear(64 * fh * fw, 512, w_init=w, b_init=b)
    actor = nn.linear(512, out_dim, w_init=inits.orthogonal(0.01), b_init=b)
    critic = nn.linear(512, 1, w_init=inits.orthogonal(1.0), b_init=b)

    def init(key: Tensor) -> dict:
        k_torso, k_dense, k_actor, k_critic = random.split(key, 4).unbind(-2)
        return {"torso": torso.init(k_torso), "dense": dense.init(k_dense),
                "actor": actor.init(k_actor), "critic": critic.init(k_critic)}  # fmt: skip

    def apply(net: dict, x: Tensor) -> tuple[Tensor, Tensor]:
        x = x.float() / 255.0 if x.dtype == torch.uint8 else x
        h = torch.relu(dense.apply(net["dense"], torso.apply(net["torso"], x)))
        return actor.apply(net["actor"], h), critic.apply(net["critic"], h).squeeze(-1)

    return nn.Model(init, apply)


def _rollout_next_values(apply_value: Any, traj: dict) -> Tensor:
    """The value of each step's reached observation [T, N], read from the rollout's own
    values where it can be: a step whose episode went on reached the next step's
    observation, so ``V(final_x[t]) = value[t + 1]``; the network runs only on the last
    step's ``final_x`` and on each env's first truncated step (its final observation, which
    the bootstrap needs). A terminated step's bootstrap is zero in GAE, so the value put
    there is never read. The same numbers as ``apply_value(traj["final_x"])`` (up to float
    rounding) when each env truncates at most once in the rollout.

    Args:
      apply_value: ``x [B, *obs_shape] -> value [B]``.
      traj: ``final_x`` [T, N, *obs_shape], ``value``, ``terminated``, ``truncated`` [T, N].
    """
    final_x, value = traj["final_x"], traj["value"]
    t_len, n = value.shape
    steps = torch.arange(t_len, device=value.device).unsqueeze(-1)  # [T, 1]
    cut = traj["truncated"] & ~traj["terminated"]
    first = torch.where(cut, steps, t_len - 1).amin(0)  # [N]: T - 1 where none was cut
    picked = final_x[first, torch.arange(n, device=value.device)]
    v = apply_value(torch.cat([final_x[-1], picked]))
    next_value = torch.cat([value[1:], v[:n].unsqueeze(0)])
    return torch.where(cut & (steps == first), v[n:], next_value)


# uint8 frames in the learning batch are kept [B, H, W, C] (one uint8 transpose per
# update) and each minibatch's gather is viewed back as [B, C, H, W]: the float frames
# then come out channels-last, the layout the compiled convolutions take, without a
# float transpose of every minibatch. False: [B, C, H, W] (the reference in the tests).
_FRAMES_LAST = True


def _is_image(spec: Any) -> bool:
    """uint8 frames ``[C, H, W]`` (``ale:<Game>``'s stacked grey screens)."""
    return isinstance(spec, specs.Box) and spec.dtype == torch.uint8 and len(spec.shape) == 3


def _distribution(net: dict, head: Tensor, discrete: bool) -> Any:
    if discrete:
        return distributions.categorical(head)
    return distributions.normal(head, net["log_std"].exp())


# ------------------------------------------------------------------------------ make


def make(config: Config) -> Algorithm:
    """PPO for ``config``: ``Algorithm(init, update, policy, config, env, steps_per_update,
    hyperparams)``.

    Builds once what the update needs (the env, checked to suit PPO's MLP, or for uint8
    frames [C, H, W] its ``nature_cnn``; the network, the observation normaliser, the
    sizes), then the update's pieces as functions closing over them, in the order
    ``update`` calls them. ``update.collect`` is the update cut at the env's step
    (``core.Collect``: ``begin``, ``act``, ``observe``, ``finish``), for a host env stepped
    between the pieces (``fxrl.algorithms.host``): the same functions, so the same numbers.
    """
    if not isinstance(config, Config):
        raise TypeError(f"ppo.make: expected a ppo.Config, got {type(config).__name__}.")
    env_params = _env_params(config)
    _check_env_params(config, env_params)
    env = core.make_env(config.env, **env_params)
    obs_spec, action_spec = env.observation_spec, env.action_spec
    where = f"ppo.make: {config.env} has"
    if not isinstance(obs_spec, specs.Box) or len(obs_spec.shape) == 0:
        raise ValueError(
            f"{where} observations {obs_spec!r}; PPO's MLP needs a Box (flattened to "
            "prod(shape) inputs)."
        )
    discrete = isinstance(action_spec, specs.Discrete)
    if not discrete and not (isinstance(action_spec, specs.Box) and len(action_spec.shape) == 1):
        raise ValueError(
            f"{where} actions {action_spec!r}; PPO handles Discrete(n) and flat Box [A] action "
            "specs."
        )
    out_dim = action_spec.n if discrete else action_spec.shape[0]
    image = _is_image(obs_spec)
    if image and config.normalize_obs:
        raise ValueError(
            f"{where} uint8 frames {obs_spec!r}, which the CNN scales by 1/255 itself: "
            "normalize_obs=False."
        )
    benv = envs.batch(env, config.num_envs)
    net = (nature_cnn if image else functools.partial(network, config))(
        tuple(obs_spec.shape), out_dim
    )
    norm = transforms.observation_norm(running=True) if config.normalize_obs else None
    # ale:<Game>: a game is truncated after ALE_EPISODE_STEPS steps, so at most once per env
    # in a rollout; GAE's next values then come from the rollout (_rollout_next_values), not
    # from the network run again on all num_envs x num_steps frames.
    reuse_values = image and config.env.startswith("ale:") and config.num_steps <= ALE_EPISODE_STEPS
    frames_last = image and _FRAMES_LAST
    batch_size = config.num_envs * config.num_steps  # env steps per update
    grad_steps = config.update_epochs * config.num_minibatches  # gradient steps per update
    num_updates = onpolicy.num_updates(config, batch_size)  # the lr anneals over them

    def forward(net_params: dict, x: Tensor) -> tuple[Any, Tensor]:
        """``(distribution, value)`` for preprocessed observations ``x``."""
        head, value = net.apply(net_params, x)
        return _distribution(net_params, head, discrete), value

    def preprocess(params: dict, obs: Tensor) -> Tensor:
        """Raw observations as the network sees them (normalised when ``normalize_obs``)."""
        return obs if norm is None else norm(obs, params["obs_norm"])

    def optimizer(hp: dict) -> tuple[optim.GradientTransformation, Any]:
        """``(opt, lr_at)`` for the hyperparameters ``hp``: ``onpolicy.make_optimizer``."""
        return onpolicy.make_optimizer(config, hp, grad_steps, num_updates)

    # -------------------------------------------------------------------------- init, act

    def init(key: Tensor, env_params: Any = None) -> TrainState:
        """A fresh agent; ``env_params`` (the env's params dataclass, e.g. a
        ``CartPoleParams`` with another pole ``length``) sets the task its envs run, kept in
        the env state (default: ``env.default_params``). Leaves are shared by the
        ``num_envs`` envs, or per env with a leading [num_envs] dim."""
        k_net, k_env, k_state = random.split(key, 3).unbind(-2)
        params = {"net": net.init(k_net)}
        if not discrete:
            size = env.action_spec.shape[0]
            params["net"]["log_std"] = torch.zeros(size, dtype=env.dtype, device=key.device)
        env_state, ts = benv.reset(k_env, env_params)
        if norm is not None:
            params["obs_norm"] = norm.init(ts.obs, env.observation_spec)
        zero = torch.zeros((), dtype=torch.int64, device=key.device)
        opt, _ = optimizer(core.hyperparams(config, HYPERPARAMS))
        return TrainState(params, opt.init(params["net"]), env_state, ts.obs, k_state, zero, zero)

    def policy(params: dict, obs: Tensor, key: Tensor | None = None, mode: str = "mode") -> Tensor:
        """Action for raw observations ``obs [..., *obs_shape]``; continuous actions are
        clipped into the action spec (the rollout keeps the unclipped sample)."""
        dist, _ = forward(params["net"], preprocess(params, obs))
        action = distributions.draw(dist, key, mode)
        return action if discrete else env.action_spec.project(action)

    # -------------------------------------------------------------------------- collect

    def begin(hp: dict, state: TrainState) -> tuple[dict, tuple]:
        """What the rollout reads (the network's params) and what it carries: ``(obs,
        obs_norm stats or (), key)``."""
        params = state.params
        return params["net"], (state.obs, params.get("obs_norm", ()), state.key)

    def act(hp: dict, net_params: dict, c: tuple) -> tuple[tuple, Tensor, dict]:
        """The policy's half of a rollout step on observations [num_envs, ...]; the record
        holds ``obs`` as the network saw it, ``action``, ``log_prob`` and ``value``."""
        obs, stats, key = c
        key, k_act = random.split(key).unbind(-2)
        x = obs if norm is None else norm(obs, stats)
        dist, value = forward(net_params, x)
        action, logp = dist.sample_and_log_prob(k_act)
        record = {"obs": x, "action": action, "log_prob": logp, "value": value}
        return (obs, stats, key), action, record

    def observe(hp: dict, net_params: dict, c: tuple, ts: Any) -> tuple[tuple, dict]:
        """The env's half, from the step's TimeStep; the record holds ``final_x`` (the
        reached observation, the final one where an episode ended, preprocessed) and
        ``onpolicy.step_record``'s fields. Running stats update after the step."""
        _, stats, key = c
        final = ts.obs if norm is None else norm(ts.obs, stats)
        next_obs = ts.info["next_obs"]
        if norm is not None:
            stats = norm.update(stats, ts.replace(obs=next_obs))
        return (next_obs, stats, key), {"final_x": final, **onpolicy.step_record(ts)}

    def env_step(hp: dict, carry: tuple, _: Any = None) -> tuple[tuple, dict]:
        """One step of the ``num_envs`` envs, as ``fxrl.scan``'s body: ``act``, the env's
        step, ``observe``. ``carry``: ``(net_params, env_state, obs, stats, key)``."""
        net_params, env_state, *c = carry
        c, action, record = act(hp, net_params, tuple(c))
        env_state, ts = benv.step(env_state, action)
        c, seen = observe(hp, net_params, c, ts)
        return (net_params, env_state, *c), {**record, **seen}

    # -------------------------------------------------------------------------- learn

    def advantages(hp: dict, net_params: dict, traj: dict) -> dict:
        """The rollout ``traj`` [T, num_envs, ...] as one flat batch [T * num_envs, ...] of
        ``obs``, ``action``, ``log_prob``, ``value``, ``advantage`` and ``value_target``
        (GAE, bootstrapped from the value of each step's reached observation)."""
        if reuse_values:
            next_value = _rollout_next_values(lambda x: net.apply(net_params, x)[1], traj)
        else:
            _, next_value = net.apply(net_params, traj["final_x"])
        advantage, target = onpolicy.advantages(traj, next_value, hp)
        batch = {k: traj[k].flatten(0, 1) for k in ("obs", "action", "log_prob", "value")}
        batch["advantage"], batch["value_target"] = advantage.flatten(0, 1), target.flatten(0, 1)
        if frames_last:  # [B, H, W, C]: see minibatch_step
            batch["obs"] = batch["obs"].movedim(-3, -1).contiguous()
        return batch

    def minibatch_step(hp: dict, opt: Any, carry: tuple, index: Tensor) -> tuple[tuple, dict]:
        """One ``opt`` step on the clipped objective over ``batch[index]``, as
        ``fxrl.scan``'s body. ``carry``: ``(net_params, opt_state, batch)``."""
        net_params, opt_state, batch = carry
        minibatch = tree.map(lambda v: v[index], batch)
        if frames_last:  # back to [B, C, H, W], a view with the channels innermost
            minibatch["obs"] = minibatch["obs"].movedim(-1, -3)

        def loss_fn(params: dict, mb: dict) -> tuple[Tensor, dict]:
            return onpolicy.clipped_loss(forward, params, mb, config, hp)

        net_params, opt_state, metrics = onpolicy.gradient_step(
            loss_fn, opt, net_params, opt_state, minibatch
        )
        return (net_params, opt_state, batch), metrics

    # -------------------------------------------------------------------------- update

    def update(state: TrainState, hyperparams: dict | None = None) -> tuple[TrainState, dict]:
        """One PPO iteration: collect ``num_envs x num_steps`` transitions, compute
        advantages, then ``update_epochs`` passes of ``num_minibatches`` shuffled minibatches
        (one loop over all of them). Pure; metrics per ``fxrl.algorithms.core``'s contract.
        ``hyperparams``: tensors for some of ``HYPERPARAMS`` (a sweep's), instead of the
        Config's numbers."""
        hp = core.hyperparams(config, HYPERPARAMS, hyperparams)
        net_params, c = begin(hp, state)
        # collect
        body = functools.partial(env_step, hp)
        (_, env_state, *c), traj = scan(body, (net_params, state.env_state, *c), config.num_steps)
        return finish(hp, state.replace(env_state=env_state), net_params, tuple(c), traj)

    def finish(
        hp: dict, state: TrainState, net_params: dict, c: tuple, traj: dict
    ) -> tuple[TrainState, dict]:
        """The learning half of ``update`` on a collected trajectory ``traj`` [T, num_envs]:
        advantages, the minibatch epochs, the report. ``c``: ``(obs, obs_norm stats or (),
        key)`` where the rollout ended; ``state.env_state`` is kept as given."""
        obs, stats, key = c
        opt, lr_at = optimizer(hp)
        batch = advantages(hp, net_params, traj)
        # learn
        key, index = onpolicy.shuffled_minibatches(
            key, config.update_epochs, batch_size, config.num_minibatches
        )
        body = functools.partial(minibatch_step, hp, opt)
        (net_params, opt_state, _), losses = scan(body, (net_params, state.opt_state, batch), index)
        # report
        steps = state.steps + batch_size
        episodes = onpolicy.episode_report(traj)
        metrics = onpolicy.update_metrics(episodes, losses, lr_at(state.updates), steps)
        new_params = {"net": net_params} if norm is None else {"net": net_params, "obs_norm": stats}
        new = TrainState(new_params, opt_state, state.env_state, obs, key, steps, state.updates + 1)
        return new, metrics

    update.collect = core.Collect(begin, act, observe, finish, config.num_steps)  # type: ignore[attr-defined]
    hyperparams = core.hyperparams(config, HYPERPARAMS)
    return Algorithm(init, update, policy, config, env, batch_size, hyperparams)


train = core.trainer(make)
