"""Reset noise, drawn cheaply: one Threefry block per env per reset.

An auto-resetting env computes its reset on every step (``torch.where``, no branches),
so the Threefry work of a reset is paid per env per step and dominates both the run time
and the compile time of a classic-control step. A reset therefore draws from exactly one
Threefry-2x32-20 block, the block at counter ``(0, 1)`` that ``fxrl.random.bits(key, 2)``
returns, and cuts its two 32-bit words into as many uniforms as the env needs:

- up to two values: the top 24 bits of each word, the same numbers as
  ``fxrl.random.uniform(key, (n,), low, high)`` (Pendulum, MountainCar);
- three or four values: the four 16-bit halves ``w0 >> 16, w0 & 0xFFFF, w1 >> 16,
  w1 & 0xFFFF`` (CartPole, Acrobot). A 16-bit grid of CartPole's [-0.05, 0.05) has a
  spacing of 1.5e-6, far below anything the dynamics resolve; gymnasium's own starts are
  float64 draws rounded to float32, and the tests check both give the same distribution.

The words stay int32 (``fxrl.random.threefry2x32_int32``) and the block is computed on
tensors shaped like the envs' batch, so compiled CPU code vectorises over the envs. The
scaling to ``[low, high)`` runs in float64 and rounds once, so eager, vmapped, compiled and
exported code give the same bits. float64 envs (exact-parity mode) draw 53-bit uniforms
from ``fxrl.random.uniform`` instead.
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
    """``n <= 4`` uniforms in ``[low, high)`` from one Threefry block (see the module).

    Args:
      key: [..., 2] int64.
      n: 1 to 4 values (float64: any number).
      low, high: Python floats, or sequences of ``n`` floats.
    Returns:
      ``n`` tensors [...] of ``dtype``.
    """
    lows, highs = _floats(low, n), _floats(high, n)
    if dtype == torch.float64:  # two words per value: not worth a copy of random.uniform
        bounds = torch.tensor([lows, highs], dtype=torch.float64, device=key.device)
        return list(random.uniform(key, (n,), bounds[0], bounds[1], dtype).unbind(-1))
    if not 1 <= n <= 4:
        raise ValueError(f"fxrl.envs.noise.uniforms: n={n}; one block gives 1 to 4 values.")
    k0, k1 = key[..., 0].to(torch.int32), key[..., 1].to(torch.int32)
    zero = torch.zeros((), dtype=torch.int32, device=key.device)
    w0, w1 = random.threefry2x32_int32(k0, k1, zero, zero + 1)  # counter (0, 1), as bits()
    if n <= 2:  # the top 24 bits of a word, as random.uniform
        fields = [((w >> 8) & 0xFFFFFF, 2.0**-24) for w in (w0, w1)]
    else:
        fields = [((w >> s) & 0xFFFF, 2.0**-16) for w in (w0, w1) for s in (16, 0)]
    return [
        (lo + (hi - lo) * (bits.double() * scale)).to(dtype)
        for (bits, scale), lo, hi in zip(fields[:n], lows, highs, strict=False)
    ]


def _floats(x: float | Sequence[float], n: int) -> list[float]:
    return [float(v) for v in x] if isinstance(x, Sequence) else [float(x)] * n
