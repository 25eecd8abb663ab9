"""One SAC gradient step as the off-policy algorithms take it: fxrl (eager and
``fxrl.compile``) against plain torch.nn + torch.optim doing the same maths, and
TorchRL's SACLoss, in one run; for 1 agent and for 8 agents (seeds) at once.

The step (Pendulum sizes: obs 3, action 1 in [-2, 2]; 2x256 ReLU actor and twin critics;
batch 256): draw 256 transitions uniformly from a full replay of 10k, one SAC loss
(twin critics, tanh-Gaussian actor, learned temperature, target entropy -1), one Adam per
part (actor 3e-4, critics 1e-3, log_alpha 1e-3), Polyak target critics (tau 0.005).

Implementations (one JSON line each, then ratios against plain torch):

  plain_torch       torch.nn modules, three torch.optim.Adam, .backward(), in-place lerp_;
                    ``--seeds 8``: 8 independent agents stepped one after another.
  fxrl              the pure step: ``torch.func.grad`` of ``fxrl.objectives.sac_loss``,
                    ``fxrl.optim.adam`` per part, ``soft_update``, keys from the state;
                    8 seeds: ``torch.func.vmap`` of the same function.
  fxrl_compiled     ``fxrl.compile`` of that function (8 seeds: of its vmap).
  torchrl           TorchRL 0.14's SACLoss + SoftUpdate on a TensorDict batch, one agent
                    (8 seeds: 8 agents stepped one after another).

Before timing, one fxrl step and one plain-torch step from the same params, batch and
noise are compared (``max_abs_param_diff`` over every updated param): the same maths.
Each implementation is warmed up, then timed in ``--repeats`` alternating rounds (the
order flips each round) of ``--iters`` calls; a ratio is the median over rounds of the
per-round time ratio, with min and max as spread; ``updates_per_s`` counts agent updates
(8 per call for 8 seeds). Below 1 is faster than plain torch.

    python bench/offpolicy_bench.py --threads 1 [--repeats 5] [--seeds 1,8]
    python bench/offpolicy_bench.py --quick      # a few iterations: check that it runs
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
from _common import Concat, cpu_model, measure, mlp_params, torch_mlp  # bench/_common.py

import fxrl
from fxrl import distributions, nn, objectives, optim, random, tree

OBS, ACT, HIDDEN, BATCH, CAPACITY, BOUND = 3, 1, 256, 256, 10_000, 2.0
GAMMA, TAU, LRS = 0.99, 0.005, {"actor": 3e-4, "critic": 1e-3, "alpha": 1e-3}
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
Runs = dict[str, Callable[[], None]]


# ---- the replay data both sides sample from --------------------------------------------


def replay(seed: int) -> dict[str, torch.Tensor]:
    """A full replay of CAPACITY Pendulum-shaped transitions (made with fxrl.random)."""
    k = random.split(random.key(100 + seed), 4).unbind(0)
    return {
        "obs": random.normal(k[0], (CAPACITY, OBS)),
        "action": random.uniform(k[1], (CAPACITY, ACT), -BOUND, BOUND),
        "reward": random.normal(k[2], (CAPACITY,)),
        "next_obs": random.normal(k[3], (CAPACITY, OBS)),
        "terminated": torch.zeros(CAPACITY, dtype=torch.bool),
    }


# ---- plain torch ------------------------------------------------------------------------


def squash(out: torch.Tensor, eps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A tanh-Gaussian draw into [-BOUND, BOUND] and its log density."""
    loc, log_std = out.chunk(2, -1)
    scale = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX).exp()
    u = loc + scale * eps
    log_det = torch.log(torch.tensor(BOUND)) + 2 * (
        torch.log(torch.tensor(2.0)) - u - F.softplus(-2 * u)
    )
    logp = torch.distributions.Normal(loc, scale).log_prob(u) - log_det
    return BOUND * torch.tanh(u), logp.sum(-1)


