"""Scoped fixes for inductor's C++ wrapper (torch 2.13), for programs such as fxrl's.

Inductor lowers a rolled loop (``scan``) to a ``while_loop``. Its C++ wrapper
(``CppWrapperCpu`` in torch/_inductor/codegen/cpp_wrapper_cpu.py) writes the loop
inline; bugs there stop a PPO update, a loop over a vmapped input or a scatter of a
Python scalar from working:

1. "A buffer declared twice" (g++: ``conflicting declaration 'auto buf52'``).
   ``ir.WhileLoop.create`` (torch/_inductor/ir.py) records each carried buffer the loop
   updates in place as a ``MutationOutput`` that, unlike every other one, keeps the
   mutated buffer's real layout instead of a ``NoneLayout``. The scheduler's
   ``decide_inplace_update`` refuses in-place reuse of a ``NoneLayout`` input only, so
   a kernel after the loop may take the loop's mutation output (``buf52``, the loop's
   version of ``buf5``) over as its own output's storage, and the wrapper allocates
   ``buf52`` for it. The Python wrapper just rebinds a variable; the C++ wrapper's
   ``codegen_while_loop`` has already declared ``RAIIAtenTensorHandle buf52`` for the
   loop's carried output, so the second ``auto buf52 = ...`` does not compile.
   Fix: ``can_reuse`` answers False for a ``MutationOutput``. It names the mutated
   buffer and has no storage of its own, so no kernel takes it over and nothing is
   allocated under its name; that kernel allocates its output instead (no change in
   the values).

2. A use after free (a segmentation fault on the first call). ``codegen_while_loop``
   writes each of the loop's read-only extra inputs as one C++ expression and pastes
   it into every iteration's condition and body. For an input seen through a view
   with its own layout (an input of the program under vmap, say) that expression is
   ``RAIIAtenTensorHandle(tmp_arg0_1_0)``: a temporary that frees the handle
   ``tmp_arg0_1_0`` when the statement ends, so the second use reads a freed handle.
   Fix: before the loop each extra input is bound once to a named handle (an alias of
   the same tensor, no copy), and the loop reads that name.

3. ``scatter(dim, index, value)`` with a Python scalar ``value`` (MinAtar Seaquest's
   ``grid.scatter(-1, cell, True)``) is written ``aoti_torch_cpu_scatter_value_out(...,
   True)``: ``_generate_scatter_fallback`` pastes the value's Python ``str``, and g++
   knows no ``True`` (nor ``inf``). Fix: the value goes through the wrapper's own
   ``val_to_arg_str`` (``1``; ``std::numeric_limits<double>::infinity()``).

4. A loop body (or a ``cond`` branch) that returns one buffer as two of its outputs (a
   carry ``(n, n)``) segfaults: ``codegen_subgraph_suffix`` writes ``out = std::move(n)``
   for each, so the second output gets the handle the first one emptied. Fix: an output
   already handed on is handed on again as a new handle to the same tensor.

5. (speed, not a bug) Each iteration of the loop allocates every buffer of its body
   afresh. ``fxrl._cpp_loop_plan`` writes the loop with its buffers allocated once; it
   declines what it cannot prove private to one iteration (keeping inductor's code
   there). ``FXRL_CPP_LOOP_PLAN=0`` turns it off.

The fixes are applied only while ``fxrl.compile`` compiles with ``cpp_wrapper=True``,
only on the C++ wrapper class, and only on torch 2.13 (the version read for them). On
any other version ``patched()`` does nothing, so ``cpp_wrapper`` behaves as that
torch's own.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

import torch

from fxrl import _cpp_loop_plan
from fxrl._class_patch import CountedPatch

# fxrl._cpp_loop_plan on or off: FXRL_CPP_LOOP_PLAN=0 turns it off (inductor's own loop
# code, for an A/B measurement or as a fallback); read when a compile enters patched()
PLAN_ENV = "FXRL_CPP_LOOP_PLAN"
PATCHED_TORCH = "2.13."  # the torch release whose inductor this patch was written for
VERSION = 3  # in the FX graph cache key of the programs built with these fixes

_plan = threading.local()  # .on: whether the compile running in this thread plans loops


def plan_loops() -> bool:
    """Whether loops are planned (``fxrl._cpp_loop_plan``): on unless the environment
    variable ``FXRL_CPP_LOOP_PLAN`` is ``0``."""
    value = os.environ.get(PLAN_ENV, "1").strip()
    if value not in ("0", "1"):
        raise ValueError(f"fxrl: {PLAN_ENV}={value!r}; expected 0 (off) or 1 (on)")
    return value == "1"


def applies() -> bool:
    """Whether this torch is the one the patch was written for."""
    return torch.__version__.startswith(PATCHED_TORCH)


class _Named:
    """A loop input already bound to a C++ variable: its reference is that name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def codegen_reference(self, writer: Any = None) -> str:
        return self.name


