"""A module that is also its main function: ``fxrl.compile`` and ``fxrl.scan``.

``fxrl.compile(fn)`` and ``fxrl.scan(body, carry, xs)`` are the public calls (as
``jax.jit`` and ``jax.lax.scan``), and ``fxrl/compile.py`` and ``fxrl/scan.py`` are the
modules that hold them with their helpers (``fxrl.compile.watch``). A package attribute
cannot be both, so the module is made callable: ``fxrl.compile(fn)`` calls the function
``fxrl.compile.compile(fn)``, while ``import fxrl.compile`` and ``fxrl.compile.watch``
reach the module, whatever was imported first.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

__all__ = ["make_callable"]


def make_callable(module_name: str, fn: Callable[..., Any]) -> None:
    """Calling the (imported) module ``module_name`` calls ``fn`` with the same arguments;
    ``inspect.signature`` of the module is ``fn``'s."""

    class CallableModule(types.ModuleType):
        __call__ = staticmethod(fn)

    CallableModule.__name__ = CallableModule.__qualname__ = f"callable module {module_name}"
    module = sys.modules[module_name]
    module.__class__ = CallableModule
    module.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
