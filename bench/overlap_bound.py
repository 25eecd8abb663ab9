"""Would `fxrl train` finish sooner if it ran eager updates while the compiled update
builds in the background (issue 39's overlap)? This measures the pieces that decide it,
for PPO on CartPole (the demo's and train_bench's setting) at ``--seeds``:

- ``eager_ms``: one eager vmapped update (median of ``--repeats``);
- ``compile_s``: the compiled update's first call with a fresh inductor cache (cold);
- ``compiled_ms``: one compiled update afterwards (median of ``--repeats`` rounds);
- ``warm_load_s``: the first call in a second process that finds the program in the cache:
  what switching from eager to compiled costs once the background compile is done.

and prints the most the overlap can save on a run of ``--updates`` updates:
``eager_updates = compile_s / eager_ms`` updates are done while the compile runs (on
another core), which the compiled program would have done in ``eager_updates x
compiled_ms``; switching costs ``warm_load_s``. ``saved_s = eager_updates x compiled_ms
- warm_load_s`` (negative: the overlap loses), assuming a free second core for the
compile (on 2 cores the compile's own g++ children compete with the eager loop, so the
real gain is at most this).

    .venv/bin/python bench/overlap_bound.py --threads 1 --seeds 8 --repeats 5

Prints JSON lines: a header, one ``overlap_bound`` line per seed count.
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

import torch
from _common import cpu_model  # bench/_common.py

_WARM = """
import sys, time, torch
torch.set_num_threads({threads})
from fxrl import random
from fxrl.algorithms import core, ppo
algo = ppo.make(ppo.Config(env="CartPole-v1"))
init, update = core.batched(algo, {seeds}, compile=True)
state = init(random.key(0))
t = time.perf_counter()
update(state)
print(time.perf_counter() - t)
"""


def _median_ms(fn, state, repeats: int) -> tuple[float, list[float], object]:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        state, _ = fn(state)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), times, state


def measure(seeds: int, repeats: int, threads: int, updates: int) -> dict:
    from fxrl import random
    from fxrl.algorithms import core, ppo

    algo = ppo.make(ppo.Config(env="CartPole-v1"))
    init_e, update_e = core.batched(algo, seeds, compile=False)
    state = init_e(random.key(0))
    state, _ = update_e(state)  # warm-up
    eager_ms, eager_all, _ = _median_ms(update_e, state, repeats)

    init_c, update_c = core.batched(algo, seeds, compile=True)
    state = init_c(random.key(0))
    t = time.perf_counter()
    state, _ = update_c(state)
    compile_s = time.perf_counter() - t
    rounds = []
    for _ in range(repeats):  # each round: 20 updates in a row, ms per update
        t = time.perf_counter()
        for _ in range(20):
            state, _ = update_c(state)
        rounds.append((time.perf_counter() - t) / 20 * 1e3)
    compiled_ms = statistics.median(rounds)

    code = _WARM.format(threads=threads, seeds=seeds)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=os.environ)  # fmt: skip
    warm_load_s = float(out.stdout.strip().splitlines()[-1])

    eager_updates = compile_s / (eager_ms / 1e3)
    saved_s = min(eager_updates, updates) * compiled_ms / 1e3 - warm_load_s
    return {
        "bench": "overlap_bound", "seeds": seeds, "updates": updates,
        "eager_ms": round(eager_ms, 1),
        "eager_spread_ms": [round(min(eager_all), 1), round(max(eager_all), 1)],
        "compile_s": round(compile_s, 1), "compiled_ms": round(compiled_ms, 2),
        "compiled_spread_ms": [round(min(rounds), 2), round(max(rounds), 2)],
        "warm_load_s": round(warm_load_s, 2),
        "eager_over_compiled": round(eager_ms / compiled_ms, 1),
        "eager_updates_during_compile": round(eager_updates, 1),
        "saved_s_at_most": round(saved_s, 2),
        "run_s_without_overlap": round(compile_s + updates * compiled_ms / 1e3, 1),
    }  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seeds", type=int, nargs="+", default=[8])
    p.add_argument("--repeats", type=int, default=5)
    # 977 updates: 500k steps per seed at 4 envs x 128 steps
    p.add_argument("--updates", type=int, default=977, help="updates in the run judged")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache  # cold: a fresh cache for this run
        print(json.dumps({"bench": "overlap_bound", "cpu": cpu_model(), "threads":
                          torch.get_num_threads(), "torch": torch.__version__,
                          "command": " ".join(["bench/overlap_bound.py", *sys.argv[1:]])}),
              flush=True)  # fmt: skip
        for seeds in args.seeds:
            print(json.dumps(measure(seeds, args.repeats, args.threads, args.updates)),
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
