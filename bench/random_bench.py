"""Draws per second of fxrl.random.uniform/normal against torch.rand/torch.randn.

Prints one JSON line per (function, size, mode) with the fxrl rate, the torch rate
measured in the same run, and their ratio. Eager and torch.compile'd. Usage:

    python bench/random_bench.py [--threads 2] [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import torch

from fxrl import random


def rate(fn: Callable[[], torch.Tensor], n: int, budget: float) -> float:
    """Values per second: the best of several timed repeats of ``fn``."""
    fn()  # warm-up (and compilation)
    best = float("inf")
    deadline = time.perf_counter() + budget
    reps = 0
    while reps < 3 or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        reps += 1
    return n / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="short timings, eager only")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    budget = 0.2 if args.quick else 1.0
    key = random.key(0)
    ours = {
        "uniform": lambda k, n: random.uniform(k, (n,)),
        "normal": lambda k, n: random.normal(k, (n,)),
    }
    peers = {"uniform": torch.rand, "normal": torch.randn}
    modes = ["eager"] if args.quick else ["eager", "compile"]
    for mode in modes:
        for name, fn in ours.items():
            for n in (4096, 1_000_000):
                f = fn
                if mode == "compile":
                    f = torch.compile(fn, fullgraph=True, dynamic=False)
                    t0 = time.perf_counter()
                    f(key, n)
                    compile_s = time.perf_counter() - t0
                fxrl_rate = rate(lambda f=f, n=n: f(key, n), n, budget)
                gen = torch.Generator().manual_seed(0)
                torch_rate = rate(
                    lambda name=name, n=n, gen=gen: peers[name](n, generator=gen), n, budget
                )
                row = {
                    "bench": "random",
                    "fn": name,
                    "size": n,
                    "mode": mode,
                    "threads": torch.get_num_threads(),
                    "fxrl_per_s": round(fxrl_rate),
                    f"torch_{'rand' if name == 'uniform' else 'randn'}_per_s": round(torch_rate),
                    "ratio_fxrl_to_torch": round(fxrl_rate / torch_rate, 3),
                }
                if mode == "compile":
                    row["compile_s"] = round(compile_s, 1)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