def _can_reuse(self: Any, input_buffer: Any, output_buffer: Any = None) -> bool:
    from torch._inductor import ir
    from torch._inductor.scheduler import SchedulerBuffer

    node = input_buffer.node if isinstance(input_buffer, SchedulerBuffer) else input_buffer
    if isinstance(node, ir.MutationOutput):  # fix 1
        return False
    return _patch.saved["can_reuse"](self, input_buffer, output_buffer)


def _codegen_while_loop(self: Any, while_loop: Any, stack_output: bool = False) -> None:
    extra = while_loop.additional_inputs
    named = []
    for i, buf in enumerate(extra):  # fix 2: each extra input bound once, before the loop
        name = f"{while_loop.get_name()}_extra_input_{i}"
        self.writeline(f"AtenTensorHandle {name}_handle;")
        self.writeline(
            "AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_assign_tensors_out("
            f"{buf.codegen_reference()}, &{name}_handle));"
        )
        self.writeline(f"RAIIAtenTensorHandle {name}({name}_handle);")
        named.append(_Named(name))
    while_loop.additional_inputs = named
    try:
        if getattr(_plan, "on", False):
            _cpp_loop_plan.codegen_while_loop(self, while_loop, stack_output)
        else:
            _patch.saved["codegen_while_loop"](self, while_loop, stack_output)
    finally:
        while_loop.additional_inputs = extra


def _codegen_subgraph_suffix(
    self: Any, subgraph: Any, outer_inputs: list[str], outer_outputs: list[str]
) -> None:
    from torch._inductor import ir

    moved: dict[str, str] = {}  # inner reference -> the outer output it was moved into
    for inner, outer in zip(subgraph.graph.graph_outputs, outer_outputs, strict=True):
        src = inner.codegen_reference()
        if isinstance(inner, ir.ShapeAsConstantBuffer):
            self.writeline(f"{outer} = {src};")
        elif src in moved:  # fix 4: the same buffer again, as a second handle
            _cpp_loop_plan.write_new_handle(self, outer, moved[src])
        else:
            self.writeline(f"{outer}.reset();")
            self.writeline(f"{outer} = std::move({src});")
            moved[src] = outer


def _run_wrapper_ir_passes(self: Any, is_inference: bool) -> None:
    _patch.saved["run_wrapper_ir_passes"](self, is_inference)
    if getattr(_plan, "on", False):
        _cpp_loop_plan.plan(self)


def _generate_scatter_fallback(
    self: Any,
    output: str,
    inputs: list[Any],
    cpp_kernel_name: str,
    python_kernel_name: str,
    src_is_tensor: bool,
    reduce: Any,
    kwargs: list[str],
    device: str,
) -> None:
    if not src_is_tensor:  # fix 3: a scalar src written as a C++ value ("1", not "True")
        inputs = [*inputs[:-1], self.val_to_arg_str(inputs[-1])]
    _patch.saved["_generate_scatter_fallback"](
        self, output, inputs, cpp_kernel_name, python_kernel_name, src_is_tensor, reduce,
        kwargs, device,
    )  # fmt: skip


_PATCHES = {
    "can_reuse": _can_reuse,
    "codegen_while_loop": _codegen_while_loop,
    "_generate_scatter_fallback": _generate_scatter_fallback,
    "run_wrapper_ir_passes": _run_wrapper_ir_passes,
    "codegen_subgraph_suffix": _codegen_subgraph_suffix,
}


def _wrapper_class() -> type:
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu

    return CppWrapperCpu


_patch = CountedPatch(_wrapper_class, _PATCHES)


@contextlib.contextmanager
def patched() -> Iterator[None]:
    """Inside this block, inductor's C++ wrapper compiles programs holding a loop.
    Nested and concurrent uses are counted; the class is restored when the last exits."""
    if not applies():
        yield
        return
    # Programs built with the fixes get their own key in inductor's FX graph cache, so
    # one compiled without them (by an earlier fxrl or a plain torch) is never loaded.
    # The plan is in the key too: a program built with it and one built without are
    # different programs (the same values, tested).
    outer = getattr(_plan, "on", None)
    _plan.on = plan_loops()
    tag = f"{torch.compiler.config.cache_key_tag}|fxrl_cpp_wrapper_patch={VERSION}|{_plan.on}"
    try:
        with _patch.applied(), torch.compiler.config.patch(cache_key_tag=tag):
            yield
    finally:
        _plan.on = outer
