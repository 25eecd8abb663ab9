"""``fxrl.compile(fn)``: compile a pure function over pytrees the way ``jax.jit`` does.

``torch.compile`` guards every call with dynamo: it checks the Python objects it read
(every dataclass field of a nested env state, the env object, module globals) and its
generated code rebuilds the nested outputs in Python. For a pure function none of that
is needed: the output depends only on the input leaves. So ``fxrl.compile``

- traces ``fn`` once per input signature (pytree structure, static leaves, and each
  tensor's shape and dtype; inputs are made dense first, so a stride-0 leaf of a vmapped
  init and the dense output fed back in share one program) with ``make_fx`` on fake
  tensors, into one flat graph of aten ops: no dynamo, so no guards, no graph breaks (a
  function that cannot be traced whole fails loudly instead of running eagerly) and no
  shared code-object cache to exhaust;
- keeps loops rolled: ``fxrl.scan`` traced here is torch's ``scan``
  operator, its body compiled once and run as a loop inside the program (``lax.scan``
  under ``jax.jit``), so a whole update (rollout, advantages, every minibatch step) is
  one program whose compile time does not grow with the loops' lengths;
- drops outputs that are inputs passed through (env params, keys kept in the state) or
  repeats of another output, and hands those back directly;
- compiles the rest with inductor, with options scoped to this function:
  ``realize_reads_threshold=1`` stores a value read by several consumers instead of
  inlining it into each, which keeps Threefry's 20 rounds from growing into huge loop
  bodies (the batched CartPole step: 5 s of compile CPU instead of 28 s); on the CPU
  (torch 2.13) ``cpp_wrapper=True``, so the code around the kernels (allocations, kernel calls, the
  rolled loops themselves) is C++ rather than inductor's generated Python; on a GPU the
  whole program (loops included) is captured as one CUDA graph and replayed
  (``fxrl.cuda_graph``, see ``FXRL_OPTIONS``); and each program is specialized to its
  inputs' shapes (no symbolic sizes);
- stores the program in inductor's on-disk FX graph cache (``TORCHINDUCTOR_CACHE_DIR``):
  another process tracing the same graph loads it instead of compiling; the key is the
  graph itself, so a changed function never gets a stale program;
- on each call, flattens the arguments with optree (C++), looks the signature up in a
  bounded LRU (``MAX_PROGRAMS`` per compiled function) and calls the program directly.

``with watch() as built:`` (``from fxrl.compile import watch``) collects a
``CompileRecord`` (name, seconds, and whether inductor loaded the program from its cache)
for each program compiled inside the block: the run loop's progress display shows the
compile as its own phase with it.

Non-tensor leaves (Python numbers, strings, ``None``) are static: a new value compiles a
new program, as ``static_argnums`` do in ``jax.jit``. ``fn`` must be pure: closed-over
tensors are baked into the program as constants.

Under ``torch.func.vmap`` the call unwraps its batched arguments and runs the compiled
``vmap(fn)`` instead, so ``vmap(fxrl.compile(f))`` is compiled code too (with
``torch.compile`` it graph-breaks and silently runs eagerly).

torch internals used here, and why (the places to check on a torch upgrade):
``torch.fx.experimental.proxy_tensor.make_fx`` (tracing without dynamo);
``torch._inductor.compile_fx.compile_fx`` (inductor on an aten graph, with
``ignore_shape_env`` for static shapes); ``fxrl._direct`` (on torch 2.13, a graph traced
with inductor's decompositions and rewritten free of in-place ops goes to inductor's
``compile_fx_forward`` without AOTAutograd's two passes); ``fxrl._cpp_wrapper_patch``
(a fix of the C++ wrapper, torch 2.13 only); ``fxrl._codegen_patch`` (inductor's dtype-propagation
handler built once per compile instead of once per generated op, and a float32 ``tanh`` in a
CPU kernel written with ``exp`` instead of Sleef's, torch 2.13 only);
``fxrl._isa_patch`` (inductor's vector-ISA libraries probed by a subprocess once per
inductor cache, not once per process, and the first check run in a thread beside fxrl's
trace, torch 2.13 only); ``fxrl._build_patch`` (a C++-wrapper
program's wrapper and kernels compiled by two g++ at once, the kernels at ``-O2``, torch
2.13 only);
``torch._guards.tracing`` with a ``FakeTensorMode``/``ShapeEnv`` (the FX graph cache
needs a tracing context);
``torch._C._DisableFuncTorch`` and ``torch._C._functorch`` (unwrapping an enclosing
vmap); ``torch._higher_order_ops.scan.scan_op`` (in ``fxrl.scan``: the rolled loop,
called directly because its Python wrapper runs dynamo, which refuses an enclosing vmap);
``torch.cuda.CUDAGraph`` on inductor's compiled callable (``fxrl.cuda_graph``: it relies on
inductor lowering a scan to a while loop counted on the CPU, torch 2.11 and 2.13).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import functools
import operator
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import optree
import torch
from torch._C import _functorch

from fxrl import tree
from fxrl._callable_module import make_callable

__all__ = [
    "DEFAULT_OPTIONS",
    "MAX_PROGRAMS",
    "CompileRecord",
    "Compiled",
    "compile",
    "is_traced",
    "is_tracing",
    "trace",
    "watch",
]

# size_asserts: each program is looked up by its inputs' exact shapes (all dense), so
# inductor's per-call re-check of every input (a Python call per tensor) is redundant.
# unsafe_marked_cacheable_functions: inductor's FX graph cache refuses graphs holding a
# higher-order op unless it is marked; a scan's body is a sub-module of the traced graph,
# pickled (code included) into the cache key, so a changed body is a new key (tested).
# cpp_wrapper (CPU programs on torch 2.13 only; see _options): inductor's generated
# wrapper, which allocates the buffers and calls the kernels, is C++ instead of Python,
# so a rolled loop iterates in C++ (informal, on a loaded 2-core machine: a PPO CartPole
# update 14.5 -> 10.5 ms at 1 seed, 43.5 -> 36.6 ms at 8 vmapped seeds, bit-identical).
# cpp_wrapper_build_separate: the wrapper compiled apart from the kernels (at -O3), instead
# of one -O3 file, which compiled slower than the Python wrapper's program (informal,
# PPO's update at 1 seed: 28 s this way, 41 s with the Python wrapper).
# aot_inductor.compile_wrapper_opt_level: that wrapper at -Og instead of inductor's -O1:
# g++ on the wrapper of PPO's 8-seed update takes half the CPU (1.4 against 2.9 s) and
# the updates run as fast (docs/results/wrapper_opt_level.jsonl); at -O0 the updates ran
# 5 to 10% slower (compile_levers.jsonl, and informal on an Intel Xeon).
# cpp.enable_loop_tail_vec: a loop whose length is not a multiple of the vector width
# runs its last elements with the scalar kernel inductor writes anyway, instead of a
# third, masked-vector copy of every loop body; fxrl's batches are small, so most loops
# have a tail. In the cold compile of PPO's 8-seed CartPole update, kernel code
# generation about 7.5 -> 6.1 CPU s (three runs each, informal, a loaded 2-core AMD
# EPYC); a steady update unchanged (36.2 vs 35.6 ms, both programs alternated in one
# process). Tail elements may round differently in the last bit (scalar libm against
# vectorized math), within the compiled == eager tolerances.
DEFAULT_OPTIONS: dict[str, Any] = {
    "realize_reads_threshold": 1,
    "size_asserts": False,
    "unsafe_marked_cacheable_functions": ["torch.ops.higher_order.scan"],
    "cpp.enable_loop_tail_vec": False,
    "cpp_wrapper": True,
    "cpp_wrapper_build_separate": True,
    "aot_inductor.compile_wrapper_opt_level": "Og",
}

# Defaults that hold for programs on the CPU, with the torch fxrl._cpp_wrapper_patch
# fixes, only: dropped for a program with a tensor on another device, or on another
# torch (whose C++ wrapper may still fail on loops), unless the caller's options name
# them.
_CPU_DEFAULTS = (
    "cpp_wrapper",
    "cpp_wrapper_build_separate",
    "aot_inductor.compile_wrapper_opt_level",
)

# fxrl's own options, given in the same dict as inductor's (``options=``):
#   fxrl.cuda_graph: a program whose inputs are all on one CUDA device runs as one CUDA
#     graph (torch.cuda.CUDAGraph) captured on its second call and replayed after: the
#     whole program, its rolled loops included, is one launch. Inductor lowers a rolled
#     loop to a while loop whose counter lives on the CPU (its scan-to-while pass), so a
#     fixed-length loop reads nothing back from the GPU and a capture records every
#     iteration; inductor's own CUDA graphs (triton.cudagraphs) leave programs holding a
#     loop out (torch 2.11 and 2.13), and its cudagraph trees hand back outputs the next
#     replay overwrites. Here inputs are copied into the graph's inputs and outputs
#     copied out, so a compiled function stays pure. Default: on for CUDA programs; a
#     program that writes an input in place (an off-policy update's replay buffer) or
#     whose capture fails runs as compiled (the failure is warned about once).
FXRL_OPTIONS = ("fxrl.cuda_graph",)

# Programs kept per compiled function (least recently used dropped first): a function
# called with ever new shapes or static values would otherwise keep every program alive.
MAX_PROGRAMS = 32

_OPTS = {"none_is_leaf": True, "namespace": tree.NAMESPACE}

# True while fxrl.compile traces a function: loops written with fxrl.scan
# then trace as one rolled loop (torch's scan operator) instead of unrolling.
_TRACING: contextvars.ContextVar[bool] = contextvars.ContextVar("fxrl_tracing", default=False)


@dataclasses.dataclass(frozen=True)
class CompileRecord:
    """One program ``fxrl.compile`` built (see ``watch``).

    Attributes:
      name: the compiled function's name.
      seconds: tracing plus inductor, wall time.
      from_cache: inductor loaded the program from its on-disk cache
        (``TORCHINDUCTOR_CACHE_DIR``) instead of generating and compiling code; the
        tracing still ran.
    """

    name: str
    seconds: float
    from_cache: bool


# The lists of the open watch() blocks of this thread or task, innermost last.
_WATCHERS: contextvars.ContextVar[tuple[list[CompileRecord], ...]] = contextvars.ContextVar(
    "fxrl_compile_watchers", default=()
)
# inductor's counters of its two on-disk caches: a program comes from the cache when
# looking it up hit and nothing missed or bypassed the cache
_HITS = (("inductor", "fxgraph_cache_hit"), ("aot_autograd", "autograd_cache_hit"))
_MISSES = (
    ("inductor", "fxgraph_cache_miss"),
    ("inductor", "fxgraph_cache_bypass"),
    ("aot_autograd", "autograd_cache_miss"),
    ("aot_autograd", "autograd_cache_bypass"),
)


@contextlib.contextmanager
def watch() -> Iterator[list[CompileRecord]]:
    """Collect a ``CompileRecord`` for each program ``fxrl.compile`` builds inside the block.

        from fxrl.compile import watch         # or fxrl.compile.watch()

        with watch() as built:
            state, metrics = update(state)     # the first call compiles
        built   # [CompileRecord(name='update', seconds=31.2, from_cache=False)]

    An empty list: nothing was compiled (the programs were built before, in this process).
    Blocks nest; each sees the programs built inside it (this thread or task only).
    """
    records: list[CompileRecord] = []
    token = _WATCHERS.set((*_WATCHERS.get(), records))
    try:
        yield records
    finally:
        _WATCHERS.reset(token)


def _cache_counts() -> tuple[int, int]:
    from torch._dynamo.utils import counters

    hits = sum(counters[group][name] for group, name in _HITS)
    return hits, sum(counters[group][name] for group, name in _MISSES)


def is_tracing() -> bool:
    """Whether ``fxrl.compile`` is tracing the calling code (loops should stay rolled)."""
    return _TRACING.get()


def is_traced(x: Any) -> bool:
    """Whether ``x`` is a tensor of a trace in progress, whose values cannot be read: a
    fake tensor (``fxrl.compile``, ``make_fx``) or one wrapped by a torch.func transform
    (vmap, grad, functionalization)."""
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(x, torch.Tensor) and (
        isinstance(x, FakeTensor)
        or _functorch.is_functorch_wrapped_tensor(x)
        or _functorch.is_functionaltensor(x)
    )


def _trace(
    fn: Callable[..., Any], spec: Any, leaves: list[Any], decompose: bool = False
) -> tuple[Any, Any, list[int]]:
    """``fn`` traced on fake tensors into one flat aten graph of its tensor leaves:
    (graph module, output pytree spec, positions of the tensor leaves). ``decompose``:
    with inductor's decompositions applied as it traces (what AOTAutograd would do)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    table = None
    if decompose:
        from torch._inductor.decomposition import select_decomp_table

        table = select_decomp_table()

    tensor_pos = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    static = [None if isinstance(x, torch.Tensor) else x for x in leaves]  # keep no tensors
    out_spec: list[Any] = []

    def flat(*tensors: torch.Tensor) -> tuple[Any, ...]:
        args = list(static)
        for i, t in zip(tensor_pos, tensors, strict=True):
            args[i] = t
        out_leaves, spec_out = optree.tree_flatten(fn(*optree.tree_unflatten(spec, args)), **_OPTS)
        out_spec.append(spec_out)
        return tuple(out_leaves)

    tensors = _distinct([leaves[i] for i in tensor_pos])
    token = _TRACING.set(True)
    try:
        gm = make_fx(
            flat, decomposition_table=table, tracing_mode="fake", _allow_non_fake_inputs=True
        )(*tensors)
    finally:
        _TRACING.reset(token)
    return gm, out_spec[-1], tensor_pos


