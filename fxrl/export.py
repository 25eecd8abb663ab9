"""Export one pure function ``policy(params, *inputs)`` for deployment.

    exported = export(policy, params, obs)            # torch.export, params baked in
    print(exported)                                   # the readable graph
    to_onnx(exported, "policy.onnx")                  # ONNX Runtime, no torch needed
    to_onnx(exported, "int8.onnx", quantize="int8", calibration=frames)   # int8 weights
    to_aoti(exported, "policy.pt2")                   # AOTInductor (needs a C++ compiler)
    load_onnx("policy.onnx")(obs.numpy())             # == policy(params, obs)

Params become buffers of the program (ONNX initializers), not inputs. Inputs and outputs
are named after their pytree paths joined by "_": a tensor argument by its parameter name
(``obs``), a dict argument by its keys (``{"agent": {"obs": x}}`` -> ``agent_obs``), any
other container by parameter name and path (``carry_h`` for an ``LSTMCarry`` argument);
outputs likewise, with ``output`` as the name of the return value
(``(action, carry)`` -> ``output_0, output_1_h, output_1_c``; return a dict to choose
the names). ``mode`` goes to ``fn``'s ``mode`` parameter; ``mode="random"`` adds an int64
``key`` input [2] (``fn``'s ``key`` parameter), so the deployed policy draws exactly what
the eager one draws from the same key.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import logging
import re
import shutil
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from fxrl import _onnx_patch, _quantize, deploy, tree
from fxrl._errors import closest, unknown
from fxrl._export_binding import (
    Binding,
    ExportError,
    check_example,
    check_unique,
    dtype_name,
    encode,
    fn_name,
    identifier,
    leaf_names,
    resolver,
)
from fxrl._optional import require
from fxrl.deploy import BATCH, METADATA_KEY, OnnxPolicy, load_onnx

__all__ = [
    "AOTI_OPTIONS",
    "MODES",
    "QUANTIZE",
    "AotiPolicy",
    "ExportError",
    "ExportedPolicy",
    "OnnxPolicy",
    "export",
    "load",
    "load_aoti",
    "load_onnx",
    "to_aoti",
    "to_onnx",
]

MODES = ("random", "mode", "mean")
QUANTIZE = _quantize.QUANTIZE  # to_onnx(quantize=...)
_SHAPES_LOG = "torch.fx.experimental.symbolic_shapes"
_ONNX_LOG = "torch.onnx"


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Silence a torch logger below ERROR (its notices duplicate fxrl's own messages)."""
    log = logging.getLogger(name)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


# ----------------------------------------------------------------------------- export


