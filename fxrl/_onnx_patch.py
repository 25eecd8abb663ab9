"""Two costs of ``torch.onnx.export(dynamo=True)`` that ``fxrl.export.to_onnx`` avoids.

1. **The registry.** Every export builds ONNX's function registry afresh
   (``ONNXRegistry.from_torchlib``), which re-reads the source of about 500 onnxscript
   functions: about 0.5 s a call. fxrl builds it once per opset and hands each export a
   copy of its own (so a ``custom_translation_table`` registered into one changes no
   other).
2. **The second trace.** The exporter lowers the program with
   ``run_decompositions(table)``, which traces the whole program again (AOT autograd,
   functionalization): about half of an export of a small policy or env step. fxrl's
   programs are already functional ATen graphs, so fxrl lowers a copy call by call
   instead: each call ONNX does not translate directly (or that the exporter's table
   decomposes) is traced alone through that table on its inputs' fake values, once per
   operator and kinds of inputs, and inlined (``lower``). A graph with sub-graphs
   (control flow), a mutating operator other than ``detach_``, a call outside ATen and
   ``operator``, or a symbolic size reaching a call to lower takes the exporter's own
   path unchanged.

Both apply only inside ``with applied():`` and only where torch's exporter has these
names (``applies()`` is False otherwise, and nothing changes). ``FXRL_FAST_ONNX=0``
turns both off (the exporter as torch ships it). ``counts`` says how many programs were
lowered here and how many took the exporter's own path.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import operator
import os
from collections.abc import Container, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.utils._pytree as pytree

from fxrl._class_patch import CountedPatch

ENABLED = os.environ.get("FXRL_FAST_ONNX", "1") != "0"
_EXPORTER = "torch.onnx._internal.exporter"
_OPERATOR_FUNCTIONS = frozenset(
    getattr(operator, name) for name in dir(operator) if not name.startswith("_")
)


def _module(name: str) -> Any:
    return importlib.import_module(f"{_EXPORTER}.{name}")


@functools.cache
def applies() -> bool:
    """The exporter has the functions this module stands in for (torch 2.6 and later)
    and ``FXRL_FAST_ONNX`` is not 0."""
    if not ENABLED:
        return False
    try:
        registration, fx_passes, decomp = (
            _module(n) for n in ("_registration", "_fx_passes", "_decomp")
        )
    except ImportError:
        return False
    return (
        callable(getattr(getattr(registration, "ONNXRegistry", None), "from_torchlib", None))
        and callable(getattr(fx_passes, "decompose_with_registry", None))
        and callable(getattr(decomp, "get_onnx_implemented_overloads", None))
        and callable(getattr(decomp, "create_onnx_friendly_decomposition_table", None))
    )


# ----------------------------------------------------------------------------- registry

_registries: dict[int, Any] = {}


def _copy_registry(registry: Any) -> Any:
    """A registry whose per-operator lists are its own: registering into the copy leaves
    the original as it was."""
    new = copy.copy(registry)
    new.functions = {op: list(metas) for op, metas in registry.functions.items()}
    return new


def _registry_once(cls: type, opset_version: int | None = None) -> Any:
    build = _registry_patch.saved["from_torchlib"]
    key = -1 if opset_version is None else opset_version
    if key not in _registries:
        built = build() if opset_version is None else build(opset_version=opset_version)
        _registries[key] = built
    return _copy_registry(_registries[key])


_registry_patch = CountedPatch(
    lambda: _module("_registration").ONNXRegistry,
    {"from_torchlib": classmethod(_registry_once)},
)


# ----------------------------------------------------------------------------- decomposition

_tables: dict[frozenset[Any], dict[Any, Any]] = {}


def _ops(registry: Any) -> tuple[frozenset[Any], dict[Any, Any]]:
    """(the operators ONNX translates, the exporter's decomposition table: operator ->
    decomposition) for ``registry``; the table is worked out once per set of translated
    operators."""
    decomp = _module("_decomp")
    translated = frozenset(decomp.get_onnx_implemented_overloads(registry))
    if translated not in _tables:
        _tables[translated] = decomp.create_onnx_friendly_decomposition_table(set(translated))
    return translated, _tables[translated]


counts = {"lowered": 0, "exporter": 0}


# Checks the exporter removes itself (``_fx_passes.remove_assertion_nodes``).
@functools.cache
def _assertions() -> frozenset[Any]:
    aten = torch.ops.aten
    return frozenset(
        getattr(getattr(aten, name, None), overload, None)
        for name, overload in (
            ("sym_constrain_range_for_size", "default"),
            ("_assert_async", "default"),
            ("_assert_async", "msg"),
            ("_assert_scalar", "default"),
            ("_assert_tensor_metadata", "default"),
        )
    ) - {None}


def _needs_lowering(target: Any, translated: Container[Any], decomposed: Container[Any]) -> bool:
    return target not in _assertions() and (target not in translated or target in decomposed)


def lower(program: torch.export.ExportedProgram, registry: Any) -> Any:
    """``program`` as the exporter's decomposition would give it, made without tracing the
    whole program again: a copy in which each call ONNX does not translate directly is
    replaced by the graph of that call alone, traced through the exporter's decomposition
    table (on the call's own fake inputs). None where this does not apply (control flow,
    mutation, a call outside ATen and ``operator``, a symbolic size among a replaced call's
    inputs, a call whose outputs are used other than whole or by index): the caller then
    takes the exporter's own path."""
    translated, table = _ops(registry)
    graph = program.graph_module.graph
    if any(True for _ in program.graph_module.named_children()):
        return None  # control flow's sub-graphs
    todo = []
    for node in graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        target = node.target
        if node.op != "call_function":
            return None
        if target in _OPERATOR_FUNCTIONS:
            continue
        if target is torch.ops.aten.detach_.default:  # autograd metadata only: the input
            todo.append(node.name)
            continue
        if not isinstance(target, torch._ops.OpOverload) or target._schema.is_mutable:
            return None
        if _needs_lowering(target, translated, table):
            todo.append(node.name)
    program = copy.deepcopy(program)
    if not todo:
        return program
    graph = program.graph_module.graph
    nodes = {n.name: n for n in graph.nodes}
    renamed: dict[str, str] = {}
    pieces: dict[Any, Any] = {}  # one trace per operator and inputs' shapes and dtypes
    for name in todo:
        node = nodes[name]
        if node.target is torch.ops.aten.detach_.default:
            result = node.args[0]
        else:
            result = _inline_lowered(graph, node, table, pieces)
        if result is None:
            return None
        if any(user.op == "output" for user in node.users) and isinstance(result, torch.fx.Node):
            renamed[node.name] = result.name
        elif any(user.op == "output" for user in node.users):
            return None
        if isinstance(result, torch.fx.Node):
            node.replace_all_uses_with(result)
        else:
            for user in list(node.users):
                if user.target is not operator.getitem:
                    return None
                user.replace_all_uses_with(result[user.args[1]])
                graph.erase_node(user)
        graph.erase_node(node)
    for spec in program.graph_signature.output_specs:
        name = getattr(spec.arg, "name", None)
        if name in renamed:
            spec.arg = dataclasses.replace(spec.arg, name=renamed[name])
    graph.lint()
    program.graph_module.recompile()
    return program


