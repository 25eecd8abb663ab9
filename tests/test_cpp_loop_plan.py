"""fxrl._cpp_loop_plan: a rolled loop's buffers allocated once in the C++ wrapper.

Each program is compiled twice, with the plan (the default) and without it
(``FXRL_CPP_LOOP_PLAN=0``: inductor's own loop code), with inductor's FX graph cache off
so that the wrapper is generated here. The two programs run the same kernels, so their
outputs must agree bit for bit; and the planned wrapper must really be planned (the
loop's buffers allocated before ``while (1)``, none inside it), the other one not.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys

import pytest
import torch
from test_compile_cpp_wrapper import nested  # the loop in a loop both files compile

import fxrl
from fxrl import _cpp_wrapper_patch, tree
from fxrl.scan import scan

pytestmark = pytest.mark.skipif(
    not _cpp_wrapper_patch.applies(), reason="the plan is part of the torch 2.13 C++ wrapper fixes"
)

fc = sys.modules["fxrl.compile"]
ALLOC = "aoti_torch_empty_strided("
W = torch.linspace(-1.0, 1.0, 64).reshape(8, 8)


@contextlib.contextmanager
def _plan_env(on: bool):
    old = os.environ.get(_cpp_wrapper_patch.PLAN_ENV)
    os.environ[_cpp_wrapper_patch.PLAN_ENV] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ[_cpp_wrapper_patch.PLAN_ENV]
        else:
            os.environ[_cpp_wrapper_patch.PLAN_ENV] = old


@contextlib.contextmanager
def _wrappers(out: list):
    """Collect the C++ source of every wrapper generated inside the block."""
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu

    own = CppWrapperCpu.__dict__.get("generate")
    generate = CppWrapperCpu.generate

    def spy(self, *args, **kwargs):
        result = generate(self, *args, **kwargs)
        out.append(self.wrapper_call.getvalue())
        return result

    CppWrapperCpu.generate = spy
    try:
        yield
    finally:
        if own is None:
            del CppWrapperCpu.generate
        else:
            CppWrapperCpu.generate = own


def build(run, plan: bool) -> tuple[object, list[str]]:
    """``run()``'s result, and the wrapper sources it generated, with or without the plan
    (no FX graph cache: every program is generated)."""
    sources: list[str] = []
    with _plan_env(plan), _wrappers(sources), torch._inductor.config.patch(fx_graph_cache=False):
        result = run()
    return result, sources


def loops(source: str) -> list[str]:
    """The text of each outermost ``while (1) { ... }`` in a wrapper's source."""
    out, i = [], 0
    while (i := source.find("while (1) {", i)) >= 0:
        depth, j = 0, i
        for j in range(i, len(source)):
            depth += source[j] == "{"
            depth -= source[j] == "}"
            if depth == 0 and source[j] == "}":
                break
        out.append(source[i : j + 1])
        i = j
    return out


def assert_bitwise_equal(a, b) -> None:
    la, lb = tree.leaves(a), tree.leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        assert x.shape == y.shape and x.dtype == y.dtype and x.stride() == y.stride()
        same_bits = x.contiguous().numpy().tobytes() == y.contiguous().numpy().tobytes()
        assert same_bits, (x, y)  # NaNs included


# Small programs, each a shape of loop the plan must get right.


def carries(c, xs):
    """Several carries, one a reduction, and a stacked output."""

    def body(c, x):
        a, b = c
        n = torch.tanh(a * 0.5 + x)
        return (n, b + n.sum()), {"y": n * 2}

    return scan(body, c, xs)


def one_buffer_two_slots(c, xs):
    """One buffer is the next value of two carries (the plan double-buffers it)."""

    def body(c, x):
        a, b = c
        n = torch.sin(a * b + x)
        return (n, n), {"y": n + a}

    return scan(body, c, xs)


def view_carry(c, xs):
    """A carry that is a view of a buffer computed in the body (a transpose)."""

    def body(c, x):
        n = torch.tanh(c.t() * 1.5 + x.t()).contiguous()
        return n.t(), {"y": n.sum(0)}

    return scan(body, c, xs)