class ExportedPolicy:
    """A policy traced by ``torch.export`` with its params baked in.

    Call it like the function without params (positional in example-input order, or by
    input name): ``exported(obs)``. ``str(exported)`` is the readable graph; ``program``
    the ``torch.export.ExportedProgram``; ``eager`` calls the original function (None once
    loaded from a file). Save with ``save(path)`` (``.pt2``), read with ``fxrl.export.load``.
    """

    def __init__(self, program: torch.export.ExportedProgram, meta: dict[str, Any]) -> None:
        self.program, self.meta = program, meta
        self.inputs: list[dict[str, Any]] = meta["inputs"]
        self.input_names = [i["name"] for i in self.inputs]
        self.output_names = deploy.leaf_names(meta["output_spec"])
        self.eager: Callable[..., Any] | None = None
        self._module: Callable[..., Any] | None = None

    @property
    def module(self) -> Callable[..., Any]:
        if self._module is None:
            self._module = self.program.module()
        return self._module

    def flat_inputs(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
        """The program's flat input list for a call, checked against names, shapes, dtypes."""
        values = deploy.flatten_args(self.meta["args"], args, kwargs)
        for name, v in values.items():
            if not isinstance(v, torch.Tensor):
                dtype = getattr(torch, self._dtype(name))
                values[name] = torch.as_tensor(v, dtype=dtype)
        deploy.check_inputs(self.inputs, values)
        return [values[n] for n in self.input_names]

    def _dtype(self, name: str) -> str:
        return next(i["dtype"] for i in self.inputs if i["name"] == name)

    def structure(self, flat_outputs: Sequence[Any]) -> Any:
        """The return value of the function, rebuilt from the flat outputs."""
        values = dict(zip(self.output_names, flat_outputs, strict=True))
        return deploy.unflatten(self.meta["output_spec"], values, resolver)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.structure(self.module(*self.flat_inputs(args, kwargs)))

    def graph(self) -> str:
        """The program as readable Python: one line per op, shapes and dtypes annotated.

        (Without the dtype assertions that torch.export inserts after ``.to()`` calls.)
        """
        text = self.program.graph_module.print_readable(print_output=False)
        # Left out: comments pointing into this file's wrapper rather than the user's code,
        # and the dtype assertions torch.export adds after each .to() (no-ops when run).
        own = re.escape(__file__)
        keep = [
            ln
            for ln in text.splitlines()
            if not re.search(own, ln) and "aten._assert_tensor_metadata" not in ln
        ]
        return "\n".join(keep).strip("\n")

    def __str__(self) -> str:
        return f"{self!r}\n{self.graph()}"

    def __repr__(self) -> str:
        ins = ", ".join(f"{i['name']}: {i['dtype']}{i['shape']}" for i in self.inputs)
        return f"ExportedPolicy({self.meta['function']}: {ins} -> {', '.join(self.output_names)})"

    def save(self, path: str | Path) -> Path:
        """Write the program and its naming metadata to ``path`` (``.pt2``)."""
        path = Path(path)
        # serialized in memory, then written as plain bytes: a failed write (a full disk)
        # is the OSError that names its cause, not torch's zip writer's RuntimeError
        buffer = io.BytesIO()
        torch.export.save(self.program, buffer, extra_files={"fxrl.json": json.dumps(self.meta)})
        path.write_bytes(buffer.getvalue())
        return path


def load(path: str | Path) -> ExportedPolicy:
    """Read an ``ExportedPolicy`` written by ``ExportedPolicy.save``."""
    extra = {"fxrl.json": ""}
    program = torch.export.load(Path(path), extra_files=extra)
    if not extra["fxrl.json"]:
        raise ValueError(f"load: {path} was not written by ExportedPolicy.save (no fxrl.json).")
    return ExportedPolicy(program, json.loads(extra["fxrl.json"]))


def _params_module(params: Any) -> tuple[torch.nn.Module, Callable[[torch.nn.Module], Any]]:
    """A module holding the tensor leaves of ``params`` as buffers named by path."""
    holder = torch.nn.Module()
    leaves = tree.leaves(params)
    spec = tree.structure(params)
    raw = tree.path_names(params) if not isinstance(params, torch.Tensor) else ["params"]
    slots: list[str | None] = []
    for name, leaf in zip(raw, leaves, strict=True):
        if not isinstance(leaf, torch.Tensor):
            slots.append(None)
            continue
        name = identifier(name)
        base, i = name, 1
        while hasattr(holder, name):  # "training", "forward"... or a duplicate path
            name, i = f"{base}_{i}", i + 1
        holder.register_buffer(name, leaf.detach().clone())
        slots.append(name)

    def rebuild(module: torch.nn.Module) -> Any:
        vals = [
            getattr(module, s) if s is not None else v for s, v in zip(slots, leaves, strict=True)
        ]
        return tree.unflatten(spec, vals)

    return holder, rebuild


def _wrapper(binding: Binding, params: Any, input_names: list[str], arg_specs: list[Any]):
    holder, rebuild = _params_module(params)
    arg_trees = [tree.structure(v) for _, v in binding.args]
    arg_sizes = [s.num_leaves for s in arg_trees]
    none_mask = [[leaf is None for leaf in tree.leaves(v)] for _, v in binding.args]
    captured: dict[str, Any] = {}

    def forward(self: torch.nn.Module, *flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        it = iter(flat)
        args = []
        for spec, size, nones in zip(arg_trees, arg_sizes, none_mask, strict=True):
            leaves = [None if nones[j] else next(it) for j in range(size)]
            args.append(tree.unflatten(spec, leaves))
        out = binding.call(rebuild(self), args)
        captured["out"] = out
        return tuple(_output_leaves(out))

    kinds = inspect.Parameter.POSITIONAL_OR_KEYWORD
    forward.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", kinds)] + [inspect.Parameter(n, kinds) for n in input_names]
    )
    cls = type("Policy", (torch.nn.Module,), {"forward": forward})
    module = cls()
    for name, buf in holder.named_buffers():
        module.register_buffer(name, buf)
    return module, rebuild, captured


def _output_leaves(out: Any) -> list[torch.Tensor]:
    leaves = []
    for path, leaf in tree.flatten_with_paths(out):
        if not isinstance(leaf, torch.Tensor):
            where = "".join(f"[{p!r}]" for p in path) or "the return value"
            raise ExportError(
                f"export: output {where} is a {type(leaf).__name__}; a policy must return "
                "tensors (or a pytree of them)."
            )
        leaves.append(leaf)
    return leaves


def _user_frame(exc: BaseException) -> str:
    """'file:line: code' of the innermost frame outside torch and this file."""
    torch_dir = str(Path(torch.__file__).parent)
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith(torch_dir)
        and f.filename != __file__
        and "site-packages" not in f.filename
    ]
    if not frames:
        return "the exported function"
    f = frames[-1]
    return f"{f.filename}:{f.lineno}: {(f.line or '').strip()}"