def _lift_loop_constants(gm: torch.fx.GraphModule, recompile: bool = True) -> None:
    """Constant tensors inside a rolled loop's body (``torch.tensor(...)`` made there, a
    closed-over tensor of an env or a network) become extra inputs of the loop, read from
    the outer graph: inductor's functionalization cannot take a constant captured inside
    a loop body ("FunctionalTensor on its own"). A loop inside a loop's body is done
    first, so its constants become the outer body's, then the outer loop's inputs."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not torch.ops.higher_order.scan:
            continue
        body_name = node.args[0].target
        body = getattr(gm, body_name)
        _lift_loop_constants(body, recompile=False)
        consts = [
            n
            for n in body.graph.nodes
            if n.op == "get_attr" and isinstance(getattr(body, n.target, None), torch.Tensor)
        ]
        if not consts:
            continue
        last = [n for n in body.graph.nodes if n.op == "placeholder"][-1]
        outer = []
        # One loop input per distinct constant: the body's trace may hold one tensor
        # under several names (a module-level constant read twice), and two loop inputs
        # sharing memory fail inductor's check that a loop's inputs do not alias.
        lifted: dict[tuple, torch.fx.Node] = {}
        storages: set[int] = set()
        for c in consts:
            value = getattr(body, c.target)
            view = (value.untyped_storage().data_ptr(), value.storage_offset(),
                    tuple(value.shape), value.stride(), value.dtype)  # fmt: skip
            if view in lifted:
                c.replace_all_uses_with(lifted[view])
                body.graph.erase_node(c)
                continue
            if value.numel() and view[0] in storages:  # another view of one storage
                value = value.clone()
            storages.add(view[0])
            i = len(outer)
            with body.graph.inserting_after(last):
                last = body.graph.placeholder(f"lifted_{i}")
            last.meta = dict(c.meta)
            c.replace_all_uses_with(last)
            lifted[view] = last
            name = f"{body_name}_const_{i}"
            gm.register_buffer(name, value)
            body.graph.erase_node(c)
            with gm.graph.inserting_before(node):
                attr = gm.graph.get_attr(name)
            attr.meta = dict(last.meta)
            outer.append(attr)
        combine, init, xs, extra = node.args
        node.args = (combine, init, xs, (*extra, *outer))
    if recompile:  # the graphs inside too
        gm.recompile()


def _hoist_unchanged_carries(gm: torch.fx.GraphModule, recompile: bool = True) -> None:
    """A rolled loop's carried values that its body hands back unchanged (the network's
    params carried through a rollout, a batch carried through the minibatch loop) become
    read-only extra inputs of the loop, and the loop's final value of each is its initial
    one. Carried, each was copied in every iteration (a loop's outputs may not alias its
    inputs, so ``fxrl.scan`` copies what the body returns). A loop inside a loop's body
    is done first."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not torch.ops.higher_order.scan:
            continue
        combine, init, xs, extra = node.args
        body = getattr(gm, combine.target)
        _hoist_unchanged_carries(body, recompile=False)
        placeholders = [n for n in body.graph.nodes if n.op == "placeholder"]
        out = body.graph.output_node()
        outs = list(out.args[0])

        def source(n: Any) -> Any:  # through fxrl.scan's own copy
            while (
                isinstance(n, torch.fx.Node)
                and n.target is torch.ops.aten.clone.default
                and len(n.args) == 1
            ):
                n = n.args[0]
            return n

        same = [i for i in range(len(init)) if source(outs[i]) is placeholders[i]]
        if not same or any(u.target is not operator.getitem for u in node.users):
            continue
        last = placeholders[-1]
        for j, i in enumerate(same):
            with body.graph.inserting_after(last):
                last = body.graph.placeholder(f"unchanged_{j}")
            last.meta = dict(placeholders[i].meta)
            placeholders[i].replace_all_uses_with(last)
        keep = [i for i in range(len(outs)) if i not in same]
        out.args = ([outs[i] for i in keep],)
        for i in same:
            body.graph.erase_node(placeholders[i])
        body.graph.eliminate_dead_code()
        new_init = [v for i, v in enumerate(init) if i not in same]
        node.args = (combine, new_init, xs, (*extra, *(init[i] for i in same)))
        position = {old: new for new, old in enumerate(keep)}
        for user in list(node.users):
            index = user.args[1]
            if index in position:
                user.args = (node, position[index])
            else:  # the loop's final value of an unchanged carry is its initial one
                user.replace_all_uses_with(init[index])
                gm.graph.erase_node(user)
        if "val" in node.meta:
            node.meta["val"] = [node.meta["val"][i] for i in keep]
    if recompile:
        gm.recompile()


