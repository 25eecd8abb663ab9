"""A vmapped compiled update with its rolled loops' seed dim first or last (an A/B).

Under ``torch.func.vmap`` over seeds, ``fxrl.scan`` batches torch's scan operator itself,
with the vmapped dim first in the loop's carry, inputs and body (``first``, the default).
Torch's own batching rule for the operator moves it last instead (``last``), so the loops
permute their inputs and the bodies permute their values back and forth. For each case
one process builds the update both ways through ``core.batched(..., compile=True)`` from
the same initial state, and counts the permutes and copies in each traced graph (the
``make_fx`` graph ``fxrl.compile`` hands to inductor, loop bodies apart: exact counts).
After ``--warmup`` updates of each, it runs ``--rounds`` rounds; a round times
``--updates`` updates of one program, then of the other (which goes first alternates), so
that a change in the machine's load falls on both. The time is the process's CPU time
(``time.process_time``) at ``--threads`` torch threads.

The two programs compute the same values in another memory layout, so inductor may round
a few kernels differently: the benchmark checks that the states after the first update
agree to float tolerance and fails otherwise (later updates may drift apart further, as
any two float orders of one training run do).

Lines: per case, one per layout with the graphs' counts, one per layout with the median,
min and max CPU milliseconds per update over the rounds and every round's figure, then one
with ``ratio``: ``last``'s median over ``first``'s (above 1: seed dim first is faster).

Usage: ``python bench/scan_layout_ab.py [--cases ppo_cartpole_8seeds,dqn_cartpole_8seeds]
[--threads 1] [--rounds 7] [--updates 5] [--warmup 2]``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

CASES = ("ppo_cartpole_8seeds", "dqn_cartpole_8seeds")
LAYOUTS = ("first", "last")
PERMUTES = {"permute", "transpose", "t", "movedim"}
COPIES = {"clone", "copy", "_to_copy", "contiguous", "copy_"}


@contextlib.contextmanager
def _layout(layout: str) -> Iterator[None]:
    """While open, ``fxrl.scan`` traces its loops with the seed dim ``layout``."""
    from torch._higher_order_ops.scan import scan_op

    scan_module = sys.modules["fxrl.scan"]
    own = scan_module._scan_op_batch_first
    if layout == "last":  # torch's batching rule: scan_op called on the batched tensors
        scan_module._scan_op_batch_first = lambda fn, init, xs, consts: list(
            scan_op(fn, init, xs, tuple(consts))
        )
    try:
        yield
    finally:
        scan_module._scan_op_batch_first = own


def _algo(case: str) -> Any:
    from fxrl.algorithms import dqn, ppo

    return {"ppo_cartpole_8seeds": lambda: ppo.make(ppo.Config()),
            "dqn_cartpole_8seeds": lambda: dqn.make(dqn.Config())}[case]()  # fmt: skip


def counts(case: str, layout: str) -> list[dict]:
    """Permutes and copies per graph of the traced update (the top graph, then each loop
    body, nested loops after their parent's), and how the loops' inputs are made."""
    import torch

    from fxrl import random
    from fxrl.algorithms import core

    fc = sys.modules["fxrl.compile"]
    algo = _algo(case)
    init, _ = core.batched(algo, 8, compile=False)
    with _layout(layout):
        gm = fc.trace(core._taking_hyperparams(algo, True), init(random.key(0)), core._values(algo))
    fc._lift_loop_constants(gm)
    fc._drop_unread_loop_inputs(gm)

    def name(node: Any) -> str:
        if node.op != "call_function":
            return node.op
        return getattr(node.target, "__name__", str(node.target)).split(".")[0]

    rows: list[dict] = []

    def walk(g: Any, label: str) -> None:
        ops = collections.Counter(name(n) for n in g.graph.nodes if n.op == "call_function")
        row = {"case": case, "layout": layout, "graph": label, "nodes": sum(ops.values()),
               "permutes": sum(v for k, v in ops.items() if k in PERMUTES),
               "copies": sum(v for k, v in ops.items() if k in COPIES)}  # fmt: skip
        loops = [n for n in g.graph.nodes if n.target is torch.ops.higher_order.scan]
        row["loop_inputs_made_by"] = [
            dict(collections.Counter(name(a) for a in [*n.args[1], *n.args[2], *n.args[3]]))
            for n in loops
        ]
        rows.append(row)
        for n in loops:
            walk(getattr(g, n.args[0].target), n.args[0].target)

    walk(gm, "top")
    return rows


def build(case: str, layout: str) -> tuple[Any, Any]:
    """(update, state after one update): the program compiled with the seed dim ``layout``."""
    from fxrl import random
    from fxrl.algorithms import core

    init, update = core.batched(_algo(case), 8, compile=True)
    with _layout(layout):  # the program is traced and compiled at the first call
        state, _ = update(init(random.key(0)))
    return update, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    import torch

    import fxrl  # noqa: F401  (fxrl.scan and fxrl.compile, the modules)
    from fxrl.testing import assert_trees_close

    torch.set_num_threads(args.threads)
    for case in args.cases.split(","):
        if case not in CASES:
            raise SystemExit(f"scan_layout_ab: unknown case {case!r}; expected one of {CASES}")
        for layout in LAYOUTS:
            for row in counts(case, layout):
                print(json.dumps(row), flush=True)
        programs = {layout: list(build(case, layout)) for layout in LAYOUTS}
        try:
            assert_trees_close(programs["first"][1], programs["last"][1], rtol=1e-5, atol=1e-6)
        except AssertionError as e:
            raise SystemExit(
                f"scan_layout_ab: {case}: the two layouts' states differ: {e}"
            ) from None
        for _ in range(args.warmup):
            for p in programs.values():
                p[1], _ = p[0](p[1])
        ms: dict[str, list[float]] = {layout: [] for layout in LAYOUTS}
        for r in range(args.rounds):
            for layout in LAYOUTS if r % 2 == 0 else LAYOUTS[::-1]:
                update, state = programs[layout]
                begin = time.process_time()
                for _ in range(args.updates):
                    state, _ = update(state)
                ms[layout].append(1e3 * (time.process_time() - begin) / args.updates)
                programs[layout][1] = state
        for layout, xs in ms.items():
            line = {"case": case, "layout": layout, "ms": round(statistics.median(xs), 3),
                    "ms_min": round(min(xs), 3), "ms_max": round(max(xs), 3),
                    "rounds_ms": [round(x, 3) for x in xs], "updates": args.updates,
                    "threads": args.threads, "clock": "process_cpu"}  # fmt: skip
            print(json.dumps(line), flush=True)
        ratio = statistics.median(ms["last"]) / statistics.median(ms["first"])
        check = "first update's states equal to float tolerance"
        print(json.dumps({"case": case, "ratio": round(ratio, 3), "check": check}), flush=True)


if __name__ == "__main__":
    main()
