"""Threefry-2x32-20 as one op inside ``fxrl.compile``'s programs.

Written as plain tensor ops, each draw's cipher is about 150 ops in the traced graph (20
rounds of add, shift, mask, or and xor), and every phase of a compile grows with the op
count: the cipher's ops cost about a quarter of the cold compile of PPO's update
(``bench/threefry_compile_bound.py``) and almost nothing of its run. While
``fxrl.compile`` or ``torch.compile`` traces, ``fxrl.random.threefry2x32_int32`` calls
``fxrl::threefry2x32`` instead: one node, which inductor lowers (``lower``, registered on
first use; under ``torch.compile`` dynamo runs the registration rather than tracing it)
to the same rounds as one pointwise loop, and which other ``torch.compile`` backends run
by its eager kernel. Its output packs the two int32 words into one int64 (low word first)
so that the rounds run once per element. Eager calls, ``torch.export`` (so ONNX) and
``torch.func`` transforms outside a compile see the plain ops as before; the op's eager
kernel is those ops, so both forms give the same bits (tested).
"""

from __future__ import annotations

from typing import Any

import torch

_LIB = torch.library.Library("fxrl", "DEF")
_LIB.define("threefry2x32(Tensor k0, Tensor k1, Tensor x0, Tensor x1) -> Tensor")
_LOWERED = False
# Whether a compile's trace uses the op (False: the plain ops, as before it; for A/B
# measurements, bench/threefry_op_ab.py).
ENABLED = True


ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
PARITY = 0x1BD11BDA


def _rounds(ops: Any, const: Any, k0: Any, k1: Any, x0: Any, x1: Any) -> tuple[Any, Any]:
    """The cipher's 20 rounds over ``ops``: the ``torch`` namespace (plain tensor ops, with
    Python ints as constants) or inductor's ``ops`` (``const`` makes its int32 constants)."""

    def rotl(x: Any, r: int) -> Any:
        # int32 has only arithmetic right shifts: mask the sign copies away (a logical one)
        shifted = ops.bitwise_right_shift(x, const(32 - r))
        return ops.bitwise_or(
            ops.bitwise_left_shift(x, const(r)), ops.bitwise_and(shifted, const((1 << r) - 1))
        )

    ks = (k0, k1, ops.bitwise_xor(ops.bitwise_xor(k0, k1), const(PARITY)))
    x0 = ops.add(x0, k0)
    x1 = ops.add(x1, k1)
    for group in range(5):
        for r in range(4):
            x0 = ops.add(x0, x1)
            x1 = ops.bitwise_xor(rotl(x1, ROTATIONS[(4 * group + r) % 8]), x0)
        x0 = ops.add(x0, ks[(group + 1) % 3])
        x1 = ops.add(x1, ops.add(ks[(group + 2) % 3], const(group + 1)))
    return x0, x1


def plain(
    k0: torch.Tensor, k1: torch.Tensor, x0: torch.Tensor, x1: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The cipher as plain tensor ops (``fxrl.random`` outside a compile)."""
    return _rounds(torch, int, k0, k1, x0, x1)


def pack(y0: torch.Tensor, y1: torch.Tensor) -> torch.Tensor:
    """Two int32 words as one int64: ``y0`` in the low 32 bits."""
    return (y0.to(torch.int64) & 0xFFFFFFFF) | (y1.to(torch.int64) << 32)


def unpack(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``pack``'s inverse: the two int32 words."""
    return packed.to(torch.int32), (packed >> 32).to(torch.int32)


def _eager(k0: torch.Tensor, k1: torch.Tensor, x0: torch.Tensor, x1: torch.Tensor) -> Any:
    return pack(*plain(k0, k1, x0, x1))


_LIB.impl("threefry2x32", _eager, "CompositeExplicitAutograd")


@torch.library.register_fake("fxrl::threefry2x32")
def _fake(k0: torch.Tensor, k1: torch.Tensor, x0: torch.Tensor, x1: torch.Tensor) -> Any:
    shape = torch.broadcast_shapes(k0.shape, k1.shape, x0.shape, x1.shape)
    return k0.new_empty(shape, dtype=torch.int64)


def _vmap(info: Any, in_dims: tuple, *words: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Batched words: each moved to a leading batch dim (size 1 where unbatched) and its
    logical dims right-aligned to the broadcast shape, then one call."""
    logical = [
        w.shape if d is None else w.movedim(d, 0).shape[1:]
        for w, d in zip(words, in_dims, strict=True)
    ]
    shape = torch.broadcast_shapes(*logical)
    out = []
    for w, d, s in zip(words, in_dims, logical, strict=True):
        w = w.unsqueeze(0) if d is None else w.movedim(d, 0)
        out.append(w.reshape(w.shape[0], *([1] * (len(shape) - len(s))), *s))
    return torch.ops.fxrl.threefry2x32(*out), 0


torch.library.register_vmap("fxrl::threefry2x32", _vmap)


def threefry2x32(
    k0: torch.Tensor, k1: torch.Tensor, x0: torch.Tensor, x1: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The cipher as the one op (int32 words in and out), for a compile's trace."""
    _register_lowering()
    return unpack(torch.ops.fxrl.threefry2x32(k0, k1, x0, x1))


def _register_lowering() -> None:
    """Teach inductor the op: one pointwise loop over the broadcast shape."""
    global _LOWERED
    if _LOWERED:
        return
    from torch._inductor import ir
    from torch._inductor.lowering import broadcast_tensors, register_lowering
    from torch._inductor.virtualized import ops

    def const(v: int) -> Any:
        v &= 0xFFFFFFFF
        return ops.constant(v - (1 << 32) if v >= 1 << 31 else v, torch.int32)

    @register_lowering(torch.ops.fxrl.threefry2x32.default)
    def lower(*words: Any) -> Any:
        words = broadcast_tensors(*words)
        loaders = [w.make_loader() for w in words]

        def inner(index: Any) -> Any:
            y0, y1 = _rounds(ops, const, *(load(index) for load in loaders))
            low = ops.bitwise_and(
                ops.to_dtype(y0, torch.int64), ops.constant(0xFFFFFFFF, torch.int64)
            )
            high = ops.bitwise_left_shift(
                ops.to_dtype(y1, torch.int64), ops.constant(32, torch.int64)
            )
            return ops.bitwise_or(low, high)

        return ir.Pointwise.create(
            device=words[0].get_device(), dtype=torch.int64, inner_fn=inner,
            ranges=list(words[0].get_size()),
        )  # fmt: skip

    _LOWERED = True


# Under torch.compile, dynamo calls this once instead of tracing it (it refuses to trace
# into inductor's lowering module): what torch.compiler.assume_constant_result sets,
# written here because calling that imports dynamo, which `import fxrl` must not
# (tests/test_import.py; tests/test_threefry_op.py fails if dynamo stops honouring it).
_register_lowering._dynamo_marked_constant = True  # type: ignore[attr-defined]