def _drop_unread_loop_inputs(gm: torch.fx.GraphModule, recompile: bool = True) -> None:
    """A rolled loop's extra inputs that its body never reads are dropped. A body that
    closes over a whole train state (to read its params) gets every leaf of it, the
    replay buffer included; a loop holding the buffer before it is written in place
    stops inductor from writing it in place (it copies the whole buffer instead)."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not torch.ops.higher_order.scan:
            continue
        combine, init, xs, extra = node.args
        body = getattr(gm, combine.target)
        placeholders = [n for n in body.graph.nodes if n.op == "placeholder"]
        first = len(init) + len(xs)
        keep = []
        for value, ph in zip(extra, placeholders[first:], strict=True):
            if ph.users:
                keep.append(value)
            else:
                body.graph.erase_node(ph)
        if len(keep) < len(extra):
            node.args = (combine, init, xs, tuple(keep))
    gm.graph.eliminate_dead_code()
    if recompile:
        gm.recompile()


def _distinct(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """The example inputs with no two sharing memory: a tensor passed as two leaves (or
    two views of one storage) would otherwise be traced as one input, and a later call
    with two different tensors would compute with only one of them."""
    seen: set[int] = set()
    out = []
    for t in tensors:
        ptr = t.untyped_storage().data_ptr() if t.numel() else None
        if ptr is not None and ptr in seen:
            t = t.clone()
        elif ptr is not None:
            seen.add(ptr)
        out.append(t)
    return out


def _options(given: dict[str, Any], tensors: list[Any]) -> dict[str, Any]:
    """Inductor's options for one program: ``given`` over ``DEFAULT_OPTIONS`` (fxrl's own
    options left out), less the C++ wrapper defaults the caller did not set when a tensor
    is on another device or this torch is not the one ``fxrl._cpp_wrapper_patch`` fixes."""
    from fxrl import _cpp_wrapper_patch

    merged = {k: v for k, v in {**DEFAULT_OPTIONS, **given}.items() if not k.startswith("fxrl.")}
    if not _cpp_wrapper_patch.applies() or any(t.device.type != "cpu" for t in tensors):
        for k in _CPU_DEFAULTS:
            if k not in given:
                merged.pop(k, None)
    return merged


def _own_options(given: dict[str, Any], tensors: list[Any]) -> dict[str, Any]:
    """fxrl's own options for one program (``FXRL_OPTIONS``): ``given``'s, else what fits
    the inputs' devices: ``fxrl.cuda_graph`` on when every input is on one CUDA device."""
    own = {k: v for k, v in given.items() if k.startswith("fxrl.")}
    unknown = sorted(set(own) - set(FXRL_OPTIONS))
    if unknown:
        raise ValueError(
            f"fxrl.compile: unknown fxrl option(s) {unknown}; fxrl's own options are "
            f"{list(FXRL_OPTIONS)} (other keys are inductor's)."
        )
    devices = {t.device for t in tensors}
    on_one_gpu = len(devices) == 1 and next(iter(devices)).type == "cuda"
    if own.get("fxrl.cuda_graph") and not on_one_gpu:
        where = sorted(str(d) for d in devices) or "no tensor inputs"
        raise ValueError(
            f"fxrl.compile: fxrl.cuda_graph=True needs every input on one CUDA device; this "
            f"call's inputs are on {where}. Move them (x.to('cuda')), or leave the option out."
        )
    own.setdefault("fxrl.cuda_graph", on_one_gpu)
    return own