class PlainAgent:
    """SAC the torch.nn + torch.optim way (SpinningUp's / CleanRL's shape)."""

    def __init__(self, seed: int, data: dict) -> None:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.actor = torch_mlp([OBS, HIDDEN, HIDDEN, 2 * ACT])
            self.critics = torch.nn.ModuleList(
                [torch_mlp([OBS + ACT, HIDDEN, HIDDEN, 1]) for _ in range(2)]
            )
        self.targets = copy.deepcopy(self.critics)
        self.log_alpha = torch.zeros((), requires_grad=True)
        self.opts = [
            torch.optim.Adam(self.actor.parameters(), LRS["actor"]),
            torch.optim.Adam(self.critics.parameters(), LRS["critic"]),
            torch.optim.Adam([self.log_alpha], LRS["alpha"]),
        ]
        self.data = data

    def loss(self, b: dict, eps_next: torch.Tensor, eps_now: torch.Tensor) -> torch.Tensor:
        alpha = self.log_alpha.detach().exp()
        c1, c2 = self.critics
        with torch.no_grad():
            next_a, next_logp = squash(self.actor(b["next_obs"]), eps_next)
            sa = torch.cat([b["next_obs"], next_a], 1)
            t1, t2 = self.targets
            next_q = torch.min(t1(sa), t2(sa)).squeeze(1) - alpha * next_logp
            y = b["reward"] + GAMMA * (1 - b["terminated"].float()) * next_q
        sa = torch.cat([b["obs"], b["action"]], 1)
        critic_loss = 0.5 * (F.mse_loss(c1(sa).squeeze(1), y) + F.mse_loss(c2(sa).squeeze(1), y))
        a, logp = squash(self.actor(b["obs"]), eps_now)
        self.critics.requires_grad_(False)  # the actor loss moves the actor only
        sa = torch.cat([b["obs"], a], 1)
        actor_loss = (alpha * logp - torch.min(c1(sa), c2(sa)).squeeze(1)).mean()
        self.critics.requires_grad_(True)
        alpha_loss = -(self.log_alpha * (logp.detach() - ACT)).mean()
        return critic_loss + actor_loss + alpha_loss

    def step(self, index: torch.Tensor | None = None, eps: torch.Tensor | None = None) -> None:
        if index is None:
            index = torch.randint(0, CAPACITY, (BATCH,))
        if eps is None:
            eps = torch.randn(2, BATCH, ACT)
        b = {k: v.index_select(0, index) for k, v in self.data.items()}
        for opt in self.opts:
            opt.zero_grad(set_to_none=True)
        self.loss(b, eps[0], eps[1]).backward()
        for opt in self.opts:
            opt.step()
        with torch.no_grad():
            for t, p in zip(self.targets.parameters(), self.critics.parameters(), strict=True):
                t.lerp_(p, TAU)

    def params(self) -> dict:
        return {"actor": mlp_params(self.actor),
                "critic": tree.stack([mlp_params(c) for c in self.critics]),
                "log_alpha": self.log_alpha.detach().clone()}  # fmt: skip


# ---- fxrl ---------------------------------------------------------------------------------

actor_model = nn.mlp(OBS, 2 * ACT, (HIDDEN, HIDDEN), "relu")
critic_model = nn.mlp(OBS + ACT, 1, (HIDDEN, HIDDEN), "relu")
OPTS = {name: optim.adam(lr) for name, lr in LRS.items()}
PARTS = (("actor", "actor"), ("critic", "critic"), ("log_alpha", "alpha"))


def actor_apply(p: dict, obs: torch.Tensor) -> distributions.TanhNormal:
    loc, log_std = actor_model.apply(p, obs).chunk(2, -1)
    scale = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX).exp()
    return distributions.tanh_normal(loc, scale, -BOUND, BOUND)