def _data_dependent(exc: BaseException) -> bool:
    names = {type(e).__name__ for e in _chain(exc)}
    text = " ".join(str(e) for e in _chain(exc))
    return (
        bool(
            names & {"GuardOnDataDependentSymNode", "DataDependentOutputException", "UserError"}
            and ("data-dependent" in text or "data dependent" in text or "DataDependent" in text)
        )
        or "GuardOnDataDependentSymNode" in names
    )


def _chain(exc: BaseException | None) -> list[BaseException]:
    out = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _check_global_rng(program: torch.export.ExportedProgram) -> None:
    for node in program.graph.nodes:
        target = node.target
        tags = getattr(target, "tags", ())
        if node.op == "call_function" and torch.Tag.nondeterministic_seeded in tags:
            trace = (node.meta.get("stack_trace") or "").strip().splitlines()
            where = next(
                (ln.strip() for ln in reversed(trace) if ln.strip().startswith("File")), ""
            )
            raise ExportError(
                f"export: the function draws from torch's global random generator ({target}"
                f"{', ' + where if where else ''}). An exported program cannot reproduce "
                "that stream and fxrl code never uses it: draw from an explicit key "
                "(fxrl.random.normal(key, shape), fxrl.distributions.draw(dist, key, mode)) "
                "and export with mode='random', which adds a `key` input."
            )


