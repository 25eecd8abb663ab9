"""Loss updates: fxrl (pure loss + torch.func.grad + fxrl.optim) against plain torch.nn +
torch.optim doing the same maths, and TorchRL's loss modules, in one run.

Cases (one JSON line per implementation, then time ratios):

  dqn_atari  Nature DQN net, batch 128 of uint8 frames, Huber loss, Adam: one update.
  sac        Pendulum sizes (obs 3, action 1), 2x256 MLPs, batch 256, twin critics,
             learned temperature, one Adam over all parts, Polyak target update: one update.
  ppo        one iteration on 2048 transitions (128 steps x 16 envs, CartPole sizes,
             separate 2x64 tanh actor and critic): values of the rollout, GAE, then 10
             epochs of 32 minibatches of 64 (loss, grad, clip to norm 0.5, Adam).

Each implementation is warmed up, then timed in ``--repeats`` alternating rounds (the order
flips every round) of ``--iters`` calls; a ratio is the median over rounds of the
per-round time ratio, with its min and max as the spread. Time ratios: below 1 is faster
than plain torch. Before timing, fxrl's and plain torch's losses (and DQN's gradients) are
compared on the same params and noise (``max_abs_diff``): both do the same maths.

    python bench/loss_bench.py [--threads 1] [--repeats 5] [--cases dqn_atari,sac,ppo]
    python bench/loss_bench.py --quick     # a few iterations: check that it runs
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from _common import (  # bench/_common.py
    Concat,
    cpu_model,
    measure,
    mlp_params,
    nature_dqn,
    nature_dqn_params,
    torch_mlp,
)

from fxrl import distributions, nn, optim, random, tree
from fxrl.objectives import dqn_loss, ppo_loss, sac_loss, soft_update

GAMMA, LMBDA, TAU = 0.99, 0.95, 0.005
Runs = dict[str, Callable[[], None]]


def max_abs_diff(a: object, b: object) -> float:
    pairs = zip(tree.leaves(a), tree.leaves(b), strict=True)
    return max(float((x.detach() - y.detach()).abs().max()) for x, y in pairs)


def autograd_grad(fn: Callable, argnums: int, has_aux: bool = True) -> Callable:
    """``torch.func.grad(fn, argnums, has_aux=True)``'s result, via torch.autograd.grad.

    The params tree's leaves become fresh leaf tensors that require grad; the gradients
    come back in the same tree (zeros for leaves the loss does not use). Not vmappable:
    the eager single-agent path, without functorch's per-op wrapping.
    """

    def grad(*args: object, **kwargs: object) -> tuple[object, object]:
        leaves, spec = tree.leaves(args[argnums]), tree.structure(args[argnums])
        inputs = [x.detach().requires_grad_() for x in leaves]
        args = (*args[:argnums], tree.unflatten(spec, inputs), *args[argnums + 1 :])
        loss, aux = fn(*args, **kwargs)
        grads = torch.autograd.grad(loss, inputs, allow_unused=True)
        grads = [
            torch.zeros_like(x) if g is None else g for x, g in zip(inputs, grads, strict=True)
        ]
        return tree.unflatten(spec, grads), aux

    return grad


GRADS = {"fxrl": torch.func.grad, "fxrl_autograd": autograd_grad}


def fxrl_runs(make_step: Callable, state: dict, compiled: bool) -> Runs:
    """Runners for ``make_step(grad_transform, compiled) -> step(state) -> state``.

    ``fxrl``: torch.func.grad, eager; ``fxrl_autograd``: torch.autograd.grad, eager;
    ``fxrl_compiled``: torch.func.grad with the update step under torch.compile.
    """
    variants = [(name, grad, False) for name, grad in GRADS.items()]
    if compiled:
        variants.append(("fxrl_compiled", torch.func.grad, True))
    runs: Runs = {}
    for name, grad, comp in variants:
        step, held = make_step(grad, comp), {"state": state}

        def run(step: Callable = step, held: dict = held) -> None:
            held["state"] = step(held["state"])

        runs[name] = run
    return runs


def td(fields: dict, batch_size: list[int]):
    from tensordict import TensorDict

    return TensorDict(fields, batch_size=batch_size)


# ---- DQN on the Nature Atari net ------------------------------------------------------


def dqn_case(torchrl: bool, compiled: bool) -> tuple[Runs, dict]:
    num_actions, n = 6, 128
    k = random.split(random.key(0), 5).unbind(0)
    frames = lambda key: random.randint(key, (n, 4, 84, 84), 0, 256).to(torch.uint8)
    batch = {
        "obs": frames(k[0]),
        "action": random.randint(k[1], (n,), 0, num_actions),
        "reward": random.normal(k[2], (n,)),
        "next_obs": frames(k[3]),
        "terminated": random.bernoulli(k[4], 0.05, (n,)),
    }
    with torch.random.fork_rng():
        torch.manual_seed(0)
        online = nature_dqn(num_actions, pixels=True)
    target = copy.deepcopy(online)
    model, opt = nn.atari_dqn(num_actions), optim.adam(1e-4)
    st = {"params": nature_dqn_params(online), "target": nature_dqn_params(target)}
    st["opt"] = opt.init(st["params"])

    def make_step(grad: Callable, compiled: bool) -> Callable:
        grad_fn = grad(dqn_loss, argnums=1, has_aux=True)

        def update(params: dict, target: dict, opt_state: object, batch: dict) -> tuple:
            grads, _ = grad_fn(model.apply, params, target, batch, gamma=GAMMA)
            updates, opt_state = opt.update(grads, opt_state, params)
            return optim.apply_updates(params, updates), opt_state

        update = torch.compile(update) if compiled else update

        def step(st: dict) -> dict:
            params, opt_state = update(st["params"], st["target"], st["opt"], batch)
            return st | {"params": params, "opt": opt_state}

        return step

    def plain_loss() -> torch.Tensor:
        with torch.no_grad():
            next_q = target(batch["next_obs"]).max(1).values
            y = batch["reward"] + GAMMA * (1 - batch["terminated"].float()) * next_q
        q = online(batch["obs"]).gather(1, batch["action"].unsqueeze(1)).squeeze(1)
        return F.smooth_l1_loss(q, y)

    torch_opt = torch.optim.Adam(online.parameters(), 1e-4)

    def plain_step() -> None:
        torch_opt.zero_grad(set_to_none=True)
        plain_loss().backward()
        torch_opt.step()

    plain_loss().backward()  # same maths: gradients before any update
    grad_fn = torch.func.grad(dqn_loss, argnums=1, has_aux=True)
    fx_grads, _ = grad_fn(model.apply, st["params"], st["target"], batch, gamma=GAMMA)
    layers = lambda kind: [m for m in online.modules() if isinstance(m, kind)]
    grads_of = lambda kind: [{"w": m.weight.grad, "b": m.bias.grad} for m in layers(kind)]
    torch_grads = {
        "conv": {"layers": grads_of(torch.nn.Conv2d)},
        "head": {"layers": grads_of(torch.nn.Linear)},
    }
    extra = {"batch": n, "max_abs_grad_diff": max_abs_diff(fx_grads, torch_grads)}
    runs: Runs = {"plain_torch": plain_step, **fxrl_runs(make_step, st, compiled)}
    if torchrl:
        runs["torchrl"] = torchrl_dqn(copy.deepcopy(online), batch)
    return runs, extra


def torchrl_dqn(net: torch.nn.Module, batch: dict) -> Callable[[], None]:
    from torchrl.modules import QValueActor
    from torchrl.objectives import DQNLoss

    actor = QValueActor(net, in_keys=["observation"], action_space="categorical")
    loss = DQNLoss(actor, loss_function="smooth_l1", delay_value=True, action_space="categorical")
    loss.make_value_estimator(gamma=GAMMA)
    term = batch["terminated"].unsqueeze(-1)
    data = td(
        {
            "observation": batch["obs"],
            "action": batch["action"],
            ("next", "observation"): batch["next_obs"],
            ("next", "reward"): batch["reward"].unsqueeze(-1),
            ("next", "done"): term,
            ("next", "terminated"): term,
        },
        [batch["reward"].shape[0]],
    )
    opt = torch.optim.Adam(net.parameters(), 1e-4)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss(data)["loss"].backward()
        opt.step()

    return step


# ---- SAC at Pendulum sizes ------------------------------------------------------------

OBS, ACT, HIDDEN, SAC_BATCH, BOUND = 3, 1, 256, 256, 2.0


def squash(out: torch.Tensor, eps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A tanh-Gaussian draw into [-2, 2] and its log density (plain torch)."""
    loc, log_std = out.chunk(2, -1)
    scale = log_std.clamp(-5, 2).exp()
    u = loc + scale * eps
    log_det = torch.log(torch.tensor(BOUND)) + 2 * (
        torch.log(torch.tensor(2.0)) - u - F.softplus(-2 * u)
    )
    logp = torch.distributions.Normal(loc, scale).log_prob(u) - log_det
    return BOUND * torch.tanh(u), logp.sum(-1)