def _inline_lowered(
    graph: torch.fx.Graph, node: torch.fx.Node, table: dict[Any, Any], pieces: dict[Any, Any]
) -> Any:
    """Trace ``node``'s call alone through ``table`` on its inputs' fake values (or take
    the trace of an earlier call of the same operator on the same kinds of inputs from
    ``pieces``) and insert that graph before it; the node(s) standing for its result, or
    None."""
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.fx.experimental.proxy_tensor import make_fx

    inputs: list[torch.fx.Node] = []
    leaves, spec = pytree.tree_flatten((node.args, node.kwargs))
    fakes = []
    for leaf in leaves:
        if isinstance(leaf, torch.fx.Node):
            value = leaf.meta.get("val")
            if not isinstance(value, FakeTensor) or _symbolic(value):
                return None
            inputs.append(leaf)
            fakes.append(value)
        elif isinstance(leaf, torch.SymInt | torch.SymFloat | torch.SymBool):
            return None
    target = node.target
    key = (target, *(_kind(leaf) for leaf in leaves))
    if key in pieces:
        return _insert(graph, node, pieces[key], inputs)
    fake_mode = detect_fake_mode(fakes)
    if fake_mode is None:
        return None

    def call(*tensors: torch.Tensor) -> Any:
        it = iter(tensors)
        args, kwargs = pytree.tree_unflatten(
            [next(it) if isinstance(leaf, torch.fx.Node) else leaf for leaf in leaves], spec
        )
        return target(*args, **kwargs)

    try:
        with fake_mode:
            # fresh fake inputs: two inputs sharing one fake value would be traced as one
            piece = make_fx(call, decomposition_table=table)(*map(_fresh, fakes))
    except Exception:
        return None
    pieces[key] = piece
    return _insert(graph, node, piece, inputs)


