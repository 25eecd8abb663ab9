"""Env steps per second: fxrl's pure CartPole and Pendulum against gymnasium's, same run.

Prints JSON lines. For each env and batch size (1, 64, 4096, 16384):

- ``fxrl`` eager and compiled with ``fxrl.compile`` (the recommended way; ``torch.compile``
  of the same step is measured in ``bench/compile_bench.py``): ``make(id)`` with
  gymnasium's time limit and auto-reset on (every env keeps its own key stream), batched
  with ``fxrl.envs.batch`` above 1; one call per step, a random action drawn inside it
  from a per-step key.
  (Episode statistics are off: gymnasium's vector envs keep none.)
- ``gymnasium_vector``: CartPole's numpy-vectorized env,
  ``gym.make_vec(id, N, vectorization_mode="vector_entry_point")`` (Pendulum has none);
  ``gymnasium_sync``: ``SyncVectorEnv`` (N python envs); at batch 1 ``gymnasium``:
  ``gym.make(id)``, resetting when an episode ends. Actions from numpy, drawn per step.
- ``ratio`` lines: fxrl steps/s over each gymnasium contender's, per mode.

Contenders alternate within each repeat and the best repeat counts, so machine noise
hits all alike. The thread count is set explicitly (``--threads``, default 1: numpy
steps on one core) and printed. Compiling takes a few seconds per env and batch size.

Usage: ``python bench/env_throughput.py [--quick] [--threads 1] [--seconds 0.5]``
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from _common import measure  # bench/_common.py

from fxrl import envs, random, specs
from fxrl.compile import compile as fxrl_compile

Run = Callable[[int], float]  # steps -> seconds


def random_action(spec: Any, key: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """A uniform random action: one 32-bit draw per env (multiply-shift for Discrete)."""
    if isinstance(spec, specs.Discrete):
        return (random.bits(key, shape) * spec.n) >> 32
    return random.uniform(key, (*shape, *spec.shape), spec.low, spec.high, spec.dtype)


def fxrl_run(env_id: str, num_envs: int, compiled: bool) -> tuple[Run, float]:
    """A timed loop over fxrl steps, and the seconds its first call took (compilation)."""
    env = envs.make(env_id, episode_stats=False)
    if num_envs > 1:
        env = envs.batch(env, num_envs)

    def step(state: Any, key: torch.Tensor) -> tuple[Any, Any]:
        return env.step(state, random_action(env.action_spec, key, env.batch_shape))

    fn = fxrl_compile(step) if compiled else step
    box = [env.reset(random.key(0))[0]]
    keys = random.split(random.key(1), 4096)
    start = time.perf_counter()
    for i in range(2):  # the second call catches a recompile for the strides of outputs
        box[0], _ = fn(box[0], keys[i])
    first_call = time.perf_counter() - start

    def run(steps: int) -> float:
        state = box[0]
        begin = time.perf_counter()
        for i in range(steps):
            state, _ = fn(state, keys[i % 4096])
        seconds = time.perf_counter() - begin
        box[0] = state
        return seconds

    return run, first_call


def gym_vector_run(env_id: str, num_envs: int, mode: str) -> Run:
    import gymnasium as gym

    env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    space = env.single_action_space

    def run(steps: int) -> float:
        begin = time.perf_counter()
        for _ in range(steps):
            if isinstance(space, gym.spaces.Discrete):
                action = rng.integers(0, space.n, num_envs)
            else:
                action = rng.uniform(space.low, space.high, (num_envs, *space.shape))
                action = action.astype(np.float32)
            env.step(action)
        return time.perf_counter() - begin

    return run


def gym_single_run(env_id: str) -> Run:
    import gymnasium as gym

    env = gym.make(env_id)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    space = env.action_space

    def run(steps: int) -> float:
        begin = time.perf_counter()
        for _ in range(steps):
            if isinstance(space, gym.spaces.Discrete):
                action = int(rng.integers(0, space.n))
            else:
                action = rng.uniform(space.low, space.high).astype(np.float32)
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        return time.perf_counter() - begin

    return run


def best_rates(
    runs: dict[str, Run], num_envs: int, seconds: float, repeats: int
) -> dict[str, float]:
    """Env steps per second of each run (best of ``repeats``, contenders interleaved)."""
    steps = {}
    for name, run in runs.items():  # size each run to take about `seconds`
        n = 1
        while (took := run(n)) < seconds / 10:
            n *= 4
        steps[name] = max(1, int(n * seconds / took))
    # each run times its own loop of steps
    sized = {name: functools.partial(run, steps[name]) for name, run in runs.items()}
    times, _ = measure(sized, 1, repeats, warmup=False, self_timed=True)
    return {name: steps[name] * num_envs / (min(ms) / 1e3) for name, ms in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="CartPole at batch 1 and 4096 only, shorter runs"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--seconds", type=float, default=0.5, help="per timed repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--envs", default="CartPole-v1,Pendulum-v1")
    parser.add_argument("--batches", default="1,64,4096,16384")
    args = parser.parse_args()
    env_ids, batches = args.envs.split(","), [int(b) for b in args.batches.split(",")]
    if args.quick:
        env_ids, batches, args.seconds, args.repeats = ["CartPole-v1"], [1, 4096], 0.2, 3
    torch.set_num_threads(args.threads)
    print(
        json.dumps(
            {
                "bench": "env_throughput",
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
                "machine": platform.machine(),
                "processor": platform.processor() or None,
                "quick": args.quick,
            }
        ),
        flush=True,
    )
    for env_id in env_ids:
        for n in batches:
            runs: dict[str, Run] = {}
            compile_s = {}
            for mode in ("eager", "compiled"):
                runs[f"fxrl_{mode}"], compile_s[mode] = fxrl_run(env_id, n, mode == "compiled")
            if n == 1:
                runs["gymnasium"] = gym_single_run(env_id)
            if env_id == "CartPole-v1":
                runs["gymnasium_vector"] = gym_vector_run(env_id, n, "vector_entry_point")
            if n <= 4096 or not args.quick:
                runs["gymnasium_sync"] = gym_vector_run(env_id, n, "sync")
            rates = best_rates(runs, n, args.seconds, args.repeats)
            for name, rate in rates.items():
                line = {
                    "env": env_id,
                    "batch": n,
                    "impl": name,
                    "steps_per_s": round(rate),
                    "us_per_call": round(n / rate * 1e6, 2),
                }
                if name.startswith("fxrl"):
                    line["first_call_s"] = round(compile_s[name.removeprefix("fxrl_")], 2)
                print(json.dumps(line), flush=True)
            for mode in ("eager", "compiled"):
                for peer in ("gymnasium", "gymnasium_vector", "gymnasium_sync"):
                    if peer in rates:
                        print(
                            json.dumps(
                                {
                                    "env": env_id,
                                    "batch": n,
                                    "ratio": f"fxrl_{mode}/{peer}",
                                    "value": round(rates[f"fxrl_{mode}"] / rates[peer], 3),
                                }
                            ),
                            flush=True,
                        )


if __name__ == "__main__":
    main()
