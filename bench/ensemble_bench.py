"""Ensembles of Q-networks and the Atari DQN net: fxrl against torch.nn + torch.optim.

One training step = forward, backward, Adam update. Cases, each printed as one JSON line:

  ensemble_mlp  32 Q-nets (MLP 2x64 and 2x256, batch 256 per member, per-member data):
                fxrl  vmap(grad(loss) + adam.update) over stacked params and states;
                loop  32 torch.nn.Sequential modules and 32 torch.optim.Adam, one by one;
                recipe torch.func.stack_module_state + vmap(grad(functional_call)) and one
                       torch.optim.Adam over the stacked leaves (no loop over members).
  atari_dqn     the Nature DQN net, batch 128: fxrl grad + adam vs torch.nn + torch.optim.

Before timing, each case computes the gradients of every variant from the same params and
data and reports the largest difference (``max_abs_grad_diff``): the variants do the same
work. (The Adam updates themselves are checked against torch.optim in tests/test_optim.py.)

    python bench/ensemble_bench.py            # full run (the lead takes figures from it)
    python bench/ensemble_bench.py --quick    # a few iterations, to check that it runs
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import statistics
from collections.abc import Callable

import torch
from _common import (
    measure,
    mlp_params,
    nature_dqn,
    nature_dqn_params,
    torch_mlp,
)  # bench/_common.py

from fxrl import nn, optim, random, tree

OBS, ACTIONS = 32, 8


def q_loss(q: torch.Tensor, action: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    q_taken = q.gather(-1, action.unsqueeze(-1)).squeeze(-1)
    return (q_taken - target).square().mean()


def medians(runs: dict[str, Callable[[], None]], iters: int, rounds: int) -> dict[str, float]:
    """Median milliseconds per call of each run over alternating rounds."""
    times, _ = measure(runs, iters, rounds)
    return {name: statistics.median(ms) for name, ms in times.items()}


def max_diff(a: object, b: object) -> float:
    return max(
        float((x - y).detach().abs().max())
        for x, y in zip(tree.leaves(a), tree.leaves(b), strict=True)
    )


def ensemble_case(
    hidden: tuple[int, ...], members: int, batch: int, iters: int, rounds: int
) -> dict:
    key = random.key(0)
    k_obs, k_act, k_tgt = random.split(key, 3).unbind(0)
    obs = random.normal(k_obs, (members, batch, OBS))
    action = random.randint(k_act, (members, batch), 0, ACTIONS)
    target = random.normal(k_tgt, (members, batch))
    with torch.random.fork_rng():
        torch.manual_seed(0)
        modules = [torch_mlp([OBS, *hidden, ACTIONS]) for _ in range(members)]

    # fxrl: one vmapped call does every member's forward, backward and Adam step.
    model = nn.mlp(OBS, ACTIONS, hidden, "relu")
    opt = optim.adam(1e-3)

    def member_step(params, opt_state, obs, action, target):
        grads = torch.func.grad(lambda p: q_loss(model.apply(p, obs), action, target))(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state

    fxrl_step = torch.func.vmap(member_step)
    fx = {"params": tree.stack([mlp_params(m) for m in modules])}
    fx["state"] = torch.func.vmap(opt.init)(fx["params"])

    def run_fxrl() -> None:
        fx["params"], fx["state"] = fxrl_step(fx["params"], fx["state"], obs, action, target)

    # (a) a Python loop over torch.nn modules, each with its own torch.optim.Adam.
    loop_modules = [copy.deepcopy(m) for m in modules]
    loop_opts = [torch.optim.Adam(m.parameters(), 1e-3) for m in loop_modules]

    def run_loop() -> None:
        for i, (m, o) in enumerate(zip(loop_modules, loop_opts, strict=True)):
            o.zero_grad(set_to_none=True)
            q_loss(m(obs[i]), action[i], target[i]).backward()
            o.step()

    # (b) PyTorch's ensembling recipe: stacked state, vmap(grad(functional_call)), and one
    # Adam over the stacked leaves.
    stacked, buffers = torch.func.stack_module_state([copy.deepcopy(m) for m in modules])
    base = copy.deepcopy(modules[0]).to("meta")

    def recipe_loss(p, b, obs, action, target):
        return q_loss(torch.func.functional_call(base, (p, b), (obs,)), action, target)

    recipe_grad = torch.func.vmap(torch.func.grad(recipe_loss))
    recipe_opt = torch.optim.Adam(list(stacked.values()), 1e-3)

    def run_recipe() -> None:
        grads = recipe_grad(stacked, buffers, obs, action, target)
        for name, p in stacked.items():
            p.grad = grads[name]
        recipe_opt.step()

    # Same work check: the gradients of every variant from the same params and data.
    fx_grads = torch.func.vmap(torch.func.grad(lambda p, o, a, t: q_loss(model.apply(p, o), a, t)))(
        fx["params"], obs, action, target
    )
    for i, m in enumerate(loop_modules):
        m.zero_grad(set_to_none=True)
        q_loss(m(obs[i]), action[i], target[i]).backward()
    loop_grads = tree.stack(
        [
            {"layers": [{"w": x.weight.grad, "b": x.bias.grad} for x in m if hasattr(x, "weight")]}
            for m in loop_modules
        ]
    )
    recipe_grads = recipe_grad(stacked, buffers, obs, action, target)
    recipe_grads = {
        "layers": [
            {"w": recipe_grads[f"{i}.weight"], "b": recipe_grads[f"{i}.bias"]}
            for i in range(0, 2 * len(hidden) + 1, 2)
        ]
    }
    diff = max(max_diff(fx_grads, loop_grads), max_diff(fx_grads, recipe_grads))

    ms = medians({"fxrl": run_fxrl, "loop": run_loop, "recipe": run_recipe}, iters, rounds)
    sizes = [OBS, *hidden, ACTIONS]
    macs = sum(a * b for a, b in itertools.pairwise(sizes))
    flop = 3 * 2 * macs * batch * members  # forward + backward (about twice the forward)
    return {
        "bench": "ensemble_mlp",
        "hidden": list(hidden),
        "members": members,
        "batch": batch,
        "fxrl_ms": round(ms["fxrl"], 3),
        "loop_ms": round(ms["loop"], 3),
        "recipe_ms": round(ms["recipe"], 3),
        "loop_over_fxrl": round(ms["loop"] / ms["fxrl"], 3),
        "recipe_over_fxrl": round(ms["recipe"] / ms["fxrl"], 3),
        "gflop_per_step": round(flop / 1e9, 4),
        "fxrl_gflops": round(flop / ms["fxrl"] / 1e6, 2),
        "loop_gflops": round(flop / ms["loop"] / 1e6, 2),
        "recipe_gflops": round(flop / ms["recipe"] / 1e6, 2),
        "max_abs_grad_diff": diff,
    }


def atari_case(batch: int, iters: int, rounds: int) -> dict:
    num_actions = 6
    k_obs, k_act, k_tgt = random.split(random.key(1), 3).unbind(0)
    frames = random.uniform(k_obs, (batch, 4, 84, 84))
    action = random.randint(k_act, (batch,), 0, num_actions)
    target = random.normal(k_tgt, (batch,))
    with torch.random.fork_rng():
        torch.manual_seed(1)
        module = nature_dqn(num_actions)

    def grad_of(m: torch.nn.Module) -> dict:
        return {"w": m.weight.grad, "b": m.bias.grad}

    model, opt = nn.atari_dqn(num_actions), optim.adam(1e-4)
    fx = {"params": nature_dqn_params(module)}
    fx["state"] = opt.init(fx["params"])
    loss_grad = torch.func.grad(lambda p: q_loss(model.apply(p, frames), action, target))

    def run_fxrl() -> None:
        updates, fx["state"] = opt.update(loss_grad(fx["params"]), fx["state"], fx["params"])
        fx["params"] = optim.apply_updates(fx["params"], updates)

    torch_opt = torch.optim.Adam(module.parameters(), 1e-4)

    def run_torch() -> None:
        torch_opt.zero_grad(set_to_none=True)
        q_loss(module(frames), action, target).backward()
        torch_opt.step()

    fx_grads = loss_grad(fx["params"])
    q_loss(module(frames), action, target).backward()
    ref = {
        "conv": {"layers": [grad_of(module[i]) for i in (0, 2, 4)]},
        "head": {"layers": [grad_of(module[i]) for i in (7, 9)]},
    }
    diff = max_diff(fx_grads, ref)
    ms = medians({"fxrl": run_fxrl, "torch": run_torch}, iters, rounds)
    return {
        "bench": "atari_dqn",
        "batch": batch,
        "fxrl_ms": round(ms["fxrl"], 3),
        "torch_ms": round(ms["torch"], 3),
        "torch_over_fxrl": round(ms["torch"] / ms["fxrl"], 3),
        "max_abs_grad_diff": diff,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few iterations: check it runs")
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="torch.set_num_threads (default: all CPUs)",
    )
    parser.add_argument("--members", type=int, default=32, help="ensemble size")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    iters, rounds = (2, 1) if args.quick else (20, 5)
    common = {"threads": torch.get_num_threads(), "torch": torch.__version__, "quick": args.quick}
    for hidden in ((64, 64), (256, 256)):
        result = ensemble_case(hidden, args.members, 256, iters, rounds)
        print(json.dumps({**result, **common}), flush=True)
    atari_iters, atari_rounds = (1, 1) if args.quick else (5, 5)
    print(json.dumps({**atari_case(128, atari_iters, atari_rounds), **common}), flush=True)


if __name__ == "__main__":
    main()
