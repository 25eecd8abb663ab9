"""fxrl._codegen_patch: inductor's dtype-propagation handler builds its rules once inside
the block, is the same handler, and gets its own ``__init__`` back after (torch 2.13 only).
No compile here: the patch's effect on a program is none (its code is unchanged), and
tests/test_compile*.py compile through it."""

import torch
import torch._inductor.compile_fx  # the tables the handler's rules read
import torch._inductor.lowering
from torch._inductor.dtype_propagation import DtypePropagationOpsHandler

from fxrl import _codegen_patch


def _counting_init(monkeypatch):
    """Wrap the class's own __init__ with a counter of the times it runs."""
    original = DtypePropagationOpsHandler.__init__
    calls = []

    def init(self):
        calls.append(1)
        original(self)

    monkeypatch.setattr(DtypePropagationOpsHandler, "__init__", init)
    return init, calls


def test_inside_the_block_the_rules_are_built_once_and_are_the_same(monkeypatch):
    monkeypatch.setattr(torch, "__version__", _codegen_patch.PATCHED_TORCH + "0")
    monkeypatch.setattr(DtypePropagationOpsHandler, "_instance", None)  # a fresh singleton
    outside = set(vars(DtypePropagationOpsHandler()))  # the rules the original builds
    DtypePropagationOpsHandler._instance = None
    init, calls = _counting_init(monkeypatch)
    with _codegen_patch.patched():
        with _codegen_patch.patched():  # nested uses are counted
            handlers = [DtypePropagationOpsHandler() for _ in range(5)]
        assert DtypePropagationOpsHandler.__init__ is _codegen_patch._init_once
    assert len(calls) == 1
    assert all(h is handlers[0] for h in handlers)
    assert set(vars(handlers[0])) - {"_fxrl_built"} == outside
    assert "add" in outside and "sigmoid" in outside
    assert DtypePropagationOpsHandler.__init__ is init  # the class's own, back
    assert _codegen_patch._patch.depth == 0
    DtypePropagationOpsHandler()
    assert len(calls) == 2  # outside the block it runs on every call again


def test_on_another_torch_version_the_patch_does_nothing(monkeypatch):
    init, calls = _counting_init(monkeypatch)
    monkeypatch.setattr(torch, "__version__", "2.14.0")
    assert not _codegen_patch.applies()
    with _codegen_patch.patched():
        assert DtypePropagationOpsHandler.__init__ is init
        DtypePropagationOpsHandler()
        DtypePropagationOpsHandler()
    assert len(calls) == 2
