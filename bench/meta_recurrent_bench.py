"""Recurrent PPO and task ensembles: what recurrence and vmapping over tasks cost, each
contender timed against a peer measured in the same run.

Parts (``--only PART`` runs one):

``gru_sequence``: recurrent PPO's learning pass through its core, alone. A minibatch of
sequences [T, B=16, obs 4] (T = 32, recurrent PPO's ``num_steps``, and T = 128), a
stored starting carry [B, 64], episode starts drawn at random (``is_init``, p = 0.05 per
step), loss = mean of the outputs squared, gradients w.r.t. the GRU's weights.

  torch_grucell_loop      the peer: ``torch.nn.GRUCell`` stepped in a Python loop, the
                          hidden state multiplied by ``1 - is_init`` before each step (the
                          CleanRL shape), ``.backward()``.
  fxrl                    ``torch.func.grad`` of the loss through ``fxrl.nn.gru(4, 64)``'s
                          ``apply`` (input projections of all steps at once, the resets by
                          ``torch.where`` inside the sequence), eager.
  fxrl_compiled           ``fxrl.compile`` of that gradient function. Only for T <=
                          ``--compiled-max-t`` (default 32): the loop is unrolled, and
                          compiling the T = 128 graph took 340 s on the loaded 2-core
                          machine (T = 32: about 55 s). ``--compiled-max-t 128`` adds it.
  torch_nn_gru_no_resets  ``torch.nn.GRU`` over the whole sequence in one fused op,
                          ``.backward()``. It has NO mid-sequence resets, so it is NOT the
                          same maths: a reference for what a fused kernel costs.

Before timing, the GRUCell gets fxrl's weights (the same names and gate order, r z n, so
they copy across unchanged) and the outputs and gradients of both are compared
(``max_abs_output_diff``, ``max_abs_grad_diff``, the compiled one's too); so are
``torch.nn.GRU`` and fxrl's GRU without resets (``nn_gru_vs_fxrl_no_resets``).

``recurrent_ppo_iteration``: env steps/s of whole training iterations on CartPole-v1
with the velocities masked (positions only, as ``recurrent_ppo.Config(mask_velocity=True)``),
16 envs x 32 steps, 4 epochs x 4 minibatches (128 transitions each), for 1 and 4 seeds,
every contender through ``core.batched(algo, seeds, compile=True)`` (compiled pieces,
vmapped over seeds), as ``examples/recurrent_ppo_cartpole.py --compile`` trains.

  ppo                     the peer: feed-forward ``fxrl.algorithms.ppo`` (2x64 tanh actor
                          and critic) with the same sizes on the same masked env. ppo has no
                          mask option, so ``fxrl.envs.make`` is patched, while ``ppo.make``
                          runs, to return the env seen through ``transforms.select``
                          (the wrapper recurrent_ppo uses).
  recurrent_ppo_gru       ``fxrl.algorithms.recurrent_ppo``, GRU core (64): the ratio
                          against ppo is the cost of recurrence.
  recurrent_ppo_mlp       the same recurrent_ppo code with ``cell="mlp"`` (a dense layer in
                          the core's place): separates the recurrence from the rest.

``task_ensemble``: 8 CartPole-v1 tasks (pole half-length in [0.25, 1], pole mass in
[0.05, 0.5], ``tasks.sample_params``), one PPO agent each (``ppo.Config.tuned``:
4 envs x 128 steps, 4 epochs x 4 minibatches), env steps/s of all 8 together.

  loop_8_tasks            the peer: a Python loop calling one task's compiled update
                          (``core.batched(algo, 1, compile=True)``) on each task's state.
  vmapped_8_tasks         ``tasks.update_tasks(algo, 8, compile=True)``: one vmapped,
                          compiled update for all tasks.

Before timing, one update from the same 8 initial states is taken both ways, and the
states and metrics compared (``max_abs_state_diff``, ``max_abs_metric_diff``).

Timing (``bench/_common.measure``): each contender called twice as warm-up, then
``--repeats`` alternating rounds (the order flips each round) of ``--iters`` calls. A line
per contender gives the median ms per call over rounds, min and max as spread, env steps/s
where there are env steps, and ``first_call_s`` (the compile, for compiled contenders;
where a check runs a contender before timing, its first call is the check's); a
ratio line per contender is the median over rounds of the per-round time ratio against
the peer (above 1: slower than the peer), min and max as spread.

    .venv/bin/python bench/meta_recurrent_bench.py --threads 1 [--repeats 5] [--iters N]
    .venv/bin/python bench/meta_recurrent_bench.py --only gru_sequence --compiled-max-t 128
    .venv/bin/python bench/meta_recurrent_bench.py --quick    # checks that it runs (<1 min)

A full run takes about 9 minutes on a 2-core machine with a cold inductor cache (less with
a warm one), most of it compiling: gru_sequence ~1.5 min, recurrent_ppo_iteration ~5.5 min
(the GRU update's pieces alone ~2.5 min), task_ensemble ~1.5 min. ``--quick`` uses tiny
sizes and 1 call per round; it compiles fxrl_compiled in gru_sequence (T = 8) but runs
parts 2 and 3 eagerly (``compile=False``, ``"compiled": false`` in their lines: compiling
their pieces takes minutes at any size). Its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

import torch
from _common import cpu_model, measure  # bench/_common.py
from torch import Tensor

import fxrl
from fxrl import envs, nn, random, transforms, tree
from fxrl.algorithms import core, ppo, recurrent_ppo, tasks

BENCH = "meta_recurrent_bench"
PARTS = ("gru_sequence", "recurrent_ppo_iteration", "task_ensemble")
OBS, HIDDEN, RESET_P = 4, 64, 0.05
NUM_TASKS = 8
TASK_RANGES = {"length": (0.25, 1.0), "masspole": (0.05, 0.5)}
Runs = dict[str, Callable[[], None]]


def emit(row: dict) -> None:
    print(json.dumps(row), flush=True)


def max_abs_diff(a: Any, b: Any) -> float:
    """Largest |a - b| over the tensor leaves of two trees (NaN in both counts as equal,
    NaN in one as infinite)."""
    worst = 0.0
    for x, y in zip(tree.leaves(a), tree.leaves(b), strict=True):
        if not isinstance(x, Tensor) or x.numel() == 0:
            continue
        d = (x.double() - y.double()).abs()
        d = torch.where(x.double().isnan() & y.double().isnan(), 0.0, d)
        worst = max(worst, float(torch.nan_to_num(d, nan=float("inf")).max()))
    return worst


def timed_first(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` and its wall time in seconds (a compiled contender's first call: compile)."""
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def report(head: dict, times: dict, first: dict, peer: str, steps: int = 0) -> None:
    """One line per contender (ms per call; env steps/s when ``steps`` per call), then
    one ratio line per contender against ``peer``."""
    for name, ms in times.items():
        med = statistics.median(ms)
        line = {**head, "impl": name, "ms": round(med, 3), "ms_min": round(min(ms), 3),
                "ms_max": round(max(ms), 3), "first_call_s": round(first[name], 2)}  # fmt: skip
        if steps:
            line["env_steps_per_s"] = round(steps * 1e3 / med, 1)
        emit(line)
    for name, ms in times.items():
        if name == peer:
            continue
        ratios = [a / b for a, b in zip(ms, times[peer], strict=True)]
        emit({**head, "ratio": f"{name}/{peer}", "value": round(statistics.median(ratios), 3),
              "min": round(min(ratios), 3), "max": round(max(ratios), 3)})  # fmt: skip


