"""Explicit, splittable random keys: counter-based Threefry-2x32 in plain tensor ops.

A key is an int64 tensor ``[2]`` holding two unsigned 32-bit words; any function also
takes a batch of keys ``[..., 2]`` and then returns ``[..., *shape]``, so
``torch.func.vmap(f)(keys) == f(keys)``. The generator is Threefry-2x32 with 20 rounds
(Salmon et al. 2011, "Parallel random numbers: as easy as 1, 2, 3"), checked against
the Random123 known-answer vectors. It uses only integer add, and, or, xor and shifts,
so the same key gives the same bits in eager code, under ``torch.func.vmap``, under
``torch.compile``, through ``torch.export`` and in ONNX Runtime. Float transforms run in
float64 and round once, so they are bit-stable too. The global torch RNG is never used.

Streams are separated by the second counter word: ``split`` children use counter
``(i, 0)``, ``bits`` uses ``(j, 1)``, ``fold_in`` hashes ``data`` under the derived
key at ``(0, 2)``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import torch

from fxrl import _threefry_op
from fxrl.compile import is_tracing

__all__ = [
    "bernoulli",
    "bits",
    "categorical",
    "choice",
    "fold_in",
    "key",
    "ndtri",
    "normal",
    "permutation",
    "randint",
    "split",
    "threefry2x32",
    "threefry2x32_int32",
    "uniform",
]

Shape = int | Sequence[int] | torch.Size

_MASK = 0xFFFFFFFF


# ----------------------------------------------------------------------------- the block


def threefry2x32_int32(
    k0: torch.Tensor, k1: torch.Tensor, x0: torch.Tensor, x1: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Threefry-2x32-20 on int32 tensors: each word is a uint32 reinterpreted as int32.

    Sums wrap, as the cipher wants. torch's CPU kernels and Inductor vectorize int32 shifts
    but not int64 ones, so this is ~10x faster than masking int64 sums, eager and compiled.
    Code that keeps words in int32 between calls (hot env loops) uses it directly. While
    ``fxrl.compile`` or ``torch.compile`` traces, the cipher is one op
    (``fxrl._threefry_op``), the same bits in far fewer graph nodes; ``torch.export``
    keeps the plain ops.
    """
    # fxrl.compile's trace, and torch.compile's (dynamo cannot read is_tracing's context
    # variable: it asks is_compiling first); torch.export keeps the plain ops
    if _threefry_op.ENABLED and (
        (torch.compiler.is_compiling() and not torch.compiler.is_exporting()) or is_tracing()
    ):
        return _threefry_op.threefry2x32(k0, k1, x0, x1)
    return _threefry_op.plain(k0, k1, x0, x1)


