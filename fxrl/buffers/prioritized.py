"""Prioritized replay (Schaul et al. 2016, "Prioritized Experience Replay").

Items are drawn with probability ``p_i ** alpha / sum_j p_j ** alpha`` by walking the
sum tree (``fxrl.buffers.sumtree``); importance weights are normalised by the largest
weight in the whole buffer, read from the min tree. ``update_priorities`` writes both
trees in place, like the buffer storage.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import random
from fxrl.buffers import frames, sumtree
from fxrl.buffers.checks import eager
from fxrl.buffers.state import Buffer, evolve

__all__ = ["draw", "update_priorities", "weights"]


def draw(buf: Buffer, key: Tensor, batch_size: int, replace: bool) -> Tensor:
    """[batch_size] slots drawn in proportion to their stored priority."""
    leaves = buf.sums[-1]
    if replace:
        mass = random.uniform(key, (batch_size,), dtype=torch.float64) * buf.sums[0]
        if eager(mass):
            return sumtree.find(buf.sums, mass)  # sample() checked the total is positive
        return sumtree.find(buf.sums, mass, safe=True).clamp(max=buf.capacity - 1)
    # Efraimidis & Spirakis (2006): the top-k of u ** (1 / p) is a draw without
    # replacement in proportion to p; in logs, log(u) / p.
    u = random.uniform(key, (leaves.shape[-1],), dtype=torch.float64)
    score = torch.where(leaves > 0, torch.log1p(-u) / leaves, -torch.inf)
    return torch.topk(score, batch_size).indices


def weights(buf: Buffer, index: Tensor, beta: float | Tensor | None) -> Tensor:
    """[B] float32 importance weights of slots ``index`` (ones for a uniform buffer)."""
    if not buf.prioritized:
        return torch.ones(index.shape, device=index.device)
    beta = buf.beta if beta is None else beta
    # (N P(i))^-beta / max_j (N P(j))^-beta = (p_i / p_min)^-beta: N and the total cancel.
    return (buf.sums[-1].index_select(0, index) / buf.mins[0]).pow(-beta).float()


def update_priorities(buf: Buffer, index: Tensor, priority: Tensor) -> Buffer:
    """Set the priorities of slots ``index`` [K] to ``priority`` [K] (>= 0, e.g. |TD error|).

    Stores ``(priority + eps) ** alpha``; thousands of indices go in one vectorised call.
    A slot named more than once keeps the largest of its priorities. Writes the trees in
    place and returns the buffer with an updated maximum priority.
    """
    if not buf.prioritized:
        raise ValueError(
            "fxrl.buffers.update_priorities: this buffer is uniform; create it with "
            "init(example, capacity, prioritized=True) to use priorities."
        )
    if not isinstance(index, Tensor) or index.ndim != 1 or index.dtype != torch.int64:
        raise ValueError(
            f"fxrl.buffers.update_priorities: index is {_desc(index)}; expected int64 [K], "
            "such as info['index'] from sample."
        )
    if not isinstance(priority, Tensor) or priority.shape != index.shape:
        raise ValueError(
            f"fxrl.buffers.update_priorities: priority is {_desc(priority)}; expected a "
            f"float tensor of index's shape {list(index.shape)}. For TD errors of shape "
            "[K, 1], pass td_error.abs().squeeze(-1)."
        )
    shifted = priority.detach().to(torch.float64) + buf.eps
    lowest, highest = torch.aminmax(shifted)
    if eager(priority) and not (bool(lowest >= buf.eps) and bool(highest < torch.inf)):
        raise ValueError(
            "fxrl.buffers.update_priorities: priority has negative, NaN or infinite "
            "values; expected finite values >= 0 (pass td_error.abs())."
        )
    value = shifted**buf.alpha
    if buf.frame_stack > 1:
        # A slot sampled earlier may have aged into the S - 1 oldest since: keep it at zero.
        value = torch.where(frames.sampleable(buf, index), value, 0.0)
    sumtree.assign(buf.sums, buf.mins, index, value)
    return evolve(buf, max_priority=torch.maximum(buf.max_priority, highest))


def _desc(x: Any) -> str:
    if isinstance(x, Tensor):
        return f"a tensor {list(x.shape)} {str(x.dtype).removeprefix('torch.')}"
    return f"{type(x).__name__}"
