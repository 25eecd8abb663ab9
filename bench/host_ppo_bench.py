"""PPO on gymnasium's CartPole-v1 through a gymnasium vector env (``env="gymnasium:
CartPole-v1"``, ``fxrl.algorithms.host``): fxrl against Stable-Baselines3's PPO and
CleanRL's ``ppo.py``, all with PureJaxRL's / CleanRL's CartPole settings (4 envs x 128
steps, 4 epochs x 4 minibatches, lr 2.5e-4 annealed) and all measured in this run.

    .venv/bin/python bench/host_ppo_bench.py --threads 1 --cleanrl /path/to/cleanrl/ppo.py

Prints JSON lines:
  * ``{"bench": "host_ppo_train", "impl": "fxrl", "seeds": n, ...}``: compile (the first
    update) apart from the run, env steps/s over all seeds after it, and each seed's greedy
    return over ``--eval-episodes`` episodes of gymnasium's own CartPole-v1;
  * ``{"bench": "host_ppo_train", "impl": "sb3" | "cleanrl", ...}``: one seed's env steps/s
    over ``--peer-steps`` steps (CleanRL: its own SPS print, the last one);
  * ``{"bench": "host_ppo_throughput", "ratio": "fxrl_1seed/sb3", ...}`` and
    ``"fxrl_8seeds/sb3"``, ``"fxrl_1seed/cleanrl"``, ``"fxrl_8seeds/cleanrl"``.
CleanRL is not a dependency: give the path of its ``cleanrl/ppo.py`` (it needs tyro and
tensorboard, both in fxrl's dev extra). Flags and ratio names stay fixed across changes.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time

import torch
from _common import cpu_model  # bench/_common.py


def _emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def fxrl_run(num_seeds: int, total_steps: int, eval_episodes: int) -> dict:
    from fxrl import random, tree
    from fxrl.algorithms import core, ppo
    from fxrl.run.evaluate import evaluate_gymnasium, torch_actor

    algo = ppo.make(ppo.Config(env="gymnasium:CartPole-v1", total_steps=total_steps))
    init, update = core.batched(algo, num_seeds, compile=True)
    iterations = max(1, total_steps // algo.steps_per_update)
    state = init(random.key(0))
    t0 = time.perf_counter()
    state, _ = update(state)  # compiles the pieces
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(iterations - 1):
        state, _ = update(state)
    run_s = time.perf_counter() - t0
    steps = num_seeds * (iterations - 1) * algo.steps_per_update
    returns = []
    for s in range(num_seeds):
        params = tree.index(state.params, s) if num_seeds > 1 else state.params
        episodes = evaluate_gymnasium(torch_actor(algo, params), "CartPole-v1", eval_episodes)
        returns.append(sum(episodes) / len(episodes))
    return {"compile_s": round(compile_s, 1), "run_s": round(run_s, 1),
            "steps_per_s": round(steps / run_s, 1), "greedy_gymnasium_return": returns,
            "seeds_at_475": sum(r >= 475 for r in returns)}  # fmt: skip


def sb3_run(total_steps: int) -> dict:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env("CartPole-v1", n_envs=4, seed=0)
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=128, n_epochs=4, learning_rate=2.5e-4,
                gamma=0.99, gae_lambda=0.95, clip_range=0.2, ent_coef=0.01, vf_coef=0.5,
                max_grad_norm=0.5, device="cpu", seed=0)  # fmt: skip
    t0 = time.perf_counter()
    model.learn(total_steps)
    run_s = time.perf_counter() - t0
    return {"run_s": round(run_s, 1), "steps_per_s": round(total_steps / run_s, 1)}


def cleanrl_run(script: str, total_steps: int, threads: int) -> dict:
    cmd = [sys.executable, script, "--total-timesteps", str(total_steps), "--no-cuda",
           "--seed", "1"]  # fmt: skip
    env = {"OMP_NUM_THREADS": str(threads), "PATH": "/usr/bin:/bin"}
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd="/tmp", check=True)
    wall_s = time.perf_counter() - t0
    sps = [int(x) for x in re.findall(r"SPS:\s*(\d+)", out.stdout + out.stderr)]
    return {"wall_s": round(wall_s, 1), "steps_per_s": sps[-1] if sps else None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--total-steps", type=int, default=500_000, help="fxrl: steps per seed")
    p.add_argument("--peer-steps", type=int, default=100_000, help="SB3, CleanRL: steps")
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--cleanrl", default=None, help="path of CleanRL's cleanrl/ppo.py")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    common = {"threads": a.threads, "cpu": cpu_model(), "torch": torch.__version__}
    rates = {}
    for seeds in (1, a.seeds):
        row = fxrl_run(seeds, a.total_steps, a.eval_episodes)
        rates[f"fxrl_{seeds}seed{'s' if seeds > 1 else ''}"] = row["steps_per_s"]
        _emit(bench="host_ppo_train", impl="fxrl", seeds=seeds, total_steps=a.total_steps,
              **row, **common)  # fmt: skip
    peers = {"sb3": sb3_run(a.peer_steps)}
    if a.cleanrl:
        peers["cleanrl"] = cleanrl_run(a.cleanrl, a.peer_steps, a.threads)
    for name, row in peers.items():
        _emit(bench="host_ppo_train", impl=name, seeds=1, total_steps=a.peer_steps, **row,
              **common)  # fmt: skip
        for mine, rate in rates.items():
            if row["steps_per_s"]:
                _emit(bench="host_ppo_throughput", ratio=f"{mine}/{name}",
                      value=round(rate / row["steps_per_s"], 3), **common)  # fmt: skip


if __name__ == "__main__":
    main()