def sac_batch() -> dict:
    k = random.split(random.key(1), 5).unbind(0)
    return {
        "obs": random.normal(k[0], (SAC_BATCH, OBS)),
        "action": random.uniform(k[1], (SAC_BATCH, ACT), -BOUND, BOUND),
        "reward": random.normal(k[2], (SAC_BATCH,)),
        "next_obs": random.normal(k[3], (SAC_BATCH, OBS)),
        "terminated": torch.zeros(SAC_BATCH, dtype=torch.bool),
    }


def sac_case(torchrl: bool, compiled: bool) -> tuple[Runs, dict]:
    batch = sac_batch()
    with torch.random.fork_rng():
        torch.manual_seed(2)
        actor = torch_mlp([OBS, HIDDEN, HIDDEN, 2 * ACT])
        critics = [torch_mlp([OBS + ACT, HIDDEN, HIDDEN, 1]) for _ in range(2)]
    targets = copy.deepcopy(critics)
    log_alpha = torch.zeros((), requires_grad=True)
    critic_params = [p for c in critics for p in c.parameters()]

    def plain_loss(eps_next: torch.Tensor, eps_now: torch.Tensor) -> torch.Tensor:
        alpha = log_alpha.detach().exp()
        with torch.no_grad():
            next_a, next_logp = squash(actor(batch["next_obs"]), eps_next)
            sa = torch.cat([batch["next_obs"], next_a], 1)
            next_q = torch.min(targets[0](sa), targets[1](sa)).squeeze(1) - alpha * next_logp
            y = batch["reward"] + GAMMA * (1 - batch["terminated"].float()) * next_q
        sa = torch.cat([batch["obs"], batch["action"]], 1)
        critic_loss = 0.5 * sum(F.mse_loss(c(sa).squeeze(1), y) for c in critics)
        a, logp = squash(actor(batch["obs"]), eps_now)
        for p in critic_params:  # freeze the critics for the actor loss (SpinningUp's way)
            p.requires_grad_(False)
        sa = torch.cat([batch["obs"], a], 1)
        actor_loss = (alpha * logp - torch.min(critics[0](sa), critics[1](sa)).squeeze(1)).mean()
        for p in critic_params:
            p.requires_grad_(True)
        alpha_loss = -(log_alpha * (logp.detach() - ACT)).mean()
        return critic_loss + actor_loss + alpha_loss

    torch_opt = torch.optim.Adam([*actor.parameters(), *critic_params, log_alpha], 3e-4)
    online_p = critic_params
    target_p = [p for c in targets for p in c.parameters()]

    def plain_step() -> None:
        torch_opt.zero_grad(set_to_none=True)
        eps = torch.randn(2, SAC_BATCH, ACT)
        plain_loss(eps[0], eps[1]).backward()
        torch_opt.step()
        with torch.no_grad():
            for t, p in zip(target_p, online_p, strict=True):
                t.lerp_(p, TAU)

    actor_model = nn.mlp(OBS, 2 * ACT, (HIDDEN, HIDDEN), "relu")
    critic_model = nn.mlp(OBS + ACT, 1, (HIDDEN, HIDDEN), "relu")

    def actor_apply(p: dict, obs: torch.Tensor) -> distributions.TanhNormal:
        loc, log_std = actor_model.apply(p, obs).chunk(2, -1)
        return distributions.tanh_normal(loc, log_std.clamp(-5, 2).exp(), -BOUND, BOUND)

    def critic_apply(p: dict, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return critic_model.apply(p, torch.cat([obs, action], -1))

    stack = lambda ms: tree.stack([mlp_params(m) for m in ms])
    st = {"params": {"actor": mlp_params(actor), "critic": stack(critics)}, "key": random.key(3)}
    st["params"]["log_alpha"] = torch.zeros(())
    st["target"] = {"critic": stack(targets)}
    opt = optim.adam(3e-4)
    st["opt"] = opt.init(st["params"])

    def make_step(grad: Callable, compiled: bool) -> Callable:
        grad_fn = grad(sac_loss, argnums=2, has_aux=True)

        def update(st: dict, batch: dict) -> dict:
            key, loss_key = random.split(st["key"]).unbind(0)
            grads, _ = grad_fn(
                actor_apply, critic_apply, st["params"], st["target"], batch, loss_key
            )
            updates, opt_state = opt.update(grads, st["opt"], st["params"])
            params = optim.apply_updates(st["params"], updates)
            target = {"critic": soft_update(st["target"]["critic"], params["critic"], TAU)}
            return {"params": params, "target": target, "opt": opt_state, "key": key}

        update = torch.compile(update) if compiled else update
        return lambda st: update(st, batch)

    key = random.key(4)  # same maths: the losses from the same params and noise
    fx_loss, _ = sac_loss(actor_apply, critic_apply, st["params"], st["target"], batch, key)
    eps = [random.normal(k, (SAC_BATCH, ACT)) for k in random.split(key).unbind(0)]
    extra = {"batch": SAC_BATCH, "hidden": [HIDDEN, HIDDEN]}
    extra["max_abs_loss_diff"] = max_abs_diff(fx_loss, plain_loss(*eps))
    runs: Runs = {"plain_torch": plain_step, **fxrl_runs(make_step, st, compiled)}
    if torchrl:
        runs["torchrl"] = torchrl_sac(copy.deepcopy(actor), copy.deepcopy(critics[0]), batch)
    return runs, extra


def torchrl_sac(
    actor_net: torch.nn.Module, critic_net: torch.nn.Module, batch: dict
) -> Callable[[], None]:
    from tensordict.nn import NormalParamExtractor, TensorDictModule
    from torchrl.data import Bounded
    from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator
    from torchrl.objectives import SACLoss, SoftUpdate

    spec = Bounded(-BOUND, BOUND, (ACT,))
    module = TensorDictModule(
        torch.nn.Sequential(actor_net, NormalParamExtractor()), ["observation"], ["loc", "scale"]
    )
    actor = ProbabilisticActor(
        module, in_keys=["loc", "scale"], distribution_class=TanhNormal,
        distribution_kwargs={"low": -BOUND, "high": BOUND}, return_log_prob=True, spec=spec,
    )  # fmt: skip
    qnet = ValueOperator(Concat(critic_net), in_keys=["observation", "action"])
    loss = SACLoss(actor, qnet, num_qvalue_nets=2, loss_function="l2", action_spec=spec)
    loss.make_value_estimator(gamma=GAMMA)
    updater = SoftUpdate(loss, tau=TAU)
    term = batch["terminated"].unsqueeze(-1)
    data = td(
        {
            "observation": batch["obs"],
            "action": batch["action"],
            ("next", "observation"): batch["next_obs"],
            ("next", "reward"): batch["reward"].unsqueeze(-1),
            ("next", "done"): term,
            ("next", "terminated"): term,
        },
        [SAC_BATCH],
    )
    opt = torch.optim.Adam(loss.parameters(), 3e-4)

    def step() -> None:
        out = loss(data)
        (out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        updater.step()

    return step


# ---- PPO: one iteration over 2048 transitions -----------------------------------------

T, N, PPO_OBS, PPO_ACT, EPOCHS, MINIBATCH = 128, 16, 4, 2, 10, 64


def rollout(actor: torch.nn.Module) -> dict:
    k = random.split(random.key(5), 6).unbind(0)
    obs = random.normal(k[0], (T, N, PPO_OBS))
    action = random.randint(k[1], (T, N), 0, PPO_ACT)
    with torch.no_grad():
        log_prob = torch.distributions.Categorical(logits=actor(obs)).log_prob(action)
    return {
        "obs": obs,
        "action": action,
        "log_prob": log_prob,
        "reward": random.normal(k[2], (T, N)),
        "next_obs": random.normal(k[3], (T, N, PPO_OBS)),
        "terminated": random.bernoulli(k[4], 0.02, (T, N)),
        "truncated": random.bernoulli(k[5], 0.005, (T, N)),
    }


def plain_gae(data: dict, value: torch.Tensor, next_value: torch.Tensor) -> torch.Tensor:
    """CleanRL's reverse loop over time (truncation cuts the trace, bootstraps the value)."""
    advantage = torch.zeros_like(value)
    last = torch.zeros(N)
    for t in reversed(range(T)):
        term = data["terminated"][t].float()
        cut = 1.0 - (data["terminated"][t] | data["truncated"][t]).float()
        delta = data["reward"][t] + GAMMA * next_value[t] * (1.0 - term) - value[t]
        last = delta + GAMMA * LMBDA * cut * last
        advantage[t] = last
    return advantage


def plain_ppo_loss(actor, critic, mb: dict) -> torch.Tensor:
    dist = torch.distributions.Categorical(logits=actor(mb["obs"]))
    log_ratio = dist.log_prob(mb["action"]) - mb["log_prob"]
    ratio = log_ratio.exp()
    adv = mb["advantage"]
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 0.8, 1.2)).mean()
    v_loss = 0.5 * ((critic(mb["obs"]).squeeze(-1) - mb["value_target"]) ** 2).mean()
    return pg - 0.01 * dist.entropy().mean() + 0.5 * v_loss


