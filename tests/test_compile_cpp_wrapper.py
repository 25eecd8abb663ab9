"""fxrl.compile's default C++ wrapper on CPU: rolled loops (nested, vmapped) compute what
inductor's Python wrapper computes; the torch 2.13 fixes are scoped and version-guarded."""

import sys

import pytest
import torch

import fxrl
from fxrl import _cpp_wrapper_patch
from fxrl.scan import scan

fc = sys.modules["fxrl.compile"]  # the module (fxrl.compile is the function)
W = torch.linspace(-1.0, 1.0, 64).reshape(8, 8)


def nested(w, c, xs):
    """A loop in a loop. The inner body reads a closed-over constant (W) and the vmapped
    ``w`` (a loop input seen through a view: the use-after-free the patch fixes); the
    stacked output is rescaled after the loop (a kernel that would take the loop's
    updated buffer over: the "declared twice" g++ error the patch fixes)."""

    def outer(c, x):
        def inner(h, k):
            h = torch.tanh(h @ W * w + x * (k + 1))
            return h, {"s": h.sum(-1)}

        h, ys = scan(inner, c, 3)
        return h, {"y": ys["s"], "m": h.mean(-1)}

    c, ys = scan(outer, c, xs)
    return c, ys["y"] * 2 + 1, ys["m"]


@pytest.fixture(scope="module")
def programs():
    ws = torch.tensor([0.5, 1.5])
    c = torch.linspace(-1.0, 1.0, 32).reshape(4, 8)
    xs = torch.linspace(-2.0, 2.0, 160).reshape(5, 4, 8)
    fn = torch.func.vmap(nested, in_dims=(0, None, None))
    entered = []
    patched = _cpp_wrapper_patch.patched

    def spy():
        entered.append(True)
        return patched()

    _cpp_wrapper_patch.patched = spy
    try:
        default = fxrl.compile(fn)(ws, c, xs)  # the C++ wrapper: fxrl.compile's CPU default
    finally:
        _cpp_wrapper_patch.patched = patched
    python = fxrl.compile(fn, options={"cpp_wrapper": False})(ws, c, xs)
    return {"default": default, "python": python, "eager": fn(ws, c, xs), "entered": entered}


def test_the_default_compile_of_a_cpu_program_builds_the_cpp_wrapper(programs):
    assert programs["entered"] == [True]


def test_nested_vmapped_loops_through_the_cpp_wrapper_equal_the_python_wrappers(programs):
    for cpp, py, eager in zip(
        programs["default"], programs["python"], programs["eager"], strict=True
    ):
        assert cpp.shape == eager.shape
        torch.testing.assert_close(cpp, py, rtol=1e-6, atol=0)
        torch.testing.assert_close(cpp, eager)


def test_the_patch_is_undone_after_the_compile(programs):
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    assert CppWrapperCpu.can_reuse is PythonWrapperCodegen.can_reuse
    assert CppWrapperCpu.codegen_while_loop is not _cpp_wrapper_patch._codegen_while_loop
    assert _cpp_wrapper_patch._patch.depth == 0


def test_on_another_torch_version_the_patch_does_nothing(monkeypatch):
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu

    before = dict(CppWrapperCpu.__dict__)
    monkeypatch.setattr(torch, "__version__", "2.14.0")
    assert not _cpp_wrapper_patch.applies()
    with _cpp_wrapper_patch.patched():
        assert dict(CppWrapperCpu.__dict__) == before
    monkeypatch.setattr(torch, "__version__", _cpp_wrapper_patch.PATCHED_TORCH + "0")
    with _cpp_wrapper_patch.patched():
        assert CppWrapperCpu.can_reuse is _cpp_wrapper_patch._can_reuse
    assert dict(CppWrapperCpu.__dict__) == before


def test_the_cpp_wrapper_is_a_default_on_cpu_and_torch_2_13_only_and_the_callers_word_wins(
    monkeypatch,
):
    cpu, meta = torch.zeros(2), torch.zeros(2, device="meta")
    assert fc._options({}, [cpu])["cpp_wrapper"] is True
    assert "cpp_wrapper" not in fc._options({}, [cpu, meta])
    assert "cpp_wrapper_build_separate" not in fc._options({}, [meta])
    assert fc._options({"cpp_wrapper": True}, [meta])["cpp_wrapper"] is True
    assert fc._options({"cpp_wrapper": False}, [cpu])["cpp_wrapper"] is False
    monkeypatch.setattr(torch, "__version__", "2.14.0")  # a torch the patch was not made for
    assert "cpp_wrapper" not in fc._options({}, [cpu])
    assert fc._options({"cpp_wrapper": True}, [cpu])["cpp_wrapper"] is True


def test_a_loop_whose_carry_is_reduced_from_its_xs_compiles():
    # programs are specialized to their shapes: with symbolic sizes (fxrl.compile before
    # it passed ignore_shape_env) inductor's loop lowering failed here with "KeyError: s.."
    def f(xs):
        return scan(lambda c, x: (c * 0.5 + x, {"y": c}), xs.sum(0), xs)

    xs = torch.linspace(-1.0, 1.0, 18).reshape(6, 3)
    carry, ys = fxrl.compile(f)(xs)
    want_carry, want_ys = f(xs)
    torch.testing.assert_close(carry, want_carry)
    torch.testing.assert_close(ys["y"], want_ys["y"])


def test_a_scatter_of_python_scalars_compiles_through_the_cpp_wrapper():
    # a scalar scatter value was pasted into the C++ wrapper as Python text ("True");
    # inductor calls aten's scatter (rather than generating a kernel) under deterministic
    # algorithms, which tests/conftest.py turns on
    assert torch.are_deterministic_algorithms_enabled()

    def f(grid, x, idx):
        return grid.scatter(-1, idx, True), x.scatter(-1, idx, float("-inf"))

    grid = torch.zeros(3, 5, dtype=torch.bool)
    x = torch.linspace(0.0, 1.0, 15).reshape(3, 5)
    idx = torch.tensor([[0], [4], [2]])
    for got, want in zip(fxrl.compile(f)(grid, x, idx), f(grid, x, idx), strict=True):
        assert torch.equal(got, want)
