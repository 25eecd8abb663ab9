"""Run an exported fxrl policy with ONNX Runtime: numpy in, numpy out, no torch.

This one file imports only the standard library, numpy and onnxruntime, so a deployed
program needs neither torch nor fxrl. ``import fxrl.deploy`` inside an fxrl install
imports torch (``fxrl/__init__.py`` does), so where torch is absent copy this file next
to the program (``fxrl_deploy.py``) or load it by path::

    import importlib.util
    spec = importlib.util.spec_from_file_location("fxrl_deploy", "fxrl_deploy.py")
    deploy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(deploy)

    policy = deploy.load_onnx("pong.onnx")
    action = policy(screen)                         # positional, in example-input order
    action, carry = policy(obs=o, carry_h=h, carry_c=c, is_init=first)   # or by name

``fxrl.export.export`` writes, into the ONNX file's ``metadata_props["fxrl"]``, the input
names, shapes and dtypes and the structure of the arguments and outputs as JSON; this
module rebuilds that structure (dicts, lists, tuples; NamedTuples and dataclasses come
back as namedtuples of the same name and fields) and checks every input before it
reaches onnxruntime.
"""

from __future__ import annotations

import collections
import difflib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["METADATA_KEY", "OnnxPolicy", "flatten_args", "load_onnx", "unflatten"]

METADATA_KEY = "fxrl"
BATCH = "batch"  # the name of the symbolic leading dim of a dynamic-batch export

Spec = dict[str, Any]  # the JSON structure spec (see ``unflatten``)


# ----------------------------------------------------------------------------- structure


def _unknown(name: object, valid: Sequence[object], what: str) -> str:
    """``fxrl._errors.unknown``'s message, written again here because this file imports
    nothing of fxrl (tests/test_export.py checks that the two say the same)."""
    valid = [str(v) for v in valid]
    found = difflib.get_close_matches(str(name), valid, 1, 0.6)
    hint = f" Did you mean {found[0]!r}?" if found else ""
    return f"unknown {what} {name!r}.{hint} Expected one of: {', '.join(valid)}."


def leaf_names(spec: Spec) -> list[str]:
    """Names of the leaves of a JSON structure spec, in flattening order."""
    if spec["kind"] == "leaf":
        return [spec["name"]]
    return [n for child in spec.get("children", ()) for n in leaf_names(child)]


def _flatten_into(spec: Spec, value: Any, where: str, out: dict[str, Any]) -> None:
    kind = spec["kind"]
    if kind == "leaf":
        out[spec["name"]] = value
        return
    if kind == "none":
        if value is not None:
            raise ValueError(f"{where} was None when exported (a constant); got {value!r}.")
        return
    children = spec["children"]
    if kind == "dict":
        if not isinstance(value, Mapping) or list(value) != spec["keys"]:
            got = list(value) if isinstance(value, Mapping) else type(value).__name__
            if isinstance(value, Mapping) and set(value) == set(spec["keys"]):
                value = {k: value[k] for k in spec["keys"]}
            else:
                raise ValueError(f"{where} must be a dict with keys {spec['keys']}; got {got}.")
        parts = [value[k] for k in spec["keys"]]
        labels = [f"{where}[{k!r}]" for k in spec["keys"]]
    elif kind == "dataclass" and not isinstance(value, tuple | list):
        parts = [getattr(value, f) for f in spec["fields"]]
        labels = [f"{where}.{f}" for f in spec["fields"]]
    else:
        if not isinstance(value, tuple | list) or len(value) != len(children):
            got = (
                f"{type(value).__name__} of length {len(value)}"
                if isinstance(value, tuple | list)
                else type(value).__name__
            )
            raise ValueError(
                f"{where} must be a {spec.get('type', kind)} of {len(children)} items; got {got}."
            )
        parts = list(value)
        labels = [f"{where}[{i}]" for i in range(len(parts))]
    for child, part, label in zip(children, parts, labels, strict=True):
        _flatten_into(child, part, label, out)