def ppo_case(torchrl: bool, compiled: bool) -> tuple[Runs, dict]:
    from fxrl.objectives import gae

    with torch.random.fork_rng():
        torch.manual_seed(6)
        actor = torch_mlp([PPO_OBS, 64, 64, PPO_ACT], torch.nn.Tanh)
        critic = torch_mlp([PPO_OBS, 64, 64, 1], torch.nn.Tanh)
    data = rollout(actor)
    flat = lambda x: x.reshape(T * N, *x.shape[2:])
    params = [*actor.parameters(), *critic.parameters()]
    torch_opt = torch.optim.Adam(params, 2.5e-4, eps=1e-5)

    def plain_iteration() -> None:
        with torch.no_grad():
            value = critic(data["obs"]).squeeze(-1)
            next_value = critic(data["next_obs"]).squeeze(-1)
            advantage = plain_gae(data, value, next_value)
        b = {k: flat(data[k]) for k in ("obs", "action", "log_prob")}
        b |= {"advantage": flat(advantage), "value_target": flat(advantage + value)}
        for _ in range(EPOCHS):
            perm = torch.randperm(T * N)
            for start in range(0, T * N, MINIBATCH):
                idx = perm[start : start + MINIBATCH]
                loss = plain_ppo_loss(actor, critic, {k: v[idx] for k, v in b.items()})
                torch_opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 0.5)
                torch_opt.step()

    actor_model = nn.mlp(PPO_OBS, PPO_ACT, (64, 64), "tanh")
    critic_model = nn.mlp(PPO_OBS, 1, (64, 64), "tanh")

    def policy(p: dict, obs: torch.Tensor) -> distributions.Categorical:
        return distributions.categorical(actor_model.apply(p["actor"], obs))

    def value_fn(p: dict, obs: torch.Tensor) -> torch.Tensor:
        return critic_model.apply(p["critic"], obs).squeeze(-1)

    opt = optim.chain(optim.clip_by_global_norm(0.5), optim.adam(2.5e-4, eps=1e-5))
    st = {
        "params": {"actor": mlp_params(actor), "critic": mlp_params(critic)},
        "key": random.key(7),
    }
    st["opt"] = opt.init(st["params"])

    def fxrl_batch(params: dict) -> dict:
        with torch.no_grad():
            value = value_fn(params, data["obs"])
            next_value = value_fn(params, data["next_obs"])
            advantage, target = gae(
                data["reward"], value, next_value, data["terminated"], data["truncated"],
                gamma=GAMMA, lmbda=LMBDA,
            )  # fmt: skip
        b = {k: flat(data[k]) for k in ("obs", "action", "log_prob")}
        return b | {"advantage": flat(advantage), "value_target": flat(target)}

    def make_step(grad: Callable, compiled: bool) -> Callable:
        grad_fn = grad(ppo_loss, argnums=2, has_aux=True)

        def minibatch_update(params: dict, opt_state: object, b: dict, idx: torch.Tensor) -> tuple:
            mb = {k: v[idx] for k, v in b.items()}
            grads, _ = grad_fn(policy, value_fn, params, mb)
            updates, opt_state = opt.update(grads, opt_state, params)
            return optim.apply_updates(params, updates), opt_state

        minibatch_update = torch.compile(minibatch_update) if compiled else minibatch_update

        def iteration(st: dict) -> dict:
            params, opt_state, key = st["params"], st["opt"], st["key"]
            b = fxrl_batch(params)
            for _ in range(EPOCHS):
                key, perm_key = random.split(key).unbind(0)
                perm = random.permutation(perm_key, T * N)
                for start in range(0, T * N, MINIBATCH):
                    idx = perm[start : start + MINIBATCH]
                    params, opt_state = minibatch_update(params, opt_state, b, idx)
            return {"params": params, "opt": opt_state, "key": key}

        return iteration

    b = fxrl_batch(
        st["params"]
    )  # same maths: advantages and the whole-batch loss from the same params
    with torch.no_grad():
        value = critic(data["obs"]).squeeze(-1)
        plain_adv = flat(plain_gae(data, value, critic(data["next_obs"]).squeeze(-1)))
        plain = plain_ppo_loss(actor, critic, b)
    fx_loss, _ = ppo_loss(policy, value_fn, st["params"], b)
    extra = {"transitions": T * N, "epochs": EPOCHS, "minibatch": MINIBATCH}
    extra["max_abs_adv_diff"] = max_abs_diff(b["advantage"], plain_adv)
    extra["max_abs_loss_diff"] = max_abs_diff(fx_loss, plain)
    runs: Runs = {"plain_torch": plain_iteration, **fxrl_runs(make_step, st, compiled)}
    if torchrl:
        runs["torchrl"] = torchrl_ppo(copy.deepcopy(actor), copy.deepcopy(critic), data)
    return runs, extra


