"""Recurrent PPO: PPO with a GRU or LSTM core whose carry is an explicit argument.

PureJaxRL's ``ppo_rnn.py`` recipe on fxrl's pieces. The policy is
``policy(params, obs, carry, is_init, key=None, mode="mode") -> (action, carry)``:
``is_init`` marks the first observation of an episode and resets the carry inside the
cell (``torch.where``), so no primer, no hidden state, and the exported program takes
and returns the carry like any other tensor.

    algo = recurrent_ppo.make(recurrent_ppo.Config(env="CartPole-v1", mask_velocity=True))
    state = algo.init(key)
    state, metrics = algo.update(state)         # collect num_envs x num_steps, then learn
    carry = algo.initial_carry()                # zeros; is_init=True resets it anyway
    action, carry = algo.policy(state.params, obs, carry, torch.tensor(True))
    returns = core.evaluate(algo, state.params)  # gymnasium, the carry fed back each step

``make`` returns a ``core.Algorithm`` like every algorithm's, with ``initial_carry`` set:
evaluation, export and the run code feed the carry back because of it.

One ``update``: a rollout of ``num_steps`` from the carry the previous update ended with
(stored in the TrainState, with the flags saying which envs start a new episode), GAE,
then ``update_epochs`` passes over minibatches of whole env sequences (split over envs,
never over time), each re-run through the core from its stored starting carry with the
``is_init`` resets inside and differentiated back through time by ``fxrl.scan.scan_vjp``.
Every loop is a ``fxrl.scan`` (the sequence loop's forward and backward inside the
gradient steps' loop), so ``fxrl.compile`` makes the update one program whose size does
not depend on ``num_steps``. ``cell="mlp"`` swaps the core for a dense layer that ignores
the carry: the feed-forward baseline, with the same torso, heads and call shape.

``mask_velocity=True`` trains on the env seen through ``transforms.select`` (positions
only, ``POSITIONS``); the policy takes the env's full observations and applies the same
selection first, so it never sees a velocity, in training, evaluation or export.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import torch
from torch import Tensor

from fxrl import distributions, envs, nn, optim, random, specs, transforms, tree
from fxrl.algorithms import core, onpolicy
from fxrl.algorithms.core import Algorithm, check_config
from fxrl.nn import initializers as inits
from fxrl.scan import scan, scan_vjp

__all__ = [
    "CELLS",
    "HYPERPARAMS",
    "POSITIONS",
    "Config",
    "TrainState",
    "make",
    "train",
]

CELLS = ("gru", "lstm", "mlp")

# Config fields the update reads only as numbers, with their dtypes (``update(state,
# hyperparams)``; a sweep vmaps over them): PPO's.
HYPERPARAMS = onpolicy.HYPERPARAMS

# Observation entries that are not velocities, per env: what mask_velocity keeps.
POSITIONS: dict[str, tuple[int, ...]] = {
    "CartPole-v1": (0, 2),  # cart position, pole angle (drops both velocities)
    "Pendulum-v1": (0, 1),  # cos, sin of the angle (drops the angular velocity)
    "Acrobot-v1": (0, 1, 2, 3),  # cos/sin of both angles (drops both angular velocities)
    "MountainCar-v0": (0,),  # position
    "MountainCarContinuous-v0": (0,),
}


@dataclasses.dataclass(frozen=True)
class Config:
    """Recurrent PPO's settings; names are PureJaxRL's (``ppo_rnn.py``) where it has them.

    Defaults are the recorded masked-CartPole run's
    (docs/results/recurrent_ppo_masked_cartpole.md). ``hidden``: the embedding before the
    core has layers of these sizes, and so do the actor and critic heads after it
    (PureJaxRL's ``ppo_rnn``: one layer each, ``(64,)``).
    """

    env: str = "CartPole-v1"  # an env id: fxrl.envs.registered(), "gymnasium:<id>" or "ale:<Game>"
    mask_velocity: bool = True  # observe only POSITIONS[env]: a partially observable task
    cell: str = "gru"  # "gru", "lstm", or "mlp" (feed-forward baseline, carry unused)
    rnn_hidden: int = 64  # width of the recurrent core (and its carry)
    hidden: tuple[int, ...] = (64,)  # layer sizes of the embedding and of each head
    activation: str = "tanh"  # activation of the embedding and the heads
    num_envs: int = 16  # envs stepped together per seed
    num_steps: int = 32  # steps per env per update (the length of each trained sequence)
    total_steps: int = 500_000  # env steps per seed for train()
    update_epochs: int = 4  # passes over each rollout
    num_minibatches: int = 4  # minibatches of whole env sequences; divides num_envs
    lr: float = 1e-3  # Adam learning rate (eps 1e-5)
    anneal_lr: bool = True  # decay lr linearly to 0 over total_steps
    gamma: float = 0.99  # discount
    gae_lambda: float = 0.95  # GAE's lambda
    clip_eps: float = 0.2  # ratio clip (and value clip)
    clip_value: bool = True  # clip the value update around the rollout's values
    ent_coef: float = 0.01  # entropy bonus weight
    vf_coef: float = 0.5  # value loss weight
    max_grad_norm: float = 0.5  # global gradient norm clip
    normalize_advantages: bool = True  # per minibatch

    def __post_init__(self) -> None:
        core.check_env_id(self, host=True)
        check_config(self, "cell", self.cell in CELLS, f"one of {', '.join(map(repr, CELLS))}")
        core.check_positive(
            self,
            "rnn_hidden",
            "num_envs",
            "num_steps",
            "total_steps",
            "update_epochs",
            "num_minibatches",
        )
        _check_hidden(self)
        divisors = [d for d in range(1, self.num_envs + 1) if self.num_envs % d == 0]
        check_config(
            self,
            "num_minibatches",
            self.num_envs % self.num_minibatches == 0,
            f"a divisor of num_envs = {self.num_envs} ({', '.join(map(str, divisors))}): "
            "minibatches split the rollout over envs, keeping whole sequences",
            "Change num_minibatches or num_envs.",
        )
        onpolicy.check_config(self)
        check_config(self, "mask_velocity", isinstance(self.mask_velocity, bool), "True or False")
        check_config(
            self,
            "mask_velocity",
            not self.mask_velocity or self.env in POSITIONS,
            f"False for {self.env}: no velocity mask is known for it (known: "
            f"{', '.join(POSITIONS)})",
        )


def _check_hidden(config: Config) -> None:
    h = config.hidden
    if isinstance(h, int) and not isinstance(h, bool):
        # recurrent PPO's hidden was one int before it became a tuple of sizes (as in every
        # other algorithm); an old run's config.json still holds that int
        check_config(
            config,
            "hidden",
            False,
            f"a tuple of layer sizes: write ({h},) for "
            "the one-layer embedding and heads an int used to mean",
        )
    ok = isinstance(h, tuple) and len(h) > 0
    ok = ok and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in h)
    check_config(config, "hidden", ok, "a non-empty tuple of positive ints, e.g. (64,)")


@tree.dataclass
class TrainState:
    """Everything recurrent PPO needs between updates (all tensors)."""

    params: dict  # {"net": network params}
    opt_state: Any
    env_state: Any  # the batch env's state [num_envs]
    obs: Tensor  # [num_envs, obs_dim] (masked) what the policy acts on next
    carry: Any  # [num_envs, 1, rnn_hidden] (LSTM: LSTMCarry of two) the core's state
    is_init: Tensor  # [num_envs] bool: obs is the first of an episode
    key: Tensor  # [2]
    steps: Tensor  # [] int64 env steps so far
    updates: Tensor  # [] int64 updates so far


# ------------------------------------------------------------------------------ network


class _Network(NamedTuple):
    """Recurrent PPO's network as its three stages, and the whole.

    ``embed(p, xs [..., obs]) -> [..., h]`` (every step at once); ``core_vjp(p, carry,
    es [T, *B, h], is_init [T, *B]) -> (ys [T, *B, width], vjp_fn)`` with ``vjp_fn(d_ys)
    -> (d_p, d_es)``: the core over the sequence and its backward (backpropagation through
    time, ``fxrl.scan.scan_vjp``; the feed-forward core runs on every step at once);
    ``heads(p, ys [..., width]) -> (distribution, value [...])``;
    ``apply(net, xs [T, *B, obs], carry, is_init [T, *B]) -> (head [T, *B, out], value
    [T, *B], carry)``: the three in a row (``p``: ``net``'s entry of each stage)."""

    init: Any
    apply: Any
    embed: Any
    core_vjp: Any
    heads: Any
    initial_carry: Any


def _network(config: Config, obs_dim: int, out_dim: int) -> _Network:
    """Embedding, core, actor and critic heads. Orthogonal inits as PureJaxRL (sqrt 2
    hidden, 0.01 policy head, 1 value head)."""
    w, b, act, hid = inits.orthogonal(math.sqrt(2)), inits.zeros, config.activation, config.hidden
    h, width = hid[-1], config.rnn_hidden
    embed = nn.mlp(obs_dim, h, hid[:-1], act, output_activation=act, w_init=w, b_init=b)
    if config.cell == "mlp":
        cell = nn.mlp(h, width, (), act, output_activation=act, w_init=w, b_init=b)
        rnn = nn.gru(h, width)  # only for its carry's shape
    else:
        cell = None
        rnn = (nn.gru if config.cell == "gru" else nn.lstm)(h, width)
    actor, critic = (
        nn.mlp(width, n, hid, act, w_init=w, b_init=b, output_w_init=inits.orthogonal(s))
        for n, s in ((out_dim, 0.01), (1, 1.0))
    )

    def init(key: Tensor) -> dict:
        k_embed, k_core, k_actor, k_critic = random.split(key, 4).unbind(-2)
        core_params = rnn.init(k_core) if cell is None else cell.init(k_core)
        return {
            "embed": embed.init(k_embed),
            "core": core_params,
            "actor": actor.init(k_actor),
            "critic": critic.init(k_critic),
        }

    def core_step(p: dict, carry: Any, x: tuple[Tensor, Tensor]) -> tuple[Any, Tensor]:
        y, carry = rnn.cell(p, x[0], carry, x[1])  # x: (input projection, is_init) of a step
        return carry, y

    def core_vjp(p: dict, carry: Any, es: Tensor, is_init: Tensor) -> tuple[Tensor, Any]:
        if cell is not None:  # the feed-forward baseline: no carry, every step at once
            ys, pull = torch.func.vjp(cell.apply, p, es)
            return ys, pull
        # the input projections of every step at once; the loop runs the recurrence only
        layer = p["layers"][0]
        p_in = {"layers": [{k: layer[k] for k in ("w_ih", "b_ih")}]}
        p_rec = {"layers": [{k: layer[k] for k in ("w_hh", "b_hh")}]}
        gx, project_vjp = torch.func.vjp(rnn.project, p_in, es)
        _, ys, seq_vjp = scan_vjp(core_step, p_rec, carry, (gx, is_init))

        def pull(d_ys: Tensor) -> tuple[dict, Tensor]:
            d_rec, _, (d_gx, _) = seq_vjp(None, d_ys)
            d_in, d_es = project_vjp(d_gx)
            grads = {**d_in["layers"][0], **d_rec["layers"][0]}
            return {"layers": [{k: grads[k] for k in layer}]}, d_es

        return ys, pull

    def heads(p: dict, ys: Tensor) -> tuple[Any, Tensor]:
        head = actor.apply(p["actor"], ys)
        return _distribution(head), critic.apply(p["critic"], ys).squeeze(-1)

    def apply(net: dict, xs: Tensor, carry: Any, is_init: Tensor) -> tuple[Tensor, Tensor, Any]:
        e = embed.apply(net["embed"], xs)
        if cell is None:
            ys, carry = rnn.apply(net["core"], e, carry, is_init)
        else:
            ys = cell.apply(net["core"], e)
        value = critic.apply(net["critic"], ys).squeeze(-1)
        return actor.apply(net["actor"], ys), value, carry

    return _Network(init, apply, embed.apply, core_vjp, heads, rnn.initial_carry)


def _distribution(head: Tensor) -> Any:
    return distributions.categorical(head)


# ------------------------------------------------------------------------------ make


def make(config: Config) -> Algorithm:
    """Recurrent PPO for ``config`` (discrete-action envs): ``Algorithm(init, update, policy,
    config, env, steps_per_update, hyperparams, initial_carry)``, the policy taking and
    returning the carry: ``policy(params, obs [*B, full_obs_dim], carry, is_init [*B] bool,
    key=None, mode="mode") -> (action [*B], carry)``."""
    if not isinstance(config, Config):
        raise TypeError(
            f"recurrent_ppo.make: expected a recurrent_ppo.Config, got {type(config).__name__}."
        )
    env = core.make_env(config.env)
    mask = transforms.select(POSITIONS[config.env]) if config.mask_velocity else None
    benv = envs.batch(env if mask is None else envs.transform(env, mask), config.num_envs)
    obs_spec, action_spec = benv.env.observation_spec, env.action_spec
    where = f"recurrent_ppo.make: {config.env} has"
    if not isinstance(action_spec, specs.Discrete):
        raise ValueError(f"{where} actions {action_spec!r}; recurrent PPO handles Discrete(n).")
    if not isinstance(obs_spec, specs.Box) or len(obs_spec.shape) != 1:
        raise ValueError(f"{where} observations {obs_spec!r}; needs a flat Box [obs_dim].")
    net = _network(config, obs_spec.shape[0], action_spec.n)
    n, t_len = config.num_envs, config.num_steps
    steps_per_update = n * t_len
    grad_steps = config.update_epochs * config.num_minibatches
    num_updates = onpolicy.num_updates(config, steps_per_update)

    def optimizer(hp: dict) -> tuple[optim.GradientTransformation, Any]:
        return onpolicy.make_optimizer(config, hp, grad_steps, num_updates)

    def initial_carry(
        batch_shape: tuple[int, ...] = (), device: torch.device | str | None = None
    ) -> Any:
        return net.initial_carry(tuple(batch_shape), device)

    def policy(
        params: dict,
        obs: Tensor,
        carry: Any,
        is_init: Tensor,
        key: Tensor | None = None,
        mode: str = "mode",
    ) -> tuple[Tensor, Any]:
        """``(action [*B], carry)`` for the env's full observations ``obs [*B, obs_dim]``
        (masked here when ``mask_velocity``), the carry from the previous call and
        ``is_init [*B]`` bool, True on an episode's first observation."""
        x = obs if mask is None else mask(obs)
        head, _, carry = net.apply(params["net"], x.unsqueeze(0), carry, is_init.unsqueeze(0))
        return distributions.draw(_distribution(head[0]), key, mode), carry

    def init(key: Tensor) -> TrainState:
        k_net, k_env, k_state = random.split(key, 3).unbind(-2)
        params = {"net": net.init(k_net)}
        env_state, ts = benv.reset(k_env)
        carry = initial_carry((n,), key.device)
        is_init = torch.ones(n, dtype=torch.bool, device=key.device)
        zero = torch.zeros((), dtype=torch.int64, device=key.device)
        opt_state = optimizer(core.hyperparams(config, HYPERPARAMS))[0].init(params["net"])
        return TrainState(params, opt_state, env_state, ts.obs, carry, is_init, k_state, zero, zero)

    # -------------------------------------------------------------------------- collect

    def act(hp: dict, params: dict, c: tuple) -> tuple[tuple, Tensor, dict]:
        obs, carry, is_init, key = c
        key, k_act = random.split(key).unbind(-2)
        head, value, carry = net.apply(params["net"], obs[None], carry, is_init[None])
        action, logp = _distribution(head[0]).sample_and_log_prob(k_act)
        record = {"obs": obs, "is_init": is_init, "action": action, "log_prob": logp,
                  "value": value[0], "carry_after": carry}  # fmt: skip
        return (obs, carry, is_init, key), action, record

    def observe(hp: dict, params: dict, c: tuple, ts: Any) -> tuple[tuple, dict]:
        _, carry, _, key = c
        done = ts.terminated | ts.truncated
        record = {"final_obs": ts.obs, **onpolicy.step_record(ts)}
        return (ts.info["next_obs"], carry, done, key), record

    def env_step(hp: dict, params: dict, c: tuple) -> tuple[tuple, dict]:
        env_state, *rest = c
        inner, action, record = act(hp, params, tuple(rest))
        env_state, ts = benv.step(env_state, action)
        inner, seen = observe(hp, params, inner, ts)
        return (env_state, *inner), {**record, **seen}

    def advantages(hp: dict, params: dict, traj: dict) -> dict:
        """The rollout ``traj`` [T, num_envs, ...] as a batch of whole env sequences with
        GAE advantages and value targets (ppo's ``advantages``, kept time-major)."""
        # Bootstrap values: each step's reached observation (the final one where an episode
        # ended) seen with the carry after that step, all T*N at once as one-step sequences.
        flat = lambda v: v.flatten(0, 1)[None]
        carry_after = tree.map(lambda v: v.flatten(0, 1), traj["carry_after"])
        no_reset = torch.zeros_like(flat(traj["is_init"]))
        _, next_value, _ = net.apply(params["net"], flat(traj["final_obs"]), carry_after, no_reset)
        advantage, target = onpolicy.advantages(traj, next_value[0].reshape(t_len, n), hp)
        batch = {k: traj[k] for k in ("obs", "is_init", "action", "log_prob", "value")}
        batch["advantage"], batch["value_target"] = advantage, target
        return batch

    # -------------------------------------------------------------------------- learn

    def loss_and_grads(p: dict, hp: dict, seq: dict, carry: Any) -> tuple[dict, dict]:
        """The clipped PPO loss's gradient on sequences ``seq`` [T, envs] re-run from their
        starting ``carry``: forward through the embedding (every step at once), the core
        (a loop over the sequence) and the heads; backward through them in reverse, the
        core by ``fxrl.scan.scan_vjp`` (backpropagation through time in a rolled loop)."""
        e, embed_vjp = torch.func.vjp(lambda p_: net.embed(p_, seq["obs"]), p["embed"])
        ys, core_vjp = net.core_vjp(p["core"], carry, e, seq["is_init"])

        def heads_loss(heads_p: dict, ys_: Tensor) -> tuple[Tensor, dict]:
            return onpolicy.clipped_loss(net.heads, heads_p, {**seq, "obs": ys_}, config, hp)

        heads_p = {"actor": p["actor"], "critic": p["critic"]}
        grad_heads = torch.func.grad(heads_loss, argnums=(0, 1), has_aux=True)
        (g_heads, d_ys), metrics = grad_heads(heads_p, ys)
        g_core, d_e = core_vjp(d_ys)
        (g_embed,) = embed_vjp(d_e)
        return {"embed": g_embed, "core": g_core, **g_heads}, metrics

    def update(state: TrainState, hyperparams: dict | None = None) -> tuple[TrainState, dict]:
        hp, params = core.hyperparams(config, HYPERPARAMS, hyperparams), state.params
        # collect num_steps, from the carry and flags the last update ended with
        c = (state.env_state, state.obs, state.carry, state.is_init, state.key)
        (env_state, *inner), traj = scan(lambda c_, _: env_step(hp, params, c_), c, t_len)
        return finish(hp, state.replace(env_state=env_state), params, tuple(inner), traj)

    def finish(hp: dict, state: TrainState, params: dict, c: tuple, traj: dict) -> tuple:
        obs, carry, is_init, key = c
        opt, lr_at = optimizer(hp)
        batch = advantages(hp, params, traj)

        # learn: epochs x minibatches of whole env sequences (rows of ``index``), each
        # re-run through the core from the carry it started the rollout with
        key, index = onpolicy.shuffled_minibatches(
            key, config.update_epochs, n, config.num_minibatches
        )

        def grad_step(c: tuple, rows: Tensor) -> tuple[tuple, dict]:
            net_params, opt_state = c
            seq = tree.map(lambda v: v[:, rows], batch)
            start = tree.map(lambda v: v[rows], state.carry)
            grads, metrics = loss_and_grads(net_params, hp, seq, start)
            updates, opt_state = opt.update(grads, opt_state, net_params)
            return (optim.apply_updates(net_params, updates), opt_state), metrics

        (net_params, opt_state), losses = scan(grad_step, (params["net"], state.opt_state), index)

        # report
        steps = state.steps + steps_per_update
        episodes = onpolicy.episode_report(traj)
        metrics = onpolicy.update_metrics(episodes, losses, lr_at(state.updates), steps)
        new = TrainState(
            {"net": net_params},
            opt_state,
            state.env_state,
            obs,
            carry,
            is_init,
            key,
            steps,
            state.updates + 1,
        )
        return new, metrics

    def begin(hp: dict, state: TrainState) -> tuple[dict, tuple]:
        return state.params, (state.obs, state.carry, state.is_init, state.key)

    update.collect = core.Collect(begin, act, observe, finish, t_len)  # type: ignore[attr-defined]

    hyperparams = core.hyperparams(config, HYPERPARAMS)
    return Algorithm(
        init, update, policy, config, env, steps_per_update, hyperparams, initial_carry
    )


train = core.trainer(make)
