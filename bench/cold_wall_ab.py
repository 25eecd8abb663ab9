"""The wall a user waits for a first compile, with a lever of fxrl's on and off: each run
is a fresh process with a fresh inductor cache that builds an update and times its first
call (the compile, inductor's one-time set-up included: its vector-ISA probes) with
``time.perf_counter``. ``bench/compile_phases.py`` charges CPU seconds to phases with the
set-up apart; a lever that overlaps work on two cores shows only in this wall.

The two settings of ``--variable`` (``1``: the default, and ``0``) alternate, the order
flipped every round, so that a change in the machine's load falls on both alike.
Inductor's precompiled headers live outside its cache directory (shared by every run
here, as on a user's machine after the first compile ever).

Usage: ``python bench/cold_wall_ab.py --variable FXRL_ISA_BACKGROUND [--case ppo_8seeds]
[--rounds 5] [--threads 1]`` (cases as ``bench/compile_phases.py``'s). Prints JSON lines: a
header, one line per run (``compile_wall_s``, the setting and the round), then the median
and spread of each setting.
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

from _common import cpu_model  # bench/_common.py


def child(case: str, threads: int) -> dict[str, float]:
    import torch

    torch.set_num_threads(threads)
    from compile_phases import make_case  # bench/compile_phases.py

    state, update = make_case(case)
    begin = time.perf_counter()
    update(state)
    return {"compile_wall_s": round(time.perf_counter() - begin, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variable", default="FXRL_ISA_BACKGROUND")
    parser.add_argument("--case", default="ppo_8seeds")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.case, args.threads)), flush=True)
        return
    import torch

    header = {"bench": "cold_wall_ab", "torch": torch.__version__, "cpu": cpu_model(),
              "cpus": os.cpu_count(), "threads": args.threads, "case": args.case,
              "variable": args.variable, "rounds": args.rounds}  # fmt: skip
    print(json.dumps(header), flush=True)
    walls: dict[str, list[float]] = {"1": [], "0": []}
    for r in range(args.rounds):
        for value in ("1", "0") if r % 2 == 0 else ("0", "1"):
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, args.variable: value}
                cmd = [sys.executable, __file__, "--child", "--case", args.case,
                       "--threads", str(args.threads)]  # fmt: skip
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            walls[value].append(row["compile_wall_s"])
            print(json.dumps({**row, args.variable: value, "round": r}), flush=True)
    for value, xs in walls.items():
        print(json.dumps({"summary": True, args.variable: value,
                          "median_s": round(statistics.median(xs), 2),
                          "min_s": min(xs), "max_s": max(xs)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
