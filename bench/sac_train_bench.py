"""SAC on Pendulum-v1, whole training steps: fxrl's compiled update for 8 vmapped seeds
against Stable-Baselines3's SAC for one seed, in one run (issue 24's target: fxrl's 8
seeds x 20k steps in at most 2x SB3's one-seed wall).

Both sides use SB3's Pendulum settings as fxrl's ``sac.Config`` defaults do: 2x256 ReLU
actor and twin critics, batch 256, lr 1e-3, tau 0.005, one env, one env step and one
gradient step per update, learned temperature. What is timed is a steady training step
(one env step + one gradient step, past ``learning_starts``):

  fxrl_8_seeds   ``core.batched(sac.make(config), 8)``: one ``fxrl.compile`` program per
                 call, the env step and the gradient step of all 8 seeds in it
  fxrl_1_seed    the same for one seed
  sb3_1_seed     ``SAC("MlpPolicy", "Pendulum-v1").learn(n)``: SB3's own loop (gymnasium's
                 env stepped in Python, one ``train()`` per step)

Each side is warmed past learning_starts, then timed in ``--repeats`` alternating rounds
of ``--steps`` training steps (the order flips each round): the median ms per step, with
min and max as spread. The 20k-step wall is projected as compile + 20k x the median step
(fxrl's compile, from a cold ``TORCHINDUCTOR_CACHE_DIR``, is reported apart; SB3 has
none). Ratios are per round: fxrl's 8 seeds against SB3's one seed.

    python bench/sac_train_bench.py --threads 1 [--repeats 5] [--steps 200]
    python bench/sac_train_bench.py --quick       # a few steps: check that it runs
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import torch
from _common import cpu_model  # bench/_common.py

from fxrl import random
from fxrl.algorithms import core, sac

WARM = 300  # env steps before timing: past learning_starts below
LEARNING_STARTS = 256


def _emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def fxrl_runner(num_seeds: int) -> tuple[callable, float]:
    """``run(n) -> seconds`` for n training steps of ``num_seeds`` seeds, and the first
    call's seconds (trace + compile + one step)."""
    config = sac.Config(learning_starts=LEARNING_STARTS)
    init, update = core.batched(sac.make(config), num_seeds, compile=True)
    state = init(random.key(0))
    start = time.perf_counter()
    state, _ = update(state)
    first = time.perf_counter() - start
    for _ in range(WARM):
        state, _ = update(state)
    box = [state]

    def run(n: int) -> float:
        s = box[0]
        start = time.perf_counter()
        for _ in range(n):
            s, m = update(s)
        float(m["steps"].reshape(-1)[0])  # results read back, as a training loop does
        box[0] = s
        return time.perf_counter() - start

    return run, first


def sb3_runner() -> callable:
    from stable_baselines3 import SAC

    model = SAC("MlpPolicy", "Pendulum-v1", learning_starts=LEARNING_STARTS, batch_size=256,
                learning_rate=1e-3, tau=0.005, train_freq=1, gradient_steps=1,
                policy_kwargs={"net_arch": [256, 256]}, seed=0, device="cpu")  # fmt: skip
    model.learn(WARM)

    def run(n: int) -> float:
        start = time.perf_counter()
        model.learn(n, reset_num_timesteps=False)
        return time.perf_counter() - start

    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=200, help="training steps per round")
    p.add_argument("--total", type=int, default=20_000, help="steps of the projected wall")
    p.add_argument("--quick", action="store_true", help="2 rounds of 5 steps")
    args = p.parse_args()
    if args.quick:
        args.repeats, args.steps = 2, 5
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    _emit(bench="sac_train", cpu=cpu_model(), torch=torch.__version__,
          threads=torch.get_num_threads(), steps_per_round=args.steps,
          repeats=args.repeats, quick=args.quick)  # fmt: skip
    runs, first = {}, {}
    for n in (8, 1):
        runs[f"fxrl_{n}_seed{'s' if n > 1 else ''}"], first[n] = fxrl_runner(n)
    runs["sb3_1_seed"] = sb3_runner()
    ms: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(args.repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            ms[name].append(runs[name](args.steps) / args.steps * 1e3)
    for name, values in ms.items():
        seeds = 8 if name == "fxrl_8_seeds" else 1
        compile_s = first[seeds] if name.startswith("fxrl") else 0.0
        med = statistics.median(values)
        _emit(impl=name, seeds=seeds, ms_per_step=round(med, 3),
              spread=[round(min(values), 3), round(max(values), 3)],
              first_call_s=round(compile_s, 2),
              projected_wall_s=round(compile_s + args.total * med / 1e3, 1))  # fmt: skip
    for name in ("fxrl_8_seeds", "fxrl_1_seed"):
        ratios = [a / b for a, b in zip(ms[name], ms["sb3_1_seed"], strict=True)]
        _emit(ratio=f"{name} / sb3_1_seed, per step", median=round(statistics.median(ratios), 3),
              spread=[round(min(ratios), 3), round(max(ratios), 3)])  # fmt: skip


if __name__ == "__main__":
    main()
