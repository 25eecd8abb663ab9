"""Naive references for the value estimators: Python loops over floats, one env at a time.

Written from the definitions (GAE paper eq. 16, Sutton and Barto ch. 7 and 12, IMPALA eq. 1),
not from fxrl's formulation: episode ends are handled with Python ``if``s, V-trace as the
paper's sum rather than a recursion. Inputs are [T, *B] tensors; gamma and lmbda are already
expanded to [T, *B]. Outputs are float64 [T, *B].
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from torch import Tensor

BATCH_SHAPES = [(), (3,), (2, 3)]


def per_env(fn: Callable[..., list[list[float]]], *fields: Tensor) -> list[Tensor]:
    """Run ``fn`` on each env's columns (Python lists) and stack the results as [T, *B]."""
    horizon, batch = fields[0].shape[0], fields[0].shape[1:]
    cols = [f.reshape(horizon, -1).double().T.tolist() for f in fields]
    outs = [fn(*(c[i] for c in cols)) for i in range(len(cols[0]))]
    return [
        torch.tensor([o[k] for o in outs], dtype=torch.float64).T.reshape(horizon, *batch)
        for k in range(len(outs[0]))
    ]


def gae(r, v, nv, term, trunc, g, lam):
    horizon = len(r)
    adv = [0.0] * horizon
    for t in reversed(range(horizon)):
        delta = r[t] + (0.0 if term[t] else g[t] * nv[t]) - v[t]
        cut = term[t] or trunc[t] or t == horizon - 1
        adv[t] = delta + (0.0 if cut else g[t] * lam[t] * adv[t + 1])
    return [adv, [a + b for a, b in zip(adv, v, strict=True)]]


def td_lambda(r, nv, term, trunc, g, lam):
    horizon = len(r)
    ret = [0.0] * horizon
    for t in reversed(range(horizon)):
        if term[t]:
            ret[t] = r[t]
            continue
        cut = trunc[t] or t == horizon - 1
        follow = nv[t] if cut else ret[t + 1]
        ret[t] = r[t] + g[t] * ((1 - lam[t]) * nv[t] + lam[t] * follow)
    return [ret]


def n_step(r, nv, term, trunc, g, n):
    horizon = len(r)
    out = []
    for t in range(horizon):
        total, discount = 0.0, 1.0
        for k in range(n):
            s = t + k
            total += discount * r[s]
            discount *= g[s]
            if k == n - 1 or term[s] or trunc[s] or s == horizon - 1:
                total += 0.0 if term[s] else discount * nv[s]
                break
        out.append(total)
    return [out]


def vtrace(r, v, nv, term, trunc, log_rho, g, lam, clip_rho, clip_c, clip_pg):
    horizon = len(r)
    rho = [float(torch.tensor(x, dtype=torch.float64).exp()) for x in log_rho]
    delta = [
        min(clip_rho, rho[t]) * (r[t] + (0.0 if term[t] else g[t] * nv[t]) - v[t])
        for t in range(horizon)
    ]
    cut = [term[t] or trunc[t] or t == horizon - 1 for t in range(horizon)]
    vs = []
    for s in range(horizon):
        total, weight = 0.0, 1.0
        for t in range(s, horizon):
            total += weight * delta[t]
            if cut[t]:
                break
            weight *= g[t] * lam[t] * min(clip_c, rho[t])
        vs.append(v[s] + total)
    pg = []
    for s in range(horizon):
        follow = nv[s] if cut[s] else vs[s + 1]
        target = r[s] + (0.0 if term[s] else g[s] * follow)
        pg.append(min(clip_pg, rho[s]) * (target - v[s]))
    return [vs, pg]


@st.composite
def trajectories(draw: st.DrawFn, max_t: int = 40) -> dict[str, Tensor]:
    """A float64 trajectory [T, *B] with random episode ends of both kinds, and discounts.

    gamma/lmbda come as a float, a per-env [*B] tensor or a per-step [T, *B] tensor.
    """
    horizon = draw(st.integers(1, max_t))
    batch = draw(st.sampled_from(BATCH_SHAPES))
    shape = (horizon, *batch)
    floats = st.floats(-10.0, 10.0, allow_nan=False, width=32)
    field = lambda: torch.as_tensor(draw(hnp.arrays("float64", shape, elements=floats)))
    # No ends, rare ends (traces cross the scan's chunks of 8 steps) or frequent ends.
    density = st.sampled_from([[False], [False] * 15 + [True], [False, True]])
    flag = lambda: torch.as_tensor(
        draw(hnp.arrays("bool", shape, elements=st.sampled_from(draw(density))))
    )
    traj = {
        "reward": field(),
        "value": field(),
        "next_value": field(),
        "terminated": flag(),
        "truncated": flag(),
        "log_rho": field() / 4,
    }
    for name in ("gamma", "lmbda"):
        kind = draw(st.sampled_from(["float", "per_env", "per_step"]))
        unit = st.floats(0.0, 1.0)
        if kind == "float":
            traj[name] = draw(unit)
        else:
            sub = batch if kind == "per_env" else shape
            traj[name] = torch.as_tensor(draw(hnp.arrays("float64", sub, elements=unit)))
    return traj


def expanded(x: float | Tensor, like: Tensor) -> Tensor:
    """A discount as a float64 [T, *B] tensor, for the naive loops."""
    return torch.as_tensor(x, dtype=torch.float64).expand_as(like)
