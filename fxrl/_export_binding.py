"""How ``fxrl.export`` names inputs and outputs and binds examples to ``fn``'s signature.

Names join pytree paths with "_" (see ``fxrl.export``); structures are described as JSON
(``fxrl.deploy.unflatten`` reads them back without torch).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import keyword
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optree
import torch

from fxrl import random, tree

DTYPES = (
    torch.float16,
    torch.float32,
    torch.float64,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
)


class ExportError(ValueError):
    """The function cannot be exported as written; the message says what to change."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ----------------------------------------------------------------------------- naming


def identifier(name: str) -> str:
    name = re.sub(r"\W", "_", name)
    return f"_{name}" if not name or name[0].isdigit() or keyword.iskeyword(name) else name


def leaf_names(prefix: str, value: Any, spread_dict: bool) -> list[str | None]:
    """One name per leaf of ``value`` (None for None leaves, which stay constants)."""
    names: list[str | None] = []
    for path, leaf in tree.flatten_with_paths(value):
        if leaf is None:
            names.append(None)
            continue
        parts = [str(p) for p in path]
        if not (spread_dict and isinstance(value, Mapping)) or not parts:
            parts = [prefix, *parts]
        names.append(identifier("_".join(parts)))
    return names


def check_unique(what: str, names: Sequence[str], extra: Sequence[str] = ()) -> None:
    seen: dict[str, int] = {}
    for n in [*names, *extra]:
        seen[n] = seen.get(n, 0) + 1
    dup = sorted(n for n, c in seen.items() if c > 1)
    if dup:
        raise ExportError(
            f"export: {what} names collide: {dup}. Names join pytree paths with '_' "
            "({'a_b': x} and {'a': {'b': y}} both give 'a_b'); rename a key or an argument."
        )


def encode(value: Any, names: list[str | None]) -> dict[str, Any]:
    """The JSON structure spec of ``value`` whose leaves are named ``names`` (in order)."""
    it = iter(names)

    def walk(spec: optree.PyTreeSpec, node: Any) -> dict[str, Any]:
        if spec.is_leaf():
            name = next(it)
            return {"kind": "none"} if name is None else {"kind": "leaf", "name": name}
        values = optree.tree_flatten_one_level(node, none_is_leaf=True, namespace=tree.NAMESPACE)
        kids = [walk(c, v) for c, v in zip(spec.children(), values[0], strict=True)]
        kind, typ = spec.kind, spec.type
        if kind == optree.PyTreeKind.TUPLE:
            return {"kind": "tuple", "children": kids}
        if kind == optree.PyTreeKind.LIST:
            return {"kind": "list", "children": kids}
        if kind in (optree.PyTreeKind.DICT, optree.PyTreeKind.ORDEREDDICT):
            keys = list(spec.entries())
            if not all(isinstance(k, str | int) for k in keys):
                raise ExportError(f"export: dict keys must be str or int, got {keys}.")
            return {"kind": "dict", "keys": keys, "children": kids}
        out = {"type": f"{typ.__module__}.{typ.__qualname__}", "children": kids}
        if kind == optree.PyTreeKind.NAMEDTUPLE:
            return {"kind": "namedtuple", "fields": list(typ._fields), **out}
        if dataclasses.is_dataclass(typ):
            static = {
                f.name: getattr(node, f.name)
                for f in dataclasses.fields(typ)
                if f.metadata.get("static", False)
            }
            try:
                json.dumps(static)
            except TypeError:
                static = {}
            fields = [str(e) for e in spec.entries()]
            return {"kind": "dataclass", "fields": fields, "static": static, **out}
        raise ExportError(
            f"export: cannot describe a {typ.__name__} node for deployment; use dicts, "
            "lists, tuples, NamedTuples or fxrl.tree.dataclass types."
        )

    return walk(tree.structure(value), value)


def resolver(spec: dict[str, Any]) -> Callable[[list[Any]], Any] | None:
    """Rebuild NamedTuples and dataclasses as their own types when already imported."""
    module, _, name = spec["type"].rpartition(".")
    typ: Any = sys.modules.get(module)
    for part in name.split("."):
        typ = getattr(typ, part, None)
    if not isinstance(typ, type):
        return None
    if spec["kind"] == "namedtuple":
        return lambda kids: typ(*kids)
    return lambda kids: typ(**dict(zip(spec["fields"], kids, strict=True)), **spec["static"])


