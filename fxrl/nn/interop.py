"""Bridges to torch.nn: turn a module into ``(params, apply)`` and load params back.

``from_module`` is TorchRL's ``TensorDict.from_module`` in fxrl's shape: params are a
nested dict (``{"0": {"weight": ..., "bias": ...}}`` for a ``Sequential``; paths join with
"_" into export names) and ``apply`` runs the module through
``torch.func.functional_call``, so it vmaps over stacked params like any fxrl model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from fxrl import tree
from fxrl.nn.core import Params

__all__ = ["from_module", "to_module"]


def _nest(flat: dict[str, torch.Tensor]) -> Params:
    out: dict[str, Any] = {}
    for name, value in flat.items():
        node = out
        *parents, leaf = name.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def _flat(params: Params) -> dict[str, torch.Tensor]:
    return {".".join(str(p) for p in path): x for path, x in tree.flatten_with_paths(params)}


def from_module(
    module: torch.nn.Module, *, buffers: bool = True
) -> tuple[Params, Callable[..., Any]]:
    """``(params, apply)`` for any torch.nn.Module.

    Args:
      module: the module; its structure (and train/eval mode) is captured by ``apply``.
      buffers: include buffers (BatchNorm statistics...) in params, as TorchRL does.
        With ``False`` the module's own buffers are used; do that to take
        ``torch.func.grad`` over all params when a buffer is an integer tensor.
    Returns:
      params: nested dict of detached copies of the parameters (and buffers), following
        the module's attribute names; the module and params share no memory.
      apply: ``apply(params, *args, **kwargs)`` = ``module(*args, **kwargs)`` with params
        swapped in. Buffers are cloned before the call, so a module that updates them in
        place (BatchNorm in train mode) never writes into ``params``.
    """
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_module: expected a torch.nn.Module, got {type(module).__name__}.")
    flat = {n: p.detach().clone() for n, p in module.named_parameters()}
    buffer_names = set()
    if buffers:
        for n, b in module.named_buffers():
            flat[n] = b.detach().clone()
            buffer_names.add(n)

    def apply(params: Params, *args: Any, **kwargs: Any) -> Any:
        values = _flat(params)
        missing = sorted(set(flat) - set(values))
        if missing:
            raise ValueError(
                f"from_module apply: params lack {missing}; expected the params "
                f"returned by from_module for {type(module).__name__}."
            )
        values = {n: v.clone() if n in buffer_names else v for n, v in values.items()}
        return torch.func.functional_call(module, values, args, kwargs)

    return _nest(flat), apply


def to_module(params: Params, module: torch.nn.Module) -> torch.nn.Module:
    """Copy ``params`` (as made by ``from_module``) into ``module``'s parameters and buffers.

    This is the one stateful function here: it writes into ``module`` (under no_grad)
    and returns it. Names and shapes must match exactly; the error lists the differences.
    """
    values = _flat(params)
    own = dict(module.named_parameters())
    own.update(dict(module.named_buffers()))
    missing, unexpected = sorted(set(own) - set(values)), sorted(set(values) - set(own))
    if missing or unexpected:
        raise ValueError(
            f"to_module: params do not fit {type(module).__name__}: missing "
            f"{missing}, unexpected {unexpected}."
        )
    bad = [
        f"{n}: {list(v.shape)} vs module {list(own[n].shape)}"
        for n, v in values.items()
        if v.shape != own[n].shape
    ]
    if bad:
        raise ValueError(f"to_module: shapes differ: {bad}.")
    with torch.no_grad():
        for n, v in values.items():
            own[n].copy_(v)
    return module