def _writes_inputs(gm: torch.fx.GraphModule) -> bool:
    """Whether the traced program writes one of its inputs in place (an off-policy
    update writes its replay buffer; a pure function writes none): such a program cannot
    be replayed from copies of its inputs. An op writing a tensor that is an input, or a
    view of one, counts; writes into tensors the program made do not."""

    from fxrl._direct import is_view

    def base(node: Any) -> Any:
        # through views (ops whose output aliases their first input) to the tensor viewed
        while isinstance(node, torch.fx.Node) and node.op == "call_function" and is_view(node):
            if not node.args:
                break
            node = node.args[0]
        return node

    for node in gm.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        schema = target._schema
        if not schema.is_mutable:
            continue
        for arg, value in zip(schema.arguments, node.args, strict=False):
            written = arg.alias_info is not None and arg.alias_info.is_write
            if written and getattr(base(value), "op", None) == "placeholder":
                return True
    return False


class _CudaGraph:
    """A compiled program run as one CUDA graph (``fxrl.cuda_graph``): the first call runs
    it as compiled (warming it up), the second captures it on copies of its inputs, and
    every call from then on copies the inputs in, replays, and copies the outputs out."""

    def __init__(self, run: Callable[..., Any]) -> None:
        self.run = run
        self.calls = 0
        self.graph: Any = None  # torch.cuda.CUDAGraph once captured; False: capture failed

    def __call__(self, *tensors: torch.Tensor) -> list[torch.Tensor]:
        self.calls += 1
        if self.graph is False or self.calls == 1:
            return self.run(*tensors)
        if self.graph is None:
            self._capture(tensors)
            if self.graph is False:
                return self.run(*tensors)
        for dst, src in zip(self.inputs, tensors, strict=True):
            dst.copy_(src)
        self.graph.replay()
        return [x.clone() for x in self.outputs]

    def _capture(self, tensors: tuple[torch.Tensor, ...]) -> None:
        import warnings

        self.inputs = [t.clone() for t in tensors]
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        try:
            with torch.cuda.graph(graph):
                self.outputs = list(self.run(*self.inputs))
            # a replay recomputes GPU work only: an output made on the host would keep
            # its value from the capture
            host = [o for o in self.outputs if o.device.type != "cuda"]
            if host:
                raise RuntimeError(f"{len(host)} output(s) are made on {host[0].device}")
        except Exception as e:  # an op that cannot be captured (a host read of GPU data)
            self.graph, self.inputs, self.outputs = False, [], []
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            warnings.warn(
                f"fxrl.compile: this program could not be captured as a CUDA graph ({first}); "
                "it runs as compiled. options={'fxrl.cuda_graph': False} skips the attempt.",
                RuntimeWarning,
                stacklevel=3,
            )
            return
        self.graph = graph