def critic_apply(p: dict, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    return critic_model.apply(p, torch.cat([obs, action], -1)).squeeze(-1)


def fxrl_state(agent: PlainAgent) -> dict:
    """The plain agent's params as an fxrl state (same numbers), with Adam states."""
    params = agent.params()
    target = {"critic": tree.stack([mlp_params(c) for c in agent.targets])}
    opt = {name: OPTS[name].init(params[part]) for part, name in PARTS}
    return {"params": params, "target": target, "opt": opt, "key": random.key(7)}


def learn(st: dict, batch: dict, key: torch.Tensor) -> dict:
    """One SAC gradient step on ``batch``: pure."""
    params = st["params"]
    grads, _ = torch.func.grad(objectives.sac_loss, argnums=2, has_aux=True)(
        actor_apply, critic_apply, params, st["target"], batch, key, gamma=GAMMA
    )
    new_params, new_opt = {}, {}
    for part, name in PARTS:
        upd, new_opt[name] = OPTS[name].update(grads[part], st["opt"][name], params[part])
        new_params[part] = optim.apply_updates(params[part], upd)
    target = {"critic": objectives.soft_update(st["target"]["critic"], new_params["critic"], TAU)}
    return {"params": new_params, "target": target, "opt": new_opt, "key": st["key"]}


def step(st: dict, data: dict) -> dict:
    """Sample a batch from the replay ``data`` (uniform, as ``fxrl.buffers.sample`` on a
    full buffer) and take one gradient step; the keys come from the state."""
    key, k_index, k_loss = random.split(st["key"], 3).unbind(-2)
    index = random.randint(k_index, (BATCH,), 0, CAPACITY)
    batch = tree.map(lambda x: x.index_select(0, index), data)
    return {**learn(st, batch, k_loss), "key": key}


# ---- TorchRL ------------------------------------------------------------------------------


def torchrl_agent(agent: PlainAgent) -> Callable[[], None]:
    from tensordict import TensorDict
    from tensordict.nn import NormalParamExtractor, TensorDictModule
    from torchrl.data import Bounded
    from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator
    from torchrl.objectives import SACLoss, SoftUpdate

    spec = Bounded(-BOUND, BOUND, (ACT,))
    net = torch.nn.Sequential(copy.deepcopy(agent.actor), NormalParamExtractor())
    module = TensorDictModule(net, ["observation"], ["loc", "scale"])
    actor = ProbabilisticActor(
        module, in_keys=["loc", "scale"], distribution_class=TanhNormal,
        distribution_kwargs={"low": -BOUND, "high": BOUND}, return_log_prob=True, spec=spec,
    )  # fmt: skip
    qnet = ValueOperator(Concat(copy.deepcopy(agent.critics[0])), in_keys=["observation", "action"])
    loss = SACLoss(actor, qnet, num_qvalue_nets=2, loss_function="l2", action_spec=spec)
    loss.make_value_estimator(gamma=GAMMA)
    updater = SoftUpdate(loss, tau=TAU)
    d = agent.data
    term = d["terminated"].unsqueeze(-1)
    data = TensorDict(
        {"observation": d["obs"], "action": d["action"], ("next", "observation"): d["next_obs"],
         ("next", "reward"): d["reward"].unsqueeze(-1), ("next", "done"): term,
         ("next", "terminated"): term},
        [CAPACITY],
    )  # fmt: skip
    groups = {"actor": [], "critic": [], "alpha": []}
    for name, p in loss.named_parameters():
        groups["alpha" if "alpha" in name else "actor" if "actor" in name else "critic"].append(p)
    opts = [torch.optim.Adam(groups[k], LRS[k]) for k in ("actor", "critic", "alpha")]

    def run() -> None:
        batch = data[torch.randint(0, CAPACITY, (BATCH,))]
        out = loss(batch)
        (out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]).backward()
        for opt in opts:
            opt.step()
            opt.zero_grad(set_to_none=True)
        updater.step()

    return run


# ---- the cases ----------------------------------------------------------------------------


def check(agent: PlainAgent) -> float:
    """Largest difference between the params after one fxrl and one plain-torch step from
    the same params, batch and noise."""
    st = fxrl_state(agent)
    key = random.key(11)
    index = random.randint(random.key(12), (BATCH,), 0, CAPACITY)
    batch = tree.map(lambda x: x.index_select(0, index), agent.data)
    new = learn(st, batch, key)
    k_next, k_now = random.split(key).unbind(0)
    eps = torch.stack([random.normal(k, (BATCH, ACT)) for k in (k_next, k_now)])
    twin = copy.deepcopy(agent)
    twin.step(index, eps)
    pairs = zip(tree.leaves(new["params"]), tree.leaves(twin.params()), strict=True)
    return max(float((a - b).abs().max()) for a, b in pairs)


