"""What fxrl.random's Threefry cipher costs the cold compile of PPO's 8-seed update.

A bound, not a change: each round compiles the update in a fresh process with a fresh
inductor cache (``TORCHINDUCTOR_CACHE_DIR``) twice, taking turns, both with the cipher as
plain tensor ops (``fxrl._threefry_op.ENABLED`` off): once as it is, and once with
``fxrl.random.threefry2x32_int32`` cut from 20 rounds to one (no longer a cipher; the
random draws are different numbers of the same shapes and dtypes, so the graph keeps every
other op). The difference is what the cipher's ops cost the compile; the steady update's
time shows what they cost at run time. CPU seconds of the process and of the compilers it
runs (``os.times``, children included; inductor's compile workers off, so every g++ is a
child), torch at ``--threads``.

Usage: ``python bench/threefry_compile_bound.py [--rounds 3] [--threads 1] [--updates 10]``.
Prints JSON lines: a header (torch, threads, CPU model), then one line per compile.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from _common import cpu_model, cpu_s, run_fresh  # bench/_common.py


def child(mode: str, threads: int, updates: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    torch._inductor.config.compile_threads = 1
    import fxrl
    from fxrl import _threefry_op, random

    _threefry_op.ENABLED = False  # the cipher's plain ops, as the bound is about them

    if mode == "one_round":

        def one_round(k0, k1, x0, x1):
            x0 = x0 + k0
            x1 = x1 + k1
            x0 = x0 + x1
            x1 = ((x1 << 13) | ((x1 >> 19) & 0x1FFF)) ^ x0  # one rotation by 13
            return x0 + (k0 ^ k1), x1 + k0

        random.threefry2x32_int32 = one_round
    fxrl.compile(lambda x: x + 1)(torch.zeros(3))  # inductor's one-time set-up, apart
    from fxrl.algorithms import core, ppo

    begin = cpu_s()
    init, update = core.batched(ppo.make(ppo.Config()), 8, compile=True)
    state, _ = update(init(random.key(0)))
    compile_cpu = cpu_s() - begin
    begin = time.process_time()
    for _ in range(updates):
        state, _ = update(state)
    steady = 1e3 * (time.process_time() - begin) / max(updates, 1)
    return {"compile_cpu_s": round(compile_cpu, 2), "steady_cpu_ms": round(steady, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.threads, args.updates)), flush=True)
        return
    import torch

    header = {"torch": torch.__version__, "threads": args.threads, "cpu": cpu_model(),
              "cpus": os.cpu_count(), "case": "ppo_8seeds"}  # fmt: skip
    print(json.dumps(header), flush=True)
    for i in range(args.rounds):
        for mode in ("cipher", "one_round"):
            argv = ["--child", mode, "--threads", str(args.threads), "--updates", str(args.updates)]
            line = run_fresh(__file__, argv)
            print(json.dumps({"round": i, "threefry": mode, **line}), flush=True)


if __name__ == "__main__":
    main()