def threefry2x32(
    k0: torch.Tensor, k1: torch.Tensor, x0: torch.Tensor, x1: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The Threefry-2x32-20 block cipher on int64 tensors holding uint32 words.

    Args:
      k0, k1: key words, broadcastable with the counters.
      x0, x1: counter words.
    Returns:
      The two output words, each broadcast to the common shape, int64 in [0, 2**32).
    """
    y0, y1 = threefry2x32_int32(*(t.to(torch.int32) for t in (k0, k1, x0, x1)))
    return y0.to(torch.int64) & _MASK, y1.to(torch.int64) & _MASK


# ----------------------------------------------------------------------------- keys


def _check_key(fn: str, key: torch.Tensor) -> None:
    if not isinstance(key, torch.Tensor):
        raise ValueError(
            f"fxrl.random.{fn}: key must be an int64 tensor of shape [2] (or [..., 2]) made by "
            f"fxrl.random.key(seed); got {type(key).__name__} {key!r}."
        )
    if key.dtype != torch.int64 or key.ndim == 0 or key.shape[-1] != 2:
        raise ValueError(
            f"fxrl.random.{fn}: key has shape {list(key.shape)} and dtype "
            f"{str(key.dtype).removeprefix('torch.')}; expected int64 with shape [2] (or a batch "
            "[..., 2]) as made by fxrl.random.key(seed) or fxrl.random.split(key)."
        )


def _shape(fn: str, shape: Shape) -> tuple[int, ...]:
    # Symbolic sizes (torch.export with a dynamic batch) stay symbolic: int() would fix them.
    if isinstance(shape, int | torch.SymInt):
        shape = (shape,)
    try:
        out = tuple(s if isinstance(s, torch.SymInt) else operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(
            f"fxrl.random.{fn}: shape must be a tuple of ints, got {shape!r}."
        ) from None
    if any(isinstance(s, int) and s < 0 for s in out):
        raise ValueError(f"fxrl.random.{fn}: shape {out} has a negative size.")
    return out


def key(seed: int | torch.Tensor, *, device: torch.device | str | None = None) -> torch.Tensor:
    """A key from an integer seed: int64 ``[2]`` = (high, low) 32-bit words of the seed.

    A tensor of seeds ``[...]`` gives a batch of keys ``[..., 2]``. The key is made on
    ``device``; by default on the seed tensor's device, or torch's default device for an
    int seed. Every fxrl function makes its tensors on the device of its inputs, so
    ``init(key(0, device="cuda"))`` gives a state on the GPU.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | torch.Tensor):
        raise TypeError(f"fxrl.random.key: seed must be an int or an int tensor, got {seed!r}.")
    if isinstance(seed, torch.Tensor):
        if seed.dtype.is_floating_point or seed.dtype.is_complex or seed.dtype == torch.bool:
            raise TypeError(
                f"fxrl.random.key: seed tensor has dtype {seed.dtype}; expected an integer dtype."
            )
        seed = seed.to(device=device, dtype=torch.int64)
    else:
        if not -(2**63) <= seed < 2**64:
            raise ValueError(f"fxrl.random.key: seed {seed} does not fit in 64 bits.")
        seed = torch.tensor(
            seed - 2**64 if seed >= 2**63 else seed, dtype=torch.int64, device=device
        )
    return torch.stack([(seed >> 32) & _MASK, seed & _MASK], dim=-1)


def split(key: torch.Tensor, num: int = 2) -> torch.Tensor:
    """``num`` new independent keys: ``[..., 2] -> [..., num, 2]``."""
    _check_key("split", key)
    if not isinstance(num, int) or num < 1:
        raise ValueError(f"fxrl.random.split: num must be a positive int, got {num!r}.")
    counter = torch.arange(num, dtype=torch.int64, device=key.device)
    y0, y1 = threefry2x32(key[..., 0:1], key[..., 1:2], counter, torch.zeros_like(counter))
    return torch.stack([y0, y1], dim=-1)


def fold_in(key: torch.Tensor, data: int | torch.Tensor) -> torch.Tensor:
    """A new key derived from ``key`` and an integer (a step count, an env index...).

    ``data`` may be a tensor broadcastable with the key's batch shape.
    """
    _check_key("fold_in", key)
    data = torch.as_tensor(data, dtype=torch.int64, device=key.device)
    zero = torch.zeros((), dtype=torch.int64, device=key.device)
    d0, d1 = threefry2x32(key[..., 0], key[..., 1], zero, zero + 2)
    y0, y1 = threefry2x32(d0, d1, (data >> 32) & _MASK, data & _MASK)
    return torch.stack([y0, y1], dim=-1)