# ---- 1. gru_sequence ------------------------------------------------------------------------

GRU = nn.gru(OBS, HIDDEN)


def fxrl_loss(params: dict, xs: Tensor, carry: Tensor, is_init: Tensor) -> Tensor:
    """Mean squared output of fxrl's GRU over ``xs [T, B, OBS]`` from ``carry [B, 1, H]``,
    reset to zeros where ``is_init [T, B]``."""
    ys, _ = GRU.apply(params, xs, carry, is_init)
    return ys.square().mean()


fxrl_grad = torch.func.grad(fxrl_loss)


def copy_weights(params: dict, module: torch.nn.Module, suffix: str) -> torch.nn.Module:
    """fxrl's GRU weights into a torch GRUCell (``suffix=""``) or GRU (``"_l0"``): the same
    names and gate order (reset, update, new), so they copy unchanged."""
    layer = params["layers"][0]
    with torch.no_grad():
        for name in ("w_ih", "w_hh", "b_ih", "b_hh"):
            kind, part = name.split("_")
            attr = f"{'weight' if kind == 'w' else 'bias'}_{part}{suffix}"
            getattr(module, attr).copy_(layer[name])
    return module


def cell_loop(cell: torch.nn.GRUCell, xs: Tensor, h: Tensor, keep: Tensor) -> Tensor:
    """The plain-torch sequence: ``h * (1 - is_init)`` before each GRUCell step."""
    outs = []
    for t in range(xs.shape[0]):
        h = cell(xs[t], h * keep[t])
        outs.append(h)
    return torch.stack(outs)


def cell_grads(cell: torch.nn.GRUCell) -> dict:
    return {"layers": [{"w_ih": cell.weight_ih.grad, "w_hh": cell.weight_hh.grad,
                        "b_ih": cell.bias_ih.grad, "b_hh": cell.bias_hh.grad}]}  # fmt: skip