def export(
    fn: Callable[..., Any],
    params: Any,
    *example_inputs: Any,
    dynamic_batch: bool = False,
    mode: str = "mode",
) -> ExportedPolicy:
    """Trace ``fn(params, *inputs)`` once with ``torch.export``; params become constants.

    Args:
      fn: a pure function ``fn(params, *inputs[, key][, mode=...])`` of tensors. Python
        control flow may depend on shapes but not on tensor values (use ``torch.where``).
      params: a pytree of tensors baked into the program as buffers.
      example_inputs: one example per input after ``params`` (pytrees of tensors).
      dynamic_batch: make dim 0 of every input except ``key`` a symbolic ``batch`` dim,
        so one program serves any batch size. Give examples with a batch of 2 or more.
      mode: ``"mode"`` (deterministic), ``"mean"`` or ``"random"``, passed to ``fn``'s
        ``mode`` parameter; ``"random"`` adds an int64 ``key`` [2] input.
    Returns:
      An ``ExportedPolicy``: callable, printable, ``to_onnx``/``to_aoti``/``save``-able.
    """
    if mode not in MODES:
        raise ValueError(unknown(mode, MODES, "mode", where="export"))
    if not callable(fn):
        raise TypeError(f"export: fn must be a function fn(params, *inputs), got {fn!r}.")
    binding = Binding(fn, tuple(example_inputs), mode)
    if not binding.args:
        raise ExportError(
            f"export: no example inputs for {fn_name(fn)}; pass one example per input "
            "after params, e.g. export(policy, params, obs) with obs shaped as one "
            "observation (or a batch)."
        )

    # Names: leaf names per argument, checked unique (and against structured arg names).
    arg_specs, input_names, flat, inputs_meta = [], [], [], []
    for name, value in binding.args:
        names = leaf_names(name, value, spread_dict=True)
        for leaf_name, leaf in zip(names, tree.leaves(value), strict=True):
            check_example(leaf_name or name, leaf)
            if leaf_name is not None:
                input_names.append(leaf_name)
                # A copy: examples sharing storage (LSTMCarry(zeros, zeros)) would be
                # traced as one aliased input.
                flat.append(leaf.clone())
        arg_specs.append({"name": name, "spec": encode(value, names)})
    structured = [a["name"] for a in arg_specs if a["spec"]["kind"] != "leaf"]
    check_unique("input", input_names, structured)

    dynamic_shapes = None
    if dynamic_batch:
        dynamic_shapes = _batch_dims(input_names, flat)
    for n, x in zip(input_names, flat, strict=True):
        shape: list[Any] = list(x.shape)
        if dynamic_batch and n != "key":
            shape[0] = BATCH
        inputs_meta.append({"name": n, "shape": shape, "dtype": dtype_name(x.dtype)})

    module, rebuild, captured = _wrapper(binding, params, input_names, arg_specs)
    # Run eagerly first: errors in the function itself surface as they would anyway.
    eager_out = module(*flat)
    out_names = leaf_names("output", captured["out"], spread_dict=True)
    check_unique("output", [n for n in out_names if n is not None])
    output_spec = encode(captured["out"], out_names)

    anchor = getattr(torch.fx.proxy, "_register_stack_trace_anchor", None)
    if anchor is not None:  # show the user's lines in the printed graph
        with contextlib.suppress(Exception):
            anchor(fn)
    out, err = io.StringIO(), io.StringIO()
    try:
        # On failure torch prints the partial graph to stderr; fxrl's message replaces it.
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _quiet(_SHAPES_LOG):
            program = torch.export.export(
                module, tuple(flat), dynamic_shapes=dynamic_shapes, strict=False
            )
    except Exception as e:
        sys.stdout.write(out.getvalue())
        if _data_dependent(e):
            raise ExportError(
                f"export: {fn_name(fn)} branches in Python on a tensor's value at "
                f"{_user_frame(e)}. An exported program fixes its control flow when traced, "
                "so `if`/`while`/`bool()`/`.item()` on data cannot be exported: compute both "
                "branches and select with torch.where(cond, a, b) (fxrl.tree.where for "
                "pytrees)."
            ) from e
        if (
            dynamic_batch
            and "batch" in str(e)
            and ("Constraints violated" in str(e) or "specializ" in str(e))
        ):
            raise ExportError(
                f"export(dynamic_batch=True): {fn_name(fn)} fixes the batch size somewhere "
                "(a reshape to a literal size, int(x.shape[0]), a Python loop over the batch); "
                f"use -1 or x.shape[0] instead. torch.export says:\n{e}"
            ) from e
        sys.stderr.write(err.getvalue())
        raise
    sys.stdout.write(out.getvalue())
    sys.stderr.write(err.getvalue())
    _check_global_rng(program)
    # Drop computations whose results are unused (q_value's value next to its action).
    program.graph_module.graph.eliminate_dead_code()
    program.graph_module.recompile()
    meta = {
        "version": 1,
        "function": fn_name(fn),
        "mode": mode,
        "dynamic_batch": dynamic_batch,
        "inputs": inputs_meta,
        "args": arg_specs,
        "output_spec": output_spec,
    }
    exported = ExportedPolicy(program, meta)
    exported.eager = lambda *a, **k: exported.structure(
        _output_leaves(binding.call(rebuild(module), _eager_args(exported, binding, a, k)))
    )
    del eager_out
    return exported


