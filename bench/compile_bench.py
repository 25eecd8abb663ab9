"""What compiling costs: first-call (compile) time and steady per-call time, fxrl.compile
against torch.compile and gymnasium, same run.

Prints JSON lines:

- ``compile`` lines, each from a fresh process with a fresh inductor cache
  (``TORCHINDUCTOR_CACHE_DIR``), wall and CPU seconds (children included) of the first
  call, with inductor's one-time set-up (a trivial function compiled first) reported
  apart as ``setup_s``. Cases: a Threefry draw (``random.uniform`` on 4096 keys), the
  batched CartPole step (4096 envs, auto-reset, a key stream per env, a random action
  drawn inside) with ``fxrl.compile`` and with ``torch.compile``, the same step in a
  second process reusing the first one's cache (``*_warm_cache``), and PPO's whole update
  as one ``fxrl.compile`` program (1 seed, and 8 vmapped seeds), cold and warm.
- ``steady`` lines: microseconds per call, median of ``--repeats`` alternating repeats and
  their spread, for the CartPole step at batch 1 and 4096: ``fxrl.compile``,
  ``torch.compile`` (default options), eager, and gymnasium (``gym.make`` at 1, the
  numpy-vectorized ``make_vec`` at 4096); ``ratio`` lines are steps/s over the peer's.

Usage: ``python bench/compile_bench.py [--threads 1] [--repeats 5] [--skip-ppo]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from _common import cpu_s  # bench/_common.py

from fxrl import envs, random
from fxrl.compile import compile as fxrl_compile


def cartpole_step(num_envs: int) -> tuple[Any, Callable, Any]:
    env = envs.make("CartPole-v1", episode_stats=False)
    if num_envs > 1:
        env = envs.batch(env, num_envs)

    def step(state: Any, key: torch.Tensor) -> Any:
        return env.step(state, (random.bits(key, env.batch_shape) * 2) >> 32)

    return env, step, env.reset(random.key(0))[0]


def first_calls(case: str) -> dict[str, Any]:
    """Run in a fresh process: compile ``case`` and time its first two calls."""
    begin = cpu_s()
    torch.compile(lambda x: x + 1)(torch.ones(3))  # inductor's one-time set-up
    out: dict[str, Any] = {"setup_s": round(cpu_s() - begin, 2)}
    keys = random.split(random.key(1), 4096)
    if case == "threefry":
        fn, args = fxrl_compile(lambda k: random.uniform(k, (4,))), [(keys,), (keys,)]
    elif case.startswith("cartpole"):
        _, step, state = cartpole_step(4096)
        fn = torch.compile(step) if case == "cartpole_torch" else fxrl_compile(step)
        args = [(state, keys[0])]
    elif case in ("ppo", "ppo_8seeds"):
        from fxrl.algorithms import core, ppo

        algo = ppo.make(ppo.Config(env="CartPole-v1"))
        init, fn = core.batched(algo, 8 if case == "ppo_8seeds" else 1, compile=True)
        args = [(init(random.key(0)),)]
    else:
        raise ValueError(f"compile_bench: unknown case {case!r}")
    wall, cpu = time.perf_counter(), cpu_s()
    result = fn(*args[0])
    out["first_call_s"] = round(time.perf_counter() - wall, 2)
    out["first_call_cpu_s"] = round(cpu_s() - cpu, 2)
    again = args[1] if len(args) > 1 else (result[0], *args[0][1:])
    wall = time.perf_counter()
    fn(*again)  # a second call with the first one's outputs must not recompile
    out["second_call_s"] = round(time.perf_counter() - wall, 3)
    return out


def compile_lines(threads: int, skip_ppo: bool) -> None:
    cases = ["threefry", "cartpole_fxrl", "cartpole_torch"]
    cases += [] if skip_ppo else ["ppo", "ppo_8seeds"]
    for case in cases:
        with tempfile.TemporaryDirectory() as cache:
            warm = case in ("cartpole_fxrl", "ppo", "ppo_8seeds")
            # "warm_cache": the CartPole step's name since the first figures
            again = "warm_cache" if case == "cartpole_fxrl" else f"{case}_warm_cache"
            runs = [case, again] if warm else [case]
            for label in runs:
                env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
                cmd = [sys.executable, __file__, "--case", case, "--threads", str(threads)]
                done = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if done.returncode != 0:
                    line = {"compile": label, "error": done.stderr.strip().splitlines()[-1:]}
                else:
                    line = {"compile": label, **json.loads(done.stdout.strip().splitlines()[-1])}
                print(json.dumps(line), flush=True)


def timed(fn: Callable, state: Any, keys: torch.Tensor, calls: int) -> Callable[[], float]:
    box = [fn(state, keys[0])[0]]

    def run() -> float:
        s = box[0]
        begin = time.perf_counter()
        for i in range(calls):
            s, _ = fn(s, keys[i % len(keys)])
        box[0] = s
        return (time.perf_counter() - begin) / calls * 1e6

    return run


def gym_run(num_envs: int, calls: int) -> Callable[[], float]:
    import gymnasium as gym
    import numpy as np

    rng = np.random.default_rng(0)
    if num_envs == 1:
        env = gym.make("CartPole-v1")
        env.reset(seed=0)

        def run() -> float:
            begin = time.perf_counter()
            for _ in range(calls):
                _, _, terminated, truncated, _ = env.step(int(rng.integers(0, 2)))
                if terminated or truncated:
                    env.reset()
            return (time.perf_counter() - begin) / calls * 1e6

        return run
    vec = gym.make_vec("CartPole-v1", num_envs, vectorization_mode="vector_entry_point")
    vec.reset(seed=0)

    def run_vec() -> float:
        begin = time.perf_counter()
        for _ in range(calls):
            vec.step(rng.integers(0, 2, num_envs))
        return (time.perf_counter() - begin) / calls * 1e6

    return run_vec


def steady_lines(repeats: int) -> None:
    keys = random.split(random.key(1), 256)
    for num_envs, calls in ((1, 2000), (4096, 200)):
        _, step, state = cartpole_step(num_envs)
        runs = {
            "fxrl_compile": timed(fxrl_compile(step), state, keys, calls),
            "torch_compile": timed(torch.compile(step), state, keys, calls),
            "eager": timed(step, state, keys, max(calls // 10, 20)),
            "gymnasium": gym_run(num_envs, calls),
        }
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(repeats):  # alternate, so machine noise hits all alike
            for name, run in runs.items():
                times[name].append(run())
        for name, ts in times.items():
            line = {
                "steady": name,
                "batch": num_envs,
                "us_per_call": round(statistics.median(ts), 1),
            }
            line["spread_us"] = [round(min(ts), 1), round(max(ts), 1)]
            print(json.dumps(line), flush=True)
        peer = statistics.median(times["gymnasium"])
        for name in ("fxrl_compile", "torch_compile", "eager"):
            ratio = round(peer / statistics.median(times[name]), 3)
            print(json.dumps({"batch": num_envs, "ratio": f"{name}/gymnasium", "value": ratio}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-ppo", action="store_true", help="no PPO compile case")
    parser.add_argument("--skip-steady", action="store_true", help="compile lines only")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # one compile case, in a child
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.case:
        print(json.dumps(first_calls(args.case)))
        return
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), None)
    header = {"bench": "compile_bench", "torch": torch.__version__, "cpu": cpu}
    print(json.dumps({**header, "threads": torch.get_num_threads()}), flush=True)
    compile_lines(args.threads, args.skip_ppo)
    if not args.skip_steady:
        steady_lines(args.repeats)


if __name__ == "__main__":
    main()
