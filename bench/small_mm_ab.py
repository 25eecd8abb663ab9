"""Small matrix products written as inductor's own loops against MKL's sgemm, compiled.

A steady 8-seed update spends most of its CPU in MKL's sgemm on small matrices (the
training page's profiles: its packing and small-matrix paths more than the multiply). This
asks whether inductor does better by generating those products itself, fused with their
neighbours: while an update is traced, a product ``[M, K] @ [K, N]`` (``mm``, ``addmm``,
and ``bmm`` under ``vmap``) becomes

- ``"k"``: for ``K <= 8``, a sum of ``K`` outer products, pointwise (a layer reading the
  observation, the heads' input gradients);
- ``"n"``: for ``N <= 2``, ``N`` dot products along the rows, inner reductions (the
  policy and value heads);
- ``"mnk"``: every product with ``M * N * K <= --mnk`` as a broadcast multiply and a sum
  over ``K``.

The products are added to the decomposition table ``fxrl.compile`` traces with (this file
only; fxrl does not do it). Each form's program of one algorithm's default batched update
is built in one process and they take turns (``bench/_common.time_updates``), so a change
in the load falls on all alike. Prints one JSON line per algorithm and form (median,
spread and every round's CPU ms of an update), then each form's largest difference from
the plain program's state after the timed updates (summation order differs, so not 0 where
a product was rewritten; DQN's default update takes no gradient step before
``learning_starts``, so its params, and the difference, do not move in these updates).

Usage: ``python bench/small_mm_ab.py --algos ppo dqn --forms k n mnk --rounds 30``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

import torch
from _common import (  # bench/_common.py
    cpu_model,
    ms_summary,
    state_max_abs_diff,
    time_updates,
    warm_update,
)

aten = torch.ops.aten


def small_products(form: str, mnk: int) -> dict:
    """Decompositions of ``mm``, ``bmm`` and ``addmm`` for ``form``; NotImplemented (the
    op stays) for a product the form leaves to ATen."""

    def product(a: torch.Tensor, b: torch.Tensor) -> Any:
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        if form == "k" and k <= 8:
            out = a[..., :, 0:1] * b[..., 0:1, :]
            for i in range(1, k):
                out = out + a[..., :, i : i + 1] * b[..., i : i + 1, :]
            return out
        if form == "n" and n <= 2:
            cols = [(a * b[..., :, j].unsqueeze(-2)).sum(-1) for j in range(n)]
            return torch.stack(cols, -1)
        if form == "mnk" and m * n * k <= mnk:
            return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2)
        return NotImplemented

    def addmm(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta: Any = 1,
              alpha: Any = 1) -> Any:  # fmt: skip
        out = product(a, b) if beta == 1 and alpha == 1 else NotImplemented
        return out if out is NotImplemented else bias + out

    return {aten.mm.default: product, aten.bmm.default: product, aten.addmm.default: addmm}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["ppo", "dqn"])
    parser.add_argument("--forms", nargs="+", default=["k", "n", "mnk"])
    parser.add_argument("--mnk", type=int, default=16384)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    import torch._inductor.decomposition as decomposition

    from fxrl.algorithms import dqn, ppo, sac

    table = decomposition.select_decomp_table
    modules = {"dqn": dqn, "ppo": ppo, "sac": sac}
    for name in args.algos:
        programs = {"plain": warm_update(modules[name], args.seeds)}
        for form in args.forms:
            extra = small_products(form, args.mnk)
            # read by fxrl.compile while it traces the update (its first call)
            decomposition.select_decomp_table = lambda extra=extra: {**table(), **extra}
            try:
                programs[form] = warm_update(modules[name], args.seeds)
            finally:
                decomposition.select_decomp_table = table
        ms = time_updates(programs, args.rounds, 1)
        base = {"algo": name, "seeds": args.seeds, "threads": torch.get_num_threads(),
                "rounds": args.rounds, "cpu": cpu_model(), "torch": torch.__version__}  # fmt: skip
        for form, xs in ms.items():
            extra = {"mnk": args.mnk} if form == "mnk" else {}
            print(json.dumps({**base, "form": form, **extra, **ms_summary(xs)}), flush=True)
        plain = statistics.median(ms["plain"])
        for form in args.forms:
            diff = state_max_abs_diff(programs["plain"][1], programs[form][1])
            ratio = round(statistics.median(ms[form]) / plain, 3)
            line = {**base, "form": form, "over_plain": ratio, "state_max_abs_diff": diff}
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
