"""Inductor on fxrl's own trace, without AOTAutograd's two passes over it (torch 2.13).

``fxrl.compile`` traces a function with ``make_fx`` into a flat aten graph. Handed to
``torch._inductor.compile_fx.compile_fx``, that graph is traced twice more by
AOTAutograd: once to learn which inputs are mutated and which outputs alias what (its
metadata pass), and once more under functionalization and inductor's decompositions
(the graph inductor gets). For fxrl's programs neither pass finds anything to do but
the decompositions and a few in-place ops on fresh tensors (autograd's backward
formulas write ``masked_fill_``, ``logical_not_``, ``index_put_`` into tensors they just
made). So when fxrl's own trace already applies inductor's decompositions,
``functionalize`` below rewrites those in-place ops as their out-of-place forms, and
the graph goes straight to inductor's inference compiler (``compile_fx_forward``, what
AOTAutograd's inference path calls). In a cold compile of SAC's update that is about a
fifth of the compile.

The rewrite is refused (``functionalize`` returns False, and ``fxrl.compile`` takes
inductor's usual path) whenever the graph holds anything it cannot prove safe: an
in-place op on an input or a loop body's input (an off-policy update writing its replay
buffer), on a view, or on a tensor something views; an op writing through an ``out=``
argument or into any argument but its first; an in-place op with no out-of-place twin.
A program so compiled is stored in inductor's FX graph cache under inductor's key of the
graph after its joint-graph passes. So that a later process need not run those passes
(and their one-time pattern set-up) to find it, the cache directory keeps an index,
``fxrl-direct-v1/<key>``: named by inductor's own hash of the graph before the passes
(the graph and its constants, the inputs' metadata, inductor's config, torch's version),
holding the key the program was stored under. A missing or stale entry only means a
compile.

Inputs that require grad also take the usual path (AOTAutograd would build a backward),
and so do programs on a GPU, where the path has not been tried yet.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from typing import Any

import torch

from fxrl._cache_file import write_cache_file

PATCHED_TORCH = "2.13."  # the torch release whose compile_fx internals this calls
ENABLED = os.environ.get("FXRL_DIRECT", "1") != "0"  # off: always AOTAutograd's path (A/B)


def applies(leaves: list[Any]) -> bool:
    """Whether this torch is the one written for, every tensor is on the CPU (the path is
    not yet tried on a GPU) and none requires grad."""
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    return torch.__version__.startswith(PATCHED_TORCH) and all(
        t.device.type == "cpu" and not t.requires_grad for t in tensors
    )


def _graphs(gm: torch.fx.GraphModule) -> list[torch.fx.GraphModule]:
    return [m for _, m in gm.named_modules() if isinstance(m, torch.fx.GraphModule)]


def is_view(node: Any) -> bool:
    """Whether ``node`` calls an op whose output aliases its first input (a view), not a
    write."""
    target = getattr(node, "target", None)
    if not isinstance(target, torch._ops.OpOverload) or target._schema.is_mutable:
        return False
    returns = target._schema.returns
    return bool(returns) and returns[0].alias_info is not None


def _out_of_place(target: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """``aten.masked_fill_.Scalar`` -> ``aten.masked_fill.Scalar``; None when the op is not
    a plain in-place op writing only its first argument, or has no such twin."""
    schema = target._schema
    args = schema.arguments
    if not args or args[0].alias_info is None or not args[0].alias_info.is_write:
        return None
    if any(a.alias_info is not None and a.alias_info.is_write for a in args[1:]):
        return None
    name = schema.name.split("::")[-1]
    if not name.endswith("_") or name.endswith("__"):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    overload = getattr(packet, target._overloadname, None) if packet is not None else None
    if overload is None or overload._schema.is_mutable:
        return None
    return overload


def functionalize(gm: torch.fx.GraphModule, recompile: bool = True) -> bool:
    """Rewrite in place the graph's in-place ops as their out-of-place twins; True when
    no mutation is left but writes of the top graph's inputs, False (the graph possibly
    partly rewritten, still computing the same values) otherwise.

    An op may write a fresh, unviewed tensor anywhere, or an unviewed input of the top
    graph (not of a loop body): later readers read the new value, and the input's last
    value is copied into it at the end (``copy_``, as AOTAutograd keeps an inference
    graph's input mutations, which inductor writes in place). ``recompile``: regenerate the
    graphs' Python code (off when the caller does it once after more edits)."""
    top = gm.graph
    for g in _graphs(gm):
        graph = g.graph
        order = {node: i for i, node in enumerate(graph.nodes)}
        origin: dict[torch.fx.Node, torch.fx.Node] = {}  # new value -> the input it updates
        last: dict[torch.fx.Node, torch.fx.Node] = {}  # input -> its newest value
        for node in list(graph.nodes):
            target = node.target
            if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
                continue
            if not target._schema.is_mutable:
                continue
            twin = _out_of_place(target)
            written = node.args[0] if node.args else None
            fresh_ok = isinstance(written, torch.fx.Node) and written.op == "call_function"
            input_ok = (
                graph is top and isinstance(written, torch.fx.Node) and written.op == "placeholder"
            )
            if (
                twin is None
                or not (fresh_ok or input_ok)
                or is_view(written)
                or any(is_view(user) for user in written.users)
            ):
                return False
            with graph.inserting_before(node):
                fresh = graph.call_function(twin, node.args, node.kwargs)
            fresh.meta = dict(node.meta)
            order[fresh] = order[node]
            node.replace_all_uses_with(fresh)
            later = [u for u in written.users if u is not node and order[u] > order[node]]
            for user in later:
                user.replace_input_with(written, fresh)
            graph.erase_node(node)
            base = written if input_ok else origin.get(written)
            if base is not None:
                origin[fresh] = base
                last[base] = fresh
        if last:
            with graph.inserting_before(graph.output_node()):
                for base, value in last.items():
                    copy = graph.call_function(torch.ops.aten.copy_.default, (base, value))
                    copy.meta = dict(base.meta)
        graph.lint()
    if recompile:
        gm.recompile()  # the graphs inside too
    return True


INDEX = "fxrl-direct-v1"  # the cache's folder of this index, and its version


def _graph_kwargs(cpp: bool) -> dict[str, Any]:
    """What ``compile_fx_forward`` hands inductor for an inference graph on the CPU."""
    from torch._inductor.utils import BoxedBool

    return {
        "static_input_idxs": [],
        "cudagraphs": BoxedBool(False),
        "is_backward": False,
        "is_inference": True,
        "boxed_forward_device_index": None,
        "cpp_wrapper": cpp,
        "fx_wrapper": False,
    }


def _index_path(gm: torch.fx.GraphModule, fakes: list[Any], cpp: bool) -> str | None:
    """Where this graph's entry of fxrl's index lies: a file named by inductor's own hash
    of the graph before its joint-graph passes (the graph, its constants, the inputs'
    metadata, inductor's config, torch's version), holding the FX graph cache key that
    the compile of it was stored under. None when inductor's cache is off or the graph
    cannot be hashed."""
    from torch._inductor import config
    from torch._inductor.codecache import BypassFxGraphCache, compiled_fx_graph_hash
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    if config.force_disable_caches or not config.fx_graph_cache:
        return None
    try:
        key, _ = compiled_fx_graph_hash(gm, fakes, _graph_kwargs(cpp), list(range(len(fakes))))
    except BypassFxGraphCache:
        return None
    return os.path.join(cache_dir(), INDEX, key)


def _load_indexed(index: str | None, gm: torch.fx.GraphModule, fakes: list[Any], cpp: bool) -> Any:
    """The program the index names, from inductor's FX graph cache; None when the index
    or the cache has no entry."""
    from torch._inductor.codecache import FxGraphCache
    from torch._inductor.output_code import CompiledFxGraphConstantsWithGm

    try:
        with open(index) as f:  # type: ignore[arg-type]
            key = f.read().strip()
    except (OSError, TypeError):
        return None
    constants = CompiledFxGraphConstantsWithGm(gm)
    compiled, _ = FxGraphCache.load_with_key(
        key, [], fakes, local=True, remote_cache=None, is_backward=False, constants=constants
    )
    if compiled is None:
        return None
    compiled._fx_graph_cache_key = key
    compiled.post_compile(fakes, constants, _graph_kwargs(cpp))
    return compiled


def _save_index(index: str | None, compiled: Any) -> None:
    key = getattr(compiled, "_fx_graph_cache_key", None)
    if index is None or not key:
        return
    write_cache_file(index, key)  # not written: the next process runs the passes


def compile_forward(
    gm: torch.fx.GraphModule, tensors: list[torch.Tensor], options: dict[str, Any]
) -> Callable[..., Any]:
    """Inductor's inference compile of ``gm`` (functional, decomposed, traced on fake
    tensors), as AOTAutograd's inference path would call it; a callable of the tensors."""
    from torch._dynamo import compiled_autograd
    from torch._dynamo.utils import detect_fake_mode
    from torch._functorch import config as functorch_config
    from torch._guards import TracingContext, tracing
    from torch._inductor import config
    from torch._inductor.compile_fx import (
        compile_fx_forward,
        compile_fx_inner,
        create_compiler_config_extra,
        get_cpp_wrapper_config,
        get_num_model_outputs,
    )
    from torch._inductor.decomposition import select_decomp_table
    from torch._inductor.virtualized import V
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    fakes = [node.meta["val"] for node in gm.graph.find_nodes(op="placeholder")]
    fake_mode = detect_fake_mode(fakes) or FakeTensorMode(shape_env=ShapeEnv())
    with config.patch(options):
        cpp = bool(config.cpp_wrapper)
        inner = functools.partial(
            compile_fx_inner,
            cpp_wrapper=cpp,
            fx_wrapper=False,
            compile_region_name=None,
            get_decomp_fn=select_decomp_table,
        )
        with (
            config.patch(get_cpp_wrapper_config()) if cpp else contextlib.nullcontext(),
            V.set_real_inputs(tensors),
            torch._dispatch.python.enable_python_dispatcher(),
            V.set_fake_mode(fake_mode),
            tracing(TracingContext(fake_mode)),
            compiled_autograd._disable(),
            functorch_config.patch(unlift_effect_tokens=True),
        ):
            index = _index_path(gm, fakes, cpp)
            compiled = _load_indexed(index, gm, fakes, cpp)
            if compiled is None:
                compiled = compile_fx_forward(
                    gm,
                    fakes,
                    num_orig_model_outputs=get_num_model_outputs(gm),
                    num_example_inputs=len(fakes),
                    compiler_config_extra=create_compiler_config_extra(gm),
                    inner_compile=inner,
                    is_inference=True,
                )
                _save_index(index, compiled)

    def run(*args: torch.Tensor) -> Any:
        return compiled(list(args))

    return run
