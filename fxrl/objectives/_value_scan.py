"""The reverse linear scan under every value estimator: ``y[t] = b[t] + c[t] * y[t + 1]``.

GAE, TD(lambda) and V-trace are each this scan over T with a trace factor ``c`` that is zero
where an episode ends. A Python loop over T costs T small ops (about 2048 x 5 us); this
takes about 65 ops at T=2048 (5 more per doubling of T), with no division or rescaling:

1. Split T into chunks of ``CHUNK`` steps and scan each chunk backwards with a short loop of
   ``CHUNK`` batched ops (every chunk at once), from zero, keeping the product of ``c``.
2. Scan those chunk summaries (T / CHUNK of them) by doubling (Hillis and Steele 1986):
   log2 steps, each combining a step with the one ``d`` ahead.
3. Run the loop of step 1 again, now starting from the true value at each chunk's end.

Doubling alone is fewer ops but reads all the data log2(T) times, which is slow for big
batches; the loops inside chunks read it about three times in all. The only branches are
on static shapes, so this traces under ``torch.func.vmap``, ``torch.compile(fullgraph=True)``
and ``torch.export``. T must be static there (the number of doubling steps is log2(T / 8));
batch dims may be dynamic.
"""

from __future__ import annotations

import torch
from torch import Tensor

CHUNK = 8


def doubling_scan(b: Tensor, c: Tensor) -> Tensor:
    """``y[t] = b[t] + c[t] * y[t + 1]`` along dim 0, ``y[T] = 0``, in log2(T) doubling steps.

    After the step with offset ``d``, ``b[t]`` holds the sum over the next ``2d`` steps and
    ``c[t]`` the product of their ``c``; steps past the end contribute zero.
    """
    horizon = b.shape[0]
    d = 1
    while d < horizon:
        pad = b.new_zeros((d, *b.shape[1:]))
        b = torch.addcmul(b, c, torch.cat([b[d:], pad]))
        if 2 * d < horizon:
            c = c * torch.cat([c[d:], pad])
        d *= 2
    return b


def reverse_scan(b: Tensor, c: Tensor) -> Tensor:
    """``y[t] = b[t] + c[t] * y[t + 1]`` along dim 0 with ``y[T] = 0``.

    Args:
      b, c: [T, *B] of one floating dtype (``c[T - 1]`` is not used).
    Returns:
      y: [T, *B], contiguous.
    """
    horizon, rest = b.shape[0], b.shape[1:]
    num_chunks = -(-horizon // CHUNK)
    extra = num_chunks * CHUNK - horizon  # a static int: the branch is on shapes only
    if extra:
        pad = b.new_zeros((extra, *rest))
        b, c = torch.cat([b, pad]), torch.cat([c, pad])
    b = b.reshape(num_chunks, CHUNK, *rest)
    c = c.reshape(num_chunks, CHUNK, *rest)
    # Pass 1: each chunk's y at its start with nothing carried in, and its product of c.
    y, carry = b[:, -1], c[:, -1]
    for i in range(CHUNK - 2, -1, -1):
        y = torch.addcmul(b[:, i], c[:, i], y)
        carry = c[:, i] * carry
    starts = doubling_scan(y, carry)
    # Pass 2: the same loop again, from the true y at the next chunk's start.
    y = torch.cat([starts[1:], starts.new_zeros((1, *rest))])
    ys = []
    for i in range(CHUNK - 1, -1, -1):
        y = torch.addcmul(b[:, i], c[:, i], y)
        ys.append(y)
    out = torch.stack(ys[::-1], 1).reshape(num_chunks * CHUNK, *rest)
    return out[:horizon] if extra else out