def torchrl_ppo(
    actor_net: torch.nn.Module, critic_net: torch.nn.Module, data: dict
) -> Callable[[], None]:
    from tensordict.nn import TensorDictModule
    from torchrl.modules import ProbabilisticActor, ValueOperator
    from torchrl.objectives import ClipPPOLoss
    from torchrl.objectives.value import GAE

    module = TensorDictModule(actor_net, ["observation"], ["logits"])
    actor = ProbabilisticActor(
        module, in_keys=["logits"], distribution_class=torch.distributions.Categorical,
        return_log_prob=True,
    )  # fmt: skip
    critic = ValueOperator(critic_net, in_keys=["observation"])
    advantage = GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic, average_gae=False)
    loss = ClipPPOLoss(
        actor, critic, clip_epsilon=0.2, entropy_coeff=0.01, critic_coeff=0.5,
        loss_critic_type="l2", normalize_advantage=True,
    )  # fmt: skip
    opt = torch.optim.Adam(loss.parameters(), 2.5e-4, eps=1e-5)
    tm = lambda x: x.transpose(0, 1)  # TorchRL puts time last: [N, T]
    done = data["terminated"] | data["truncated"]
    rollout_td = td(
        {
            "observation": tm(data["obs"]),
            "action": tm(data["action"]),
            "action_log_prob": tm(data["log_prob"]),
            ("next", "observation"): tm(data["next_obs"]),
            ("next", "reward"): tm(data["reward"]).unsqueeze(-1),
            ("next", "done"): tm(done).unsqueeze(-1),
            ("next", "terminated"): tm(data["terminated"]).unsqueeze(-1),
            ("next", "truncated"): tm(data["truncated"]).unsqueeze(-1),
        },
        [N, T],
    )

    def iteration() -> None:
        with torch.no_grad():
            batch = advantage(rollout_td.clone(False)).reshape(-1)
        for _ in range(EPOCHS):
            perm = torch.randperm(T * N)
            for start in range(0, T * N, MINIBATCH):
                out = loss(batch[perm[start : start + MINIBATCH]])
                total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
                total.backward()
                torch.nn.utils.clip_grad_norm_(loss.parameters(), 0.5)
                opt.step()
                opt.zero_grad(set_to_none=True)

    return iteration