def _eager_args(exported: ExportedPolicy, binding: Binding, args: Any, kwargs: Any) -> list[Any]:
    flat = exported.flat_inputs(args, kwargs)
    it = iter(flat)
    out = []
    for _, value in binding.args:
        leaves = [None if leaf is None else next(it) for leaf in tree.leaves(value)]
        out.append(tree.unflatten(tree.structure(value), leaves))
    return out


def _batch_dims(names: list[str], flat: list[torch.Tensor]) -> dict[str, Any]:
    batch = torch.export.Dim("batch", min=1)
    dims: dict[str, Any] = {}
    sizes = set()
    for n, x in zip(names, flat, strict=True):
        if n == "key":
            dims[n] = None
            continue
        if x.ndim == 0:
            raise ExportError(
                f"export(dynamic_batch=True): input {n!r} has shape []; every input but "
                "`key` needs a leading batch dim. Give batched examples, e.g. obs[None]."
            )
        sizes.add(x.shape[0])
        dims[n] = {0: batch}
    if len(sizes) > 1:
        raise ExportError(
            f"export(dynamic_batch=True): example inputs have different leading dims "
            f"{sorted(sizes)}; the leading dim of every input but `key` is the batch."
        )
    if sizes == {1}:
        raise ExportError(
            "export(dynamic_batch=True): the example batch size is 1, which torch.export "
            "specializes as a constant; give examples with a batch of 2 or more."
        )
    return dims


# ----------------------------------------------------------------------------- ONNX


def to_onnx(
    exported: ExportedPolicy,
    path: str | Path,
    *,
    optimize: bool = True,
    quantize: str | None = None,
    calibration: Iterable[Any] | None = None,
) -> Path:
    """Write ``exported`` as an ONNX model (``torch.onnx.export(dynamo=True)``).

    The file carries fxrl's naming metadata, so ``load_onnx`` (torch-free, in
    ``fxrl/deploy.py``) takes the same arguments and returns the same structure. The
    exporter's function registry is built once per process and the program lowered call by
    call rather than traced again (``fxrl/_onnx_patch.py``: 3-6x faster, a model computing
    the same outputs; ``FXRL_FAST_ONNX=0`` runs the exporter unchanged).

    Args:
      exported: the result of ``export(fn, params, *example_inputs)``.
      path: the ``.onnx`` file to write.
      optimize: fold constants and drop unused nodes (onnxscript's constant folding);
        ONNX Runtime fuses ops itself when it loads the model. The exporter's own
        optimizer (``torch.onnx.export(optimize=True)``, whose pattern rewriter runs
        twice) is not used: it made exporting an env step about 3x slower
        (PointRobot-misc) and the Pong policy no faster in ONNX Runtime, in a check on
        a loaded machine (not a benchmark figure).
      quantize: ``None`` (float32) or ``"int8"``: static int8 quantization with ONNX
        Runtime's tools (int8 weights per channel and uint8 activations for the Conv,
        MatMul and Gemm layers but the last, and but the first when no input is uint8;
        the rest, preprocessing included, stays float32).
      calibration: with ``quantize``, the example inputs whose activation ranges set the
        int8 scales: observations the policy really sees, e.g. a few hundred frames
        recorded by playing it. Each entry is what the policy takes after ``params``: the
        input itself for ``policy(params, obs)`` (with the exported shape: batched when
        exported with a batch), a tuple of inputs for more.
    Returns:
      ``path``.
    """
    _require_exported("to_onnx", exported)
    needs = ("onnx", "onnxscript", *(("onnxruntime",) if quantize else ()))
    for module in needs:  # torch's exporter needs onnx and onnxscript; int8, ONNX Runtime
        require(module, "fxrl.export.to_onnx")
    _quantize.check(quantize, calibration)
    feeds = _quantize.feeds(exported, calibration) if quantize else None
    path = Path(path)
    # Quiet: "torchvision is not installed" notices, progress lines, deprecation warnings.
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        _quiet(_ONNX_LOG),
        _onnx_patch.applied(),
    ):
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            exported.program,
            (),
            dynamo=True,
            input_names=exported.input_names,
            output_names=exported.output_names,
            optimize=False,
            verbose=False,
        )
        _separate_shared_outputs(program.model, exported.input_names, exported.output_names)
        if optimize:
            _fold_constants(program.model)
    _name_batch_dim(program.model)
    program.model.metadata_props[METADATA_KEY] = json.dumps(exported.meta)
    if feeds is None:
        program.save(str(path))
        return path
    fp32 = path.with_name(path.name + ".fp32.tmp")
    tmp = path.with_name(path.name + ".tmp")
    try:
        program.save(str(fp32))
        _quantize.quantize_file(fp32, tmp, feeds, exported.meta, METADATA_KEY)
        tmp.replace(path)
    finally:
        fp32.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
    return path


