"""Reset noise, drawn cheaply: the same numbers as ``fxrl.random.uniform``, computed so that
compiled code vectorises over a batch of envs.

An auto-resetting env computes its reset on every step (``torch.where``, no branches),
so the Threefry work of a reset is paid per env per step and dominates the cost of a
classic-control step. Two things make it cheap without changing a single bit:

- one Threefry block per pair of values, on tensors shaped like the envs' batch (as
  ``fxrl.random`` lays them out, the counters of one key are innermost, and compiled CPU
  code vectorises over those two or four lanes instead of over the envs);
- the block runs on int32 lanes that wrap, twice as many per vector as the int64 lanes
  (holding uint32 words) that ``fxrl.random.threefry2x32`` uses.

Tests check every output against ``fxrl.random`` in eager, vmapped and compiled code.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from fxrl import random

__all__ = ["threefry2x32_int32", "uniforms"]

_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
_PARITY = 0x1BD11BDA


def _int32(word: int) -> int:
    """A uint32 constant as the int32 with the same bits."""
    return word - (1 << 32) if word >= 1 << 31 else word


def _rotl(x: Tensor, r: int) -> Tensor:
    # >> is arithmetic on int32: mask off the copies of the sign bit.
    return (x << r) | ((x >> (32 - r)) & ((1 << r) - 1))


def threefry2x32_int32(k0: Tensor, k1: Tensor, x0: Tensor, x1: Tensor) -> tuple[Tensor, Tensor]:
    """Threefry-2x32-20 on int32 tensors (two's complement words; additions wrap).

    Bit for bit ``fxrl.random.threefry2x32`` with every word reinterpreted as int32.
    """
    k2 = k0 ^ k1 ^ _int32(_PARITY)
    ks = (k0, k1, k2)
    x0 = x0 + k0
    x1 = x1 + k1
    for group in range(5):
        for r in range(4):
            x0 = x0 + x1
            x1 = _rotl(x1, _ROTATIONS[(4 * group + r) % 8]) ^ x0
        x0 = x0 + ks[(group + 1) % 3]
        x1 = x1 + ks[(group + 2) % 3] + (group + 1)
    return x0, x1


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
        words = threefry2x32_int32(k0, k1, one * block, one)  # counters (block, 1), as bits()
        for w in words[: n - 2 * block]:
            u = ((w >> 8) & 0xFFFFFF).double() * 2.0**-24  # the top 24 bits, as uniform()
            i = len(out)
            out.append((lows[i] + (highs[i] - lows[i]) * u).to(dtype))
    return out


def _floats(x: float | Sequence[float], n: int) -> list[float]:
    return [float(v) for v in x] if isinstance(x, Sequence) else [float(x)] * n
