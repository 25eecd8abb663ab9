"""The Threefry op (``fxrl._threefry_op``) against the cipher's plain ops in a compiled update.

Cold compiles: each round compiles the update in two fresh processes with fresh inductor
caches, one with the op and one without, taking turns (CPU seconds of the process and its
compilers, inductor's compile workers off). Steady updates: both programs built in one
process, then taking turns, one update each, for ``--steady-rounds`` rounds
(``time.process_time``, torch at ``--threads``). The two programs' states after the same
updates are compared bit for bit.

Usage: ``python bench/threefry_op_ab.py [--algo ppo] [--seeds 8] [--rounds 3]
[--steady-rounds 60] [--threads 1]``. Prints JSON lines: a header, then one line per cold
compile, then one per program's steady time and one with the bit-for-bit check.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile

from _common import cpu_model, cpu_s, run_fresh  # bench/_common.py


def build(algo: str, seeds: int, op: bool) -> tuple:
    from fxrl import _threefry_op, random
    from fxrl.algorithms import core, dqn, ppo, sac

    module = {"ppo": ppo, "dqn": dqn, "sac": sac}[algo]
    _threefry_op.ENABLED = op
    init, update = core.batched(module.make(module.Config()), seeds, compile=True)
    state, _ = update(init(random.key(0)))  # the trace (and compile) happen here
    _threefry_op.ENABLED = True
    return update, state


def child(algo: str, seeds: int, op: bool, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    torch._inductor.config.compile_threads = 1
    import fxrl

    fxrl.compile(lambda x: x + 1)(torch.zeros(3))  # inductor's one-time set-up, apart
    begin = cpu_s()
    build(algo, seeds, op)
    return {"compile_cpu_s": round(cpu_s() - begin, 2)}


def steady(algo: str, seeds: int, rounds: int, threads: int) -> list[dict]:
    import time

    import torch

    from fxrl import tree

    torch.set_num_threads(threads)
    runs = {"op": list(build(algo, seeds, True)), "plain": list(build(algo, seeds, False))}
    ms: dict[str, list[float]] = {k: [] for k in runs}
    for i in range(rounds):
        for name in sorted(runs, reverse=i % 2 == 1):
            update, state = runs[name]
            begin = time.process_time()
            runs[name][1], _ = update(state)
            ms[name].append(1e3 * (time.process_time() - begin))
    same = all(
        torch.equal(a, b)
        for a, b in zip(tree.leaves(runs["op"][1]), tree.leaves(runs["plain"][1]), strict=True)
    )
    out = [{"steady": name, "median_ms": round(statistics.median(v), 2),
            "min_ms": round(min(v), 2)} for name, v in ms.items()]  # fmt: skip
    return [*out, {"states_equal_bit_for_bit": same, "updates": rounds + 1}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=("ppo", "dqn", "sac"), default="ppo")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steady-rounds", type=int, default=60)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = child(args.algo, args.seeds, args.child == "op", args.threads)
        print(json.dumps(result), flush=True)
        return
    import torch

    header = {"torch": torch.__version__, "threads": args.threads, "cpu": cpu_model(),
              "cpus": os.cpu_count(), "algo": args.algo, "seeds": args.seeds}  # fmt: skip
    print(json.dumps(header), flush=True)
    for i in range(args.rounds):
        for mode in ("plain", "op"):
            argv = ["--child", mode, "--algo", args.algo, "--seeds", str(args.seeds),
                    "--threads", str(args.threads)]  # fmt: skip
            line = run_fresh(__file__, argv)
            print(json.dumps({"round": i, "cipher": mode, **line}), flush=True)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        for line in steady(args.algo, args.seeds, args.steady_rounds, args.threads):
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
