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
    """True when ``x`` holds concrete values: not traced by torch.compile or torch.func."""
    return (
        not torch.compiler.is_compiling() and not torch._C._functorch.is_functorch_wrapped_tensor(x)
    )


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
    """Check ``batch`` against the buffer's example and return its leading size ``n``."""
    example_names = tree.path_names(buf.storage, ".")
    if tree.structure(batch) != tree.structure(buf.storage):
        got = tree.path_names(batch, ".") if tree.leaves(batch) else []
        missing = sorted(set(example_names) - set(got))
        extra = sorted(set(got) - set(example_names))
        raise ValueError(
            f"fxrl.buffers.{fn}: batch does not have the example's structure: missing "
            f"{missing}, unexpected {extra} (example leaves: {example_names}). Pass the "
            "same keys as the example given to init."
        )
    n = None
    leaves = tree.leaves(batch)
    for name, x, shape, store in zip(
        example_names, leaves, buf.shapes, tree.leaves(buf.storage), strict=True
    ):
        if not isinstance(x, Tensor):
            raise TypeError(
                f"fxrl.buffers.{fn}: batch leaf {name!r} is {type(x).__name__}; expected a "
                f"tensor [n, {', '.join(map(str, shape))}]."
            )
        want = f"[n, {', '.join(map(str, shape))}]".replace(", ]", "]")
        if tuple(x.shape[1:]) != shape or x.dtype != store.dtype:
            hint = " (one transition? add a leading dim: tree.map(lambda x: x[None], t))"
            raise ValueError(
                f"fxrl.buffers.{fn}: batch[{name!r}] has shape {list(x.shape)} "
                f"{_dtype(x.dtype)}; expected {want} {_dtype(store.dtype)} as in the "
                f"example{hint if tuple(x.shape) == shape else ''}."
            )
        if n is None:
            n = x.shape[0]
        elif x.shape[0] != n:
            raise ValueError(
                f"fxrl.buffers.{fn}: batch[{name!r}] has {x.shape[0]} rows but "
                f"batch[{example_names[0]!r}] has {n}; every leaf needs the same leading size."
            )
    if not n:
        raise ValueError(f"fxrl.buffers.{fn}: batch has no rows (n = {n}); expected n >= 1.")
    return n


def _dtype(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")
