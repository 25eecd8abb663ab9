"""A compiled update's steady CPU time with fxrl._cpp_loop_plan on and off (an A/B).

For each case one process builds the update twice through ``core.batched(..., compile=True)``:
once with the plan (the default) and once with ``FXRL_CPP_LOOP_PLAN=0`` (inductor's own loop
code), both from the same initial state. After ``--warmup`` updates of each, it runs
``--rounds`` rounds; a round times ``--updates`` updates of one program, then of the other
(which goes first alternates), so that a change in the machine's load falls on both. The
time is the process's CPU time (``time.process_time``) at ``--threads`` torch threads, not
wall time: on a machine shared with other work, CPU time is what one update costs this
process. Both programs run the same kernels, so after the same number of updates their
states must be equal bit for bit; the benchmark checks that and fails otherwise.

Lines: one per case and program (``impl`` ``plan`` / ``inductor``) with the median, min and
max CPU milliseconds per update over the rounds and every round's figure, then one with
``ratio``: inductor's median over the plan's (above 1: the plan is faster).

Usage: ``python bench/loop_plan_ab.py [--cases ppo_cartpole_8seeds,dqn_cartpole_8seeds]
[--threads 1] [--rounds 7] [--updates 5] [--warmup 2]``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import time
from collections.abc import Iterator
from typing import Any

CASES = ("ppo_cartpole_8seeds", "dqn_cartpole_8seeds")


@contextlib.contextmanager
def _plan(on: bool) -> Iterator[None]:
    old = os.environ.get("FXRL_CPP_LOOP_PLAN")
    os.environ["FXRL_CPP_LOOP_PLAN"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["FXRL_CPP_LOOP_PLAN"]
        else:
            os.environ["FXRL_CPP_LOOP_PLAN"] = old


def build(case: str, plan: bool) -> tuple[Any, Any]:
    """(update, state after one update): the program compiled with or without the plan."""
    from fxrl import random
    from fxrl.algorithms import core, dqn, ppo

    algo, seeds = {
        "ppo_cartpole_8seeds": (lambda: ppo.make(ppo.Config()), 8),
        "dqn_cartpole_8seeds": (lambda: dqn.make(dqn.Config()), 8),
    }[case]
    init, update = core.batched(algo(), seeds, compile=True)
    with _plan(plan):  # the program is compiled at the first call
        state, _ = update(init(random.key(0)))
    return update, state


def digest(state: Any) -> str:
    from fxrl import tree

    h = hashlib.sha256()
    for leaf in tree.leaves(state):
        h.update(leaf.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    for case in args.cases.split(","):
        if case not in CASES:
            raise SystemExit(f"loop_plan_ab: unknown case {case!r}; expected one of {CASES}")
        programs = {"plan": list(build(case, True)), "inductor": list(build(case, False))}
        for _ in range(args.warmup):
            for p in programs.values():
                p[1], _ = p[0](p[1])
        ms: dict[str, list[float]] = {"plan": [], "inductor": []}
        for r in range(args.rounds):
            for impl in ("plan", "inductor") if r % 2 == 0 else ("inductor", "plan"):
                update, state = programs[impl]
                begin = time.process_time()
                for _ in range(args.updates):
                    state, _ = update(state)
                ms[impl].append(1e3 * (time.process_time() - begin) / args.updates)
                programs[impl][1] = state
        same = digest(programs["plan"][1]) == digest(programs["inductor"][1])
        if not same:
            raise SystemExit(f"loop_plan_ab: {case}: the two programs' states differ")
        for impl, xs in ms.items():
            line = {"case": case, "impl": impl, "ms": round(statistics.median(xs), 3),
                    "ms_min": round(min(xs), 3), "ms_max": round(max(xs), 3),
                    "rounds_ms": [round(x, 3) for x in xs], "updates": args.updates,
                    "threads": args.threads, "clock": "process_cpu"}  # fmt: skip
            print(json.dumps(line), flush=True)
        ratio = statistics.median(ms["inductor"]) / statistics.median(ms["plan"])
        check = "states equal bit for bit"
        print(json.dumps({"case": case, "ratio": round(ratio, 3), "check": check}), flush=True)


if __name__ == "__main__":
    main()
