"""Ray scale-out: collector frames/s with 1 and 2 Ray workers against one process, and the
time of a weight broadcast, in one run.

Prints JSON lines:

- ``frames_per_s`` for each env and contender, collecting batches of ``--frames``
  frames with a small policy (CartPole: a linear layer and a categorical draw; Pong:
  a uniform random action, the screens still cross the wire):
  ``local``: ``fxrl.collector`` in this process over the same total number of envs
  (CartPole: ``envs.batch(envs.make(id), N)``; Pong: ``envs.atari("Pong", N)``, ale-py's
  C++ vector env); ``ray_1``/``ray_2``: ``RayCollector`` (sync mode) with 1 and 2
  workers sharing the N envs; ``gymnasium_async``: gymnasium's ``AsyncVectorEnv``
  (``gym.make_vec(id, N, vectorization_mode="async")``, one process per env, numpy
  random actions, no collector and no policy: a bare peer).
- ``ratio`` lines: each Ray contender over ``local`` and over ``gymnasium_async``.
- ``broadcast`` lines, per params size (``--sizes``, e.g. 100KB,10MB,100MB) and worker
  count: ``broadcast_s`` = ``put_s`` (``update(params)``: one ``ray.put`` in the driver)
  + ``fetch_s`` (the slowest worker's read of the new version from the object store,
  ``stats["params_fetch_s"]``): the time until every worker holds the new params, and
  the bandwidth that makes (size / time). ``batch_delay_s``: how much longer the next
  batch took than one without an update (end to end, noisier).

Every figure is the median of ``--repeats`` (>= 5 for the README) repeats, contenders
alternating within each repeat so that machine noise hits all alike; ``spread`` is
(max - min) / median. The Ray cluster is local (``ray.init(num_cpus=...)`` with enough
logical CPUs that every contender's actors live at once: an idle actor costs nothing
while another contender runs); the thread count (``--threads``, torch threads in this
process and on each worker) and the CPU model are printed.

Usage (the README's figures, on a quiet machine):
    python bench/ray_bench.py --threads 1 --repeats 5
Smoke test (seconds): python bench/ray_bench.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import ray
import torch
from _common import cpu_model  # bench/_common.py

from fxrl import envs, random
from fxrl.collector import collector
from fxrl.distributed import RayCollector

Run = Callable[[], float]  # one timed repeat -> frames per second


# ------------------------------------------------------------------------------ pieces


def make_cartpole(num_envs: int) -> Callable[[], envs.Env]:
    return lambda: envs.batch(envs.make("CartPole-v1"), num_envs)


def make_pong(num_envs: int) -> Callable[[], envs.Env]:
    return lambda: envs.atari("Pong", num_envs)


def linear_policy(params: dict, obs: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    return random.categorical(key, obs @ params["w"] + params["b"])


def random_policy(num_actions: int) -> Callable[..., torch.Tensor]:
    def policy(params: Any, obs: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        return random.randint(key, obs.shape[:1], 0, num_actions)

    return policy


def collector_run(it: Any, frames: int, batches: int) -> Run:
    """Frames/s of ``batches`` batches from the (endless) iterator ``it``."""

    def run() -> float:
        start = time.perf_counter()
        for _ in range(batches):
            next(it)
        return frames * batches / (time.perf_counter() - start)

    return run


def gym_async_run(env_id: str, num_envs: int, steps: int) -> tuple[Run, Any]:
    import gymnasium as gym

    if env_id.startswith("ALE/"):
        import ale_py

        gym.register_envs(ale_py)
    env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="async")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    n = env.single_action_space.n

    def run() -> float:
        start = time.perf_counter()
        for _ in range(steps):
            env.step(rng.integers(0, n, num_envs))
        return steps * num_envs / (time.perf_counter() - start)

    return run, env


def alternate(runs: dict[str, Run], repeats: int) -> dict[str, list[float]]:
    """Each run ``repeats`` times, contenders interleaved; one warm-up call each."""
    for run in runs.values():
        run()
    out: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            out[name].append(run())
    return out


def summary(values: list[float]) -> dict[str, float]:
    median = statistics.median(values)
    return {"median": median, "spread": (max(values) - min(values)) / median if median else 0.0}


# ------------------------------------------------------------------------------ throughput


def throughput(env_name: str, args: argparse.Namespace, workers: list[int]) -> None:
    n, frames = (args.cartpole_envs, args.frames) if env_name == "CartPole-v1" else (
        args.pong_envs, args.pong_frames)  # fmt: skip
    if env_name == "CartPole-v1":
        make, policy, gym_id = make_cartpole, linear_policy, "CartPole-v1"
        params: Any = {"w": torch.linspace(-1, 1, 8).reshape(4, 2), "b": torch.zeros(2)}
    else:
        make, policy, gym_id, params = make_pong, random_policy(6), "ALE/Pong-v5", {}
    key, batches = random.key(0), args.batches
    runs: dict[str, Run] = {}
    local = collector(make(n)(), policy, params, key, frames)
    runs["local"] = collector_run(local, frames, batches)
    collectors = []
    for w in workers:
        c = RayCollector(make(n // w), policy, params, key, w, frames, num_cpus=args.threads)
        collectors.append(c)
        runs[f"ray_{w}"] = collector_run(c, frames, batches)
    gym_run, gym_env = gym_async_run(gym_id, n, batches * frames // n)
    runs["gymnasium_async"] = gym_run
    results = alternate(runs, args.repeats)
    for name, values in results.items():
        s = summary(values)
        print(json.dumps({"env": env_name, "envs": n, "frames_per_batch": frames, "impl": name,
                          "frames_per_s": round(s["median"]), "spread": round(s["spread"], 3),
                          "repeats": len(values)}), flush=True)  # fmt: skip
    med = {name: statistics.median(v) for name, v in results.items()}
    for w in workers:
        for peer in ("local", "gymnasium_async"):
            value = round(med[f"ray_{w}"] / med[peer], 3)
            line = {"env": env_name, "envs": n, "ratio": f"ray_{w}/{peer}", "value": value}
            print(json.dumps(line), flush=True)
    for c in collectors:
        c.close()
    gym_env.close()


# ------------------------------------------------------------------------------ broadcast


def parse_size(text: str) -> int:
    units = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "B": 1}
    for unit, scale in units.items():
        if text.upper().endswith(unit):
            return int(float(text[: -len(unit)]) * scale)
    raise ValueError(f"ray_bench: --sizes entries look like 100KB or 10MB, got {text!r}.")


def broadcast(size_text: str, num_workers: int, args: argparse.Namespace) -> None:
    """Seconds from ``update(params)`` until every worker has acted with them."""
    size = parse_size(size_text)
    numel = max(1, size // 4)
    # the policy reads one element of the big leaf, so the params are fetched and used
    base = {"w": torch.linspace(-1, 1, 8).reshape(4, 2), "b": torch.zeros(2)}

    def policy(params: dict, obs: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        logits = obs @ params["w"] + params["b"] + params["big"][0]
        return random.categorical(key, logits)

    frames = 2 * num_workers  # one step of 2 envs per worker: the batch costs little
    c = RayCollector(make_cartpole(2), policy, {**base, "big": torch.zeros(numel)},
                     random.key(0), num_workers, frames, num_cpus=args.threads)  # fmt: skip
    big = [{**base, "big": torch.full((numel,), float(i % 7))} for i in range(2)]
    next(c)
    plain, updated, put, fetch = [], [], [], []
    for r in range(args.repeats + 1):
        start = time.perf_counter()
        next(c)
        t_plain = time.perf_counter() - start
        start = time.perf_counter()
        c.update(big[r % 2])
        t_put = time.perf_counter() - start
        _, stats = next(c)
        t_updated = time.perf_counter() - start
        if r:  # the first round warms up
            plain.append(t_plain)
            updated.append(t_updated)
            put.append(t_put)
            fetch.append(float(stats["params_fetch_s"].max()))
    c.close()
    # put + the slowest worker's read: the time until every worker holds the params
    total = [p + f for p, f in zip(put, fetch, strict=True)]
    s = summary(total)
    seconds = max(s["median"], 1e-9)
    end_to_end = statistics.median([u - p for u, p in zip(updated, plain, strict=True)])
    print(json.dumps({"broadcast": size_text, "bytes": numel * 4, "workers": num_workers,
                      "broadcast_s": round(seconds, 5), "spread": round(s["spread"], 3),
                      "put_s": round(statistics.median(put), 5),
                      "fetch_s": round(statistics.median(fetch), 5),
                      "batch_delay_s": round(end_to_end, 5),
                      "MB_per_s": round(numel * 4 / seconds / 1e6, 1),
                      "repeats": len(total)}), flush=True)  # fmt: skip


# ------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads, here and per worker")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", default="1,2", help="Ray worker counts")
    parser.add_argument("--envs", default="CartPole-v1,Pong", help="which throughputs to run")
    parser.add_argument("--cartpole-envs", type=int, default=64, help="CartPole envs in all")
    parser.add_argument("--frames", type=int, default=64 * 128, help="CartPole frames per batch")
    parser.add_argument("--pong-envs", type=int, default=4, help="Pong games in all")
    parser.add_argument("--pong-frames", type=int, default=4 * 64, help="Pong frames per batch")
    parser.add_argument("--batches", type=int, default=4, help="batches per timed repeat")
    parser.add_argument("--sizes", default="100KB,10MB,100MB", help="broadcast params sizes")
    parser.add_argument("--quick", action="store_true", help="a smoke test with tiny sizes")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.batches, args.cartpole_envs, args.frames = 2, 1, 8, 64
        args.pong_envs, args.pong_frames, args.sizes = 2, 8, "100KB,1MB"
    workers = [int(w) for w in args.workers.split(",")]
    torch.set_num_threads(args.threads)
    ray.init(num_cpus=sum(workers) * args.threads + 1, include_dashboard=False,
             log_to_driver=False, configure_logging=False)  # fmt: skip
    print(json.dumps({"bench": "ray_bench", "torch": torch.__version__, "ray": ray.__version__,
                      "threads": torch.get_num_threads(), "cpu": cpu_model(),
                      "cpus": os.cpu_count(), "quick": args.quick,
                      "repeats": args.repeats}), flush=True)  # fmt: skip
    for env_name in args.envs.split(","):
        throughput(env_name, args, workers)
    for size_text in args.sizes.split(","):
        for w in workers:
            broadcast(size_text, w, args)
    ray.shutdown()


if __name__ == "__main__":
    main()
