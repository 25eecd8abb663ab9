"""Time of fxrl's value estimators against TorchRL's and a Python loop, T=2048, in one run.

For each batch shape ([], [8], [128, 4]) prints one JSON line per estimator with the median
time of each contender over alternating repeats (every repeat times each contender once, in
turn, so machine noise hits them alike), the spread ((max - min) / median) and the ratios
``<peer>/fxrl_eager`` (how many times faster fxrl's default eager call is). Contenders:

- ``fxrl_eager``: ``fxrl.objectives.gae(...)`` as users call it; ``fxrl_compiled``: the same
  under ``torch.compile(fullgraph=True)`` (compile time printed apart, as ``compile_s``);
- ``torchrl``: ``torchrl.objectives.value.functional.generalized_advantage_estimate`` (its
  default path; ``vtrace_advantage_estimate``, ``td_lambda_return_estimate`` for the others),
  on its own [*B, T, 1] layout prepared outside the timing;
- ``python_loop`` (GAE only): a reverse loop over Python floats per env, including the
  ``tolist()`` in and ``torch.tensor`` out.

Usage:  python bench/value_bench.py [--threads 1] [--repeats 7] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch
from _common import cpu_model, measure  # bench/_common.py

from fxrl.objectives import gae, td_lambda, vtrace

GAMMA, LMBDA = 0.99, 0.95


def trajectory(horizon: int, batch: tuple[int, ...]) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    shape = (horizon, *batch)
    reward, value, next_value = torch.randn(3, *shape, generator=gen)
    return {
        "reward": reward,
        "value": value,
        "next_value": next_value,
        "terminated": torch.rand(shape, generator=gen) < 0.01,
        "truncated": torch.rand(shape, generator=gen) < 0.002,
        "log_rho": 0.1 * torch.randn(shape, generator=gen),
    }


def python_loop_gae(traj: dict[str, torch.Tensor]) -> torch.Tensor:
    """GAE as a reverse loop over Python floats, one env at a time."""
    horizon = traj["reward"].shape[0]
    cols = {k: traj[k].reshape(horizon, -1).T.tolist() for k in traj if k != "log_rho"}
    out = []
    for r, v, nv, term, trunc in zip(*(cols[k] for k in list(cols)), strict=True):
        adv, last = [0.0] * horizon, 0.0
        for t in range(horizon - 1, -1, -1):
            delta = r[t] + (0.0 if term[t] else GAMMA * nv[t]) - v[t]
            last = delta + (0.0 if (term[t] or trunc[t]) else GAMMA * LMBDA * last)
            adv[t] = last
        out.append(adv)
    return torch.tensor(out).T.reshape(traj["reward"].shape)


def contenders(name: str, traj: dict[str, torch.Tensor], trl) -> dict[str, Callable[[], object]]:
    """Zero-argument calls to time for estimator ``name``."""
    f = traj
    to_trl = {k: v.movedim(0, -1).unsqueeze(-1).contiguous() for k, v in f.items()}
    done = to_trl["terminated"] | to_trl["truncated"]
    flags = (f["terminated"], f["truncated"])
    if name == "gae":
        ours = lambda: gae(
            f["reward"], f["value"], f["next_value"], *flags, gamma=GAMMA, lmbda=LMBDA
        )
        peer = lambda: trl.generalized_advantage_estimate(
            GAMMA, LMBDA, to_trl["value"], to_trl["next_value"], to_trl["reward"], done,
            to_trl["terminated"],
        )  # fmt: skip
        calls = {"fxrl_eager": ours, "torchrl": peer, "python_loop": lambda: python_loop_gae(f)}
    elif name == "td_lambda":
        ours = lambda: td_lambda(f["reward"], f["next_value"], *flags, gamma=GAMMA, lmbda=LMBDA)
        peer = lambda: trl.td_lambda_return_estimate(
            GAMMA, LMBDA, to_trl["next_value"], to_trl["reward"], done, to_trl["terminated"]
        )
        calls = {"fxrl_eager": ours, "torchrl": peer}
    else:
        fields = (f["reward"], f["value"], f["next_value"], *flags, f["log_rho"])
        ours = lambda: vtrace(*fields, gamma=GAMMA)
        peer = lambda: trl.vtrace_advantage_estimate(
            GAMMA, to_trl["log_rho"], torch.zeros_like(to_trl["log_rho"]), to_trl["value"],
            to_trl["next_value"], to_trl["reward"], done, to_trl["terminated"],
        )  # fmt: skip
        calls = {"fxrl_eager": ours, "torchrl": peer}
    return calls


def compiled(name: str, traj: dict[str, torch.Tensor]) -> tuple[Callable[[], object], float]:
    """The fxrl estimator under torch.compile(fullgraph=True), and its compile time in s."""
    f, flags = traj, (traj["terminated"], traj["truncated"])
    fns = {
        "gae": lambda r, v, nv, te, tr, lr: gae(r, v, nv, te, tr, gamma=GAMMA, lmbda=LMBDA),
        "td_lambda": lambda r, v, nv, te, tr, lr: td_lambda(
            r, nv, te, tr, gamma=GAMMA, lmbda=LMBDA
        ),
        "vtrace": lambda r, v, nv, te, tr, lr: vtrace(r, v, nv, te, tr, lr, gamma=GAMMA),
    }
    fn = torch.compile(fns[name], fullgraph=True, dynamic=False)
    args = (f["reward"], f["value"], f["next_value"], *flags, f["log_rho"])
    t0 = time.perf_counter()
    fn(*args)
    return (lambda: fn(*args)), time.perf_counter() - t0


def timings(calls: dict[str, Callable[[], object]], repeats: int, target_s: float) -> dict:
    """Median ms per call and spread for each contender, over alternating repeats."""
    times, _ = measure(calls, None, repeats, target_s=target_s)
    out = {}
    for k, ts in times.items():
        med = statistics.median(ts)
        out[f"{k}_ms"] = round(med, 4)
        out[f"{k}_spread"] = round((max(ts) - min(ts)) / med, 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--horizon", type=int, default=2048)
    parser.add_argument("--quick", action="store_true", help="GAE only, batch [] and [8], eager")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from torchrl.objectives.value import functional as trl  # test-only reference

    names = ["gae"] if args.quick else ["gae", "td_lambda", "vtrace"]
    batches = [(), (8,)] if args.quick else [(), (8,), (128, 4)]
    for name in names:
        for batch in batches:
            traj = trajectory(args.horizon, batch)
            calls = contenders(name, traj, trl)
            row = {"bench": "value", "estimator": name, "T": args.horizon, "batch": list(batch)}
            if not args.quick:
                calls["fxrl_compiled"], row["compile_s"] = compiled(name, traj)
                row["compile_s"] = round(row["compile_s"], 2)
            row.update(timings(calls, args.repeats, target_s=0.02))
            for peer in calls:
                if peer != "fxrl_eager":
                    row[f"ratio_{peer}/fxrl_eager"] = round(
                        row[f"{peer}_ms"] / row["fxrl_eager_ms"], 2
                    )
            row.update(threads=torch.get_num_threads(), cpu=cpu_model(), torch=torch.__version__)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
