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

A second change does change the code: a vectorized float32 ``tanh`` in a kernel is
written with ``exp`` instead of Sleef's ``tanh``, whose accurate evaluation costs about
four times an ``exp``, and the tanh of a tanh network's activations was a quarter of a
steady PPO update's CPU. For ``|x| >= 0.55``, ``tanh(x) = (1 - e) / (1 + e)`` with
``e = exp(-2x)`` (its argument capped at 88, so that a very negative ``x`` gives -1, not
``inf / inf``); below, where ``1 - e`` would cancel, ``x (1 + x^2 P(x^2))`` with a degree-4
``P`` fitted here to ``tanh`` (least squares weighted for relative error, on
[0, 0.55^2]). Over 1M normal floats, compiled, one thread, on a 2-core AMD EPYC
(informal): 0.84 ms against Sleef's 1.89 (``exp`` alone: 0.50). The result is within
about an ulp of ``torch.tanh``; NaN stays NaN, +-inf gives +-1 and -0 stays -0
(tests/test_fast_tanh.py). Other dtypes keep Sleef's ``tanh``. Inductor's own option
(``cpp.use_decompose_tanh``, ``2 / (1 + exp(-2x)) - 1``, 0.63 ms) loses the relative
accuracy near 0, which is why inductor turned it off. Programs built this way carry the
tag ``fxrl-tanh-exp`` in their cache key (``torch.compiler.config.cache_key_tag``), so a
program compiled without the change, by ``torch.compile`` or an older fxrl, is never
loaded in its place, nor the other way round. ``FXRL_FAST_TANH=0`` in the environment
(or ``FAST_TANH = False`` here) keeps Sleef's ``tanh``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import torch

from fxrl._class_patch import CountedPatch

PATCHED_TORCH = "2.13."  # the torch release whose inductor this was written for
FAST_TANH = os.environ.get("FXRL_FAST_TANH", "1") != "0"
TANH_TAG = "fxrl-tanh-exp"
# P(z) of tanh(x) = x (1 + z P(z)), z = x^2, |x| < SMALL: fitted (numpy lstsq, relative-error
# weights, Chebyshev-spaced z) and checked in float32 at 0.54 ulps at most
SMALL = 0.55
TANH_P = (-0.33333316, 0.1333258, -0.053851858, 0.021070225, -0.0062725637)


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


def vec_tanh(x: Any) -> str:
    """C++ for the vectorized ``tanh`` of ``x`` (a kernel's value): ``exp`` for ``|x| >=
    SMALL``, the polynomial below it (float32; other dtypes: Sleef's ``tanh``)."""
    if getattr(x, "dtype", None) != torch.float32:
        return f"{x}.tanh()"
    v = f"decltype({x})"
    p = f"{v}({TANH_P[-1]!r}f)"
    for c in TANH_P[-2::-1]:
        p = f"at::vec::fmadd({p}, z, {v}({c!r}f))"
    # e: exp(-2x) with its argument capped at 88 (exp's last finite float): for x < -44
    # the quotient is then -1 instead of inf / inf; _mm512_min_ps-style clamp_max keeps NaN
    return (
        f"[&]() {{ auto e = at::vec::clamp_max({v}(-2.0f) * {x}, {v}(88.0f)).exp();"
        f" auto big = ({v}(1.0f) - e) / ({v}(1.0f) + e);"
        f" auto z = {x} * {x}; auto small = {x} * at::vec::fmadd(z, {p}, {v}(1.0f));"
        f" return {v}::blendv(big, small, {x}.abs() < {v}({SMALL!r}f)); }}()"
    )


def _vec_overrides() -> type:
    from torch._inductor.codegen.cpp import CppVecOverrides

    return CppVecOverrides


_tanh = CountedPatch(_vec_overrides, {"tanh": staticmethod(vec_tanh)})


@contextlib.contextmanager
def _tagged() -> Iterator[None]:
    tag = torch.compiler.config.cache_key_tag
    with torch.compiler.config.patch(cache_key_tag=f"{tag}|{TANH_TAG}" if tag else TANH_TAG):
        yield


@contextlib.contextmanager
def patched() -> Iterator[None]:
    """Inside this block, inductor's dtype-propagation handler builds its rules once, and
    a vectorized float32 ``tanh`` is written with ``exp`` (unless ``FAST_TANH`` is off)."""
    fast = FAST_TANH and applies()
    with (
        _patch.applied(applies()),
        _tanh.applied(fast),
        _tagged() if fast else contextlib.nullcontext(),
    ):
        yield