class _Program:
    """``fn`` traced and compiled for one input signature; called with the flat leaves."""

    def __init__(self, fn: Callable[..., Any], spec: Any, leaves: list[Any], given: dict):
        from fxrl import _direct

        start, (hits, misses) = time.perf_counter(), _cache_counts()
        graphed = None
        if _direct.ENABLED and _direct.applies(leaves):
            # a graph inductor cannot lower as it stands (one it meets only after
            # AOTAutograd's passes) is traced again and takes AOTAutograd's path
            with contextlib.suppress(Exception):
                graphed = self._build(fn, spec, leaves, given, direct=True)
        if graphed is None:
            hits, misses = _cache_counts()  # a failed direct attempt's lookup is not this one
            graphed = self._build(fn, spec, leaves, given, direct=False)
        if graphed:
            self.compiled = _CudaGraph(self.compiled)
        watchers = _WATCHERS.get()
        if watchers:
            now_hits, now_misses = _cache_counts()
            record = CompileRecord(
                getattr(fn, "__name__", type(fn).__name__),
                time.perf_counter() - start,
                now_hits > hits and now_misses == misses,
            )
            for records in watchers:
                records.append(record)

    def _build(
        self, fn: Callable[..., Any], spec: Any, leaves: list[Any], given: dict, direct: bool
    ) -> bool | None:
        """Trace and compile; whether the program is to be run as a CUDA graph, or None
        when ``direct`` and the graph holds a mutation ``fxrl._direct`` cannot rewrite."""
        from fxrl import _build_patch, _codegen_patch, _cpp_wrapper_patch, _direct, _isa_patch

        if any(isinstance(x, torch.Tensor) and x.device.type == "cpu" for x in leaves):
            _isa_patch.check_in_background()  # inductor's first-time g++ probes, beside the trace
        gm, self.out_spec, self.tensor_pos = _trace(fn, spec, leaves, decompose=direct)
        # each graph's Python code is generated once, below, not after every pass
        _lift_loop_constants(gm, recompile=False)
        _hoist_unchanged_carries(gm, recompile=False)
        _drop_unread_loop_inputs(gm, recompile=False)
        tensors = _distinct([leaves[i] for i in self.tensor_pos])
        options = _options(given, tensors)
        own = _own_options(given, tensors)
        self.plan, keep = _prune_outputs(gm)
        gm.graph.output_node().args = (tuple(keep),)
        gm.graph.eliminate_dead_code()
        from torch._inductor.compile_fx import compile_fx

        if direct and not _direct.functionalize(gm, recompile=False):
            return None
        gm.recompile()

        # An enclosing vmap must not see inductor's passes; the tracing context gives
        # inductor's on-disk FX graph cache the shape env it needs (see _cache_context).
        # ignore_shape_env: the program is specialized to its inputs' shapes (each shape
        # gets its own program anyway). Without it inductor fakes the inputs in that
        # shape env with symbolic sizes and compiles dynamic-shape kernels, and lowering a
        # loop whose output shape keeps a symbol fails ("KeyError: s..").
        # cpp_wrapper: inductor's C++ wrapper needs a fix to build a loop (see that module).
        graphed = own["fxrl.cuda_graph"] and not _writes_inputs(gm)
        cpp = options.get("cpp_wrapper")
        patch = _cpp_wrapper_patch.patched() if cpp else contextlib.nullcontext()
        _isa_patch.wait()
        with (
            torch._C._DisableFuncTorch(),
            contextlib.nullcontext() if direct else _cache_context(),
            patch,
            _codegen_patch.patched(),
            _isa_patch.patched(),
            _build_patch.patched() if cpp else contextlib.nullcontext(),
        ):
            if direct:
                self.compiled = _direct.compile_forward(gm, tensors, options)
            else:
                self.compiled = compile_fx(
                    gm, tensors, config_patches=options, ignore_shape_env=True
                )
        return graphed

    def __call__(self, tensors: list[torch.Tensor], given: list[torch.Tensor]) -> Any:
        """``tensors``: the dense inputs the program reads; ``given``: the caller's own
        tensors, handed back where an input passes through (the same objects)."""
        outs = self.compiled(*tensors)
        leaves = [outs[v] if kind == 0 else given[v] if kind == 1 else v for kind, v in self.plan]
        return optree.tree_unflatten(self.out_spec, leaves)