def gru_case(t_len: int, batch: int, compiled: bool) -> tuple[Runs, dict, dict]:
    """The contenders for one sequence length, the checks and the compile time."""
    k = random.split(random.key(0), 4).unbind(0)
    params = GRU.init(k[0])
    xs = random.normal(k[1], (t_len, batch, OBS))
    carry = 0.5 * random.normal(k[2], (batch, 1, HIDDEN))  # the carry stored at the start
    is_init = random.uniform(k[3], (t_len, batch)) < RESET_P
    keep = (1.0 - is_init.float()).unsqueeze(-1)  # [T, B, 1], as a torch rollout stores dones
    h0 = carry[:, 0].contiguous()
    cell = copy_weights(params, torch.nn.GRUCell(OBS, HIDDEN), "")
    fused = copy_weights(params, torch.nn.GRU(OBS, HIDDEN), "_l0")
    h0_fused = h0.unsqueeze(0).contiguous()  # torch's [num_layers, B, H]

    # checks: the same weights give the same outputs and gradients
    ys_fxrl, _ = GRU.apply(params, xs, carry, is_init)
    ys_cell = cell_loop(cell, xs, h0, keep)
    ys_cell.square().mean().backward()
    grads_fxrl = fxrl_grad(params, xs, carry, is_init)
    ys_plain, _ = GRU.apply(params, xs, carry)
    ys_fused, _ = fused(xs, h0_fused)
    check = {"max_abs_output_diff": max_abs_diff(ys_fxrl, ys_cell.detach()),
             "max_abs_grad_diff": max_abs_diff(grads_fxrl, cell_grads(cell)),
             "nn_gru_vs_fxrl_no_resets": max_abs_diff(ys_plain, ys_fused.detach()),
             "resets_in_batch": int(is_init.sum())}  # fmt: skip
    first: dict = {}

    def run_cell() -> None:
        cell.zero_grad(set_to_none=True)
        cell_loop(cell, xs, h0, keep).square().mean().backward()

    def run_fxrl() -> None:
        fxrl_grad(params, xs, carry, is_init)

    runs: Runs = {"torch_grucell_loop": run_cell, "fxrl": run_fxrl}
    if compiled:
        grad_compiled = fxrl.compile(fxrl_grad)
        grads_c, first["fxrl_compiled"] = timed_first(
            lambda: grad_compiled(params, xs, carry, is_init)
        )
        check["max_abs_grad_diff_compiled"] = max_abs_diff(grads_c, cell_grads(cell))

        def run_compiled() -> None:
            grad_compiled(params, xs, carry, is_init)

        runs["fxrl_compiled"] = run_compiled

    def run_fused() -> None:
        fused.zero_grad(set_to_none=True)
        out, _ = fused(xs, h0_fused)
        out.square().mean().backward()

    runs["torch_nn_gru_no_resets"] = run_fused
    return runs, check, first


def part_gru(args: argparse.Namespace) -> None:
    lens, batch = ((8,), 4) if args.quick else ((32, 128), 16)
    for t_len in lens:
        head = {"bench": BENCH, "case": "gru_sequence", "T": t_len, "B": batch, "obs": OBS,
                "hidden": HIDDEN}  # fmt: skip
        runs, check, compile_s = gru_case(t_len, batch, t_len <= args.compiled_max_t)
        iters = args.iters or (50 if t_len <= 32 else 10)
        times, first = measure(runs, *rounds(args, iters))
        report(head, times, {**first, **compile_s}, "torch_grucell_loop")
        emit({**head, "check": check})


# ---- 2. recurrent_ppo_iteration ---------------------------------------------------------


def masked_ppo(config: ppo.Config) -> core.Algorithm:
    """``ppo.make(config)`` on the env recurrent_ppo's ``mask_velocity`` trains on: each
    ``envs.make(id)`` inside it returns the env through ``transforms.select(POSITIONS[id])``."""
    real_make = envs.make

    def make_masked(env_id: str, **kwargs: Any) -> envs.Env:
        select = transforms.select(recurrent_ppo.POSITIONS[env_id])
        return envs.transform(real_make(env_id, **kwargs), select)

    with mock.patch.object(envs, "make", make_masked):
        return ppo.make(config)


