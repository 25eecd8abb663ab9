"""A vmapped compiled update before and after its rolled loops were laid out for it (an A/B/C).

Under ``torch.func.vmap`` over seeds, ``fxrl.scan`` batches torch's scan operator itself,
with the vmapped dim first in the loop's carry, inputs and body; torch's own batching rule
for the operator moves it last instead, so the loops permute their inputs and the bodies
permute their values back and forth. And ``fxrl.compile`` makes a carry that a loop body
hands back unchanged (params carried through a rollout) a read-only input of the loop
instead of a value copied every iteration. Three programs of each case:

- ``before``: the seed dim last (torch's rule), unchanged carries carried;
- ``seed_first``: the seed dim first, unchanged carries carried;
- ``after``: the seed dim first, unchanged carries made inputs (``fxrl.compile`` today).

For each case one process builds the update each way through
``core.batched(..., compile=True)`` from the same initial state, and counts the permutes
and copies in each traced graph (the graph ``fxrl.compile`` hands to inductor, loop bodies
apart: exact counts) and each loop's carried values. After ``--warmup`` updates of each,
it runs ``--rounds`` rounds; a round times ``--updates`` updates of each program in turn
(the order rotated every round), so that a change in the machine's load falls on all of
them. The time is the process's CPU time (``time.process_time``) at ``--threads`` torch
threads.

The programs compute the same values in other memory layouts, so inductor may round a
few kernels differently: the benchmark checks that the states after the first update
agree to float tolerance and fails otherwise (later updates may drift apart further, as
any two float orders of one training run do).

Lines: per case, one per program and graph with the counts, one per program with the
median, min and max CPU milliseconds per update over the rounds and every round's
figure, then one per other program with ``ratio``: its median over ``after``'s (above 1:
``after`` is faster).

Usage: ``python bench/scan_layout_ab.py [--cases ppo_cartpole_8seeds,dqn_cartpole_8seeds]
[--threads 1] [--rounds 7] [--updates 5] [--warmup 2]``.
"""

from __future__ import annotations

import collections
import contextlib
import json
import statistics
import sys
from collections.abc import Iterator
from typing import Any

from _common import ab_args, ms_summary, time_updates  # bench/_common.py

CASES = ("ppo_cartpole_8seeds", "dqn_cartpole_8seeds")
# program -> (seed dim, unchanged carries made loop inputs)
VARIANTS = {"before": ("last", False), "seed_first": ("first", False), "after": ("first", True)}
PERMUTES = {"permute", "transpose", "t", "movedim"}
COPIES = {"clone", "copy", "_to_copy", "contiguous", "copy_"}


@contextlib.contextmanager
def _variant(name: str) -> Iterator[None]:
    """While open, ``fxrl.scan`` and ``fxrl.compile`` trace and pass loops as ``name``."""
    from torch._higher_order_ops.scan import scan_op

    layout, hoist = VARIANTS[name]
    scan_module, compile_module = sys.modules["fxrl.scan"], sys.modules["fxrl.compile"]
    own_scan = scan_module._scan_op_batch_first
    own_hoist = compile_module._hoist_unchanged_carries
    if layout == "last":  # torch's batching rule: scan_op called on the batched tensors
        scan_module._scan_op_batch_first = lambda fn, init, xs, consts: list(
            scan_op(fn, init, xs, tuple(consts))
        )
    if not hoist:
        compile_module._hoist_unchanged_carries = lambda gm, **_: None
    try:
        yield
    finally:
        scan_module._scan_op_batch_first = own_scan
        compile_module._hoist_unchanged_carries = own_hoist


def _algo(case: str) -> Any:
    from fxrl.algorithms import dqn, ppo

    return {"ppo_cartpole_8seeds": lambda: ppo.make(ppo.Config()),
            "dqn_cartpole_8seeds": lambda: dqn.make(dqn.Config())}[case]()  # fmt: skip


def counts(case: str, variant: str) -> list[dict]:
    """Permutes and copies per graph of the traced update (the top graph, then each loop
    body, nested loops after their parent's), and how the loops' inputs are made."""
    import torch

    from fxrl import random
    from fxrl.algorithms import core

    fc = sys.modules["fxrl.compile"]
    algo = _algo(case)
    init, _ = core.batched(algo, 8, compile=False)
    with _variant(variant):
        gm = fc.trace(core._taking_hyperparams(algo, True), init(random.key(0)), core._values(algo))
        fc._lift_loop_constants(gm)
        fc._hoist_unchanged_carries(gm)
        fc._drop_unread_loop_inputs(gm)

    def name(node: Any) -> str:
        if node.op != "call_function":
            return node.op
        return getattr(node.target, "__name__", str(node.target)).split(".")[0]

    rows: list[dict] = []

    def walk(g: Any, label: str) -> None:
        ops = collections.Counter(name(n) for n in g.graph.nodes if n.op == "call_function")
        row = {"case": case, "program": variant, "graph": label, "nodes": sum(ops.values()),
               "permutes": sum(v for k, v in ops.items() if k in PERMUTES),
               "copies": sum(v for k, v in ops.items() if k in COPIES)}  # fmt: skip
        loops = [n for n in g.graph.nodes if n.target is torch.ops.higher_order.scan]
        row["loop_inputs_made_by"] = [
            dict(collections.Counter(name(a) for a in [*n.args[1], *n.args[2], *n.args[3]]))
            for n in loops
        ]
        row["loop_carries"] = [len(n.args[1]) for n in loops]
        rows.append(row)
        for n in loops:
            walk(getattr(g, n.args[0].target), n.args[0].target)

    walk(gm, "top")
    return rows


def build(case: str, variant: str) -> tuple[Any, Any]:
    """(update, state after one update): the program compiled as ``variant``."""
    from fxrl import random
    from fxrl.algorithms import core

    init, update = core.batched(_algo(case), 8, compile=True)
    with _variant(variant):  # the program is traced and compiled at the first call
        state, _ = update(init(random.key(0)))
    return update, state


def main() -> None:
    args = ab_args(__doc__, CASES, "scan_layout_ab")
    import torch

    import fxrl  # noqa: F401  (fxrl.scan and fxrl.compile, the modules)
    from fxrl.testing import assert_trees_close

    torch.set_num_threads(args.threads)
    for case in args.cases:
        for variant in VARIANTS:
            for row in counts(case, variant):
                print(json.dumps(row), flush=True)
        programs = {variant: list(build(case, variant)) for variant in VARIANTS}
        for variant in VARIANTS:
            try:
                after = programs["after"][1]
                assert_trees_close(programs[variant][1], after, rtol=1e-5, atol=1e-6)
            except AssertionError as e:
                raise SystemExit(
                    f"scan_layout_ab: {case}: {variant} and after differ: {e}"
                ) from None
        ms = time_updates(programs, args.rounds, args.updates, args.warmup)
        for variant, xs in ms.items():
            line = {"case": case, "program": variant, **ms_summary(xs),
                    "updates": args.updates, "threads": args.threads,
                    "clock": "process_cpu"}  # fmt: skip
            print(json.dumps(line), flush=True)
        check = "first update's states equal to float tolerance"
        for variant in ("before", "seed_first"):
            ratio = statistics.median(ms[variant]) / statistics.median(ms["after"])
            line = {"case": case, "ratio": round(ratio, 3), "of": f"{variant}/after"}
            print(json.dumps({**line, "check": check}), flush=True)


if __name__ == "__main__":
    main()
