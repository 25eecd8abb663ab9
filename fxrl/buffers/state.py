"""The ``Buffer`` pytree: what a replay buffer is, apart from what is done with it.

The bottom of ``fxrl.buffers``: ``core`` (init, add, sample), ``prioritized``, ``sequences``
and ``io`` all build on this module and on none of each other's internals.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from fxrl import tree

__all__ = ["Buffer", "evolve"]


@tree.dataclass
class Buffer:
    """A replay buffer's state. Make one with ``init``; read it, don't build it by hand.

    ``capacity`` and the settings are static (part of the treespec), the rest are tensors,
    so ``tree.stack([init(...) for _ in seeds])`` is a batch of buffers for vmap.
    """

    storage: Any  # pytree like the example; leaves [capacity, *shape]
    cursor: Tensor  # [] int64, the next slot written
    size: Tensor  # [] int64, number of filled slots
    episode_start: Tensor  # [capacity] bool: the slot's transition starts an episode
    sums: tuple[Tensor, ...]  # sum tree levels (empty for uniform buffers), float64
    mins: tuple[Tensor, ...]  # min tree levels (empty for uniform buffers), float64
    max_priority: Tensor  # [] float64, the largest (priority + eps) seen; new items get it
    capacity: int = tree.field(static=True)
    prioritized: bool = tree.field(static=True, default=False)
    alpha: float = tree.field(static=True, default=0.6)
    beta: float = tree.field(static=True, default=0.4)
    eps: float = tree.field(static=True, default=1e-6)
    frame_stack: int = tree.field(static=True, default=0)
    shapes: tuple = tree.field(static=True, default=())  # the example's leaf shapes


def evolve(buf: Buffer, **changes: Any) -> Buffer:
    """``buf.replace(**changes)`` for the hot paths: ``replace`` re-checks the field names
    and runs ``__init__``, which cost more than the rest of a one-step ``add``."""
    new = object.__new__(Buffer)
    new.__dict__.update(buf.__dict__, **changes)
    return new