def _kind(leaf: Any) -> Any:
    """What a traced piece depends on of an argument: a tensor's shape, strides, dtype and
    device (values never: the decompositions are traced on fake tensors), anything else
    itself."""
    if isinstance(leaf, torch.fx.Node):
        value = leaf.meta["val"]
        return ("tensor", tuple(value.shape), value.stride(), value.dtype, value.device)
    return (type(leaf).__name__, repr(leaf))


def _insert(
    graph: torch.fx.Graph, node: torch.fx.Node, piece: Any, inputs: list[torch.fx.Node]
) -> Any:
    env: dict[torch.fx.Node, Any] = {}
    placeholders = iter(inputs)
    keep = {k: v for k, v in node.meta.items() if k not in ("val", "tensor_meta")}
    out = None
    with graph.inserting_before(node):
        for sub in piece.graph.nodes:
            if sub.op == "placeholder":
                env[sub] = next(placeholders)
            elif sub.op == "output":
                out = pytree.tree_map(
                    lambda x: env[x] if isinstance(x, torch.fx.Node) else x, sub.args[0]
                )
            elif sub.op == "call_function":
                new = graph.node_copy(sub, lambda x: env[x])
                new.meta = {**keep, **sub.meta}
                if isinstance(sub.meta.get("val"), torch.Tensor):  # each node its own value
                    new.meta["val"] = _fresh(sub.meta["val"])
                env[sub] = new
            else:  # a constant make_fx kept as an attribute
                return None
    if isinstance(out, torch.fx.Node):
        return out
    if isinstance(out, list | tuple) and all(isinstance(o, torch.fx.Node) for o in out):
        return list(out)
    return None


def _fresh(value: torch.Tensor) -> torch.Tensor:
    """A new fake tensor like ``value`` (shape, strides, dtype, device), in its fake mode."""
    with value.fake_mode:  # type: ignore[attr-defined]
        return torch.empty_strided(
            value.shape, value.stride(), dtype=value.dtype, device=value.device
        )


def _symbolic(value: torch.Tensor) -> bool:
    return any(isinstance(d, torch.SymInt) for d in value.shape)


def _decompose_if_needed(
    exported_program: torch.export.ExportedProgram, registry: Any
) -> torch.export.ExportedProgram:
    # A copy either way: the exporter edits the program it gets (type promotion,
    # assertions removed), and the caller's program stays as it was.
    lowered = lower(exported_program, registry)
    counts["lowered" if lowered is not None else "exporter"] += 1
    if lowered is not None:
        return lowered
    return _decompose_patch.saved["decompose_with_registry"](exported_program, registry)


_decompose_patch = CountedPatch(
    lambda: _module("_fx_passes"),  # type: ignore[arg-type, return-value]
    {"decompose_with_registry": _decompose_if_needed},
)


@contextmanager
def applied() -> Iterator[None]:
    """Both stand-ins, for the length of the block (nothing where ``applies()`` is False)."""
    on = applies()
    with _registry_patch.applied(on), _decompose_patch.applied(on):
        yield
