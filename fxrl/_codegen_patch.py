"""A scoped speed fix for inductor's kernel code generation (torch 2.13), for fxrl's compiles.

``DtypePropagationOpsHandler`` (torch/_inductor/dtype_propagation.py) is a singleton
whose ``__init__`` builds its op rules (a ``setattr`` per op, then a ``dir`` check that
none is missing). ``__new__`` returns the one instance, but Python runs ``__init__``
again on every call, and ``CSEProxy._default`` (torch/_inductor/codegen/common.py) calls
``DtypePropagationOpsHandler()`` for every op of every kernel it writes: 16251 times in
the cold compile of PPO's 8-seed CartPole update, 1.1 CPU s of rebuilding the same rules
(about 66 us each on a loaded 2-core AMD EPYC). The rules depend only on inductor's own
tables, fixed once inductor is imported, so building them once gives the same handler.

Inside ``patched()`` the class's ``__init__`` builds the rules on the first call and does
nothing on later ones. Nested and concurrent uses are counted; the class gets its own
``__init__`` back when the last exits. Only on torch 2.13 (the version read for this);
on any other ``patched()`` does nothing. The generated code is unchanged, so nothing is
added to the FX graph cache key.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from fxrl._class_patch import CountedPatch

PATCHED_TORCH = "2.13."  # the torch release whose inductor this was written for


def applies() -> bool:
    """Whether this torch is the one the patch was written for."""
    return torch.__version__.startswith(PATCHED_TORCH)


def _init_once(self: Any) -> None:
    # the singleton's rules, built by its own __init__ the first time only
    if not self.__dict__.get("_fxrl_built", False):
        _patch.saved["__init__"](self)
        self._fxrl_built = True


def _handler() -> type:
    from torch._inductor.dtype_propagation import DtypePropagationOpsHandler

    return DtypePropagationOpsHandler


_patch = CountedPatch(_handler, {"__init__": _init_once})


def patched() -> contextlib.AbstractContextManager[None]:
    """Inside this block, inductor's dtype-propagation handler builds its rules once."""
    return _patch.applied(applies())