def _words(key: torch.Tensor, n: int) -> torch.Tensor:
    """``n`` uint32 words (as int64) per key: ``[..., 2] -> [..., n]``.

    Word ``i`` is output lane ``i % 2`` of the block at counter ``(i // 2, 1)``.
    """
    if isinstance(n, torch.SymInt):
        # A symbolic count: one block per word and keep its lane, rather than slicing an
        # even number of words down to n (a bound torch.export cannot prove). Same bits.
        i = torch.arange(n, dtype=torch.int64, device=key.device)
        y0, y1 = threefry2x32(key[..., 0:1], key[..., 1:2], i // 2, torch.ones_like(i))
        return torch.where(i % 2 == 0, y0, y1)
    blocks = (n + 1) // 2
    counter = torch.arange(blocks, dtype=torch.int64, device=key.device)
    y0, y1 = threefry2x32(key[..., 0:1], key[..., 1:2], counter, torch.ones_like(counter))
    return torch.stack([y0, y1], dim=-1).flatten(-2)[..., :n]


def bits(key: torch.Tensor, shape: Shape = ()) -> torch.Tensor:
    """Uniform random 32-bit words: int64 ``[..., *shape]`` with values in [0, 2**32)."""
    _check_key("bits", key)
    shape = _shape("bits", shape)
    return _words(key, math.prod(shape)).reshape((*key.shape[:-1], *shape))


def _open_unit(key: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """float64 uniforms in the open interval (0, 1): the midpoints ``(w + 1/2) / 2**32`` of
    the 2**32 cells of one word, so symmetric about 1/2 and never 0 or 1.

    Built as ``(2w + 1) * 2**-33`` in integers: adding a tiny float constant instead would
    be dropped by the ONNX exporter's graph optimizer, which treats it as adding zero.
    """
    words = _words(key, math.prod(shape)).reshape((*key.shape[:-1], *shape))
    return ((words << 1) | 1).double() * 2.0**-33


_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _check_float(fn: str, dtype: torch.dtype) -> None:
    if dtype not in _FLOATS:
        raise ValueError(
            f"fxrl.random.{fn}: dtype {dtype} is not a float dtype; use one of "
            f"{[str(d) for d in _FLOATS]}."
        )


def uniform(
    key: torch.Tensor,
    shape: Shape = (),
    minval: float | torch.Tensor = 0.0,
    maxval: float | torch.Tensor = 1.0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Uniform floats in ``[minval, maxval)``: ``[..., *shape]``.

    (The final rounding to ``dtype`` can give ``maxval`` itself when the range is wide
    against the dtype's spacing near ``maxval``; for [0, 1) it never does.)

    float32 and narrower use the top 24 bits of one word (every float32 in [0, 1) with
    that spacing is equally likely); float64 uses 53 bits from two words. Scaling to
    ``[minval, maxval)`` runs in float64 and rounds once, so it is bit-stable everywhere.
    """
    _check_key("uniform", key)
    _check_float("uniform", dtype)
    shape = _shape("uniform", shape)
    n = math.prod(shape)
    batch = key.shape[:-1]
    if dtype == torch.float64:
        w = _words(key, 2 * n).reshape((*batch, n, 2))
        u = (((w[..., 0] >> 6) << 26) | (w[..., 1] >> 6)).double() * 2.0**-52
        u = u.reshape((*batch, *shape))
    else:
        u = (_words(key, n) >> 8).double().reshape((*batch, *shape)) * 2.0**-24
    lo = torch.as_tensor(minval, dtype=torch.float64, device=key.device)
    hi = torch.as_tensor(maxval, dtype=torch.float64, device=key.device)
    return (lo + (hi - lo) * u).to(dtype)


# Wichura's AS 241 (PPND16), the inverse normal CDF to about 1e-16 relative error:
# numerator and denominator coefficients (lowest degree first) for the central region
# |p - 0.5| <= 0.425 and for the two tail regions.
_AS241 = {
    "central": (
        (
            3.3871328727963666080e0,
            1.3314166789178437745e2,
            1.9715909503065514427e3,
            1.3731693765509461125e4,
            4.5921953931549871457e4,
            6.7265770927008700853e4,
            3.3430575583588128105e4,
            2.5090809287301226727e3,
        ),
        (
            1.0,
            4.2313330701600911252e1,
            6.8718700749205790830e2,
            5.3941960214247511077e3,
            2.1213794301586595867e4,
            3.9307895800092710610e4,
            2.8729085735721942674e4,
            5.2264952788528545610e3,
        ),
    ),
    "near": (
        (
            1.42343711074968357734e0,
            4.63033784615654529590e0,
            5.76949722146069140550e0,
            3.64784832476320460504e0,
            1.27045825245236838258e0,
            2.41780725177450611770e-1,
            2.27238449892691845833e-2,
            7.74545014278341407640e-4,
        ),
        (
            1.0,
            2.05319162663775882187e0,
            1.67638483018380384940e0,
            6.89767334985100004550e-1,
            1.48103976427480074590e-1,
            1.51986665636164571966e-2,
            5.47593808499534494600e-4,
            1.05075007164441684324e-9,
        ),
    ),
    "far": (
        (
            6.65790464350110377720e0,
            5.46378491116411436990e0,
            1.78482653991729133580e0,
            2.96560571828504891230e-1,
            2.65321895265761230930e-2,
            1.24266094738807843860e-3,
            2.71155556874348757815e-5,
            2.01033439929228813265e-7,
        ),
        (
            1.0,
            5.99832206555887937690e-1,
            1.36929880922735805310e-1,
            1.48753612908506148525e-2,
            7.86869131145613259100e-4,
            1.84631831751005468180e-5,
            1.42151175831644588870e-7,
            2.04426310338993978564e-15,
        ),
    ),
}


def _f64(value: float) -> torch.Tensor:
    # A float64 tensor, not a Python float: torch.export turns Python scalars in float64
    # arithmetic into float32 scalar tensors, which would round 0.180625, 1.6 and every
    # AS 241 coefficient to float32 in exported and ONNX programs.
    return torch.tensor(value, dtype=torch.float64, device="cpu")  # moved to the input's at use


_AS241_T = {k: tuple(tuple(_f64(c) for c in cs) for cs in v) for k, v in _AS241.items()}
_C_SPLIT, _C_CENTRAL, _C_NEAR, _C_FAR = _f64(0.425), _f64(0.180625), _f64(1.6), _f64(5.0)


def _rational(region: str, x: torch.Tensor) -> torch.Tensor:
    num, den = _AS241_T[region]
    p = num[-1].to(x.device).expand_as(x)
    q = den[-1].to(x.device).expand_as(x)
    for a, b in zip(num[-2::-1], den[-2::-1], strict=True):
        p, q = p * x + a.to(x.device), q * x + b.to(x.device)
    return p / q


def ndtri(p: torch.Tensor) -> torch.Tensor:
    """The inverse standard normal CDF of float64 ``p`` in (0, 1) (Wichura 1988, AS 241).

    Only +, *, /, sqrt and log, so eager, compiled and ONNX Runtime results agree.
    """
    dev = p.device
    q = p - 0.5
    central = q * _rational("central", _C_CENTRAL.to(dev) - q * q)
    r = torch.sqrt(-torch.log(torch.minimum(p, 1.0 - p)))
    tail = torch.where(
        r <= _C_FAR.to(dev),
        _rational("near", r - _C_NEAR.to(dev)),
        _rational("far", r - _C_FAR.to(dev)),
    )
    return torch.where(q.abs() <= _C_SPLIT.to(dev), central, torch.where(q < 0, -tail, tail))


def normal(
    key: torch.Tensor, shape: Shape = (), dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Standard normal floats ``[..., *shape]``: one 32-bit word per value through the
    inverse CDF in float64, rounded once to ``dtype``. |z| <= 6.23.

    (Not Box-Muller: ONNX Runtime's float64 cos is only float32-accurate, which would
    break bit-identity between eager and deployed code.)
    """
    _check_key("normal", key)
    _check_float("normal", dtype)
    shape = _shape("normal", shape)
    return ndtri(_open_unit(key, shape)).to(dtype)


def randint(
    key: torch.Tensor,
    shape: Shape,
    minval: int | torch.Tensor,
    maxval: int | torch.Tensor,
    dtype: torch.dtype = torch.int64,
) -> torch.Tensor:
    """Uniform integers in ``[minval, maxval)``; bounds may be tensors broadcast to shape.

    Draws 64 bits per value and reduces them modulo the range, so the bias is below
    2**-32 for ranges up to 2**31.
    """
    _check_key("randint", key)
    shape = _shape("randint", shape)
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        raise ValueError(f"fxrl.random.randint: dtype {dtype} is not an integer dtype.")
    lo = torch.as_tensor(minval, device=key.device)
    hi = torch.as_tensor(maxval, device=key.device)
    for name, b in (("minval", lo), ("maxval", hi)):
        if b.dtype.is_floating_point or b.dtype == torch.bool:
            raise ValueError(f"fxrl.random.randint: {name} has dtype {b.dtype}; expected ints.")
    lo, hi = lo.long(), hi.long()
    span = torch.clamp(hi - lo, min=1)
    n = math.prod(shape)
    w = _words(key, 2 * n).reshape((*key.shape[:-1], n, 2))
    w_hi, w_lo = (
        w[..., 0].reshape((*key.shape[:-1], *shape)),
        w[..., 1].reshape((*key.shape[:-1], *shape)),
    )
    # (hi * 2**32 + lo) mod span without overflowing int64 (span < 2**31).
    r = ((w_hi % span) * ((2**32) % span) + w_lo % span) % span
    return (lo + r).to(dtype)


def bernoulli(
    key: torch.Tensor, p: float | torch.Tensor = 0.5, shape: Shape | None = None
) -> torch.Tensor:
    """Bool tensor, True with probability ``p``; ``shape`` defaults to ``p``'s shape."""
    _check_key("bernoulli", key)
    p = torch.as_tensor(p, device=key.device)
    shape = tuple(p.shape) if shape is None else _shape("bernoulli", shape)
    return uniform(key, shape, dtype=torch.float64) < p.double()


def _gumbel(key: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    return -torch.log(-torch.log(_open_unit(key, shape)))


def categorical(
    key: torch.Tensor, logits: torch.Tensor, shape: Shape | None = None, axis: int = -1
) -> torch.Tensor:
    """Indices drawn with probabilities ``softmax(logits, axis)`` (Gumbel-max, float64).

    Args:
      key: [..., 2].
      logits: [..., n] (unnormalised log-probabilities along ``axis``).
      shape: output sample shape (after the key's batch dims); defaults to the logits'
        shape without ``axis``; must broadcast with it.
    Returns:
      int64 [*key_batch, *shape].
    """
    _check_key("categorical", key)
    if not isinstance(logits, torch.Tensor) or not logits.dtype.is_floating_point:
        raise ValueError("fxrl.random.categorical: logits must be a float tensor [..., n].")
    logits = logits.movedim(axis, -1)
    batch = tuple(logits.shape[:-1])
    shape = batch if shape is None else _shape("categorical", shape)
    g = _gumbel(key, (*shape, logits.shape[-1]))
    return torch.argmax(logits.double() + g, dim=-1)


def permutation(key: torch.Tensor, n: int) -> torch.Tensor:
    """A uniformly random permutation of ``range(n)``: int64 ``[..., n]``."""
    _check_key("permutation", key)
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"fxrl.random.permutation: n must be a non-negative int, got {n!r}.")
    w = _words(key, 2 * n).reshape((*key.shape[:-1], n, 2))
    # 63-bit sort keys: a tie between any two of n elements has probability ~ n**2 / 2**64.
    sort_key = (w[..., 0] << 31) | (w[..., 1] >> 1)
    # topk rather than argsort: ONNX has TopK but no stable sort.
    return torch.topk(sort_key, n, dim=-1, largest=False, sorted=True).indices


def choice(
    key: torch.Tensor,
    n: int,
    shape: Shape = (),
    replace: bool = True,
    p: torch.Tensor | None = None,
) -> torch.Tensor:
    """Draw indices from ``range(n)``, with or without replacement, uniformly or by ``p``.

    Without replacement and with ``p`` this is the Gumbel-top-k trick, which draws
    without replacement in proportion to ``p`` (as numpy's ``choice`` does).
    """
    _check_key("choice", key)
    shape = _shape("choice", shape)
    k = math.prod(shape)
    if p is not None:
        p = torch.as_tensor(p, device=key.device)
        if p.shape != (n,):
            raise ValueError(f"fxrl.random.choice: p has shape {list(p.shape)}; expected [{n}].")
        logits = torch.log(p.double())
    if replace:
        if p is None:
            return randint(key, shape, 0, n)
        return categorical(key, logits, shape)
    if k > n:
        raise ValueError(
            f"fxrl.random.choice: cannot take {k} samples from {n} without replacement."
        )
    if p is None:
        return permutation(key, n)[..., :k].reshape((*key.shape[:-1], *shape))
    g = _gumbel(key, (n,)) + logits
    return torch.topk(g, k, dim=-1).indices.reshape((*key.shape[:-1], *shape))
