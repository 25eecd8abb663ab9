"""Pytrees: nested dicts, lists, tuples, NamedTuples and fxrl dataclasses of tensors.

fxrl flattens with optree in its own namespace, configured to give exactly the leaf
order of ``torch.utils._pytree`` (what ``torch.func.vmap`` and ``torch.export`` use):
dicts keep insertion order and ``None`` is a leaf. A test checks the two agree.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import optree
import torch
import torch.utils._pytree as torch_pytree

from fxrl._errors import closest

__all__ = [
    "PyTree",
    "concat",
    "dataclass",
    "field",
    "flatten_with_paths",
    "index",
    "leaves",
    "map",
    "path_names",
    "stack",
    "structure",
    "summary",
    "unflatten",
    "unstack",
    "where",
]

PyTree = Any
T = TypeVar("T")

NAMESPACE = "fxrl"
# Keep dict insertion order in fxrl's namespace for the whole process, as torch does for
# its own namespace: leaf order must match torch.utils._pytree's.
_DICT_ORDER = optree.dict_insertion_ordered(True, namespace=NAMESPACE)
_DICT_ORDER.__enter__()

_OPTS: dict[str, Any] = {"none_is_leaf": True, "namespace": NAMESPACE}


def leaves(tree: PyTree) -> list[Any]:
    """The leaves of ``tree`` in torch's flattening order."""
    return optree.tree_leaves(tree, **_OPTS)


def structure(tree: PyTree) -> optree.PyTreeSpec:
    """The treespec of ``tree`` (use ``unflatten(spec, leaves)`` to rebuild)."""
    return optree.tree_structure(tree, **_OPTS)


def unflatten(spec: optree.PyTreeSpec, leaves_: Sequence[Any]) -> PyTree:
    """Rebuild a tree of structure ``spec`` from its leaves."""
    return optree.tree_unflatten(spec, list(leaves_))


def flatten_with_paths(tree: PyTree) -> list[tuple[tuple[Any, ...], Any]]:
    """``[(path, leaf), ...]``; a path is the tuple of keys/indices/field names to the leaf.

    NamedTuple and dataclass children are named by their field names, not positions.
    """
    accessors, leaves_, _ = optree.tree_flatten_with_accessor(tree, **_OPTS)
    paths = [tuple(_entry_name(e) for e in acc) for acc in accessors]
    return list(zip(paths, leaves_, strict=True))


def _entry_name(entry: Any) -> Any:
    field_name = getattr(entry, "field", None)
    return field_name if isinstance(field_name, str) else entry.entry


def path_names(tree: PyTree, sep: str = "_") -> list[str]:
    """One name per leaf: its path entries joined by ``sep`` (``{"a": {"b": x}}`` -> ``a_b``).

    The root leaf (a bare tensor) is named ``"x"``.
    """
    return [sep.join(str(p) for p in path) or "x" for path, _ in flatten_with_paths(tree)]


def _path_str(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p!r}]" for p in path) or "<root>"


def _first_mismatch(a: PyTree, b: PyTree, path: tuple[Any, ...] = ()) -> str:
    """Describe where two trees first differ in structure (for error messages)."""
    sa, sb = structure(a), structure(b)
    if sa == sb:
        return ""
    if sa.num_children == 0 or sb.num_children == 0 or sa.kind != sb.kind or sa.type != sb.type:
        return f"at {_path_str(path)}: {_node_desc(a)} vs {_node_desc(b)}"
    ka, kb = list(sa.entries()), list(sb.entries())
    if ka != kb:
        return f"at {_path_str(path)}: children {ka} vs {kb}"
    for k, ca, cb in zip(
        ka,
        optree.tree_flatten_one_level(a, **_OPTS)[0],
        optree.tree_flatten_one_level(b, **_OPTS)[0],
        strict=True,
    ):
        found = _first_mismatch(ca, cb, (*path, k))
        if found:
            return found
    return f"at {_path_str(path)}: node metadata differs ({sa} vs {sb})"


