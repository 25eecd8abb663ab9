"""DQN on CartPole-v1, 8 vmapped seeds: fxrl's compiled update against PureJaxRL's
``dqn.py`` (``jax.jit(jax.vmap(make_train))``) in the same sitting (issue 24: "DQN
CartPole 8 seeds: steady throughput reported against PureJaxRL's DQN").

Both run PureJaxRL's settings (fxrl's ``dqn.Config`` defaults are those): 10 envs, buffer
10k, batch 128, lr 2.5e-4, one gradient step per 10 env steps, a hard target copy every
500 env steps, 10k random steps first, epsilon 1 -> 0.05 over 250k steps, MSE loss, a
120-84 ReLU Q-network.

  fxrl        ``core.batched(dqn.make(Config()), 8, compile=True)``: one ``fxrl.compile``
              program per update (10 env steps of 10 envs, 10 gradient steps), 8 seeds
              vmapped; steady env steps/s over ``--repeats`` rounds of ``--updates``
              updates past ``learning_starts`` (median, min-max), compile apart
  purejaxrl   PureJaxRL's ``make_train`` for ``--total-steps`` steps per seed, jit + vmap
              over 8 seeds, in the JAX venv (``--jax-python``) on one core: XLA's compile
              apart from the run (its steps/s counts every step, the random ones too)

    python bench/dqn_train_bench.py --threads 1 --purejaxrl DIR [--total-steps 200000]
    python bench/dqn_train_bench.py --quick --impl fxrl     # a few updates: check it runs

``DIR`` is a PureJaxRL checkout; its ``dqn.py`` needs ``flashbax`` in the JAX venv
(``pip install --no-deps flashbax``); ``wandb``, which it imports but does not use here,
is stood in for by an empty module.
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
from _common import cpu_model, one_core_jax  # bench/_common.py

from fxrl import random
from fxrl.algorithms import core, dqn

SEEDS = 8


def _emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def run_fxrl(args: argparse.Namespace) -> float:
    config = dqn.Config(learning_starts=1_000 if args.quick else 10_000)
    algo = dqn.make(config)
    init, update = core.batched(algo, SEEDS, compile=True)
    state = init(random.key(0))
    start = time.perf_counter()
    state, _ = update(state)
    compile_s = time.perf_counter() - start
    warm = config.learning_starts // algo.steps_per_update + 1
    for _ in range(warm):  # past the random phase: every timed update learns
        state, _ = update(state)
    rates = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(args.updates):
            state, m = update(state)
        float(m["steps"][0])
        rates.append(SEEDS * args.updates * algo.steps_per_update / (time.perf_counter() - start))
    med = statistics.median(rates)
    _emit(impl="fxrl", seeds=SEEDS, compile_s=round(compile_s, 2),
          steps_per_s=round(med), spread=[round(min(rates)), round(max(rates))],
          updates_per_round=args.updates, repeats=args.repeats)  # fmt: skip
    return med


PUREJAXRL = """
import json, sys, time, types
import jax
sys.path[:0] = [{dir!r} + "/purejaxrl"]
sys.modules["wandb"] = types.ModuleType("wandb")  # imported by dqn.py, not used here
if not hasattr(jax, "tree_map"):  # dqn.py predates jax 0.6, which removed the alias
    jax.tree_map = jax.tree.map
from dqn import make_train
config = {{"NUM_ENVS": 10, "BUFFER_SIZE": 10000, "BUFFER_BATCH_SIZE": 128,
    "TOTAL_TIMESTEPS": {steps}, "EPSILON_START": 1.0, "EPSILON_FINISH": 0.05,
    "EPSILON_ANNEAL_TIME": 25e4, "TARGET_UPDATE_INTERVAL": 500, "LR": 2.5e-4,
    "LEARNING_STARTS": {starts}, "TRAINING_INTERVAL": 10, "LR_LINEAR_DECAY": False,
    "GAMMA": 0.99, "TAU": 1.0, "ENV_NAME": "CartPole-v1", "SEED": 0, "NUM_SEEDS": {seeds},
    "WANDB_MODE": "disabled", "ENTITY": "", "PROJECT": ""}}
rngs = jax.random.split(jax.random.PRNGKey(0), {seeds})
fn = jax.jit(jax.vmap(make_train(config)))
t0 = time.perf_counter(); compiled = fn.lower(rngs).compile(); c = time.perf_counter() - t0
t0 = time.perf_counter(); out = jax.block_until_ready(compiled(rngs))
r = time.perf_counter() - t0
print(json.dumps({{"compile_s": c, "run_s": r, "jax": jax.__version__}}))
"""


def run_purejaxrl(args: argparse.Namespace) -> float:
    steps = 20_000 if args.quick else args.total_steps
    code = PUREJAXRL.format(dir=args.purejaxrl, steps=steps, seeds=SEEDS,
                            starts=1_000 if args.quick else 10_000)  # fmt: skip
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    one_core = one_core_jax(env, args.threads)
    proc = subprocess.run([args.jax_python, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, preexec_fn=one_core)  # fmt: skip
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"dqn_train_bench: PureJaxRL exited with {proc.returncode}: {tail}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    rate = SEEDS * steps / out["run_s"]
    _emit(impl="purejaxrl", seeds=SEEDS, total_steps=steps, compile_s=round(out["compile_s"], 2),
          run_s=round(out["run_s"], 2), steps_per_s=round(rate), jax=out["jax"])  # fmt: skip
    return rate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=1, help="torch (and XLA) threads")
    p.add_argument("--impl", choices=("both", "fxrl", "purejaxrl"), default="both")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--updates", type=int, default=50, help="fxrl updates per round")
    p.add_argument("--total-steps", type=int, default=200_000, help="PureJaxRL steps per seed")
    p.add_argument("--purejaxrl", default="/tmp/purejaxrl", help="a purejaxrl checkout")
    p.add_argument("--jax-python", default="/tmp/jaxvenv/bin/python", help="python with jax")
    p.add_argument("--quick", action="store_true", help="2 rounds of 2 updates, 20k PJ steps")
    args = p.parse_args()
    if args.quick:
        args.repeats, args.updates = 2, 2
    torch.set_num_threads(args.threads)
    _emit(bench="dqn_train", cpu=cpu_model(), torch=torch.__version__,
          threads=torch.get_num_threads(), seeds=SEEDS, quick=args.quick,
          python=sys.version.split()[0])  # fmt: skip
    rates = {}
    if args.impl in ("both", "fxrl"):
        rates["fxrl"] = run_fxrl(args)
    if args.impl in ("both", "purejaxrl"):
        rates["purejaxrl"] = run_purejaxrl(args)
    if len(rates) == 2:
        _emit(ratio="steps/s fxrl/purejaxrl", value=round(rates["fxrl"] / rates["purejaxrl"], 3))


if __name__ == "__main__":
    main()