def _separate_shared_outputs(model: Any, input_names: list[str], output_names: list[str]) -> None:
    """The exporter gives one graph value one name: an output that is an input unchanged (a
    key or a param an env step passes on) takes the output's name from the input, and two
    outputs that are one value (a reset's ``terminated`` and ``truncated``, both False)
    keep only the last name. Restore every input's and output's own name, giving each
    output that shares its value an Identity of its own (the exporter's optimizer did this
    as a side effect)."""
    ir = require("onnx_ir", "fxrl.export.to_onnx")
    graph = model.graph
    inputs = list(graph.inputs)
    for value, name in zip(inputs, input_names, strict=True):
        value.name = name
    is_input = {id(v) for v in inputs}
    outputs = list(graph.outputs)
    positions: dict[int, list[int]] = {}
    for j, value in enumerate(outputs):
        positions.setdefault(id(value), []).append(j)
    for j, value in enumerate(outputs):
        where = positions[id(value)]
        if id(value) not in is_input:
            # the value itself stays at one position: the one named like it, else the first
            keep = next((k for k in where if output_names[k] == value.name), where[0])
            if j == keep:
                value.name = output_names[j]
                continue
        node = ir.node("Identity", [value])
        graph.append(node)
        copy = node.outputs[0]
        copy.name, copy.shape, copy.type = output_names[j], value.shape, value.type
        outputs[j] = copy
    graph.outputs[:] = outputs


def _fold_constants(model: Any) -> None:
    """Fold constant subgraphs into initializers and drop what nothing reads (in place)."""
    optimizer = require("onnxscript.optimizer", "fxrl.export.to_onnx")
    optimizer.fold_constants(model)
    optimizer.remove_unused_nodes(model)


def _name_batch_dim(model: Any) -> None:
    """Call the symbolic dim of the graph's inputs and outputs "batch" (torch names it s0)."""
    ir = require("onnx_ir", "fxrl.export.to_onnx")
    for value in [*model.graph.inputs, *model.graph.outputs]:
        if value.shape is not None and any(isinstance(d, ir.SymbolicDim) for d in value.shape):
            value.shape = ir.Shape(
                [BATCH if isinstance(d, ir.SymbolicDim) else d for d in value.shape]
            )


# ----------------------------------------------------------------------------- AOTInductor


class AotiPolicy:
    """An AOTInductor-compiled policy: same calling convention as ``ExportedPolicy``."""

    def __init__(self, compiled: Any, meta: dict[str, Any]) -> None:
        self.compiled, self.meta = compiled, meta
        self._shim = ExportedPolicy.__new__(ExportedPolicy)
        self._shim.meta, self._shim.inputs = meta, meta["inputs"]
        self._shim.input_names = [i["name"] for i in meta["inputs"]]
        self._shim.output_names = deploy.leaf_names(meta["output_spec"])
        self.input_names, self.output_names = self._shim.input_names, self._shim.output_names

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        flat = self._shim.flat_inputs(args, kwargs)
        return self._shim.structure(list(self.compiled(*flat)))

    def __repr__(self) -> str:
        return f"AotiPolicy({self.meta['function']}: {self.input_names} -> {self.output_names})"


