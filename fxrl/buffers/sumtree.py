"""Sum and min trees over priorities, held in a tuple of tensors (one per level).

The trees are 32-ary rather than binary: 100k or 1M leaves need 4 levels instead of 17 or
20, and in eager torch the cost of a tree walk is the number of ops (a few microseconds
each), not the arithmetic, which is tiny for a batch of a few hundred. Level ``d`` holds
``sizes[d]`` nodes; node ``i`` of a level has children ``i * 32 .. i * 32 + 31`` below it.
Levels are padded with zeros (sum tree) and ``+inf`` (min tree), so padding is never
sampled and never the minimum.

Everything here is vectorised over the batch of indices (no Python loop over items); the
only loop is over the (static, ~4) levels. Writes are in place, like the buffer storage.
"""

from __future__ import annotations

import torch
from torch import Tensor

BRANCH = 32


def level_sizes(capacity: int, branch: int = BRANCH) -> tuple[int, ...]:
    """Node counts per level, root first: ``level_sizes(100_000) == (1, 32, 128, 3136, 100000)``.

    Level 1 always has ``branch`` nodes, which is how the functions below read the
    branching factor back from the tensors.
    """
    n = -(-capacity // branch) * branch
    sizes = [n]
    while n > 1:
        n //= branch
        if n > 1:
            n = -(-n // branch) * branch
        sizes.append(n)
    return tuple(reversed(sizes))


def empty(
    capacity: int, branch: int = BRANCH, *, like: Tensor | None = None
) -> tuple[tuple[Tensor, ...], ...]:
    """A sum tree (zeros) and a min tree (``+inf``) with no priorities set, float64, made
    by ``like.new_zeros`` (``like``'s device, and batched like it under vmap; default: a
    CPU tensor)."""
    sizes = level_sizes(capacity, branch)
    like = torch.zeros(()) if like is None else like
    sums = tuple(like.new_zeros(n, dtype=torch.float64) for n in sizes)
    mins = tuple(like.new_full((n,), torch.inf, dtype=torch.float64) for n in sizes)
    return sums, mins


def assign(
    sums: tuple[Tensor, ...], mins: tuple[Tensor, ...], index: Tensor, value: Tensor
) -> None:
    """Set leaves ``index`` [K] to ``value`` [K] (float64 >= 0) and refresh their ancestors.

    Duplicate indices keep the largest of their values (``scatter_reduce`` with ``amax``),
    which is deterministic and independent of their order in the batch. A zero leaf is
    never sampled and is left out of the min tree. Returns nothing:
    the trees are written in place.
    """
    # Eager torch pays a few microseconds per op whatever the size, so this counts ops:
    # index_select rather than advanced indexing, reductions straight into place.
    branch = sums[1].shape[-1]
    sums[-1].index_fill_(0, index, 0.0)
    sums[-1].scatter_reduce_(0, index, value, "amax")
    leaf = sums[-1].index_select(0, index)
    mins[-1].index_put_((index,), leaf.where(leaf > 0, torch.inf))
    for d in range(len(sums) - 1, 0, -1):
        index = index // branch
        sums[d - 1].index_put_((index,), sums[d].view(-1, branch).index_select(0, index).sum(-1))
        mins[d - 1].index_put_((index,), mins[d].view(-1, branch).index_select(0, index).amin(-1))


def find(sums: tuple[Tensor, ...], mass: Tensor, safe: bool = False) -> Tensor:
    """The leaf whose prefix-sum interval holds ``mass`` [B] (float64 in [0, total)).

    Walks down one level per step: gather the 32 children of each current node, take their
    running sum and step into the first child whose running sum exceeds the mass left.
    ``mass`` is kept below each node's own sum, so a zero-priority leaf is never returned
    even when float rounding makes a parent's sum differ from its children's by an ulp.
    Only an all-zero tree walks out of range; ``safe=True`` clamps every step so that it
    returns in-range leaves instead (for traced code, where no eager check can run).
    """
    branch = sums[1].shape[-1]
    limit = 1.0 - 2.0**-40
    # Level 1 is the root's children, the same row for every draw: no gather needed.
    running = sums[1].cumsum(0)
    mass = torch.minimum(mass.unsqueeze(-1), running[-1:] * limit)
    child = torch.searchsorted(running, mass, right=True)
    child = child.clamp(max=branch - 1) if safe else child
    mass = mass - (running - sums[1])[child]
    node = child.view(-1)
    for level in sums[2:]:
        rows = level.view(-1, branch)
        node = node.clamp(max=rows.shape[0] - 1) if safe else node
        children = rows.index_select(0, node)
        running = children.cumsum(-1)
        mass = torch.minimum(mass, running[:, -1:] * limit)
        child = torch.searchsorted(running, mass, right=True)
        child = child.clamp(max=branch - 1) if safe else child
        mass = mass - (running - children).gather(-1, child)
        node = torch.add(child.view(-1), node, alpha=branch)
    return node
