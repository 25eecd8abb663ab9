"""Windows of consecutive transitions for recurrent agents: ``sample_sequences``.

A window is ``length`` consecutive slots of one stream of steps, drawn by index
arithmetic only (one ``randint`` and one gather per leaf, no Python loop over windows or
episodes). Windows may cross episode boundaries; ``is_init`` marks every step that starts
an episode, so a recurrent policy ``policy(params, obs, carry, is_init, key)`` resets its
carry there and never mixes two episodes. Windows never cross the ring's write cursor
(the newest and the oldest transitions are not consecutive steps).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import random, tree
from fxrl.buffers import frames
from fxrl.buffers.checks import check_key, eager, int_arg
from fxrl.buffers.state import Buffer

__all__ = ["sample_sequences"]


def sample_sequences(
    buf: Buffer, key: Tensor, batch_size: int, length: int
) -> tuple[Any, dict[str, Tensor]]:
    """Draw ``batch_size`` windows of ``length`` consecutive transitions, uniformly.

    The buffer must hold one env's steps in order (for several envs, one buffer per env:
    ``tree.stack`` them and vmap). Priorities, if any, are not used.

    Args:
      buf: a buffer holding at least ``length`` transitions.
      key: [2] random key.
      batch_size: number of windows B.
      length: steps per window L.
    Returns:
      ``(windows, info)``: leaves ``[B, L, *shape]``; ``info["index"]`` [B, L] int64 slots;
      ``info["is_init"]`` [B, L] bool, True where a step starts an episode and at the
      oldest stored step (its past is gone). A dict buffer also gets
      ``windows["is_init"]``.
    """
    check_key("sample_sequences", key)
    batch_size = int_arg("sample_sequences", "batch_size", batch_size, minimum=1)
    length = int_arg("sample_sequences", "length", length, minimum=1)
    lowest = frames.lowest_age(buf) if buf.frame_stack else torch.zeros_like(buf.size)
    if eager(buf.size) and int(buf.size) - int(lowest) < length:
        raise ValueError(
            f"fxrl.buffers.sample_sequences: length={length} but the buffer holds "
            f"{int(buf.size) - int(lowest)} transitions that can start a window; add more "
            f"steps first or ask for length <= {int(buf.size) - int(lowest)}."
        )
    start = random.randint(key, (batch_size, 1), lowest, buf.size - length + 1)
    age = start + torch.arange(length, device=key.device)
    index = (buf.cursor - buf.size + age) % buf.capacity
    is_init = buf.episode_start[index] | (age == 0)
    if buf.frame_stack:
        flat = frames.gather(buf, index.reshape(-1))
        windows = tree.map(lambda x: x.reshape(batch_size, length, *x.shape[1:]), flat)
    else:
        flat = index.view(-1)
        windows = tree.map(
            lambda x: x.index_select(0, flat).view(batch_size, length, *x.shape[1:]),
            buf.storage,
        )
    if isinstance(windows, dict) and "is_init" not in windows:
        windows = {**windows, "is_init": is_init}
    return windows, {"index": index, "is_init": is_init}
