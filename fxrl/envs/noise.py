"""Reset noise, drawn cheaply: the same numbers as ``fxrl.random.uniform``, computed so that
compiled code vectorises over a batch of envs.

An auto-resetting env computes its reset on every step (``torch.where``, no branches),
so the Threefry work of a reset is paid per env per step and dominates the cost of a
classic-control step. Two things make it cheap without changing a single bit:

- one Threefry block per pair of values, on tensors shaped like the envs' batch (as
  ``fxrl.random`` lays them out, the counters of one key are innermost, and compiled CPU
  code vectorises over those two or four lanes instead of over the envs);
- the words stay int32 (``fxrl.random.threefry2x32_int32``) up to the float conversion.

Tests check every output against ``fxrl.random`` in eager, vmapped and compiled code.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from fxrl import random

__all__ = ["uniforms"]


def uniforms(
    key: Tensor,
    n: int,
    low: float | Sequence[float],
    high: float | Sequence[float],
    dtype: torch.dtype,
) -> list[Tensor]:
    """``random.uniform(key, (n,), low, high, dtype).unbind(-1)``, bit for bit, as a list.

    Args:
      key: [..., 2] int64.
      low, high: Python floats, or sequences of ``n`` floats.
    Returns:
      ``n`` tensors [...] of ``dtype``.
    """
    lows, highs = _floats(low, n), _floats(high, n)
    if dtype == torch.float64:  # two words per value: not worth a copy of random.uniform
        bounds = torch.tensor([lows, highs], dtype=torch.float64, device=key.device)
        return list(random.uniform(key, (n,), bounds[0], bounds[1], dtype).unbind(-1))
    k0, k1 = key[..., 0].to(torch.int32), key[..., 1].to(torch.int32)
    one = torch.ones((), dtype=torch.int32, device=key.device)
    out: list[Tensor] = []
    for block in range((n + 1) // 2):
        # counters (block, 1), as fxrl.random.bits uses them
        words = random.threefry2x32_int32(k0, k1, one * block, one)
        for w in words[: n - 2 * block]:
            u = ((w >> 8) & 0xFFFFFF).double() * 2.0**-24  # the top 24 bits, as uniform()
            i = len(out)
            out.append((lows[i] + (highs[i] - lows[i]) * u).to(dtype))
    return out


def _floats(x: float | Sequence[float], n: int) -> list[float]:
    return [float(v) for v in x] if isinstance(x, Sequence) else [float(x)] * n
