"""fxrl envs through gymnasium / Stable-Baselines3 adapters, against gymnasium's own envs.

Prints JSON lines; every row compares contenders measured in the same run, interleaved
within each of ``--repeats`` rounds (median and spread reported):

- ``sb3_ppo``: env steps/s of Stable-Baselines3's PPO (RL Zoo's CartPole-v1 settings) while
  learning for ``--ppo-steps`` steps on 8 CartPoles: fxrl's batch through ``to_sb3``
  (one batched step), SB3's ``DummyVecEnv`` over 8 ``to_gymnasium(make(...))`` singles,
  and the peer, SB3's ``DummyVecEnv`` over gymnasium's own CartPole-v1
  (``"ratio": "fxrl_to_sb3/gymnasium"``).
- ``env_steps``: the adapters alone with pre-drawn random actions, for N envs
  (``--num-envs``): ``to_sb3``, ``to_gymnasium`` (a VectorEnv), the DummyVecEnv of
  singles, and gymnasium's SyncVectorEnv of CartPole-v1 (the peer); with ``--compile``
  also ``to_gymnasium(..., compile=True)`` (``fxrl.compile``), its compile time reported
  apart; ``sb3_ppo`` then also runs ``to_sb3(..., compile=True)``.

Usage: ``python bench/interop_bench.py [--threads 1] [--repeats 5] [--quick] [--compile]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
import torch
from _common import cpu_model, measure  # bench/_common.py

from fxrl import envs, random
from fxrl.envs.sb3 import to_sb3
from fxrl.envs.to_gym import to_gymnasium

Run = Callable[[], float]  # -> the seconds its steps took (setup left out)


def rates(runs: dict[str, Run], steps: int, repeats: int) -> dict[str, list[float]]:
    """Steps/s of each run in each round; contenders interleaved within a round."""
    times, _ = measure(runs, 1, repeats, warmup=False, self_timed=True)
    return {name: [steps / (ms / 1e3) for ms in values] for name, values in times.items()}


def summary(rates: dict[str, list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, values in rates.items():
        out[f"{name}_steps_per_s"] = round(statistics.median(values))
        out[f"{name}_spread"] = [round(min(values)), round(max(values))]
    return out


def sb3_vec_envs(num_envs: int) -> dict[str, Callable[[], Any]]:
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    def singles() -> Any:
        return DummyVecEnv([lambda: to_gymnasium(envs.make("CartPole-v1"))] * num_envs)

    return {
        "fxrl_to_sb3": lambda: to_sb3(envs.batch(envs.make("CartPole-v1"), num_envs)),
        "fxrl_dummy_vec_of_singles": singles,
        "gymnasium": lambda: make_vec_env("CartPole-v1", n_envs=num_envs),
    }


def ppo_runs(steps: int, num_envs: int, compile: bool) -> tuple[dict[str, Run], float | None]:
    from stable_baselines3 import PPO

    def run_with(make_venv: Callable[[], Any]) -> Run:
        def run() -> float:
            venv = make_venv()
            venv.seed(0)
            model = PPO("MlpPolicy", venv, n_steps=32, batch_size=256, gae_lambda=0.8,
                        gamma=0.98, n_epochs=20, ent_coef=0.0, learning_rate=1e-3,
                        clip_range=0.2, seed=0, device="cpu")  # fmt: skip
            t0 = time.perf_counter()
            model.learn(steps)
            # SB3 may overshoot to a whole rollout: the seconds for `steps` steps
            return (time.perf_counter() - t0) * steps / model.num_timesteps

        return run

    runs = {name: run_with(make) for name, make in sb3_vec_envs(num_envs).items()}
    compile_seconds = None
    if compile:  # one venv, compiled before timing, reused by every round
        venv = to_sb3(envs.batch(envs.make("CartPole-v1"), num_envs), compile=True)
        t0 = time.perf_counter()
        venv.reset()
        venv.step(np.zeros(num_envs, dtype=np.int64))
        venv.step(np.ones(num_envs, dtype=np.int64))
        compile_seconds = round(time.perf_counter() - t0, 1)
        runs["fxrl_to_sb3_compiled"] = run_with(lambda: venv)
    return runs, compile_seconds


def env_runs(steps: int, num_envs: int, compile: bool) -> tuple[dict[str, Run], float | None]:
    actions = random.randint(random.key(0), (steps, num_envs), 0, 2).numpy()
    runs: dict[str, Run] = {}

    def sb3_style(venv: Any) -> Run:
        def run() -> float:
            venv.seed(0)
            venv.reset()
            t0 = time.perf_counter()
            for a in actions:
                venv.step(a)
            return time.perf_counter() - t0

        return run

    def gymnasium_style(venv: Any) -> Run:
        def run() -> float:
            venv.reset(seed=0)
            t0 = time.perf_counter()
            for a in actions:
                venv.step(a)
            return time.perf_counter() - t0

        return run

    for name, make in sb3_vec_envs(num_envs).items():
        if name != "gymnasium":
            runs[name] = sb3_style(make())
    runs["fxrl_to_gymnasium"] = gymnasium_style(
        to_gymnasium(envs.batch(envs.make("CartPole-v1"), num_envs))
    )
    compile_seconds = None
    if compile:
        venv = to_gymnasium(envs.batch(envs.make("CartPole-v1"), num_envs), compile=True)
        t0 = time.perf_counter()
        venv.reset(seed=0)
        venv.step(actions[0])
        venv.step(actions[1])
        compile_seconds = round(time.perf_counter() - t0, 1)
        runs["fxrl_to_gymnasium_compiled"] = gymnasium_style(venv)
    same_step = {"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP}
    peer = gymnasium.make_vec("CartPole-v1", num_envs, "sync", vector_kwargs=same_step)
    runs["gymnasium"] = gymnasium_style(peer)
    return runs, compile_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (set and printed)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (median)")
    parser.add_argument("--ppo-steps", type=int, default=8192, help="PPO env steps per round")
    parser.add_argument("--num-envs", type=str, default="8,256", help="env_steps batch sizes")
    parser.add_argument("--compile", action="store_true", help="also torch.compile the step")
    parser.add_argument("--quick", action="store_true", help="short runs, a smoke test")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    head = {"bench": "interop", "threads": torch.get_num_threads(), "cpu": cpu_model()}
    repeats = 2 if args.quick else args.repeats

    ppo_steps = 1024 if args.quick else args.ppo_steps
    runs, compile_seconds = ppo_runs(ppo_steps, 8, args.compile)
    per_s = rates(runs, ppo_steps, repeats)
    row = {**head, "case": "sb3_ppo", "num_envs": 8, "ppo_steps": ppo_steps, **summary(per_s)}
    row["ratio"] = "fxrl_to_sb3/gymnasium"
    med = {k: statistics.median(v) for k, v in per_s.items()}
    row["ratio_value"] = round(med["fxrl_to_sb3"] / med["gymnasium"], 3)
    row["ratio_singles_to_gymnasium"] = round(
        med["fxrl_dummy_vec_of_singles"] / med["gymnasium"], 3
    )
    if compile_seconds is not None:
        row["compile_seconds"] = compile_seconds
        compiled = med["fxrl_to_sb3_compiled"] / med["gymnasium"]
        row["ratio_compiled_to_gymnasium"] = round(compiled, 3)
    print(json.dumps(row), flush=True)

    for n in [int(x) for x in args.num_envs.split(",")]:
        steps = max(20, (200 if args.quick else 2000) * 8 // n)
        runs, compile_seconds = env_runs(steps, n, args.compile)
        per_s = rates(runs, steps * n, repeats)
        row = {**head, "case": "env_steps", "num_envs": n, "steps": steps, **summary(per_s)}
        med = {k: statistics.median(v) for k, v in per_s.items()}
        row["ratio"] = "fxrl_to_sb3/gymnasium"
        row["ratio_value"] = round(med["fxrl_to_sb3"] / med["gymnasium"], 3)
        row["ratio_to_gymnasium_vector_env"] = round(med["fxrl_to_gymnasium"] / med["gymnasium"], 3)
        if compile_seconds is not None:
            row["compile_seconds"] = compile_seconds
            compiled = med["fxrl_to_gymnasium_compiled"] / med["gymnasium"]
            row["ratio_compiled_to_gymnasium"] = round(compiled, 3)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
