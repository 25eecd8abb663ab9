"""Assertions over pytrees and a vmap check, with failure messages that point at the leaf."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from fxrl import tree

__all__ = ["assert_trees_close", "check_vmap"]

# Per-dtype defaults, as torch.testing.assert_close uses them.
_TOLERANCES = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}


def _name(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p!r}]" for p in path) or "<root>"


def _compare(
    path: tuple[Any, ...], a: Any, b: Any, rtol: float | None, atol: float | None
) -> str | None:
    """None when close, else a description of the failure at ``path``."""
    where = _name(path)
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor) or a != b:
            return f"{where}: {a!r} != {b!r}"
        return None
    if a.shape != b.shape:
        return f"{where}: shapes differ: {list(a.shape)} vs {list(b.shape)}"
    if a.dtype != b.dtype:
        return f"{where}: dtypes differ: {a.dtype} vs {b.dtype} (shape {list(a.shape)})"
    a_, b_ = a.detach().cpu(), b.detach().cpu()
    if not a.dtype.is_floating_point and not a.dtype.is_complex:
        bad = a_ != b_
        if not bool(bad.any()):
            return None
        i = int(bad.flatten().nonzero()[0])
        idx = tuple(int(v) for v in torch.unravel_index(torch.tensor(i), a.shape))
        return (
            f"{where}: {int(bad.sum())} of {a.numel()} elements differ (exact dtype "
            f"{a.dtype}, shape {list(a.shape)}); first at index {list(idx)}: "
            f"{a_.flatten()[i].item()} vs {b_.flatten()[i].item()}"
        )
    r_default, a_default = _TOLERANCES.get(a.dtype, (1.3e-6, 1e-5))
    rtol = r_default if rtol is None else rtol
    atol = a_default if atol is None else atol
    a64, b64 = a_.double(), b_.double()
    both_nan = torch.isnan(a64) & torch.isnan(b64)
    same_inf = torch.isinf(a64) & (a64 == b64)
    err = torch.where(both_nan | same_inf, 0.0, (a64 - b64).abs())
    err = torch.nan_to_num(err, nan=float("inf"))
    allowed = atol + rtol * b64.abs().nan_to_num(posinf=0.0, neginf=0.0)
    bad = err > allowed
    if not bool(bad.any()):
        return None
    excess = torch.where(bad, err - allowed, -1.0)
    i = int(excess.flatten().argmax())
    idx = tuple(int(v) for v in torch.unravel_index(torch.tensor(i), a.shape))
    return (
        f"{where}: {int(bad.sum())} of {a.numel()} elements not close (shape "
        f"{list(a.shape)}, {a.dtype}, rtol={rtol:g}, atol={atol:g}); worst at index "
        f"{list(idx)}: {a64.flatten()[i].item()!r} vs {b64.flatten()[i].item()!r} "
        f"(|diff| {err.flatten()[i].item():.3g})"
    )


def assert_trees_close(
    actual: Any, expected: Any, rtol: float | None = None, atol: float | None = None
) -> None:
    """Assert two pytrees have the same structure, shapes, dtypes and close values.

    Integer and bool leaves must be equal; float leaves satisfy
    ``|actual - expected| <= atol + rtol * |expected|`` (defaults per dtype, as
    ``torch.testing.assert_close``). NaNs in the same place are equal. The failure
    message names the path of the first failing leaf, its shape and the worst element.
    """
    if tree.structure(actual) != tree.structure(expected):
        raise AssertionError(f"trees differ in structure {tree._first_mismatch(actual, expected)}")
    pa, pb = tree.flatten_with_paths(actual), tree.flatten_with_paths(expected)
    for (path, a), (_, b) in zip(pa, pb, strict=True):
        failure = _compare(path, a, b, rtol, atol)
        if failure is not None:
            raise AssertionError(failure)


def check_vmap(
    fn: Callable[..., Any],
    *example_args: Any,
    in_dims: int | Sequence[int | None] | None = 0,
    rtol: float | None = None,
    atol: float | None = None,
) -> Any:
    """Check that ``torch.func.vmap(fn)`` equals stacking ``fn`` over the batch.

    Args:
      fn: the function under test; it must not use the global RNG (vmap runs with
        ``randomness="error"``, so it would fail loudly).
      example_args: batched arguments (leading dim B on every leaf of the args whose
        ``in_dims`` entry is 0; arguments with ``None`` are shared).
      in_dims: 0 or None per argument, or one value for all.
    Returns:
      The vmapped output, for further checks.
    """
    if not example_args:
        raise ValueError("check_vmap: give at least one batched example argument.")
    dims = [in_dims] * len(example_args) if not isinstance(in_dims, Sequence) else list(in_dims)
    if len(dims) != len(example_args) or any(d not in (0, None) for d in dims):
        raise ValueError(f"check_vmap: in_dims {in_dims!r} must be 0/None per argument.")
    batched = [a for a, d in zip(example_args, dims, strict=True) if d == 0]
    sizes = {x.shape[0] for a in batched for x in tree.leaves(a) if isinstance(x, torch.Tensor)}
    if len(sizes) != 1:
        raise ValueError(f"check_vmap: batched arguments must share one leading size, got {sizes}.")
    (size,) = sizes
    out = torch.func.vmap(fn, in_dims=tuple(dims))(*example_args)
    loop = [
        fn(*(tree.index(a, i) if d == 0 else a for a, d in zip(example_args, dims, strict=True)))
        for i in range(size)
    ]
    assert_trees_close(out, tree.stack(loop), rtol=rtol, atol=atol)
    return out
