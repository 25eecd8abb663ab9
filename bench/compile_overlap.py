"""Does training eagerly while the compiled update builds in the background pay? PPO on
CartPole with 8 vmapped seeds (PureJaxRL's settings), one torch thread.

    .venv/bin/python bench/record.py compile_overlap -- --threads 1

Each measurement runs in a fresh process with an empty inductor cache (a cold compile):

- ``alone``: the compiled update's first call (the compile) with nothing else running,
  then its steady time per update, and the eager update's steady time per update.
- ``overlap``: the same compile in a background thread while the main thread runs eager
  updates of the same run until the program is ready: how long the compile took so and
  how many eager updates were done meanwhile.

Then, for ``--updates`` updates (977: 8 seeds x 500k steps at 512 steps an update), the
wall of compiling first and then running compiled (``sequential_s``) against overlapping
(``overlapped_s``: the overlapped compile, then the updates the eager thread did not do,
compiled). Eager and compiled updates compute the same numbers to float tolerance
(tested), so the eager updates done during the compile count as progress.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

UPDATES = 977  # 8 seeds x 500k steps each / (4 envs x 128 steps)


def _run(phase: str, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    from fxrl import random
    from fxrl.algorithms import core, ppo

    algo = ppo.make(ppo.Config())
    init, compiled = core.batched(algo, 8, compile=True)
    _, eager = core.batched(algo, 8, compile=False)
    state = init(random.key(0))
    out: dict = {"phase": phase}
    if phase == "alone":
        begin = time.perf_counter()
        s, _ = compiled(state)
        out["compile_s"] = time.perf_counter() - begin
        begin = time.perf_counter()
        for _ in range(20):
            s, _ = compiled(s)
        out["compiled_ms"] = 1e3 * (time.perf_counter() - begin) / 20
        e, _ = eager(state)
        begin = time.perf_counter()
        for _ in range(3):
            e, _ = eager(e)
        out["eager_ms"] = 1e3 * (time.perf_counter() - begin) / 3
        return out
    done = threading.Event()
    compile_s: list[float] = []

    def build() -> None:
        begin = time.perf_counter()
        compiled(state)
        compile_s.append(time.perf_counter() - begin)
        done.set()

    worker = threading.Thread(target=build)
    begin = time.perf_counter()
    worker.start()
    e, count = state, 0
    while not done.is_set():
        e, _ = eager(e)
        count += 1
    worker.join()
    out.update(compile_s=compile_s[0], eager_updates=count,
               eager_wall_s=time.perf_counter() - begin)  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--updates", type=int, default=UPDATES)
    parser.add_argument("--phase", choices=("alone", "overlap"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(_run(args.phase, args.threads)), flush=True)
        return
    rows = {}
    for phase in ("alone", "overlap"):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
            cmd = [sys.executable, str(Path(__file__)), "--phase", phase,
                   "--threads", str(args.threads)]  # fmt: skip
            text = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
            rows[phase] = json.loads(text.stdout.strip().splitlines()[-1])
            print(json.dumps({**rows[phase], "threads": args.threads}), flush=True)
    alone, over = rows["alone"], rows["overlap"]
    step = alone["compiled_ms"] / 1e3
    sequential = alone["compile_s"] + args.updates * step
    overlapped = over["compile_s"] + max(0, args.updates - over["eager_updates"]) * step
    print(json.dumps({"updates": args.updates, "sequential_s": round(sequential, 2),
                      "overlapped_s": round(overlapped, 2),
                      "ratio": round(overlapped / sequential, 3),
                      "compile_slowdown": round(over["compile_s"] / alone["compile_s"], 3),
                      "eager_vs_compiled": round(alone["eager_ms"] / alone["compiled_ms"], 1),
                      "threads": args.threads}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
