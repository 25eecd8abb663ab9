"""What fxrl's host-env wrapping costs: Pong and CartPole through fxrl against raw peers.

Prints JSON lines, each comparing rates measured in the same run, with repeats
interleaved (best of each kept) so that machine noise hits every contender alike:

- ``pong``: random-policy steps/s and frames/s (4 emulator frames per step) of
  ``fxrl.envs.atari("Pong")``, of gymnasium's ``ALE/Pong-v5`` and of a bare
  ``ale_py.ALEInterface`` loop doing the same work (frameskip 4, sticky actions 0.25, an
  RGB screen per step), plus ``fxrl.collector`` on the fxrl env. The actions are drawn
  once before timing, so every contender steps the same sequence and only env stepping
  is timed; ``fxrl_overhead_vs_gymnasium`` is ``1 - fxrl rate / gymnasium rate``.
- ``cartpole``: single-env steps/s, ``fxrl.envs.gym("CartPole-v1")`` against gymnasium.
- ``pong_vector`` (not with ``--quick``): two Pong games, gymnasium's SyncVectorEnv against
  AsyncVectorEnv (one process each) through fxrl: with two cores, async should approach 2x.
- ``pong_ale_vector``: ``fxrl.envs.atari("Pong", num_envs=N)`` (ale-py's C++ vector env,
  threads in C++) for N = 1, 2, 4 against the single fxrl env (``ratio_fxrl_N_envs_to_*``:
  frames/s over all games) and against ``AtariVectorEnv`` alone
  (``fxrl_overhead_vs_ale_vector_N``); medians of interleaved repeats, with spread.

Usage: ``python bench/host_env_overhead.py [--threads 1] [--quick]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch
from _common import cpu_model  # bench/_common.py

from fxrl import envs, random
from fxrl.collector import collector
from fxrl.envs.host import seeds_from_key

Run = Callable[[], tuple[int, float]]  # -> (steps, seconds): resets are not timed


def best_rate(runs: dict[str, Run], repeats: int) -> dict[str, float]:
    """Steps per second of each run, best of ``repeats``, the contenders interleaved
    within each repeat."""
    best = dict.fromkeys(runs, 0.0)
    for _ in range(repeats):
        for name, run in runs.items():
            n, seconds = run()
            best[name] = max(best[name], n / seconds)
    return best


def pong_runs(steps: int, key: torch.Tensor) -> dict[str, Run]:
    import ale_py
    import ale_py.roms
    import gymnasium

    gymnasium.register_envs(ale_py)
    seed = seeds_from_key(key)
    fx = envs.atari("Pong")
    actions = fx.action_spec.sample(random.fold_in(key, 1), (steps,))
    ints = actions.tolist()
    tensors = list(actions.unbind(0))

    def fxrl_env() -> tuple[int, float]:
        state, _ = fx.reset(key)
        t0 = time.perf_counter()
        for a in tensors:
            state, _ = fx.step(state, a)
        return steps, time.perf_counter() - t0

    gym_env = gymnasium.make("ALE/Pong-v5")

    def gymnasium_env() -> tuple[int, float]:
        gym_env.reset(seed=seed)
        t0 = time.perf_counter()
        for a in ints:
            _, _, terminated, truncated, _ = gym_env.step(a)
            if terminated or truncated:
                gym_env.reset()
        return steps, time.perf_counter() - t0

    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.setFloat("repeat_action_probability", 0.25)
    ale.setInt("max_num_frames_per_episode", 108_000)
    rom = ale_py.roms.get_rom_path("pong")
    ale.loadROM(rom)
    action_set = ale.getMinimalActionSet()

    def ale_interface() -> tuple[int, float]:
        ale.setInt("random_seed", seed % 2**31)  # a seeded reset reloads, as gymnasium's
        ale.loadROM(rom)
        ale.reset_game()
        t0 = time.perf_counter()
        for a in ints:
            act = action_set[a]
            for _ in range(4):
                ale.act(act)
            ale.getScreenRGB()
            if ale.game_over():
                ale.reset_game()
        return steps, time.perf_counter() - t0

    def fxrl_collector() -> tuple[int, float]:
        # Random actions for every frame: the policy costs nothing, the collector's
        # bookkeeping (stacking batches of 128 frames, obs and next_obs, trajectory ids,
        # episode stats) is counted.
        batch = 128
        frames = steps // batch * batch
        c = collector(fx, None, None, key, batch, total_frames=frames, learning_starts=frames)
        c.reset()  # as for the others, the reset is not timed
        t0 = time.perf_counter()
        for _ in c:
            pass
        return frames, time.perf_counter() - t0

    return {
        "fxrl": fxrl_env,
        "gymnasium": gymnasium_env,
        "ale_py": ale_interface,
        "fxrl_collector": fxrl_collector,
    }


def cartpole_runs(steps: int, key: torch.Tensor) -> dict[str, Run]:
    import gymnasium

    fx = envs.gym("CartPole-v1")
    actions = fx.action_spec.sample(random.fold_in(key, 2), (steps,))
    ints, tensors = actions.tolist(), list(actions.unbind(0))
    raw = gymnasium.make("CartPole-v1")

    def fxrl_env() -> tuple[int, float]:
        state, _ = fx.reset(key)
        t0 = time.perf_counter()
        for a in tensors:
            state, _ = fx.step(state, a)
        return steps, time.perf_counter() - t0

    def gymnasium_env() -> tuple[int, float]:
        raw.reset(seed=seeds_from_key(key))
        t0 = time.perf_counter()
        for a in ints:
            _, _, terminated, truncated, _ = raw.step(a)
            if terminated or truncated:
                raw.reset()
        return steps, time.perf_counter() - t0

    return {"fxrl": fxrl_env, "gymnasium": gymnasium_env}


def vector_runs(steps: int, key: torch.Tensor) -> dict[str, Run]:
    from fxrl.envs.atari import _AtariMaker, _rom

    # gymnasium's SyncVectorEnv and AsyncVectorEnv of single ALE games, as before
    # atari(num_envs=N) moved to ale-py's C++ vector env (see ale_vector_runs)
    settings = {"frameskip": 4, "repeat_action_probability": 0.25, "full_action_space": False,
                "obs_type": "rgb", "max_num_frames_per_episode": 108_000}  # fmt: skip
    runs = {}
    for name, asynchronous in (("sync", False), ("async", True)):
        maker = _AtariMaker(_rom("Pong"), 0, False, settings)
        env = envs.gym(maker, num_envs=2, asynchronous=asynchronous)
        actions = list(env.action_spec.sample(random.fold_in(key, 3), (steps, 2)).unbind(0))

        def run(
            env: envs.HostEnv = env, actions: list[torch.Tensor] = actions
        ) -> tuple[int, float]:
            state, _ = env.reset(key)
            t0 = time.perf_counter()
            for a in actions:
                state, _ = env.step(state, a)
            return 2 * steps, time.perf_counter() - t0

        runs[name] = run
    return runs


def ale_vector_runs(steps: int, key: torch.Tensor, sizes: tuple[int, ...]) -> dict[str, Run]:
    """Pong through ``fxrl.envs.atari("Pong", num_envs=N)`` (ale-py's C++ vector env) and
    through ``ale_py.vector_env.AtariVectorEnv`` alone with the same settings (raw RGB
    screens, frameskip 4, sticky actions 0.25), plus the single fxrl env; frames counted
    over all envs."""
    import numpy as np
    from ale_py.vector_env import AtariVectorEnv

    runs: dict[str, Run] = {}
    single = envs.atari("Pong")
    single_actions = list(single.action_spec.sample(random.fold_in(key, 4), (steps,)).unbind(0))

    def fxrl_single() -> tuple[int, float]:
        state, _ = single.reset(key)
        t0 = time.perf_counter()
        for a in single_actions:
            state, _ = single.step(state, a)
        return 4 * steps, time.perf_counter() - t0

    runs["fxrl_single"] = fxrl_single
    for n in sizes:
        fx = envs.atari("Pong", num_envs=n)
        actions = fx.action_spec.sample(random.fold_in(key, 5), (steps, n))
        tensors, arrays = list(actions.unbind(0)), [a.numpy() for a in actions]
        raw = AtariVectorEnv(
            "pong", n, img_height=210, img_width=160, grayscale=False, stack_num=1,
            maxpool=False, noop_max=0, use_fire_reset=False, reward_clipping=False,
            repeat_action_probability=0.25, autoreset_mode="SameStep",
        )  # fmt: skip

        def fxrl_vector(
            fx: envs.HostEnv = fx, tensors: list = tensors, n: int = n
        ) -> tuple[int, float]:
            state, _ = fx.reset(key)
            t0 = time.perf_counter()
            for a in tensors:
                state, _ = fx.step(state, a)
            return 4 * n * steps, time.perf_counter() - t0

        def ale_vector(
            raw: AtariVectorEnv = raw, arrays: list = arrays, n: int = n
        ) -> tuple[int, float]:
            raw.reset(seed=np.arange(n, dtype=np.int32))
            t0 = time.perf_counter()
            for a in arrays:
                raw.step(a)
            return 4 * n * steps, time.perf_counter() - t0

        runs[f"fxrl_{n}"], runs[f"ale_vector_{n}"] = fxrl_vector, ale_vector
    return runs


def median_rates(runs: dict[str, Run], repeats: int) -> dict[str, list[float]]:
    """Rates of each run over ``repeats`` rounds, the contenders interleaved in each."""
    rates: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            n, seconds = run()
            rates[name].append(n / seconds)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (set and printed)")
    parser.add_argument("--quick", action="store_true", help="short runs, a smoke test")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    repeats = 2 if args.quick else 5
    key = random.key(0)

    steps = 300 if args.quick else 3000
    pong = best_rate(pong_runs(steps, key), repeats)
    row = {"bench": "host_env_overhead", "env": "pong", "threads": threads, "steps": steps}
    row.update({f"{k}_steps_per_s": round(v) for k, v in pong.items()})
    row.update({f"{k}_frames_per_s": round(4 * v) for k, v in pong.items()})
    row["ratio_fxrl_to_gymnasium"] = round(pong["fxrl"] / pong["gymnasium"], 3)
    row["ratio_fxrl_to_ale_py"] = round(pong["fxrl"] / pong["ale_py"], 3)
    row["ratio_collector_to_gymnasium"] = round(pong["fxrl_collector"] / pong["gymnasium"], 3)
    row["fxrl_overhead_vs_gymnasium"] = round(1 - pong["fxrl"] / pong["gymnasium"], 3)
    print(json.dumps(row), flush=True)

    steps = 2000 if args.quick else 20000
    cart = best_rate(cartpole_runs(steps, key), repeats)
    row = {
        "bench": "host_env_overhead",
        "env": "cartpole",
        "threads": threads,
        "steps": steps,
        "fxrl_steps_per_s": round(cart["fxrl"]),
        "gymnasium_steps_per_s": round(cart["gymnasium"]),
        "ratio_fxrl_to_gymnasium": round(cart["fxrl"] / cart["gymnasium"], 3),
        "fxrl_us_per_step_added": round(1e6 / cart["fxrl"] - 1e6 / cart["gymnasium"], 2),
    }
    print(json.dumps(row), flush=True)

    if not args.quick:
        steps = 1000
        vec = best_rate(vector_runs(steps, key), 3)
        row = {
            "bench": "host_env_overhead",
            "env": "pong_vector",
            "num_envs": 2,
            "threads": threads,
            "sync_frames_per_s": round(4 * vec["sync"]),
            "async_frames_per_s": round(4 * vec["async"]),
            "ratio_async_to_sync": round(vec["async"] / vec["sync"], 3),
        }
        print(json.dumps(row), flush=True)

    # ale-py's C++ vector env: frames/s with 1, 2, 4 games against one game, and fxrl's
    # overhead over AtariVectorEnv alone. Medians of interleaved repeats, with spread.
    sizes = (1, 2) if args.quick else (1, 2, 4)
    steps = 200 if args.quick else 1000
    rates = median_rates(ale_vector_runs(steps, key, sizes), max(repeats, 5))
    med = {k: statistics.median(v) for k, v in rates.items()}
    row = {"bench": "host_env_overhead", "env": "pong_ale_vector", "threads": threads,
           "cpu": cpu_model(), "steps_per_env": steps, "repeats": len(rates["fxrl_1"])}  # fmt: skip
    row.update({f"{k}_frames_per_s": round(v) for k, v in med.items()})
    row.update({f"{k}_spread": [round(min(v)), round(max(v))] for k, v in rates.items()})
    for n in sizes:
        row[f"ratio_fxrl_{n}_envs_to_fxrl_single"] = round(med[f"fxrl_{n}"] / med["fxrl_single"], 3)
        row[f"ratio_fxrl_{n}_envs_to_fxrl_1_env"] = round(med[f"fxrl_{n}"] / med["fxrl_1"], 3)
        row[f"fxrl_overhead_vs_ale_vector_{n}"] = round(
            1 - med[f"fxrl_{n}"] / med[f"ale_vector_{n}"], 3
        )
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