def swapped_slots(c, xs):
    """A carry passed on to another slot, and one passed through (torch's loop operators
    refuse a body output that aliases an input, so the scan's body clones them)."""

    def body(c, x):
        a, b, keep = c
        return (b, a + x * keep, keep), {"y": a * b}

    return scan(body, c, xs)


def delay(c, xs):
    """A carry that takes the previous value of another, written after that one's new
    value (the plan must not hand the new value on, nor reuse the old one's storage)."""

    def body(c, x):
        a, b = c
        return (torch.tanh(a + x), a), {"y": b * 2}

    return scan(body, c, xs)


def extern_kernels(c, xs):
    """A matmul (an extern kernel writing into a buffer) and a sort (extern kernels that
    return new tensors) in the body; a carry taken from the sort's output."""

    def body(c, x):
        h = torch.tanh(c @ W + x)
        s, i = torch.sort(h, dim=-1)
        return s * 0.9 + h * 0.1, {"y": i, "m": h.mean(-1)}

    return scan(body, c, xs)


X8 = torch.linspace(-2.0, 2.0, 40).reshape(5, 8)
X48 = torch.linspace(-2.0, 2.0, 160).reshape(5, 4, 8)
C48 = torch.linspace(-1.0, 1.0, 32).reshape(4, 8)
PROGRAMS = {
    "carries": (carries, ((torch.linspace(-1, 1, 8), torch.zeros(())), X8)),
    "one_buffer_two_slots": (
        one_buffer_two_slots,
        ((torch.linspace(-1, 1, 8), torch.linspace(0, 2, 8)), X8),
    ),
    "view_carry": (view_carry, (C48, X48)),
    "swapped_slots": (
        swapped_slots,
        ((torch.linspace(-1, 1, 8), torch.linspace(1, 2, 8), torch.tensor(0.5)), X8),
    ),
    "delay": (delay, ((torch.linspace(-1, 1, 8), torch.linspace(1, 2, 8)), X8)),
    "extern_kernels": (extern_kernels, (C48, X48)),
    "nested": (
        torch.func.vmap(nested, in_dims=(0, None, None)),
        (torch.tensor([0.5, 1.5]), C48, X48),
    ),
}
# programs whose loop body allocates nothing at all once planned (the extern kernels'
# sort returns fresh tensors; the nested loop's inner loop allocates once per outer step)
NO_ALLOCATION = {"carries", "one_buffer_two_slots", "view_carry", "swapped_slots", "delay"}


@pytest.fixture(scope="module")
def small():
    built = {}
    for name, (fn, args) in PROGRAMS.items():
        for plan in (True, False):
            built[name, plan] = build(lambda fn=fn, args=args: fxrl.compile(fn)(*args), plan)
    return built


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_planned_loop_computes_inductors_values_bit_for_bit(small, name):
    planned, _ = small[name, True]
    inductors, _ = small[name, False]
    assert_bitwise_equal(planned, inductors)
    fn, args = PROGRAMS[name]
    eager = fn(*args)
    for x, y in zip(tree.leaves(planned), tree.leaves(eager), strict=True):
        torch.testing.assert_close(x, y)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_plan_fires_and_the_switch_turns_it_off(small, name):
    (_, [planned]), (_, [inductors]) = small[name, True], small[name, False]
    assert "_hoisted" in planned
    assert "_hoisted" not in inductors
    assert ALLOC in "".join(loops(inductors))
    for loop in loops(planned):
        before = planned[: planned.find(loop)]
        assert re.search(r"_hoisted_handle\)\);", before)  # allocated before the loop
        if name in NO_ALLOCATION:
            assert ALLOC not in loop
            assert "aoti_torch_assign_tensors_out" not in loop  # inputs by reference


def test_the_switch_takes_0_or_1_only(monkeypatch):
    monkeypatch.setenv(_cpp_wrapper_patch.PLAN_ENV, "off")
    with pytest.raises(ValueError, match="FXRL_CPP_LOOP_PLAN='off'; expected 0"):
        _cpp_wrapper_patch.plan_loops()
    monkeypatch.delenv(_cpp_wrapper_patch.PLAN_ENV)
    assert _cpp_wrapper_patch.plan_loops() is True


# The planned loop on a real program (PPO's whole update) is checked where that program is
# compiled anyway: tests/algorithms/test_ppo_env_params.py, on a MinAtar game.
