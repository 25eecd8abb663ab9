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

import contextlib
import hashlib
import json
import os
import statistics
from collections.abc import Iterator
from typing import Any

from _common import ab_args, ms_summary, time_updates  # bench/_common.py

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
    args = ab_args(__doc__, CASES, "loop_plan_ab")
    import torch

    torch.set_num_threads(args.threads)
    for case in args.cases:
        programs = {"plan": list(build(case, True)), "inductor": list(build(case, False))}
        ms = time_updates(programs, args.rounds, args.updates, args.warmup)
        same = digest(programs["plan"][1]) == digest(programs["inductor"][1])
        if not same:
            raise SystemExit(f"loop_plan_ab: {case}: the two programs' states differ")
        for impl, xs in ms.items():
            line = {"case": case, "impl": impl, **ms_summary(xs), "updates": args.updates,
                    "threads": args.threads, "clock": "process_cpu"}  # fmt: skip
            print(json.dumps(line), flush=True)
        ratio = statistics.median(ms["inductor"]) / statistics.median(ms["plan"])
        check = "states equal bit for bit"
        print(json.dumps({"case": case, "ratio": round(ratio, 3), "check": check}), flush=True)


if __name__ == "__main__":
    main()
