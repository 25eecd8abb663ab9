"""Save a buffer to a directory and load it back exactly: ``save(buf, path)``, ``load(path)``.

The directory holds ``tensors.safetensors`` (every tensor of the buffer, by path name) and
``buffer.json`` (format version, static settings, storage structure, and the byte size
and SHA-256 of the tensor file). Nothing is pickled. ``save`` writes a temporary sibling
directory, fsyncs it and renames it into place, so a crash leaves the old save or the new
one, never half of each. ``load`` checks size, checksum, names, shapes and dtypes before
building anything and raises one clear error otherwise.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from fxrl import tree
from fxrl.buffers.state import Buffer

__all__ = ["load", "save"]

VERSION = 1
_TENSORS, _META = "tensors.safetensors", "buffer.json"
_STATIC = ("capacity", "prioritized", "alpha", "beta", "eps", "frame_stack")


def save(buf: Buffer, path: str | os.PathLike) -> None:
    """Write ``buf`` to the directory ``path`` (replaced if it exists), atomically."""
    if not isinstance(buf, Buffer):
        raise TypeError(
            f"fxrl.buffers.save: expected a Buffer from init/add, got {type(buf).__name__}."
        )
    path = Path(path)
    tensors = _named_tensors(buf)
    if len(tensors) != len(tree.leaves(buf)):
        raise ValueError(
            "fxrl.buffers.save: two storage leaves get the same name when their keys are "
            f"joined with '.' ({tree.path_names(buf.storage, '.')}); rename keys that "
            "contain '.'."
        )
    meta = {
        "format": "fxrl.buffers",
        "version": VERSION,
        "static": {k: getattr(buf, k) for k in _STATIC} | {"shapes": [list(s) for s in buf.shapes]},
        "storage": _structure(buf.storage),
        "levels": len(buf.sums),
        "tensors": {
            k: [str(v.dtype).removeprefix("torch."), list(v.shape)] for k, v in tensors.items()
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        file = tmp / _TENSORS
        import safetensors.torch  # imported on use: `import fxrl` stays cheap

        safetensors.torch.save_file({k: v.contiguous() for k, v in tensors.items()}, str(file))
        meta["bytes"], meta["sha256"] = file.stat().st_size, _sha256(file)
        (tmp / _META).write_text(json.dumps(meta, indent=1))
        for f in (file, tmp / _META, tmp):
            _fsync(f)
        old = None
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old.", dir=path.parent))
            os.replace(path, old / "x")
        os.replace(tmp, path)
        _fsync(path.parent)
        if old is not None:
            shutil.rmtree(old)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load(path: str | os.PathLike) -> Buffer:
    """Read a buffer written by ``save``; the same key then draws the same sample.

    The buffer comes back in memory (also one saved from ``storage="memmap"``), and
    adding to it never writes to the saved files.

    Raises ``ValueError`` naming the file and the problem (missing, truncated, corrupt,
    or not a buffer) before anything is built.
    """
    path = Path(path)
    meta = _read_meta(path)
    file = path / _TENSORS
    if not file.is_file():
        raise ValueError(f"fxrl.buffers.load: {file} is missing; the save at {path} is incomplete.")
    size = file.stat().st_size
    if size != meta["bytes"]:
        raise ValueError(
            f"fxrl.buffers.load: {file} has {size} bytes but {_META} records {meta['bytes']}: "
            "the file is truncated or was replaced. Nothing was loaded."
        )
    if _sha256(file) != meta["sha256"]:
        raise ValueError(
            f"fxrl.buffers.load: {file} does not match the SHA-256 recorded in {_META}: the "
            "file is corrupt. Nothing was loaded."
        )
    import safetensors.torch

    tensors = safetensors.torch.load_file(str(file))
    want = {k: (d, s) for k, (d, s) in meta["tensors"].items()}
    got = {k: (str(v.dtype).removeprefix("torch."), list(v.shape)) for k, v in tensors.items()}
    if got != want:
        raise ValueError(f"fxrl.buffers.load: {file} holds {got}; {_META} expects {want}.")
    return _build(meta, tensors)


def _named_tensors(buf: Buffer) -> dict[str, torch.Tensor]:
    out = {
        f"storage.{n}": x
        for n, x in zip(tree.path_names(buf.storage, "."), tree.leaves(buf.storage), strict=True)
    }
    out |= {"cursor": buf.cursor, "size": buf.size, "episode_start": buf.episode_start}
    out |= {f"sums.{i}": x for i, x in enumerate(buf.sums)}
    out |= {f"mins.{i}": x for i, x in enumerate(buf.mins)}
    out["max_priority"] = buf.max_priority
    return out


def _build(meta: dict, tensors: dict[str, torch.Tensor]) -> Buffer:
    names = [k for k in meta["tensors"] if k.startswith("storage.")]
    storage = _unflatten(meta["storage"], iter(tensors[n] for n in names))
    levels = range(meta["levels"])
    static = dict(meta["static"])
    static["shapes"] = tuple(tuple(s) for s in static["shapes"])
    return Buffer(
        storage=storage,
        cursor=tensors["cursor"],
        size=tensors["size"],
        episode_start=tensors["episode_start"],
        sums=tuple(tensors[f"sums.{i}"] for i in levels),
        mins=tuple(tensors[f"mins.{i}"] for i in levels),
        max_priority=tensors["max_priority"],
        **static,
    )


def _structure(node: Any) -> Any:
    """The storage's nesting as JSON: dicts, lists and tuples of tensors."""
    if isinstance(node, torch.Tensor):
        return "tensor"
    if type(node) is dict:
        return {"dict": [[k, _structure(v)] for k, v in node.items()]}
    if type(node) in (list, tuple):
        return {type(node).__name__: [_structure(v) for v in node]}
    raise TypeError(
        f"fxrl.buffers.save: storage holds a {type(node).__name__}; save supports dicts, "
        "lists and tuples of tensors (store NamedTuple/dataclass transitions as dicts)."
    )


def _unflatten(spec: Any, leaves: Any) -> Any:
    if spec == "tensor":
        return next(leaves)
    ((kind, children),) = spec.items()
    if kind == "dict":
        return {k: _unflatten(v, leaves) for k, v in children}
    items = [_unflatten(v, leaves) for v in children]
    return items if kind == "list" else tuple(items)


def _read_meta(path: Path) -> dict:
    file = path / _META
    if not file.is_file():
        raise ValueError(f"fxrl.buffers.load: {file} is missing; {path} is not a saved buffer.")
    try:
        meta = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(
            f"fxrl.buffers.load: {file} is not valid JSON ({err}); it is truncated or corrupt."
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != "fxrl.buffers":
        raise ValueError(f"fxrl.buffers.load: {file} does not describe an fxrl buffer.")
    if meta.get("version") != VERSION:
        raise ValueError(
            f"fxrl.buffers.load: {file} has format version {meta.get('version')}; this "
            f"fxrl reads version {VERSION}."
        )
    return meta


def _sha256(file: Path) -> str:
    h = hashlib.sha256()
    with open(file, "rb") as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    return h.hexdigest()


def _fsync(p: Path) -> None:
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
