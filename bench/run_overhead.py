"""What the run loop costs on top of the bare update: fxrl.run.train vs a plain Python loop.

Both run PPO on CartPole-v1 with 8 seeds in one vmapped update (eager, or compiled with
--compile), for --iterations iterations. The run loop adds per iteration: a NaN/inf check
of losses and params, metrics rows to metrics.jsonl/csv, the progress bar (quiet here: a
log line every 10 s), a curve.png every 30 s and a checkpoint every 60 s plus one at the
end. Prints JSON lines; "ratio": "run_loop/bare_loop" (time per run, median of --repeats
alternating repeats), with the spread. Compile time (first iteration) is reported apart.

    python bench/run_overhead.py --threads 1
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from _common import cpu_model  # bench/_common.py

from fxrl import random
from fxrl.algorithms import ppo
from fxrl.run.loop import train


def bare(config: ppo.Config, seeds: int, compile: bool) -> tuple[float, float]:
    """Seconds of (first iteration, the rest) of a plain loop over the vmapped update."""
    algo = ppo.make(config)
    state = torch.func.vmap(algo.init)(random.split(random.key(0), seeds))
    update = torch.func.vmap(algo.update)
    if compile:
        update = torch.compile(update, fullgraph=True, dynamic=False)
    iterations = config.total_steps // algo.steps_per_update
    t0 = time.perf_counter()
    state, metrics = update(state)
    float(metrics["loss"].sum())
    t1 = time.perf_counter()
    for _ in range(iterations - 1):
        state, metrics = update(state)
        float(metrics["loss"].sum())  # the run loop reads metrics every iteration too
    return t1 - t0, time.perf_counter() - t1


def run_loop(config: ppo.Config, seeds: int, compile: bool) -> tuple[float, float]:
    """Seconds of (first iteration, the rest) of fxrl.run.train, from its timing.jsonl."""
    with tempfile.TemporaryDirectory() as tmp:
        with contextlib.redirect_stdout(io.StringIO()):  # its log lines; JSON lines only here
            train("ppo", config, Path(tmp) / "run", num_seeds=seeds, compile=compile, quiet=True)
        timing = json.loads((Path(tmp) / "run" / "timing.jsonl").read_text().splitlines()[-1])
    # The loop's own clock: from its first update to after the final checkpoint and plot
    # (making the algorithm and init, which the bare loop does untimed, are left out).
    first = timing["first_iteration_s"]
    return first, timing["seconds"] - first


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--iterations", type=int, default=20, help="PPO updates per run")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--compile", action="store_true", help="torch.compile the update")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    config = ppo.Config(total_steps=512 * a.iterations)
    print(json.dumps({"cpu": cpu_model(), "torch_threads": torch.get_num_threads(),
                      "torch": torch.__version__, "seeds": a.seeds, "iterations": a.iterations,
                      "compile": a.compile}))  # fmt: skip
    times: dict[str, list[float]] = {"bare_loop": [], "run_loop": []}
    firsts: dict[str, list[float]] = {"bare_loop": [], "run_loop": []}
    for _ in range(a.repeats):
        for name, fn in (("bare_loop", bare), ("run_loop", run_loop)):
            first, rest = fn(config, a.seeds, a.compile)
            firsts[name].append(first)
            times[name].append(rest)
    steps = (a.iterations - 1) * 512 * a.seeds
    for name, ts in times.items():
        med = statistics.median(ts)
        print(json.dumps({"case": name, "median_s": round(med, 3),
                          "spread_s": [round(min(ts), 3), round(max(ts), 3)],
                          "steps_per_s": round(steps / med, 1),
                          "first_s": round(statistics.median(firsts[name]), 3)}))  # fmt: skip
    ratios = [r / b for r, b in zip(times["run_loop"], times["bare_loop"], strict=True)]
    print(json.dumps({"ratio": "run_loop/bare_loop", "median": round(statistics.median(ratios), 3),
                      "spread": [round(min(ratios), 3), round(max(ratios), 3)]}))  # fmt: skip


if __name__ == "__main__":
    main()
