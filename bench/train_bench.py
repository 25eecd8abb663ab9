"""PPO on CartPole-v1: fxrl (1 seed and N vmapped seeds) against Stable-Baselines3's PPO
and, optionally, PureJaxRL's (JAX, jit + vmap), all measured in this run.

    .venv/bin/python bench/train_bench.py --threads 1
    .venv/bin/python bench/train_bench.py --purejaxrl DIR --jax-python /tmp/jaxvenv/bin/python

Prints JSON lines:
  * ``{"bench": "ppo_train", "seeds": n, ...}``: wall time to ``--total-steps`` env steps per
    seed, compile (the first update, which compiles every piece) apart from the run, env
    steps/s over all seeds, final mean return;
  * ``{"bench": "ppo_throughput", "ratio": "fxrl_8seeds/sb3", ...}``: steady-state env
    steps/s, the median of ``--repeats`` alternating repeats of fxrl (N seeds, compiled)
    and SB3's PPO with the same settings (4 envs x 128 steps, 4 epochs x 4 minibatches);
  * ``{"bench": "ppo_train", "impl": "purejaxrl", ...}`` with ``--purejaxrl DIR``.
Flags and ratio names stay fixed across changes so figures remain comparable.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time

import torch
from _common import cpu_model  # bench/_common.py


def _emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def fxrl_train(num_seeds: int, total_steps: int) -> dict:
    from fxrl import random
    from fxrl.algorithms import core, ppo

    algo = ppo.make(ppo.Config(total_steps=total_steps))
    init, update = core.batched(algo, num_seeds, compile=True)
    iterations = max(1, total_steps // algo.steps_per_update)
    state = init(random.key(0))
    t0 = time.perf_counter()
    state, m = update(state)  # compiles every piece
    compile_s = time.perf_counter() - t0
    returns = []
    t0 = time.perf_counter()
    for _ in range(iterations - 1):
        state, m = update(state)
        returns.append(m["episode_return"])
    run_s = time.perf_counter() - t0
    last = torch.stack(returns[-10:]).nanmean(0) if returns else torch.tensor(float("nan"))
    steps = num_seeds * (iterations - 1) * algo.steps_per_update
    return {"compile_s": compile_s, "run_s": run_s, "total_s": compile_s + run_s,
            "steps_per_s": steps / run_s, "final_return_mean_last10": last.mean().item(),
            "state": state, "update": update}  # fmt: skip


def sb3_model():
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env("CartPole-v1", n_envs=4, seed=0)
    return PPO("MlpPolicy", env, n_steps=128, batch_size=128, n_epochs=4, learning_rate=2.5e-4,
               ent_coef=0.01, clip_range=0.2, max_grad_norm=0.5, seed=0, device="cpu",
               policy_kwargs={"net_arch": [64, 64]}, verbose=0)  # fmt: skip


def throughput(args: argparse.Namespace, num_seeds: int, fx: dict) -> None:
    model = sb3_model()
    model.learn(total_timesteps=512)  # warm-up
    state, update = fx["state"], fx["update"]
    fx_rates, sb_rates = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(args.iters):
            state, _ = update(state)
        fx_rates.append(num_seeds * args.iters * 512 / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        model.learn(total_timesteps=args.iters * 512, reset_num_timesteps=False)
        sb_rates.append(args.iters * 512 / (time.perf_counter() - t0))
    fx_med, sb_med = statistics.median(fx_rates), statistics.median(sb_rates)
    _emit(bench="ppo_throughput", ratio=f"fxrl_{num_seeds}seeds/sb3", value=fx_med / sb_med,
          fxrl_steps_per_s=fx_med, sb3_steps_per_s=sb_med,
          fxrl_spread=[min(fx_rates), max(fx_rates)], sb3_spread=[min(sb_rates), max(sb_rates)],
          repeats=args.repeats, iters_per_repeat=args.iters)  # fmt: skip


PUREJAXRL = """
import sys, time, jax
import types
sys.path[:0] = [{dir!r} + "/purejaxrl"]  # its ppo.py imports `wrappers` as a top-level module
# wrappers.py imports brax and navix at the top but uses them only for their own envs:
# empty stand-ins, so CartPole runs without installing them
for name in ("brax", "brax.envs", "brax.envs.wrappers", "brax.envs.wrappers.training", "navix"):
    sys.modules[name] = types.ModuleType(name)
sys.modules["brax"].envs = sys.modules["brax.envs"]
sys.modules["brax.envs.wrappers.training"].EpisodeWrapper = None
sys.modules["brax.envs.wrappers.training"].AutoResetWrapper = None
from ppo import make_train
config = {{"LR": 2.5e-4, "NUM_ENVS": 4, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": {steps},
    "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95,
    "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5,
    "ACTIVATION": "tanh", "ENV_NAME": "CartPole-v1", "ANNEAL_LR": True, "DEBUG": False}}
rngs = jax.random.split(jax.random.PRNGKey(0), {seeds})
fn = jax.jit(jax.vmap(make_train(config))) if {seeds} > 1 else jax.jit(make_train(config))
arg = rngs if {seeds} > 1 else rngs[0]
t0 = time.perf_counter(); compiled = fn.lower(arg).compile(); c = time.perf_counter() - t0
t0 = time.perf_counter(); out = jax.block_until_ready(compiled(arg))
r = time.perf_counter() - t0
print(c, r)
"""


def purejaxrl(args: argparse.Namespace, num_seeds: int) -> None:
    code = PUREJAXRL.format(dir=args.purejaxrl, steps=args.total_steps, seeds=num_seeds)
    env = {**os.environ, "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""), "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([args.jax_python, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env=env, check=True)  # fmt: skip
    compile_s, run_s = map(float, out.stdout.split()[-2:])
    _emit(bench="ppo_train", impl="purejaxrl", seeds=num_seeds, total_steps=args.total_steps,
          compile_s=compile_s, run_s=run_s, total_s=compile_s + run_s,
          steps_per_s=num_seeds * args.total_steps / run_s)  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--total-steps", type=int, default=500_000, help="env steps per seed")
    p.add_argument("--seeds", default="1,8", help="comma-separated seed counts")
    p.add_argument("--repeats", type=int, default=5, help="alternating throughput repeats")
    p.add_argument("--iters", type=int, default=8, help="updates (x512 steps) per repeat")
    p.add_argument("--purejaxrl", default=None, help="path to a purejaxrl checkout")
    p.add_argument("--jax-python", default="/tmp/jaxvenv/bin/python", help="python with jax")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    _emit(bench="setup", cpu=cpu_model(), torch=torch.__version__, threads=torch.get_num_threads(),
          python=sys.version.split()[0])  # fmt: skip
    seeds = [int(s) for s in args.seeds.split(",")]
    results = {}
    for n in seeds:
        fx = fxrl_train(n, args.total_steps)
        results[n] = fx
        _emit(bench="ppo_train", impl="fxrl", seeds=n, total_steps=args.total_steps,
              **{k: v for k, v in fx.items() if k not in ("state", "update")})  # fmt: skip
    if 1 in results and len(results) > 1:
        n = max(results)
        per_seed = (results[n]["run_s"] / n) / results[1]["run_s"]
        _emit(bench="ppo_train", ratio=f"per_seed_cost_{n}seeds/1seed", value=per_seed)
    n = max(results)
    throughput(args, n, results[n])
    if args.purejaxrl:
        for n in seeds:
            purejaxrl(args, n)


if __name__ == "__main__":
    main()
