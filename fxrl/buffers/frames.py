"""Frame-stacked observations stored one frame at a time (``init(..., frame_stack=S)``).

An Atari transition holds ``obs`` and ``next_obs`` of ``[4, 84, 84]`` uint8: 56 KB, of
which 7 KB is new. With ``frame_stack=S`` a slot keeps only the newest frame of ``obs``
and of ``next_obs`` (2 x 84 x 84 bytes) and ``sample`` rebuilds the stacks by index
arithmetic: the older frames of ``obs`` at slot ``t`` are the newest frames at slots
``t - 1, t - 2, ...``, stopping at the slot that starts the episode, whose frame repeats
(the padding of ``fxrl.transforms.frame_stack`` and gymnasium's FrameStackObservation);
``next_obs`` is ``obs`` shifted by one with the slot's own newest ``next_obs`` frame.
Keeping ``next_obs``'s frame makes episode ends exact, truncations included.

When the ring is full the ``S - 1`` oldest slots have lost their history and are not
sampled (in a prioritized buffer their priority is set to zero). The stream must be one
env's consecutive steps (for several envs, one buffer per env: ``tree.stack`` them and
vmap ``add``/``sample``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import tree
from fxrl.buffers import sumtree

_KEYS = ("obs", "next_obs")


def stored_example(example: Any, frame_stack: int) -> dict:
    """The example as stored: ``obs``/``next_obs`` ``[S, *frame]`` become ``[*frame]``."""
    if not isinstance(example, dict) or any(k not in example for k in _KEYS):
        got = sorted(example) if isinstance(example, dict) else type(example).__name__
        raise ValueError(
            f"fxrl.buffers.init: frame_stack={frame_stack} needs a dict example with 'obs' "
            f"and 'next_obs' stacks [S, ...]; got {got}."
        )
    if not any(k in example for k in ("terminated", "truncated", "is_init")):
        raise ValueError(
            f"fxrl.buffers.init: frame_stack={frame_stack} needs episode boundaries: add "
            "'terminated' and 'truncated' (or 'is_init') to the example; got keys "
            f"{sorted(example)}."
        )
    for k in _KEYS:
        x = example[k]
        if x.ndim < 1 or x.shape[0] != frame_stack or x.shape != example["obs"].shape:
            raise ValueError(
                f"fxrl.buffers.init: example[{k!r}] has shape {list(x.shape)}; with "
                f"frame_stack={frame_stack} expected [{frame_stack}, ...] stacks (oldest "
                "frame first, as fxrl.transforms.frame_stack(S, dim=-3) makes them) with "
                "obs and next_obs of one shape."
            )
    return {k: (v[-1] if k in _KEYS else v) for k, v in example.items()}


def to_stored(batch: dict, frame_stack: int) -> dict:
    """A batch as stored: the newest frame of each stack."""
    return {k: (v[:, -1] if k in _KEYS else v) for k, v in batch.items()}


def lowest_age(buf: Any) -> Tensor:
    """The youngest age (0 = oldest slot) that may be sampled: S - 1 once the ring wrapped."""
    return torch.where(buf.size >= buf.capacity, buf.frame_stack - 1, 0)


def sampleable(buf: Any, index: Tensor) -> Tensor:
    """[K] bool: the slots ``index`` still have their history (age >= ``lowest_age``)."""
    age = (index - (buf.cursor - buf.size)) % buf.capacity
    return (age >= lowest_age(buf)) & (age < buf.size)


def retire_oldest(buf: Any) -> None:
    """Prioritized + frame-stacked: zero the priority of the ``S - 1`` oldest slots of a
    full ring, in place, so they are never drawn (they only age towards being
    overwritten, and get a fresh priority when they are)."""
    zone = (buf.cursor + torch.arange(buf.frame_stack - 1, device=buf.cursor.device)) % (
        buf.capacity
    )
    keep = buf.sums[-1].index_select(0, zone) * (buf.size < buf.capacity)
    sumtree.assign(buf.sums, buf.mins, zone, keep)


def sources(buf: Any, index: Tensor) -> Tensor:
    """[B, S] slots whose newest ``obs`` frames make up the stacks at ``index`` [B]."""
    cur = index
    stopped = buf.episode_start[index]
    cols = [cur]
    for _ in range(buf.frame_stack - 1):
        cur = torch.where(stopped, cur, (cur - 1) % buf.capacity)
        stopped = stopped | buf.episode_start[cur]
        cols.append(cur)
    return torch.stack(cols[::-1], dim=-1)


def gather(buf: Any, index: Tensor) -> dict:
    """The transitions at ``index`` [B] with full ``obs``/``next_obs`` stacks rebuilt."""
    store = buf.storage
    src = sources(buf, index)
    obs = store["obs"].index_select(0, src.view(-1)).view(*src.shape, *store["obs"].shape[1:])
    newest = store["next_obs"].index_select(0, index).unsqueeze(1)
    full = {"obs": obs, "next_obs": torch.cat([obs[:, 1:], newest], dim=1)}
    pick = lambda x: x.index_select(0, index)
    return {k: full[k] if k in full else tree.map(pick, v) for k, v in store.items()}