def _find_cxx() -> str:
    from torch._inductor import config

    candidates = [c for c in config.cpp.cxx if c]
    for c in candidates:
        found = shutil.which(c)
        if found:
            return found
    raise RuntimeError(
        f"to_aoti: no C++ compiler found (looked for {candidates} on PATH). AOTInductor "
        "compiles the program to a shared library at export time: install g++ or clang++ "
        "(apt-get install g++), or point CXX at one. ONNX export (to_onnx) needs no compiler."
    )


# Inductor settings to_aoti compiles with unless told otherwise (measured in
# bench/export_bench.py; docs/concepts/exporting.md has the table).
AOTI_OPTIONS: dict[str, Any] = {}


def to_aoti(
    exported: ExportedPolicy, path: str | Path, *, options: Mapping[str, Any] | None = None
) -> Path:
    """Compile ``exported`` ahead of time with AOTInductor into a ``.pt2`` package.

    Needs a C++ compiler now (not when loading). Load with ``load_aoti(path)``.

    Args:
      exported: the result of ``export(fn, params, *example_inputs)``.
      path: the ``.pt2`` package to write.
      options: inductor settings by their dotted names in ``torch._inductor.config``
        (``{"freezing": True, "max_autotune": True, "aot_inductor.<name>": ...}``), over
        ``AOTI_OPTIONS``, fxrl's defaults.
    Returns:
      ``path``.
    """
    _require_exported("to_aoti", exported)
    configs = {**AOTI_OPTIONS, **_check_aoti_options(options or {})}
    _find_cxx()
    path = Path(path)
    configs["aot_inductor.metadata"] = {METADATA_KEY: json.dumps(exported.meta)}
    try:
        # Grad mode off: inductor applies `freezing` only to inference graphs. Packaged in a
        # temporary folder, then copied: a failed write of `path` (a full disk) is the
        # OSError that names its cause, not one from inside inductor's packager.
        with torch.no_grad(), tempfile.TemporaryDirectory() as tmp:
            package = Path(tmp) / "policy.pt2"
            torch._inductor.aoti_compile_and_package(
                exported.program, package_path=str(package), inductor_configs=configs
            )
            shutil.copyfile(package, path)
    except Exception as e:
        if any(type(x).__name__ in ("InvalidCxxCompiler", "CppCompileError") for x in _chain(e)):
            raise RuntimeError(
                f"to_aoti: the C++ compiler failed or was not found ({type(e).__name__}). "
                "AOTInductor needs a working g++/clang++ at export time; ONNX export "
                f"(to_onnx) needs none.\n{e}"
            ) from e
        raise
    return path


def _check_aoti_options(options: Mapping[str, Any]) -> dict[str, Any]:
    from torch._inductor import config

    known = config.get_config_copy()
    for name in options:
        if name not in known or name == "aot_inductor.metadata":
            # closest() only: inductor has hundreds of settings, too many to list
            guess = closest(name, [k for k in known if k != "aot_inductor.metadata"])
            hint = f" Did you mean {guess!r}?" if guess is not None else ""
            raise ValueError(
                f"to_aoti: unknown option {name!r}.{hint} Options are torch._inductor.config "
                "settings by dotted name, e.g. 'freezing' or 'aot_inductor.debug_compile'."
            )
    return dict(options)


def load_aoti(path: str | Path) -> AotiPolicy:
    """Load a package written by ``to_aoti``: a callable over torch tensors."""
    compiled = torch._inductor.aoti_load_package(str(path))
    meta = compiled.get_metadata()
    if METADATA_KEY not in meta:
        raise ValueError(f"load_aoti: {path} was not written by fxrl.export.to_aoti.")
    return AotiPolicy(compiled, json.loads(meta[METADATA_KEY]))


def _require_exported(name: str, exported: Any) -> None:
    if not isinstance(exported, ExportedPolicy):
        raise TypeError(
            f"{name}: expected the result of fxrl.export.export(fn, params, *inputs), got "
            f"{type(exported).__name__}."
        )