# ---- timing ---------------------------------------------------------------------------


def report(case: str, times: dict[str, list[float]], first: dict[str, float], extra: dict) -> None:
    for name, ms in times.items():
        line = {"bench": "loss_bench", "case": case, "impl": name}
        line |= {"ms": round(statistics.median(ms), 3), "ms_min": round(min(ms), 3)}
        line |= {"ms_max": round(max(ms), 3), "first_call_s": round(first[name], 2)}
        print(json.dumps(line), flush=True)
    base = times["plain_torch"]
    for name, ms in times.items():
        if name == "plain_torch":
            continue
        ratios = [a / b for a, b in zip(ms, base, strict=True)]
        line = {"bench": "loss_bench", "case": case, "ratio": f"{name}/plain_torch"}
        line |= {"value": round(statistics.median(ratios), 3)}
        line |= {"min": round(min(ratios), 3), "max": round(max(ratios), 3)}
        print(json.dumps(line), flush=True)
    print(json.dumps({"bench": "loss_bench", "case": case, "check": extra}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--repeats", type=int, default=5, help="alternating timed rounds")
    parser.add_argument("--cases", default="dqn_atari,sac,ppo")
    parser.add_argument("--no-torchrl", action="store_true", help="skip TorchRL's losses")
    parser.add_argument(
        "--no-compile", action="store_true", help="skip fxrl_compiled (torch.compile)"
    )
    parser.add_argument("--quick", action="store_true", help="few iterations: check it runs")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", module="torchrl")
    torch.set_num_threads(args.threads)
    header = {"bench": "loss_bench", "torch": torch.__version__, "cpu": cpu_model()}
    header |= {"threads": torch.get_num_threads(), "repeats": args.repeats, "quick": args.quick}
    print(json.dumps(header), flush=True)
    cases = {"dqn_atari": (dqn_case, 5), "sac": (sac_case, 50), "ppo": (ppo_case, 1)}
    for name in args.cases.split(","):
        make, iters = cases[name]
        runs, extra = make(torchrl=not args.no_torchrl, compiled=not args.no_compile)
        repeats = args.repeats
        if args.quick:
            iters, repeats = 1, 1
        report(name, *measure(runs, iters, repeats), extra)


if __name__ == "__main__":
    main()
