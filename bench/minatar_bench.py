"""MinAtar steps per second: fxrl's pure games, batched and compiled, against the minatar
package stepping one game in a Python loop, same run.

Prints JSON lines: a header (torch, threads, CPU model), then per game

- ``fxrl_compiled``: ``fxrl.compile`` of one step of ``envs.batch(envs.make(id,
  episode_stats=False), N)`` (sticky actions, time limit and auto-reset on, as
  ``make`` gives them), a uniformly random action per env drawn inside the program from
  a per-step key; ``compile_s`` is the first call's time (cold unless the inductor cache
  in ``TORCHINDUCTOR_CACHE_DIR`` is warm);
- ``minatar``: ``minatar.Environment(game)`` (sticky actions 0.1) stepped with
  ``act(numpy random action)``, ``reset()`` when the game ends;
- a ``ratio`` line ``fxrl_compiled/minatar`` (env steps per second over the package's).

Each figure is the median of ``--repeats`` timed rounds, the two contenders alternating
within each round (``bench/_common.measure``), so drift on a shared machine hits both.
Before timing, the compiled step is checked against the eager step (identical states).

Usage: ``python bench/minatar_bench.py [--quick] [--threads 1] [--batch 4096]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np
import torch
from _common import cpu_model, measure  # bench/_common.py

from fxrl import envs, random
from fxrl.compile import compile as fxrl_compile
from fxrl.testing import assert_trees_close

GAMES = {
    "Asterix-MinAtar": "asterix",
    "Breakout-MinAtar": "breakout",
    "Freeway-MinAtar": "freeway",
    "Seaquest-MinAtar": "seaquest",
    "SpaceInvaders-MinAtar": "space_invaders",
}


def fxrl_runner(env_id: str, num_envs: int, steps: int) -> tuple[Any, float]:
    """A function running ``steps`` compiled batched steps, and its compile time."""
    env = envs.batch(envs.make(env_id, episode_stats=False), num_envs)

    def step(state: Any, key: torch.Tensor) -> tuple[Any, Any]:
        action = (random.bits(key, env.batch_shape) * 6) >> 32  # uniform over 6
        return env.step(state, action)

    compiled = fxrl_compile(step)
    keys = random.split(random.key(1), 1024)
    state = env.reset(random.key(0))[0]
    start = time.perf_counter()
    compiled(state, keys[0])
    compile_s = time.perf_counter() - start
    eager = state
    for i in range(3):  # check the program against eager code on a few steps
        state, ts = compiled(state, keys[i])
        eager, eager_ts = step(eager, keys[i])
        assert_trees_close((state, ts), (eager, eager_ts), rtol=0, atol=0)
    box = [state]

    def run() -> None:
        s = box[0]
        for i in range(steps):
            s, _ = compiled(s, keys[i % 1024])
        box[0] = s

    return run, compile_s


def minatar_runner(env_id: str, steps: int) -> Any:
    """A function running ``steps`` steps of the package's game in a Python loop."""
    import minatar

    game = minatar.Environment(GAMES[env_id])
    game.seed(0)
    game.reset()
    rng = np.random.default_rng(0)

    def run() -> None:
        actions = rng.integers(0, 6, steps)
        for a in actions:
            _, terminal = game.act(int(a))
            if terminal:
                game.reset()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Breakout at batch 64, short")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--batch", type=int, default=4096, help="fxrl envs per step")
    parser.add_argument("--steps", type=int, default=50, help="fxrl steps per timed call")
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds (median)")
    parser.add_argument("--envs", default=",".join(GAMES), help="comma-separated ids")
    args = parser.parse_args()
    env_ids = args.envs.split(",")
    if args.quick:
        env_ids, args.batch, args.steps, args.repeats = ["Breakout-MinAtar"], 64, 5, 3
    unknown = [e for e in env_ids if e not in GAMES or e not in envs.registered()]
    if unknown:
        parser.error(f"unknown MinAtar ids {unknown}; known: {list(GAMES)}")
    torch.set_num_threads(args.threads)
    print(
        json.dumps(
            {
                "bench": "minatar",
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
                "cpu": cpu_model(),
                "batch": args.batch,
                "quick": args.quick,
            }
        ),
        flush=True,
    )
    for env_id in env_ids:
        fxrl_run, compile_s = fxrl_runner(env_id, args.batch, args.steps)
        package_steps = 2000 if args.quick else 20000
        runs = {"fxrl_compiled": fxrl_run, "minatar": minatar_runner(env_id, package_steps)}
        times, _ = measure(runs, iters=1, repeats=args.repeats)
        env_steps = {"fxrl_compiled": args.steps * args.batch, "minatar": package_steps}
        rates = {
            name: env_steps[name] / (statistics.median(ms) / 1e3) for name, ms in times.items()
        }
        for name, rate in rates.items():
            line = {"env": env_id, "impl": name, "steps_per_s": round(rate)}
            if name == "fxrl_compiled":
                line |= {"batch": args.batch, "compile_s": round(compile_s, 2)}
            print(json.dumps(line), flush=True)
        ratio = rates["fxrl_compiled"] / rates["minatar"]
        print(
            json.dumps({"env": env_id, "ratio": "fxrl_compiled/minatar", "value": round(ratio, 2)}),
            flush=True,
        )


if __name__ == "__main__":
    main()