def _cache_context() -> Any:
    """A tracing context with a fresh fake mode and shape env, as dynamo opens one.

    Inductor's FX graph cache (``FxGraphCache``) looks its shape env up in the current
    ``TracingContext`` and bypasses the cache when there is none; ``make_fx`` does not
    open one. Inside it, a program compiled once is loaded from ``TORCHINDUCTOR_CACHE_DIR``
    by every later process (the key is the traced graph, the inductor options and torch's
    version, so a changed function gets a new program, never a stale one).
    """
    from torch._guards import TracingContext, tracing
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    return tracing(TracingContext(FakeTensorMode(shape_env=ShapeEnv())))


def _prune_outputs(gm: torch.fx.GraphModule) -> tuple[list[tuple[int, Any]], list[Any]]:
    """Per output: (0, index among the kept graph outputs), (1, input index) for an input
    passed through, or (2, value) for a non-tensor constant; and the nodes to keep."""
    inputs = {node: i for i, node in enumerate(gm.graph.find_nodes(op="placeholder"))}
    plan: list[tuple[int, Any]] = []
    keep: list[Any] = []
    for out in gm.graph.output_node().args[0]:
        if not isinstance(out, torch.fx.Node):
            plan.append((2, out))
        elif out in inputs:
            plan.append((1, inputs[out]))
        else:
            if out not in keep:
                keep.append(out)
            plan.append((0, keep.index(out)))
    return plan, keep