def case(seeds: int, torchrl: bool, compiled: bool) -> tuple[Runs, dict]:
    agents = [PlainAgent(s, replay(s)) for s in range(seeds)]
    extra = {"seeds": seeds, "batch": BATCH, "hidden": [HIDDEN, HIDDEN], "replay": CAPACITY}
    extra["max_abs_param_diff"] = check(agents[0])
    runs: Runs = {}

    def plain() -> None:
        for a in agents:
            a.step()

    runs["plain_torch"] = plain
    states = [fxrl_state(a) for a in agents]
    datas = [a.data for a in agents]
    if seeds == 1:
        fn, held = step, {"st": states[0], "data": datas[0]}
    else:
        held = {"st": tree.stack(states), "data": tree.stack(datas)}
        held["st"]["key"] = random.split(random.key(7), seeds)
        fn = torch.func.vmap(step)
    variants = [("fxrl", fn)]
    if compiled:
        variants.append(("fxrl_compiled", fxrl.compile(fn)))
    for name, f in variants:
        box = dict(held)

        def run(f: Callable = f, box: dict = box) -> None:
            box["st"] = f(box["st"], box["data"])

        runs[name] = run
    if torchrl:
        steps = [torchrl_agent(a) for a in agents]

        def run_torchrl() -> None:
            for s in steps:
                s()

        runs["torchrl"] = run_torchrl
    return runs, extra


# ---- timing -------------------------------------------------------------------------------


def report(seeds: int, times: dict, first: dict, extra: dict) -> None:
    head = {"bench": "offpolicy_bench", "case": "sac_step", "seeds": seeds}
    for name, ms in times.items():
        med = statistics.median(ms)
        line = {**head, "impl": name, "ms": round(med, 3), "ms_min": round(min(ms), 3),
                "ms_max": round(max(ms), 3), "updates_per_s": round(seeds * 1e3 / med, 1),
                "first_call_s": round(first[name], 2)}  # fmt: skip
        print(json.dumps(line), flush=True)
    base = times["plain_torch"]
    for name, ms in times.items():
        if name == "plain_torch":
            continue
        ratios = [a / b for a, b in zip(ms, base, strict=True)]
        med = statistics.median(ratios)
        line = {**head, "ratio": f"{name}/plain_torch", "value": round(med, 3),
                "min": round(min(ratios), 3), "max": round(max(ratios), 3)}  # fmt: skip
        print(json.dumps(line), flush=True)
    print(json.dumps({**head, "check": extra}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--repeats", type=int, default=5, help="alternating timed rounds")
    parser.add_argument("--iters", type=int, default=20, help="calls per timed round")
    parser.add_argument("--seeds", default="1,8", help="agents per call, comma-separated")
    parser.add_argument("--no-torchrl", action="store_true", help="skip TorchRL's SACLoss")
    parser.add_argument("--no-compile", action="store_true", help="skip fxrl_compiled")
    parser.add_argument("--quick", action="store_true", help="few iterations: check it runs")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", module="torchrl")
    torch.set_num_threads(args.threads)
    header = {"bench": "offpolicy_bench", "torch": torch.__version__, "cpu": cpu_model(),
              "threads": torch.get_num_threads(), "repeats": args.repeats,
              "iters": args.iters, "quick": args.quick}  # fmt: skip
    print(json.dumps(header), flush=True)
    for seeds in (int(s) for s in args.seeds.split(",")):
        runs, extra = case(seeds, torchrl=not args.no_torchrl, compiled=not args.no_compile)
        iters, repeats = (1, 1) if args.quick else (args.iters, args.repeats)
        report(seeds, *measure(runs, iters, repeats), extra)


if __name__ == "__main__":
    main()