def flatten_args(
    arg_specs: Sequence[dict[str, Any]], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """Match call arguments to input names.

    Args:
      arg_specs: ``[{"name": argument name, "spec": structure spec}, ...]`` in order.
      args: positional arguments, one per argument spec at most.
      kwargs: keywords, each an argument name (the whole structure) or an input name
        (one leaf).
    Returns:
      ``{input name: value}`` for every input.
    """
    if len(args) > len(arg_specs):
        names = [a["name"] for a in arg_specs]
        raise TypeError(
            f"the policy takes {len(arg_specs)} positional arguments {names}; got {len(args)}."
        )
    out: dict[str, Any] = {}
    given = set()
    for a, value in zip(arg_specs, args, strict=False):
        _flatten_into(a["spec"], value, f"argument {a['name']!r}", out)
        given.add(a["name"])
    by_arg = {a["name"]: a for a in arg_specs}
    all_leaves = [n for a in arg_specs for n in leaf_names(a["spec"])]
    for name, value in kwargs.items():
        if name in given:
            raise TypeError(f"argument {name!r} given both by position and by keyword.")
        if name in by_arg and by_arg[name]["spec"]["kind"] != "leaf":
            _flatten_into(by_arg[name]["spec"], value, f"argument {name!r}", out)
        elif name in all_leaves:
            if name in out:
                raise TypeError(f"input {name!r} given twice.")
            out[name] = value
        else:
            names = list(dict.fromkeys([*by_arg, *all_leaves]))
            raise TypeError(_unknown(name, names, "input"))
    missing = [n for n in all_leaves if n not in out]
    if missing:
        raise TypeError(f"missing inputs {missing}; inputs are {all_leaves}.")
    return out


def _namedtuple(spec: Spec) -> type:
    name = spec["type"].rsplit(".", 1)[-1]
    return collections.namedtuple(name, spec["fields"])


def unflatten(
    spec: Spec,
    values: Mapping[str, Any],
    resolve: Callable[[Spec], Callable[[list[Any]], Any] | None] | None = None,
) -> Any:
    """Rebuild a structure from its leaves by name.

    A spec is a JSON dict with ``kind`` one of ``leaf`` (with ``name``), ``none``,
    ``tuple``, ``list``, ``dict`` (``keys``), ``namedtuple`` or ``dataclass`` (``type``,
    ``fields``), and ``children``. NamedTuples and dataclasses are rebuilt by
    ``resolve(spec)`` when it returns a constructor from a list of children, else as a
    namedtuple of the same name and fields.
    """
    kind = spec["kind"]
    if kind == "leaf":
        return values[spec["name"]]
    if kind == "none":
        return None
    children = [unflatten(c, values, resolve) for c in spec["children"]]
    if kind == "tuple":
        return tuple(children)
    if kind == "list":
        return children
    if kind == "dict":
        return dict(zip(spec["keys"], children, strict=True))
    build = resolve(spec) if resolve is not None else None
    if build is not None:
        return build(children)
    return _namedtuple(spec)(*children)


# ----------------------------------------------------------------------------- checks


def check_inputs(inputs: Sequence[dict[str, Any]], values: Mapping[str, Any]) -> None:
    """Check each value's shape and dtype against the recorded input; one batch size.

    ``inputs``: ``[{"name", "shape" (ints and "batch"), "dtype"}]``. Values need only
    ``.shape`` and ``.dtype`` (numpy arrays or torch tensors).
    """
    batch = None
    for spec in inputs:
        name, expected = spec["name"], spec["shape"]
        x = values[name]
        dtype = str(getattr(x, "dtype", type(x).__name__)).removeprefix("torch.")
        shape = list(getattr(x, "shape", ()))
        want = "[" + ", ".join(str(s) for s in expected) + "]"
        if dtype != spec["dtype"]:
            raise TypeError(
                f"input {name!r} has dtype {dtype}; expected {spec['dtype']} {want}. "
                f"Cast it, e.g. x.astype(np.{spec['dtype']})."
            )
        ok = len(shape) == len(expected) and all(
            s == e or e == BATCH for s, e in zip(shape, expected, strict=True)
        )
        if ok and BATCH in expected:
            b = shape[expected.index(BATCH)]
            if batch is not None and b != batch[1]:
                raise ValueError(
                    f"input {name!r} has batch size {b} but input {batch[0]!r} has {batch[1]}; "
                    "all batched inputs must share the batch size."
                )
            batch = (name, b)
        if not ok:
            raise ValueError(
                f"input {name!r} has shape {shape}; expected {want}"
                + (" (batch: any size)" if BATCH in expected else "")
                + "."
            )


# ----------------------------------------------------------------------------- ONNX


class OnnxPolicy:
    """An exported policy running in ONNX Runtime: ``policy(*args, **kwargs)``.

    Arguments are numpy arrays (Python scalars and lists are converted to the expected
    dtype), positional in the order of the example inputs or by name; outputs come back
    in the structure the exported function returned.
    """

    def __init__(self, session: Any, meta: dict[str, Any]) -> None:
        self.session = session
        self.meta = meta
        self.inputs: list[dict[str, Any]] = meta["inputs"]
        self.input_names = [i["name"] for i in self.inputs]
        self.output_names = leaf_names(meta["output_spec"])
        self._dtypes = {i["name"]: np.dtype(i["dtype"]) for i in self.inputs}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        values = flatten_args(self.meta["args"], args, kwargs)
        for name, v in values.items():
            if not isinstance(v, np.ndarray):
                values[name] = np.asarray(v, dtype=self._dtypes[name])
        check_inputs(self.inputs, values)
        outputs = self.session.run(self.output_names, values)
        return unflatten(
            self.meta["output_spec"], dict(zip(self.output_names, outputs, strict=True))
        )

    def run_flat(self, values: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """The raw outputs for ``{input name: array}``, unchecked (the fastest call)."""
        return self.session.run(self.output_names, dict(values))

    def __repr__(self) -> str:
        ins = ", ".join(f"{i['name']}: {i['dtype']}{i['shape']}" for i in self.inputs)
        return f"OnnxPolicy({ins}) -> {self.output_names}"


def read_metadata(model_metadata: Mapping[str, str], path: str) -> dict[str, Any]:
    if METADATA_KEY not in model_metadata:
        raise ValueError(
            f"{path} has no fxrl metadata: it was not written by fxrl.export.to_onnx. Run it "
            "with onnxruntime.InferenceSession directly."
        )
    return json.loads(model_metadata[METADATA_KEY])


def load_onnx(
    path: str | os.PathLike[str],
    *,
    threads: int | None = None,
    providers: Sequence[str] | None = None,
) -> OnnxPolicy:
    """Load a policy written by ``fxrl.export.to_onnx``.

    Args:
      path: the ``.onnx`` file.
      threads: ONNX Runtime's intra-op threads (None: its default, all cores; 1 is
        usually fastest for one observation at a time).
      providers: execution providers, default ``["CPUExecutionProvider"]``.
    """
    try:
        import onnxruntime as ort
    except ModuleNotFoundError as e:  # this file stands alone: no fxrl._optional here
        if e.name != "onnxruntime":
            raise
        raise ModuleNotFoundError(
            "load_onnx needs onnxruntime, which is not installed: pip install onnxruntime, "
            "or in an fxrl install: pip install 'fxrl[export]'",
            name="onnxruntime",
        ) from e

    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        str(path), options, providers=list(providers or ["CPUExecutionProvider"])
    )
    meta = read_metadata(session.get_modelmeta().custom_metadata_map, str(path))
    return OnnxPolicy(session, meta)