def _signature(leaves: list[Any]) -> Hashable:
    sig = []
    for x in leaves:
        if isinstance(x, torch.Tensor):  # dense by now (see Compiled.__call__)
            sig.append((x.shape, x.dtype, x.device, x.requires_grad))
            continue
        try:
            hash(x)
        except TypeError:
            raise TypeError(
                f"fxrl.compile: an argument leaf {x!r} ({type(x).__name__}) is neither a tensor "
                "nor hashable, so it cannot be a static argument. Pass a tensor, or close over "
                "it in the compiled function."
            ) from None
        sig.append((type(x), x))
    return tuple(sig)


class Compiled:
    """A compiled pure function over pytrees (see ``fxrl.compile``)."""

    def __init__(self, fn: Callable[..., Any], options: dict[str, Any]) -> None:
        self.fn = fn
        self.options = options
        self._programs: collections.OrderedDict[Hashable, _Program] = collections.OrderedDict()
        self._vmapped: dict[Hashable, Compiled] = {}
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any) -> Any:
        leaves, spec = optree.tree_flatten(args, **_OPTS)
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        if any(_functorch.is_batchedtensor(t) for t in tensors):
            return self._call_vmapped(leaves, spec)
        given = tensors
        if not all(t.is_contiguous() for t in tensors):
            # One program per shape, not per layout: a vmapped init's stride-0 leaves or a
            # transposed output fed back in would otherwise compile the function again.
            leaves = [x.contiguous() if isinstance(x, torch.Tensor) else x for x in leaves]
            tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        key = (spec, _signature(leaves))
        program = self._programs.get(key)
        if program is None:
            if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
                raise TypeError(
                    "fxrl.compile: an argument requires grad; a compiled function is a pure "
                    "forward program. Take gradients inside it (torch.func.grad), or pass "
                    "tensors.detach()."
                )
            program = self._programs[key] = _Program(self.fn, spec, leaves, self.options)
            if len(self._programs) > MAX_PROGRAMS:
                self._programs.popitem(last=False)
        else:
            self._programs.move_to_end(key)
        return program(tensors, given)

    def _call_vmapped(self, leaves: list[Any], spec: Any) -> Any:
        """Under vmap: unwrap the innermost level and call the compiled vmap(fn)."""
        level = max(_functorch.maybe_get_level(x) for x in leaves if isinstance(x, torch.Tensor))
        bdims, inner = [], []
        for x in leaves:
            at_level = isinstance(x, torch.Tensor) and _functorch.maybe_get_level(x) == level
            bdims.append(_functorch.maybe_get_bdim(x) if at_level else None)
            inner.append(_functorch.get_unwrapped(x) if at_level else x)
        key = (spec, tuple(bdims))
        compiled = self._vmapped.get(key)
        if compiled is None:
            fn = torch.func.vmap(
                lambda *xs: self.fn(*optree.tree_unflatten(spec, list(xs))), in_dims=tuple(bdims)
            )
            compiled = self._vmapped[key] = Compiled(fn, self.options)
        out = compiled(*inner)
        return optree.tree_map(
            lambda t: _functorch._add_batch_dim(t, 0, level) if isinstance(t, torch.Tensor) else t,
            out,
            **_OPTS,
        )

    def __repr__(self) -> str:
        return f"fxrl.compile({self.fn!r})"


