"""Recurrent PPO's compiled update (issue 24): cold compile time and steady update time
for two sequence lengths, against an older checkout (the staged form: pieces compiled
apart, loops in Python).

    .venv/bin/python bench/recurrent_ppo_compile.py                    # this checkout
    .venv/bin/python bench/recurrent_ppo_compile.py --repo /tmp/rppo_old  # another one
    .venv/bin/python bench/recurrent_ppo_compile.py --quick            # smoke run

Each case runs in a fresh process with a fresh inductor cache (``TORCHINDUCTOR_CACHE_DIR``)
and torch at ``--threads`` threads: ``core.batched(recurrent_ppo.make(Config(num_steps=T,
cell=...)), seeds, compile=True)``, the first update timed (compile and one run,
``compile_s``; inductor's one-time set-up, a trivial function compiled first, apart as
``setup_s``), then ``--updates`` more updates timed one by one (``update_ms``: median,
``update_ms_min`` / ``_max``). ``--repo`` imports fxrl from another checkout (``git
worktree add /tmp/rppo_old <commit>`` for the code before the change). Prints one JSON
line per case.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

from _common import cpu_model  # bench/_common.py

_CHILD = textwrap.dedent(
    """
    import json, statistics, sys, time
    sys.path.insert(0, {repo!r})
    import torch
    torch.set_num_threads({threads})
    import fxrl
    from fxrl import random
    from fxrl.algorithms import core, recurrent_ppo as rp

    t0 = time.perf_counter()
    fxrl.compile(lambda x: x + 1)(torch.zeros(3))
    setup = time.perf_counter() - t0
    config = rp.Config(cell={cell!r}, num_steps={steps})
    init, update = core.batched(rp.make(config), {seeds}, compile=True)
    state = init(random.key(0))
    t0 = time.perf_counter()
    state, metrics = update(state)
    float(metrics["steps"].sum())
    compile_s = time.perf_counter() - t0
    times = []
    for _ in range({updates}):
        t0 = time.perf_counter()
        state, metrics = update(state)
        float(metrics["steps"].sum())
        times.append(1e3 * (time.perf_counter() - t0))
    print(json.dumps({{
        "fxrl": fxrl.__file__, "setup_s": round(setup, 2), "compile_s": round(compile_s, 2),
        "update_ms": round(statistics.median(times), 2), "update_ms_min": round(min(times), 2),
        "update_ms_max": round(max(times), 2),
        "programs": len(getattr(update, "_programs", {{}})) or None,
    }}))
    """
)


def run_case(repo: str, cell: str, steps: int, seeds: int, updates: int, threads: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="rppo_inductor_") as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "OMP_NUM_THREADS": str(threads)}
        code = _CHILD.format(
            repo=repo, cell=cell, steps=steps, seeds=seeds, updates=updates, threads=threads
        )
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=repo
        )
    if out.returncode != 0:
        tail = out.stderr.strip().splitlines()[-1:] or ["(no output)"]
        return {"error": tail[0]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=here, help="checkout to import fxrl from")
    parser.add_argument("--steps", type=int, nargs="+", default=[16, 128], help="num_steps T")
    parser.add_argument("--cell", default="gru", choices=["gru", "lstm"])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--updates", type=int, default=10, help="timed updates after the first")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="T=8, 2 seeds, 2 updates")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.seeds, args.updates = [8], 2, 2
    repo = os.path.abspath(args.repo)
    if not os.path.isdir(os.path.join(repo, "fxrl")):
        print(f"recurrent_ppo_compile: no fxrl package under --repo {repo}", file=sys.stderr)
        raise SystemExit(2)
    import torch

    head = {"bench": "recurrent_ppo_compile", "cpu": cpu_model(), "torch": torch.__version__}
    for steps in args.steps:
        row = run_case(repo, args.cell, steps, args.seeds, args.updates, args.threads)
        print(
            json.dumps(
                {
                    **head,
                    "repo": repo,
                    "cell": args.cell,
                    "num_steps": steps,
                    "seeds": args.seeds,
                    "threads": args.threads,
                    **row,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