# ----------------------------------------------------------------------------- binding


class Binding:
    """How the flat program inputs map onto ``fn(params, *args, key=..., mode=...)``."""

    def __init__(self, fn: Callable[..., Any], example_inputs: tuple[Any, ...], mode: str):
        self.fn, self.mode = fn, mode
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            sig = None
        params = list(sig.parameters.values()) if sig is not None else []
        kinds = inspect.Parameter
        positional = [
            p for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
        ]
        var_args = sig is None or any(p.kind == kinds.VAR_POSITIONAL for p in params)
        var_kw = sig is not None and any(p.kind == kinds.VAR_KEYWORD for p in params)
        by_name = {p.name: p for p in params}
        if sig is not None and not positional and not var_args:
            raise ExportError(
                f"export: {fn_name(fn)} takes no arguments; expected fn(params, ...)."
            )
        arg_params = positional[1:]
        if len(example_inputs) > len(arg_params) and not var_args:
            raise ExportError(
                f"export: {fn_name(fn)}{sig} takes {len(arg_params)} inputs after params; got "
                f"{len(example_inputs)} example inputs."
            )
        names = [
            arg_params[i].name if i < len(arg_params) else f"arg{i}"
            for i in range(len(example_inputs))
        ]
        self.args: list[tuple[str, Any]] = list(zip(names, example_inputs, strict=True))
        self.kwargs: dict[str, Any] = {}
        if "mode" in by_name or var_kw:
            self.kwargs["mode"] = mode
        elif mode != "mode":
            raise ExportError(
                f"export(mode={mode!r}): {fn_name(fn)}{sig} has no `mode` parameter, so the "
                "mode cannot reach it. Add `mode: str = 'mode'` and draw actions with "
                "fxrl.distributions.draw(dist, key, mode)."
            )
        key_param = by_name.get("key")
        missing = [
            p.name
            for p in arg_params[len(names) :]
            if p.default is inspect.Parameter.empty and p.name not in ("key", "mode")
        ]
        if missing:
            raise ExportError(
                f"export: missing example inputs for {missing} of {fn_name(fn)}{sig} "
                f"(got {len(names)}: {names}). Pass one example per argument after "
                f"params: export(fn, params, {', '.join([*names, *missing])})."
            )
        # The key goes last, by position when `key` is the next parameter, else by keyword.
        self.key_by_keyword = False
        if mode == "random" and "key" not in names:
            if key_param is None and not var_kw:
                raise ExportError(
                    f"export(mode='random'): {fn_name(fn)}{sig} has no `key` parameter for "
                    "the key input. Add one and draw with an explicit key: "
                    "fxrl.distributions.draw(dist, key, mode) or fxrl.random.*."
                )
            self.args.append(("key", random.key(0)))
            next_param = arg_params[len(names)] if len(arg_params) > len(names) else None
            self.key_by_keyword = next_param is None or next_param.name != "key"
        elif (
            key_param is not None
            and "key" not in names
            and key_param.default is inspect.Parameter.empty
        ):
            self.kwargs["key"] = None  # deterministic modes draw nothing
        self.names = [n for n, _ in self.args]

    def call(self, params: Any, args: Sequence[Any]) -> Any:
        args = list(args)
        kwargs = dict(self.kwargs)
        if self.key_by_keyword:
            kwargs["key"] = args.pop()
        return self.fn(params, *args, **kwargs)


def fn_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def check_example(name: str, x: Any) -> None:
    if x is None:
        return
    if not isinstance(x, torch.Tensor):
        hint = (
            " (torch.as_tensor(x))"
            if hasattr(x, "__array__") or isinstance(x, int | float | bool)
            else ""
        )
        raise ExportError(
            f"export: example input {name!r} is a {type(x).__name__}; inputs must be torch "
            f"tensors{hint}. Constants belong in params or in the function."
        )
    if x.dtype not in DTYPES:
        raise ExportError(
            f"export: input {name!r} has dtype {dtype_name(x.dtype)}, which ONNX Runtime's "
            f"numpy interface cannot carry; supported: {[dtype_name(d) for d in DTYPES]}. "
            "Cast it (bfloat16 -> float32) inside or outside the function."
        )