def _node_desc(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"tensor{list(x.shape)}"
    spec = structure(x)
    if spec.num_nodes == 1:
        return f"leaf {type(x).__name__}"
    return f"{type(x).__name__} with {spec.num_leaves} leaves"


def _check_same_structure(fn_name: str, trees: Sequence[PyTree]) -> optree.PyTreeSpec:
    spec = structure(trees[0])
    for i, other in enumerate(trees[1:], start=1):
        if structure(other) != spec:
            raise ValueError(
                f"{fn_name}: tree {i} does not match tree 0 {_first_mismatch(trees[0], other)}. "
                "All trees must have the same structure (same keys, same lengths, same types)."
            )
    return spec


def map(fn: Callable[..., Any], tree: PyTree, *rest: PyTree) -> PyTree:
    """Apply ``fn`` leafwise: ``fn(leaf, *leaves_of_rest)``; trees must share structure."""
    spec = _check_same_structure("tree.map", (tree, *rest))
    columns = [leaves(t) for t in (tree, *rest)]
    return unflatten(spec, [fn(*xs) for xs in zip(*columns, strict=True)])


def stack(trees: Sequence[PyTree], dim: int = 0) -> PyTree:
    """Stack a sequence of same-structure trees leafwise into one tree (new ``dim``)."""
    if len(trees) == 0:
        raise ValueError("tree.stack: got an empty sequence; expected at least one tree.")
    return map(lambda *xs: torch.stack(xs, dim), *trees)


def unstack(tree: PyTree, dim: int = 0) -> list[PyTree]:
    """Inverse of ``stack``: a list of trees, one per index of ``dim``."""
    spec = structure(tree)
    parts = [torch.unbind(x, dim) for x in leaves(tree)]
    sizes = {len(p) for p in parts}
    if len(sizes) > 1:
        raise ValueError(f"tree.unstack: leaves have different sizes along dim {dim}: {sizes}.")
    return [unflatten(spec, xs) for xs in zip(*parts, strict=True)]


def concat(trees: Sequence[PyTree], dim: int = 0) -> PyTree:
    """Concatenate same-structure trees leafwise along an existing ``dim``."""
    if len(trees) == 0:
        raise ValueError("tree.concat: got an empty sequence; expected at least one tree.")
    return map(lambda *xs: torch.cat(xs, dim), *trees)


def index(tree: PyTree, idx: Any) -> PyTree:
    """``leaf[idx]`` for every tensor leaf (an int, slice, index tensor or boolean mask).

    Leaves that are not tensors (None, Python numbers) are passed through unchanged.
    """
    return map(lambda x: x[idx] if isinstance(x, torch.Tensor) else x, tree)


def where(condition: torch.Tensor, a: PyTree, b: PyTree) -> PyTree:
    """Leafwise ``torch.where``; ``condition`` [*B] selects along the leading batch dims.

    Every leaf must start with ``condition``'s shape; trailing dims are broadcast, so a
    per-env ``done`` [N] picks whole per-env states of any shape.
    """
    if not isinstance(condition, torch.Tensor) or condition.dtype != torch.bool:
        raise TypeError(f"tree.where: condition must be a bool tensor, got {_desc(condition)}.")
    nd = condition.ndim

    def pick(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if tuple(x.shape[:nd]) != tuple(condition.shape) or x.shape != y.shape:
            raise ValueError(
                f"tree.where: leaves of shape {list(x.shape)} and {list(y.shape)} do not both "
                f"start with the condition's shape {list(condition.shape)}."
            )
        return torch.where(condition.reshape(condition.shape + (1,) * (x.ndim - nd)), x, y)

    return map(pick, a, b)


def _desc(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"tensor{list(x.shape)} {str(x.dtype).removeprefix('torch.')}"
    return f"{type(x).__name__} {x!r}"


def summary(tree: PyTree) -> str:
    """A readable table: one row per leaf with its path, shape, dtype and element count."""
    rows = [("path", "shape", "dtype", "numel")]
    total = 0
    for name, (_, x) in zip(path_names(tree, "."), flatten_with_paths(tree), strict=True):
        if isinstance(x, torch.Tensor):
            rows.append(
                (name, str(list(x.shape)), str(x.dtype).removeprefix("torch."), str(x.numel()))
            )
            total += x.numel()
        else:
            rows.append((name, "-", type(x).__name__, "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(f"{len(rows) - 1} leaves, {total} elements")
    return "\n".join(lines)


# --------------------------------------------------------------------------- dataclasses

_REGISTERED: dict[str, type] = {}


def field(*, static: bool = False, **kwargs: Any) -> Any:
    """``dataclasses.field`` with ``static=True`` for metadata that is not a leaf."""
    metadata = dict(kwargs.pop("metadata", {}) or {})
    metadata["static"] = static
    return dataclasses.field(metadata=metadata, **kwargs)


def _replace(self: T, **changes: Any) -> T:
    """A copy with some fields changed (the instance itself is frozen)."""
    names = {f.name for f in dataclasses.fields(self)}  # type: ignore[arg-type]
    unknown = sorted(set(changes) - names)
    if unknown:
        close = [closest(u, names) for u in unknown]
        hint = "".join(f" Did you mean {c!r}?" for c in close if c is not None)
        raise TypeError(
            f"{type(self).__name__}.replace: unknown field(s) {unknown}; fields are "
            f"{sorted(names)}.{hint}"
        )
    return dataclasses.replace(self, **changes)  # type: ignore[type-var]


def dataclass(cls: type[T] | None = None, **kwargs: Any) -> Any:
    """A frozen dataclass that is a pytree for fxrl, optree, torch.func and torch.export.

    Fields are children unless declared ``tree.field(static=True)`` (kept in the treespec).
    Registration happens once per qualified name, so re-importing a module is safe, and
    the serialized type name is the qualified name, so saved exported programs load.

        @tree.dataclass
        class State:
            x: Tensor
            t: Tensor
        s2 = s.replace(t=s.t + 1)
    """
    if cls is None:
        return lambda c: dataclass(c, **kwargs)
    kwargs.setdefault("frozen", True)
    dc = dataclasses.dataclass(cls, **kwargs)  # type: ignore[call-overload]
    if "replace" not in dc.__dict__:
        dc.replace = _replace
    _register(dc)
    return dc


def _register(cls: type) -> None:
    fields = dataclasses.fields(cls)
    children = tuple(f.name for f in fields if not f.metadata.get("static", False))
    static = tuple(f.name for f in fields if f.metadata.get("static", False))
    name = f"{cls.__module__}.{cls.__qualname__}"

    def flatten(x: Any) -> tuple[list[Any], Any]:
        return [getattr(x, n) for n in children], tuple(getattr(x, n) for n in static)

    def flatten_with_keys(x: Any) -> tuple[list[tuple[Any, Any]], Any]:
        kids = [(torch_pytree.GetAttrKey(n), getattr(x, n)) for n in children]
        return kids, tuple(getattr(x, n) for n in static)

    def unflatten_(context: Any, values: Any) -> Any:
        obj = object.__new__(cls)
        for n, v in zip(children, values, strict=True):
            object.__setattr__(obj, n, v)
        for n, v in zip(static, context, strict=True):
            object.__setattr__(obj, n, v)
        return obj

    def optree_flatten(x: Any) -> tuple[list[Any], Any, tuple[str, ...]]:
        values, context = flatten(x)
        return values, context, children

    optree.register_pytree_node(
        cls, optree_flatten, lambda ctx, vals: unflatten_(ctx, vals), namespace=NAMESPACE
    )
    previous = _REGISTERED.get(name)
    if previous is not None:
        # The module was re-imported: the old class object keeps its registration, and the
        # new one takes over the serialized name (only one type may hold it in torch).
        torch_pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.pop(name, None)
    torch_pytree.register_pytree_node(
        cls,
        flatten,
        lambda values, context: unflatten_(context, values),
        serialized_type_name=name,
        flatten_with_keys_fn=flatten_with_keys,
        # Static fields go through JSON when an exported program is saved; JSON turns the
        # tuple into a list, so turn it back or the loaded program rejects its inputs.
        to_dumpable_context=lambda context: json.dumps(list(context)),
        from_dumpable_context=lambda dumped: tuple(json.loads(dumped)),
    )
    # Saved exported programs pickle their example inputs; let torch.load's weights-only
    # unpickler rebuild fxrl dataclasses (they hold tensors and static metadata only).
    torch.serialization.add_safe_globals([cls])
    _REGISTERED[name] = cls
