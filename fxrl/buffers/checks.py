"""Input checks shared by the buffer functions: messages name function, argument, got,
expected and a fix. Shape and dtype checks are static (valid under vmap and compile);
checks that read values run only in eager code (see ``eager``)."""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import Tensor

from fxrl import tree


def eager(x: Tensor) -> bool:
    """True when ``x`` holds concrete values: not traced by torch.compile, fxrl.compile or
    torch.func, and not a meta tensor (shapes only)."""
    from fxrl.compile import is_traced

    return not (torch.compiler.is_compiling() or is_traced(x) or x.device.type == "meta")


def int_arg(fn: str, name: str, value: Any, minimum: int) -> int:
    try:
        out = operator.index(value)
    except TypeError:
        raise TypeError(
            f"fxrl.buffers.{fn}: {name} must be an int, got {type(value).__name__} {value!r}."
        ) from None
    if out < minimum:
        raise ValueError(f"fxrl.buffers.{fn}: {name} must be >= {minimum}, got {out}.")
    return out


def check_key(fn: str, key: Any) -> None:
    if not isinstance(key, Tensor) or key.dtype != torch.int64 or tuple(key.shape) != (2,):
        got = f"{list(key.shape)} {key.dtype}" if isinstance(key, Tensor) else repr(key)
        raise ValueError(
            f"fxrl.buffers.{fn}: key is {got}; expected an int64 key of shape [2] from "
            "fxrl.random.key(seed) or fxrl.random.split (vmap over a batch of keys)."
        )


def batch_size_of(fn: str, buf: Any, batch: Any) -> int:
    """Check ``batch`` against the buffer's example and return its leading size ``n``.

    Cheap when the batch is right (one flatten, shape and dtype compares); leaf names are
    only worked out to explain an error.
    """
    spec = tree.structure(buf.storage)
    if tree.structure(batch) != spec:
        names = tree.path_names(buf.storage, ".")
        got = tree.path_names(batch, ".") if tree.leaves(batch) else []
        missing = sorted(set(names) - set(got))
        extra = sorted(set(got) - set(names))
        raise ValueError(
            f"fxrl.buffers.{fn}: batch does not have the example's structure: missing "
            f"{missing}, unexpected {extra} (example leaves: {names}). Pass the same keys "
            "as the example given to init."
        )
    leaves = tree.leaves(batch)
    stores = tree.leaves(buf.storage)
    n = leaves[0].shape[0] if leaves and isinstance(leaves[0], Tensor) and leaves[0].ndim else None
    for i, (x, shape, store) in enumerate(zip(leaves, buf.shapes, stores, strict=True)):
        ok = isinstance(x, Tensor) and x.ndim == len(shape) + 1 and x.shape[1:] == shape
        if not (ok and x.dtype == store.dtype):
            _bad_leaf(fn, buf, i, x, shape, store.dtype)
        if x.shape[0] != n:
            names = tree.path_names(buf.storage, ".")
            raise ValueError(
                f"fxrl.buffers.{fn}: batch[{names[i]!r}] has {x.shape[0]} rows but "
                f"batch[{names[0]!r}] has {n}; every leaf needs the same leading size."
            )
    if not n:
        raise ValueError(f"fxrl.buffers.{fn}: batch has no rows (n = {n}); expected n >= 1.")
    return n


def _bad_leaf(fn: str, buf: Any, i: int, x: Any, shape: tuple, dtype: torch.dtype) -> None:
    name = tree.path_names(buf.storage, ".")[i]
    want = f"[n, {', '.join(map(str, shape))}]".replace(", ]", "]")
    if not isinstance(x, Tensor):
        raise TypeError(
            f"fxrl.buffers.{fn}: batch leaf {name!r} is {type(x).__name__}; expected a "
            f"tensor {want} {_dtype(dtype)}."
        )
    hint = " (one transition? add a leading dim: tree.map(lambda x: x[None], t))"
    raise ValueError(
        f"fxrl.buffers.{fn}: batch[{name!r}] has shape {list(x.shape)} {_dtype(x.dtype)}; "
        f"expected {want} {_dtype(dtype)} as in the example"
        f"{hint if tuple(x.shape) == shape else ''}."
    )


def _dtype(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")