def part_recurrent(args: argparse.Namespace) -> None:
    sizes = (
        {"num_envs": 4, "num_steps": 8, "update_epochs": 1, "num_minibatches": 2}
        if args.quick
        else {"num_envs": 16, "num_steps": 32, "update_epochs": 4, "num_minibatches": 4}
    )
    compiled = not args.quick
    algos = {
        "ppo": masked_ppo(ppo.Config(env="CartPole-v1", lr=1e-3, **sizes)),
        "recurrent_ppo_gru": recurrent_ppo.make(recurrent_ppo.Config(cell="gru", **sizes)),
        "recurrent_ppo_mlp": recurrent_ppo.make(recurrent_ppo.Config(cell="mlp", **sizes)),
    }
    steps = algos["ppo"].steps_per_update
    assert all(a.steps_per_update == steps for a in algos.values())
    for seeds in (1, 2) if args.quick else (1, 4):
        head = {"bench": BENCH, "case": "recurrent_ppo_iteration", "env": "CartPole-v1 masked",
                "seeds": seeds, "compiled": compiled, **sizes}  # fmt: skip
        runs: Runs = {}
        for name, algo in algos.items():
            init, update = core.batched(algo, seeds, compile=compiled)
            box = {"state": init(random.key(0))}

            def run(update: Callable = update, box: dict = box) -> None:
                box["state"], _ = update(box["state"])

            runs[name] = run
        times, first = measure(runs, *rounds(args, 20))
        report(head, times, first, "ppo", steps=seeds * steps)


# ---- 3. task_ensemble -----------------------------------------------------------------------


def part_tasks(args: argparse.Namespace) -> None:
    sizes = (
        {"num_envs": 2, "num_steps": 16, "update_epochs": 1, "num_minibatches": 2}
        if args.quick
        else {}
    )
    compiled = not args.quick
    algo = ppo.make(ppo.Config.tuned("CartPole-v1", **sizes))
    c = algo.config
    head = {"bench": BENCH, "case": "task_ensemble", "env": "CartPole-v1", "tasks": NUM_TASKS,
            "compiled": compiled, "num_envs": c.num_envs, "num_steps": c.num_steps,
            "update_epochs": c.update_epochs, "num_minibatches": c.num_minibatches}  # fmt: skip
    env_params = tasks.sample_params(algo.env, random.key(0), NUM_TASKS, TASK_RANGES)
    states = tasks.init_tasks(algo, random.key(1), env_params)
    dense = lambda t: tree.map(lambda x: x.clone(memory_format=torch.contiguous_format), t)
    singles = [dense(tree.index(states, i)) for i in range(NUM_TASKS)]
    vmapped = tasks.update_tasks(algo, NUM_TASKS, compile=compiled)
    single = core.batched(algo, 1, compile=compiled)[1]

    # check: one update from the same initial states, both ways (the first calls compile)
    (v_state, v_metrics), v_s = timed_first(lambda: vmapped(states))
    loop_out, l_s = timed_first(lambda: [single(s) for s in singles])
    l_state, l_metrics = tree.stack(loop_out)
    check = {"max_abs_state_diff": max_abs_diff(v_state, l_state),
             "max_abs_metric_diff": max_abs_diff(v_metrics, l_metrics),
             "length": [round(x, 3) for x in env_params.length.tolist()],
             "masspole": [round(x, 3) for x in env_params.masspole.tolist()]}  # fmt: skip

    box = {"vmapped": v_state, "loop": [state for state, _ in loop_out]}

    def run_loop() -> None:
        box["loop"] = [single(s)[0] for s in box["loop"]]

    def run_vmapped() -> None:
        box["vmapped"], _ = vmapped(box["vmapped"])

    runs: Runs = {"loop_8_tasks": run_loop, "vmapped_8_tasks": run_vmapped}
    times, first = measure(runs, *rounds(args, 5))
    first_s = {**first, "loop_8_tasks": l_s, "vmapped_8_tasks": v_s}
    report(head, times, first_s, "loop_8_tasks", steps=NUM_TASKS * algo.steps_per_update)
    emit({**head, "check": check})


# ---- main -----------------------------------------------------------------------------------


def rounds(args: argparse.Namespace, default_iters: int) -> tuple[int, int]:
    """``(iters, repeats)`` for ``measure``: one call in one round with ``--quick``."""
    if args.quick:
        return 1, 1
    return args.iters or default_iters, args.repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--repeats", type=int, default=5, help="alternating timed rounds")
    parser.add_argument("--iters", type=int, default=None,
                        help="calls per timed round (default per part: 50/10, 20, 5)")  # fmt: skip
    parser.add_argument("--only", choices=PARTS, default=None, help="run one part")
    parser.add_argument("--compiled-max-t", type=int, default=32,
                        help="time fxrl_compiled in gru_sequence up to this T")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check that it runs")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    parts = (args.only,) if args.only else PARTS
    emit({"bench": BENCH, "torch": torch.__version__, "cpu": cpu_model(),
          "threads": torch.get_num_threads(), "repeats": args.repeats, "iters": args.iters,
          "quick": args.quick, "parts": list(parts)})  # fmt: skip
    run_part = {"gru_sequence": part_gru, "recurrent_ppo_iteration": part_recurrent,
                "task_ensemble": part_tasks}  # fmt: skip
    for part in parts:
        start = time.perf_counter()
        run_part[part](args)
        emit({"bench": BENCH, "case": part, "wall_s": round(time.perf_counter() - start, 1)})


if __name__ == "__main__":
    main()
