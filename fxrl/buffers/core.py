"""Replay buffers as pytrees: ``init``, ``add``, ``sample``, ``update_priorities``.

A buffer is a frozen ``Buffer`` of tensors: storage preallocated from one example
transition (dtypes kept, so uint8 pixels stay uint8), a cursor, a size, per-slot episode
starts and, for prioritized buffers, a sum tree and a min tree (``fxrl.buffers.sumtree``).

The one exception to purity in fxrl: ``add`` and ``update_priorities`` write the storage
and the priority trees **in place** and return a new ``Buffer`` that shares them (with a
new cursor and size), so adding 100 frames to a 100k-frame Atari buffer copies 100 frames,
not the buffer. Use the returned buffer and drop the old one. ``sample`` is pure.

The ``Buffer`` type is ``fxrl.buffers.state``'s (re-exported here); prioritized sampling and
``update_priorities`` live in ``fxrl.buffers.prioritized``.

Everything vmaps: a buffer whose leaves carry a leading seed dim (``tree.stack`` of
buffers) is one buffer per seed, and ``torch.func.vmap(add)`` / ``vmap(sample)`` act per
seed. Checks that read tensor values (an empty buffer, negative priorities) run in eager
code only; shape and dtype checks run everywhere.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import Tensor

from fxrl import random, tree
from fxrl.buffers import frames, sumtree
from fxrl.buffers.checks import batch_size_of, check_key, eager, int_arg
from fxrl.buffers.prioritized import draw, weights
from fxrl.buffers.state import Buffer, evolve

__all__ = ["Buffer", "add", "init", "sample"]


def init(
    example: Any,
    capacity: int,
    prioritized: bool = False,
    alpha: float = 0.6,
    beta: float = 0.4,
    eps: float = 1e-6,
    *,
    frame_stack: int = 0,
    storage: str = "memory",
    path: str | None = None,
) -> Buffer:
    """An empty buffer for transitions shaped like ``example``.

    Args:
      example: one transition, a pytree of tensors (no batch dim), e.g. ``{"obs": [4, 84,
        84] uint8, "action": [] int64, "reward": [] float32, "next_obs": ..., ...}``.
      capacity: number of transitions kept; older ones are overwritten (a ring).
      prioritized: sample in proportion to ``priority ** alpha`` (Schaul et al. 2016).
      alpha, beta, eps: priority exponent, importance-weight exponent (``sample`` may
        override it, for annealing), and the constant added to every priority.
      frame_stack: ``S > 0`` stores only the newest frame of ``example["obs"]`` and
        ``example["next_obs"]`` (both ``[S, ...]``, oldest frame first) and rebuilds the
        stacks when sampling; exact for stacks that start an episode by repeating its
        first frame (``fxrl.transforms.frame_stack``, gymnasium's FrameStackObservation).
        Needs one stream of consecutive steps per buffer (one env; vmap for more).
      storage: ``"memory"`` or ``"memmap"``: one file per leaf under the directory
        ``path``, paged in and out by the OS, so the buffer may exceed RAM (the priority
        trees and episode flags stay in memory).
      path: the directory for ``storage="memmap"``.
    Returns:
      A ``Buffer`` (a pytree). Under ``vmap(init)`` every array of it is batched wherever
      some leaf of ``example`` is, so each seed owns its storage.
    """
    capacity = int_arg("init", "capacity", capacity, minimum=1)
    named = tree.flatten_with_paths(example)
    for p, x in named:
        if not isinstance(x, Tensor):
            raise TypeError(
                f"fxrl.buffers.init: example leaf {'.'.join(map(str, p)) or '<root>'!r} is "
                f"{type(x).__name__}; "
                "expected a tensor for every leaf (one transition, no batch dim)."
            )
    if storage not in ("memory", "memmap") or (storage == "memmap") != (path is not None):
        raise ValueError(
            f"fxrl.buffers.init: got storage={storage!r}, path={path!r}; expected "
            "storage='memory' (no path) or storage='memmap' with path=DIRECTORY."
        )
    if frame_stack and capacity < frame_stack:
        raise ValueError(
            f"fxrl.buffers.init: capacity={capacity} is smaller than frame_stack="
            f"{frame_stack}; a frame-stacked buffer needs capacity >= frame_stack."
        )
    stored = frames.stored_example(example, frame_stack) if frame_stack else example
    like = _batched_zero(tree.leaves(example))
    if storage == "memmap":
        leaves = [
            _memmap(path, name, capacity, x)
            for name, x in zip(tree.path_names(stored), tree.leaves(stored), strict=True)
        ]
        store = tree.unflatten(tree.structure(stored), leaves)
    else:
        store = tree.map(lambda x: like.new_zeros((capacity, *x.shape), dtype=x.dtype), stored)
    sums, mins = sumtree.empty(capacity, like=like) if prioritized else ((), ())
    zero = like.new_zeros((), dtype=torch.int64)
    return Buffer(
        storage=store,
        cursor=zero,
        size=zero.clone(),
        episode_start=like.new_zeros(capacity, dtype=torch.bool),
        sums=sums,
        mins=mins,
        max_priority=like.new_ones((), dtype=torch.float64),
        capacity=capacity,
        prioritized=bool(prioritized),
        alpha=float(alpha),
        beta=float(beta),
        eps=float(eps),
        frame_stack=int(frame_stack),
        shapes=tuple(tuple(x.shape) for x in tree.leaves(example)),
    )


def _batched_zero(leaves: list[Tensor]) -> Tensor:
    """A float32 zero ``[]`` on the example's device, batched at every vmap level at which
    some leaf is. The buffer's arrays are made from it (``new_zeros``), so that under
    ``vmap(init)`` each seed owns its storage (``add`` writes in place), even where one
    leaf (an action spec's zeros) is not batched; a stride-0 expansion would make every
    seed write into one shared array."""
    if not leaves:
        return torch.zeros(())
    zero = torch.zeros((), device=leaves[0].device)
    for x in leaves:
        zero = zero + torch.zeros_like(x.reshape(-1)[:1], dtype=torch.float32).sum()
    return zero


def _memmap(path: str, name: str, capacity: int, x: Tensor) -> Tensor:
    """A ``[capacity, *x.shape]`` tensor backed by the file ``path/name.bin``."""
    os.makedirs(path, exist_ok=True)
    n = capacity * x.numel()
    flat = torch.from_file(os.path.join(path, f"{name}.bin"), shared=True, size=n, dtype=x.dtype)
    return flat.view(capacity, *x.shape)


def add(buf: Buffer, batch: Any) -> Buffer:
    """Append a batch of transitions (leaves ``[n, *example_shape]``, any ``n``).

    Writes slots ``cursor, cursor + 1, ...`` modulo capacity in place (when ``n`` exceeds
    the capacity only the last ``capacity`` transitions are kept). New items of a
    prioritized buffer get the largest priority seen so far. Episode starts are taken
    from ``batch["is_init"]`` if present, else from the previous step's ``terminated |
    truncated``; the first transition ever added starts an episode.
    """
    n = batch_size_of("add", buf, batch)
    start = _episode_starts(buf, batch, n)
    skip = max(n - buf.capacity, 0)
    m = n - skip
    stored = frames.to_stored(batch, buf.frame_stack) if buf.frame_stack else batch
    targets = [*tree.leaves(buf.storage), buf.episode_start]
    # detach: a stored transition never keeps an autograd graph (or makes storage track one)
    values = [(x[skip:] if skip else x).detach() for x in (*tree.leaves(stored), start)]
    pos = None
    if eager(buf.cursor) and buf.cursor.device.type == "cpu":  # elsewhere int() is a sync
        _write_slices(targets, values, (int(buf.cursor) + skip) % buf.capacity)
    else:
        pos = _positions(buf, skip, m)
        for store, x in zip(targets, values, strict=True):
            store.index_put_((pos,), x)
    if buf.prioritized:
        pos = _positions(buf, skip, m) if pos is None else pos
        top = (buf.max_priority**buf.alpha).expand(m)
        sumtree.assign(buf.sums, buf.mins, pos, top)
    out = evolve(
        buf,
        cursor=(buf.cursor + n) % buf.capacity,
        size=torch.clamp(buf.size + n, max=buf.capacity),
    )
    if buf.prioritized and buf.frame_stack > 1:
        frames.retire_oldest(out)
    return out


def _positions(buf: Buffer, skip: int, m: int) -> Tensor:
    """[m] slots written by an add of ``skip + m`` rows (the first ``skip`` are dropped)."""
    return (buf.cursor + skip + torch.arange(m, device=buf.cursor.device)) % buf.capacity


def _write_slices(targets: list[Tensor], values: list[Tensor], first: int) -> None:
    """Eager fast path: one or two contiguous slice copies (memcpy speed; ``index_put_``
    of 100 Atari frames is ~8x slower)."""
    n = values[0].shape[0]
    head = min(n, targets[0].shape[0] - first)
    for store, x in zip(targets, values, strict=True):
        if head == n:
            store[first : first + n].copy_(x)
        else:
            store[first:].copy_(x[:head])
            store[: n - head].copy_(x[head:])


def _episode_starts(buf: Buffer, batch: Any, n: int) -> Tensor:
    """[n] bool: which transitions of the batch start an episode."""
    if isinstance(batch, dict) and "is_init" in batch:
        return batch["is_init"].to(torch.bool)
    first = buf.size == 0
    if isinstance(batch, dict) and ("terminated" in batch or "truncated" in batch):
        done = _done(batch)
        last = (buf.cursor - 1) % buf.capacity
        # a one-element index tensor, not a 0-d one: x[t] with a 0-d t reads its value in
        # Python (a data-dependent guard that fxrl.compile's tracing refuses)
        prev = _done(buf.storage)[last.reshape(1)].squeeze(0) | first
        return torch.cat([prev.unsqueeze(0), done[:-1]])
    return torch.cat(
        [first.unsqueeze(0), torch.zeros(n - 1, dtype=torch.bool, device=first.device)]
    )


def _done(fields: dict) -> Tensor:
    flags = [fields[k].to(torch.bool) for k in ("terminated", "truncated") if k in fields]
    return flags[0] | flags[1] if len(flags) == 2 else flags[0]


def sample(
    buf: Buffer,
    key: Tensor,
    batch_size: int,
    *,
    replace: bool = True,
    beta: float | Tensor | None = None,
) -> tuple[Any, dict[str, Tensor]]:
    """Draw ``batch_size`` transitions: uniformly, or by priority for prioritized buffers.

    Args:
      buf: a non-empty buffer.
      key: [2] random key.
      batch_size: number of transitions.
      replace: ``False`` draws distinct transitions (``batch_size <= size``; costs one
        random number per slot of the buffer).
      beta: importance-weight exponent; defaults to the buffer's.
    Returns:
      ``(batch, info)``: batch leaves ``[batch_size, *shape]``; ``info["index"]`` [B]
      int64 slots (for ``update_priorities``); ``info["weight"]`` [B] float32 importance
      weights ``(N * P(i)) ** -beta / max_j (N * P(j)) ** -beta`` (ones when uniform).
    """
    check_key("sample", key)
    batch_size = int_arg("sample", "batch_size", batch_size, minimum=1)
    if eager(buf.size):
        _check_can_sample(buf, batch_size, replace)
    if buf.prioritized:
        index = draw(buf, key, batch_size, replace)
    elif replace:
        lowest = frames.lowest_age(buf) if buf.frame_stack else 0
        age = random.randint(key, (batch_size,), lowest, buf.size)
        index = (buf.cursor - buf.size + age) % buf.capacity
    else:
        lowest = frames.lowest_age(buf) if buf.frame_stack else 0
        oldest = buf.cursor - buf.size
        age = (torch.arange(buf.capacity, device=key.device) - oldest) % buf.capacity
        score = random.uniform(key, (buf.capacity,))
        score = torch.where((age >= lowest) & (age < buf.size), score, -1.0)
        index = torch.topk(score, batch_size).indices
    if buf.frame_stack:
        batch = frames.gather(buf, index)
    else:
        batch = tree.map(lambda x: x.index_select(0, index), buf.storage)
    return batch, {"index": index, "weight": weights(buf, index, beta)}


def _check_can_sample(buf: Buffer, batch_size: int, replace: bool) -> None:
    size = int(buf.size)
    lowest = int(frames.lowest_age(buf)) if buf.frame_stack else 0
    if size - lowest <= 0:
        raise ValueError(
            "fxrl.buffers.sample: the buffer is empty (size 0); add(buf, batch) before "
            "sampling, e.g. after a warm-up of random actions."
        )
    if buf.prioritized and not float(buf.sums[0]) > 0:
        raise ValueError(
            "fxrl.buffers.sample: every priority in the buffer is zero; nothing can be "
            "drawn in proportion to priority. Use eps > 0 in init, or update_priorities "
            "with some positive values."
        )
    if replace:
        return
    available = int((buf.sums[-1] > 0).sum()) if buf.prioritized else size - lowest
    if batch_size > available:
        raise ValueError(
            f"fxrl.buffers.sample: batch_size={batch_size} without replacement but the "
            f"buffer holds {available} transitions that can be drawn; use "
            f"batch_size <= {available}, or replace=True."
        )