def trace(fn: Callable[..., Any], *args: Any) -> torch.fx.GraphModule:
    """The graph ``fxrl.compile(fn)`` would compile for ``args``: one flat graph of aten
    ops over the tensor leaves (``jax.make_jaxpr``'s role). Loops written with
    ``fxrl.scan`` appear as single ``torch.ops.higher_order.scan``
    nodes, their bodies as sub-graphs; print ``trace(fn, *args).code`` to read it."""
    leaves, spec = optree.tree_flatten(args, **_OPTS)
    leaves = [x.contiguous() if isinstance(x, torch.Tensor) else x for x in leaves]
    return _trace(fn, spec, leaves)[0]


def compile(fn: Callable[..., Any] | None = None, *, options: dict[str, Any] | None = None) -> Any:
    """Compile a pure function of pytrees of tensors; call it like ``fn``.

    ``fxrl.compile(update)``, ``fxrl.compile(torch.func.vmap(env.step))``, or as a
    decorator ``@fxrl.compile``. Positional arguments (pytrees; non-tensor leaves are
    static). See the module docstring for what it does and why.

    Args:
      fn: the pure function.
      options: inductor options for this function, over ``DEFAULT_OPTIONS``
        (``{"realize_reads_threshold": 4}`` is inductor's own default: slower to compile
        Threefry-heavy code, sometimes faster to run; ``{"cpp_wrapper": False}``:
        inductor's Python wrapper, the default for programs off the CPU and on torch
        versions other than 2.13), and fxrl's own (``FXRL_OPTIONS``:
        ``{"fxrl.cuda_graph": False}`` runs a GPU program without capturing it as a CUDA
        graph).
    Returns:
      A ``Compiled`` callable. Its first call with a new input signature compiles.
    """
    if fn is None:
        return lambda f: compile(f, options=options)
    if not callable(fn):
        raise TypeError(f"fxrl.compile: expected a function, got {type(fn).__name__} {fn!r}.")
    return Compiled(fn, dict(options or {}))


# ``fxrl.compile(fn)`` is this module called: the function above (see fxrl._callable_module)
make_callable(__name__, compile)
