"""A rolled loop's buffers allocated once, not on every iteration (torch 2.13's C++ wrapper).

Inductor's C++ wrapper writes a ``while_loop`` inline (``CppWrapperCpu.codegen_while_loop``,
torch/_inductor/codegen/cpp_wrapper_cpu.py): every iteration binds a fresh tensor handle
to each carried and read-only input of the condition and of the body
(``aoti_torch_assign_tensors_out``: a heap-allocated ``at::Tensor`` each), allocates each
of the body's buffers afresh (``aoti_torch_empty_strided``: a ``TensorImpl``, a storage
and its data), and frees them all at the end. In a PPO update that is most of what the
CPU does outside the kernels. ``codegen_while_loop`` here writes the same loop with its
buffers planned once, after inductor's own memory planning has decided which buffer
reuses which (``plan``, run after ``run_wrapper_ir_passes``):

- a buffer the condition or the body allocates with a static shape is allocated once,
  before the loop (``<name>_hoisted``), and the body refers to it (``auto& <name> =
  <name>_hoisted;``); inductor's reuse of a dead buffer for a new one becomes a second
  reference to the same storage, and its frees are dropped;
- a carried value the body computes into such a buffer is double-buffered: the first
  iteration moves the buffer into the carry and takes a spare allocated with it, every
  later iteration swaps the carry with the buffer, whose storage held the carry before
  last and is read by nothing any more;
- an input is a reference to the loop's own handle (``auto& <inner> = <outer>;``)
  instead of a new handle; its frees inside the body are dropped (the loop holds it
  anyway), and a carried value the body passes through unchanged is left in place;
- a buffer the outputs reach otherwise (a view of it, or it in two carried slots) is
  double-buffered: two storages that change sides after every iteration;
- an output handed to two carried slots is moved into the first and handed to the
  second as a new handle to the same tensor (inductor's code moves it twice: fix 4 of
  ``fxrl._cpp_wrapper_patch``).

What is not provably private to one iteration keeps inductor's code (the plan declines
it): every buffer of a body with an output of unknown aliasing (an extern kernel's
output, say), the buffers that go to a carried slot whose input is passed on to another
slot or viewed by an output, a buffer or input that some line moves from, a buffer of a
dynamic shape or off the CPU. Storage that an output of one iteration holds is never
written by the next, so the values are those of inductor's own code (bit for bit, on
small loops of each shape above and on a PPO update: tests/test_cpp_loop_plan.py).
``FXRL_CPP_LOOP_PLAN=0`` turns the plan off (``fxrl._cpp_wrapper_patch.plan_loops``).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

# line objects this module puts into the wrapper's lines (WrapperLine subclasses are
# made on first use, so that importing fxrl does not import inductor)
_CLASSES: dict[str, type] = {}


def _classes() -> dict[str, type]:
    if _CLASSES:
        return _CLASSES
    from torch._inductor.codegen.wrapper import WrapperLine

    @dataclasses.dataclass
    class LoopStart(WrapperLine):
        """Before ``while (1) {``: the loop's hoisted buffers and spares."""

        wrapper: Any
        loop: Any
        hoisted: list = dataclasses.field(default_factory=list)  # buffers
        spares: set = dataclasses.field(default_factory=set)  # names with a spare

        def codegen(self, code: Any) -> None:
            for node in self.hoisted:
                name = node.get_name()
                for suffix in ("_hoisted", "_spare") if name in self.spares else ("_hoisted",):
                    code.writeline(_allocation(self.wrapper, node, name + suffix))

    @dataclasses.dataclass
    class LoopEnd(WrapperLine):
        """After the loop's ``}``: the hoisted buffers freed."""

        start: Any

        def codegen(self, code: Any) -> None:
            for node in self.start.hoisted:
                code.writeline(f"{node.get_name()}_hoisted.reset();")
                if node.get_name() in self.start.spares:
                    code.writeline(f"{node.get_name()}_spare.reset();")

    @dataclasses.dataclass
    class LoopInput(WrapperLine):
        """A subgraph input: a reference to the loop's handle, or a new handle."""

        inner: str
        outer: str
        by_reference: bool = False

        def codegen(self, code: Any) -> None:
            if self.by_reference:
                code.writeline(f"auto& {self.inner} = {self.outer};")
                return
            code.writeline(f"AtenTensorHandle {self.inner}_handle;")
            code.writeline(
                "AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_assign_tensors_out("
                f"{self.outer}, &{self.inner}_handle));"
            )
            code.writeline(f"RAIIAtenTensorHandle {self.inner}({self.inner}_handle);")

    @dataclasses.dataclass
    class LoopOutput(WrapperLine):
        """A subgraph output handed to the loop: moved, swapped, or left in place."""

        outer: str
        reference: str  # the inner output's C++ expression
        node: Any  # the inner output (IR)
        mode: str = "move"  # "move" | "swap" | "copy" (a hoisted buffer) | "keep" (passed through)
        buffer: str = ""  # for "swap": the hoisted buffer's name

        def codegen(self, code: Any) -> None:
            if self.mode == "keep":
                return
            if self.mode == "copy":  # a second handle (a double-buffered buffer, or an
                # output handed on already: see fix 4 in fxrl._cpp_wrapper_patch)
                write_new_handle(code, self.outer, self.reference)
                return
            if self.mode == "swap":
                b = self.buffer
                code.writeline(f"if ({b}_spare.get()) {{")
                code.writeline(f"    {self.outer} = std::move({b}_hoisted);")
                code.writeline(f"    {b}_hoisted = std::move({b}_spare);")
                code.writeline(f"}} else {{ std::swap({self.outer}, {b}_hoisted); }}")
                return
            src = self.reference
            if not _is_shape(self.node):
                src = f"std::move({src})"
                code.writeline(f"{self.outer}.reset();")
            code.writeline(f"{self.outer} = {src};")

    @dataclasses.dataclass
    class BodyEnd(WrapperLine):
        """After a subgraph's outputs: the double-buffered buffers change sides."""

        pingpong: list = dataclasses.field(default_factory=list)

        def codegen(self, code: Any) -> None:
            for name in self.pingpong:
                code.writeline(f"std::swap({name}_hoisted, {name}_spare);")

    @dataclasses.dataclass
    class Bind(WrapperLine):
        """``auto& new = old;``: a hoisted buffer (or inductor's reuse of one) in the body."""

        new: str
        old: str

        def codegen(self, code: Any) -> None:
            code.writeline(f"auto& {self.new} = {self.old};")

    _CLASSES.update(LoopStart=LoopStart, LoopEnd=LoopEnd, LoopInput=LoopInput,
                    LoopOutput=LoopOutput, BodyEnd=BodyEnd, Bind=Bind)  # fmt: skip
    return _CLASSES


def _is_shape(node: Any) -> bool:
    from torch._inductor import ir

    return isinstance(node, ir.ShapeAsConstantBuffer)


def _allocation(wrapper: Any, node: Any, name: str) -> str:
    from torch._inductor.virtualized import V

    return wrapper.make_allocation(
        name,
        node.get_device(),
        node.get_dtype(),
        node.get_size(),
        node.get_stride(),
        V.graph.get_allocation_size(node),
        node.get_is_pinned(),
    )


def codegen_while_loop(self: Any, while_loop: Any, stack_output: bool = False) -> None:
    """torch 2.13's ``CppWrapperCpu.codegen_while_loop`` with its inputs, outputs and the
    places around the loop written as line objects that ``plan`` can rewrite."""
    from torch._inductor import ir
    from torch._inductor.codegen.wrapper import EnterSubgraphLine, ExitSubgraphLine

    if stack_output:
        raise NotImplementedError("NYI cpp wrapper for while_loop_stack_output")
    c = _classes()
    is_bool_pred = isinstance(
        while_loop.cond_subgraph.graph.graph_outputs[0], ir.ShapeAsConstantBuffer
    )
    name = while_loop.get_name()
    outer_carried = [buf.codegen_reference() for buf in while_loop.carried_inputs]
    outer_extra = [buf.codegen_reference() for buf in while_loop.additional_inputs]
    carried_out = self._get_while_loop_carried_output_names(while_loop)
    cond_result = f"{name}_cond_result"
    self.writeline(
        f"bool {cond_result};" if is_bool_pred else f"RAIIAtenTensorHandle {cond_result};"
    )
    for inp, out_name in zip(outer_carried, carried_out, strict=True):
        self.writeline(f"AtenTensorHandle {out_name}_handle;")
        self.writeline(
            "AOTI_TORCH_ERROR_CODE_CHECK("
            f"aoti_torch_assign_tensors_out({inp}, &{out_name}_handle));"
        )
        self.writeline(f"RAIIAtenTensorHandle {out_name}({out_name}_handle);")
    outer_inputs = [*carried_out, *outer_extra]
    start = c["LoopStart"](self, while_loop)
    self.writeline(start)
    self.writeline("while (1) {")
    self.writeline(EnterSubgraphLine(self, while_loop.cond_subgraph.graph))
    _codegen_subgraph(self, while_loop.cond_subgraph, outer_inputs, [cond_result])
    if is_bool_pred:
        scalar = cond_result
    else:
        scalar = f"{cond_result}_scalar"
        self.codegen_tensor_item(__import__("torch").bool, cond_result, scalar)
    self.writeline(f"if (!{scalar}) break;")
    self.writeline(ExitSubgraphLine(self))
    self.writeline(EnterSubgraphLine(self, while_loop.body_subgraph.graph))
    _codegen_subgraph(self, while_loop.body_subgraph, outer_inputs, carried_out)
    self.writeline(ExitSubgraphLine(self))
    self.writeline("}")
    self.writeline(c["LoopEnd"](start))


def _codegen_subgraph(
    self: Any, subgraph: Any, outer_inputs: list[str], outer_outputs: list[str]
) -> None:
    """``CppWrapperCpu.codegen_subgraph`` with ``LoopInput`` / ``LoopOutput`` lines."""
    from torch._inductor import ir
    from torch._inductor.virtualized import V

    c = _classes()
    graph = subgraph.graph
    try:
        self.push_codegened_graph(graph)
        self.writeline(f"// subgraph: {subgraph.name}")
        for (inner, value), outer in zip(graph.graph_inputs.items(), outer_inputs, strict=True):
            if isinstance(value, ir.TensorBox):
                self.writeline(c["LoopInput"](inner, outer))
        parent = V.graph
        with V.set_graph_handler(graph):
            graph.codegen_subgraph(parent_graph=parent)
        for node, outer in zip(graph.graph_outputs, outer_outputs, strict=True):
            self.writeline(c["LoopOutput"](outer, node.codegen_reference(), node))
        self.writeline(c["BodyEnd"]())
    finally:
        self.pop_codegened_graph()


_MOVE = re.compile(r"std::move\((\w+)\)|(\w+)\.release\(\)")
_RESET = re.compile(r"(\w+)\.reset\(\);")
_RESETS = re.compile(r"^\s*(\w+\.reset\(\);\s*)+$")  # a line of frees only


def plan(wrapper: Any) -> None:
    """Rewrite the lines of each loop written by ``codegen_while_loop`` (see the module
    docstring); run after inductor's memory planning, before the lines become code."""
    c = _classes()
    lines = wrapper.lines
    for i, line in enumerate(lines):
        if isinstance(line, c["LoopStart"]):
            for graph in (line.loop.cond_subgraph.graph, line.loop.body_subgraph.graph):
                _plan_subgraph(wrapper, lines, _region(lines, i, graph), line)


def _region(lines: list, start: int, graph: Any) -> list[tuple[int, int]]:
    """(index, depth) of the lines of ``graph``'s subgraph after ``start`` (depth 0: its
    own lines; deeper: lines of loops nested in it)."""
    from torch._inductor.codegen.wrapper import EnterSubgraphLine, ExitSubgraphLine

    begin = next(
        j for j in range(start, len(lines))
        if isinstance(lines[j], EnterSubgraphLine) and lines[j].graph is graph
    )  # fmt: skip
    out, depth = [], 0
    for j in range(begin + 1, len(lines)):
        if isinstance(lines[j], EnterSubgraphLine):
            depth += 1
        elif isinstance(lines[j], ExitSubgraphLine):
            if depth == 0:
                return out
            depth -= 1
        out.append((j, depth))
    raise AssertionError("fxrl: a loop's subgraph has no end")


def _output_kind(node: Any) -> tuple[str, str | None]:
    """('buffer' | 'input' | 'view' | 'shape' | 'other', buffer name) of a subgraph output."""
    from torch._inductor import ir

    x = node
    while isinstance(x, ir.TensorBox | ir.StorageBox):
        x = x.data
    if isinstance(x, ir.ShapeAsConstantBuffer):
        return "shape", None
    if isinstance(x, ir.ReinterpretView):
        base = x.data
        while isinstance(base, ir.TensorBox | ir.StorageBox | ir.ReinterpretView):
            base = base.data
        return "view", base.get_name()
    if isinstance(x, ir.InputBuffer):
        return "input", x.get_name()
    if isinstance(x, ir.ComputedBuffer) and not x.get_inputs_that_alias_output():
        return "buffer", x.get_name()
    return "other", None


def _same_layout(a: Any, b: Any) -> bool:
    return a.get_size() == b.get_size() and a.get_stride() == b.get_stride()


def _plan_subgraph(wrapper: Any, lines: list, region: list[tuple[int, int]], start: Any) -> None:
    from torch._inductor.codegen.wrapper import (
        AllocateLine,
        FreeIfNotReusedLine,
        FreeLine,
        NullLine,
        ReinterpretLine,
        ReuseLine,
    )

    c = _classes()
    own = [j for j, depth in region if depth == 0]
    candidates: dict[str, Any] = {}  # root name -> buffer
    root: dict[str, str] = {}  # a name for a hoistable buffer itself -> its root
    view: dict[str, str] = {}  # a name for a view of one (its own handle) -> the root
    moved: set[str] = set()  # names some line moves from or releases
    for j, _ in region:
        line = lines[j]
        if isinstance(line, str):
            moved.update(a or b for a, b in _MOVE.findall(line))
    for j in own:
        line = lines[j]
        if isinstance(line, AllocateLine) and not line.comm_buffer:
            node = line.node
            static = wrapper.static_shape_for_buffer_or_none(node) is not None
            if node.get_device().type == "cpu" and static:
                candidates[node.get_name()] = node
                root[node.get_name()] = node.get_name()
        elif isinstance(line, ReuseLine | ReinterpretLine):
            old, new = line.node, line.reused_as
            same = isinstance(line, ReuseLine) and _same_layout(old, new)
            if old.get_name() in root and same:
                root[new.get_name()] = root[old.get_name()]
            elif old.get_name() in root or old.get_name() in view:
                view[new.get_name()] = root.get(old.get_name()) or view[old.get_name()]
    inputs = [lines[j] for j in own if isinstance(lines[j], c["LoopInput"])]
    outputs = [lines[j] for j in own if isinstance(lines[j], c["LoopOutput"])]
    by_outer = {inp.outer: inp.inner for inp in inputs}
    excluded = {root[n] for n in moved if n in root}
    kept_inputs = set(moved)  # inputs that need their own handle
    direct: dict[str, int] = {}  # root -> outputs that are the buffer itself
    viewed: set[str] = set()  # roots some output is a view of
    slot_roots: dict[str, set[str]] = {}  # outer name -> roots its output refers to
    for out in outputs:
        kind, name = _output_kind(out.node)
        if kind == "other":
            excluded.update(candidates)  # an output of unknown aliasing: hoist nothing
        elif kind == "view" and name in root | view:
            r = root.get(name) or view[name]
            viewed.add(r)
            slot_roots.setdefault(out.outer, set()).add(r)
        elif kind == "view":
            kept_inputs.add(name)  # a view of an input: read before the carry changes
        elif kind == "buffer" and name in view:
            viewed.add(view[name])
            slot_roots.setdefault(out.outer, set()).add(view[name])
        elif kind == "buffer" and name in root:
            direct[root[name]] = direct.get(root[name], 0) + 1
            slot_roots.setdefault(out.outer, set()).add(root[name])
        elif kind == "input" and by_outer.get(out.outer) != name:
            kept_inputs.add(name)  # passed on to another slot, or the condition's result
    for outer, roots in slot_roots.items():  # a slot whose input goes on to another slot
        if by_outer.get(outer) in kept_inputs:  # keeps inductor's own buffers
            excluded.update(roots)
    hoisted = {r for r in candidates if r not in excluded}
    # one output that is the buffer itself: swapped with the carry; else the buffer is
    # double-buffered (its two storages change sides after every iteration)
    pingpong = {r for r in hoisted if r in viewed or direct.get(r, 0) > 1}
    refs = {inp.inner for inp in inputs if inp.inner not in kept_inputs}
    for inp in inputs:
        inp.by_reference = inp.inner in refs
    for out in outputs:
        kind, name = _output_kind(out.node)
        r = root.get(name) if kind == "buffer" else None
        if r in pingpong:
            out.mode = "copy"
        elif r in hoisted:
            out.mode, out.buffer = "swap", r
        elif kind == "input" and name in refs and by_outer.get(out.outer) == name:
            out.mode = "keep"
    moved: dict[str, str] = {}  # an output moved into a carry: a second one is a new handle
    for out in outputs:
        if out.mode == "move" and not _is_shape(out.node):
            if out.reference in moved:
                out.mode, out.reference = "copy", moved[out.reference]
            else:
                moved[out.reference] = out.outer
    start.spares.update(r for r in hoisted if r in pingpong or r in direct)
    for j in own:
        if isinstance(lines[j], c["BodyEnd"]):
            lines[j].pingpong = sorted(pingpong)
    names = {n for n, r in root.items() if r in hoisted} | refs
    for j in own:
        line = lines[j]
        if isinstance(line, AllocateLine) and line.node.get_name() in hoisted:
            lines[j] = c["Bind"](line.node.get_name(), line.node.get_name() + "_hoisted")
        elif isinstance(line, ReuseLine) and root.get(line.node.get_name()) in hoisted:
            if line.reused_as.get_name() in root:
                lines[j] = c["Bind"](line.reused_as.get_name(), line.node.get_name())
            else:  # a view with its own handle: the hoisted buffer is not freed
                line.delete_old = False
        elif isinstance(line, FreeIfNotReusedLine | FreeLine) and line.node.get_name() in names:
            lines[j] = NullLine(wrapper)
        elif isinstance(line, str) and _RESETS.match(line):
            kept = [n for n in _RESET.findall(line) if n not in names]
            lines[j] = " ".join(f"{n}.reset();" for n in kept)
    start.hoisted.extend(candidates[r] for r in candidates if r in hoisted)


def write_new_handle(self: Any, target: str, source: str) -> None:
    """``target = a new handle to source's tensor`` (``RAIIAtenTensorHandle`` has no copy)."""
    self.writeline(f"{target}.reset();")
    self.writeline("{ AtenTensorHandle fxrl_h;")
    self.writeline(
        f"  AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_new_tensor_handle({source}, &fxrl_h));"
    )
    self.writeline(f"  {target} = RAIIAtenTensorHandle(fxrl_h); }}")
