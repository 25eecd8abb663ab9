"""Checkpoints of a whole TrainState: safetensors, written atomically, loaded without pickle.

    save("run/checkpoints/latest.safetensors", state, {"algorithm": "ppo", "config": {...}})
    state, meta = load("run/checkpoints/latest.safetensors", template, expect={...})

A checkpoint is one safetensors file: every leaf of the TrainState (params, optimizer
state, env state, key, counters) stored under its path name (``params/actor/w``), and a
JSON header in the file's metadata with the tree's names/shapes/dtypes, a SHA-256 of the
tensor bytes, the fxrl and torch versions and whatever the caller adds (algorithm,
config, iteration). Loading rebuilds the tree from a *template* (``vmap(algo.init)(keys)``)
and fills its leaves by name, so no code is unpickled. The file is written to a temporary
name in the same directory, fsynced, then renamed over the old one: a crash mid-write
leaves the previous checkpoint as it was, and so does a write that fails (a full disk, a
quota, a file-size limit, permissions), which raises ``WriteError`` naming the file, the
cause and the fix.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import signal
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as _st_load
from safetensors.torch import save as _st_save

import fxrl
from fxrl import tree

__all__ = [
    "FORMAT",
    "CheckpointError",
    "WriteError",
    "append_text",
    "atomic_write",
    "load",
    "read_meta",
    "remove_temporary",
    "save",
    "written_atomically",
]

FORMAT = 1
_KEY = "fxrl"
TMP_PREFIX = "."


class CheckpointError(RuntimeError):
    """A checkpoint that is truncated, corrupt, or not of this run (the message says which)."""


def _named_leaves(fn: str, state: Any) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for path, leaf in tree.flatten_with_paths(state):
        name = "/".join(str(p) for p in path) or "x"
        if not isinstance(leaf, torch.Tensor):
            raise TypeError(
                f"{fn}: leaf {name!r} of the state is a {type(leaf).__name__}, not a tensor. "
                "A TrainState holds tensors only; mark constants tree.field(static=True)."
            )
        out[name] = leaf
    return out


def _digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(tensors[name].contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


class WriteError(OSError):
    """A file could not be written: no space left, a quota, a file-size limit, a read-only
    or foreign directory. The file it was to replace is as it was before; the message names
    the file, the cause and the fix."""

    def __init__(self, path: str | Path, cause: OSError, more: str = "") -> None:
        super().__init__(cause.errno, cause.strerror or str(cause))
        self.path, self.cause, self._more = Path(path), cause, more
        why = cause.strerror or str(cause)
        self.message = (
            f"could not write {self.path}: {why}. {self.path.name} was left as it "
            f"was. {_fix(cause.errno, self.path.parent)}{more}"
        )

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:  # pickled across processes as it was built
        return (WriteError, (self.path, self.cause, self._more))

    def with_context(self, more: str) -> WriteError:
        """The same error with ``more`` said after it (what the caller kept, what to run)."""
        return WriteError(self.path, self.cause, more=f" {more}")


def _fix(code: int | None, where: Path) -> str:
    if code in (errno.ENOSPC, errno.EDQUOT):
        return f"Free space on the disk of {where} (df -h {where}), or raise your quota."
    if code == errno.EFBIG:
        return "Raise the file-size limit (ulimit -f), or write to another disk."
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"Make {where} writable (it is read-only or not yours), or write elsewhere."
    return f"Check the disk of {where}."


def written_atomically(
    path: str | Path, *, keep: Path | None = None
) -> contextlib.AbstractContextManager[Path]:
    """``with written_atomically(path) as tmp:`` write ``tmp`` (a name in ``path``'s
    directory with ``path``'s suffix, so writers that pick a format by extension pick the
    same); at the end of the block it is fsynced and renamed over ``path``. If the block
    raises, ``tmp`` is removed and ``path`` is untouched; an ``OSError`` (no space, a
    quota, permissions) becomes a ``WriteError`` naming ``path``.

    Args:
      path: the file to write.
      keep: if given and ``path`` exists, the old ``path`` becomes ``keep`` (a hard link
        renamed into place) once the new file is written and before it replaces ``path``:
        at every moment an intact ``path`` exists, and a failed write changes neither.
    """
    return _written_atomically(Path(path), keep)


@contextlib.contextmanager
def _written_atomically(path: Path, keep: Path | None) -> Iterator[Path]:
    tmp = _temporary(path)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        if keep is not None and path.exists():
            _link_over(path, keep)
        _test_hook(path)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except Exception as e:  # a failure, not a kill: nothing half-written is left behind
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and not isinstance(e, WriteError):
            raise WriteError(path, e) from e
        raise


def _temporary(path: Path) -> Path:
    """``.NAME.tmp-PID.SUFFIX`` beside ``path`` (``remove_temporary`` finds those a crash left)."""
    return path.with_name(f"{TMP_PREFIX}{path.name}.tmp-{os.getpid()}{path.suffix}")


def _link_over(source: Path, target: Path) -> None:
    """``target`` becomes ``source``'s content (a hard link renamed into place: atomic)."""
    tmp = _temporary(target)
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:  # a filesystem without hard links
        import shutil

        shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | Path, data: bytes, *, keep: Path | None = None) -> Path:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half.

    Temporary file in the same directory, fsync, ``os.replace``, fsync of the directory
    (``written_atomically``; ``keep``: where the old file goes). A write that fails (no
    space, a quota, permissions) removes the temporary file, leaves ``path`` as it was
    and raises ``WriteError``.
    """
    path = Path(path)
    with written_atomically(path, keep=keep) as tmp, open(tmp, "wb") as f:
        f.write(data)
        f.flush()
    return path


# Testing only: FXRL_TEST_SIGNAL_IN_WRITE="latest.safetensors:3:KILL" makes this process's
# 3rd atomic write of a file of that name send itself SIGKILL (or INT, TERM...) after the
# temporary file is written and before it is renamed: the worst moment for a crash, hit
# deterministically by tests/run/test_resume_exact.py. Several: "NAME:3:INT,NAME:4:INT".
_HOOK_ENV = "FXRL_TEST_SIGNAL_IN_WRITE"
_hook_counts: dict[str, int] = {}


def _test_hook(path: Path) -> None:
    specs = [s.rsplit(":", 2) for s in os.environ.get(_HOOK_ENV, "").split(",") if s]
    if not any(name == path.name for name, _, _ in specs):
        return
    count = _hook_counts[path.name] = _hook_counts.get(path.name, 0) + 1
    for name, nth, sig in specs:
        if name == path.name and int(nth) == count:
            os.kill(os.getpid(), getattr(signal, f"SIG{sig}"))


def append_text(path: str | Path, text: str) -> Path:
    """Append ``text`` to ``path`` (created if missing). A write that fails (no space, a
    quota, a file-size limit) cuts the file back to its old length, so no half line is
    left, and raises ``WriteError``."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size, view = os.fstat(fd).st_size, memoryview(text.encode())
            try:
                while view:
                    view = view[os.write(fd, view) :]
            except OSError:
                os.ftruncate(fd, size)  # shrinking a file needs no space
                raise
        finally:
            os.close(fd)
    except OSError as e:
        raise WriteError(path, e) from e
    return path


def remove_temporary(directory: str | Path) -> list[Path]:
    """Delete the temporary files that writes interrupted by a crash left in ``directory``
    (``.NAME.tmp-PID``, never renamed over ``NAME``); returns them."""
    stale = sorted(Path(directory).glob(f"{TMP_PREFIX}*.tmp-*"))
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def save(
    path: str | Path, state: Any, meta: dict[str, Any] | None = None, *, keep: Path | None = None
) -> Path:
    """Write ``state`` (a pytree of tensors) and ``meta`` (JSON-able) to ``path`` atomically.

    Args:
      path: the checkpoint file (``.safetensors``); its directory must exist.
      state: the TrainState, batched over seeds or not.
      meta: extra header entries (algorithm, config, iteration, steps...).
      keep: where the old ``path`` goes (``previous.safetensors``), once the new file is
        written and before it replaces ``path``; a failed write changes neither.
    Returns:
      ``path``.
    Raises:
      WriteError: the file could not be written (no space...); ``path`` is as it was.
    """
    named = _named_leaves("checkpoint.save", state)
    # Cloned: safetensors refuses tensors that share storage (views of one buffer).
    tensors = {n: t.detach().to("cpu").contiguous().clone() for n, t in named.items()}
    header = {
        "format": FORMAT,
        "fxrl_version": fxrl.__version__,
        "torch_version": torch.__version__,
        "leaves": [
            [n, list(t.shape), str(t.dtype).removeprefix("torch.")] for n, t in tensors.items()
        ],
        # Each leaf's memory layout: float results of the next update depend on it (a
        # matmul reads a transposed weight with another kernel and rounds differently), so
        # a resumed run must read the state laid out as the uninterrupted run had it.
        "strides": {n: list(t.stride()) for n, t in named.items()},
        "sha256": _digest(tensors),
        **(meta or {}),
    }
    data = _st_save(tensors, metadata={_KEY: json.dumps(header)})
    return atomic_write(path, data, keep=keep)


def read_meta(path: str | Path) -> dict[str, Any]:
    """The JSON header of a checkpoint, without reading its tensors (checks it is intact)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist.")
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _corrupt(path, f"the file has {size} bytes, too few for a header")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            raise _corrupt(path, f"the header claims {n} bytes but the file has {size}")
        raw = f.read(n)
    try:
        st_header = json.loads(raw)
        meta = json.loads(st_header["__metadata__"][_KEY])
    except (ValueError, KeyError, TypeError) as e:
        raise _corrupt(path, f"its header does not parse ({type(e).__name__}: {e})") from None
    end = max(
        (v["data_offsets"][1] for k, v in st_header.items() if k != "__metadata__"), default=0
    )
    if 8 + n + end != size:
        raise _corrupt(path, f"it should have {8 + n + end} bytes but has {size} (truncated?)")
    return meta


def _corrupt(path: Path, why: str) -> CheckpointError:
    return CheckpointError(
        f"checkpoint {path} is corrupt: {why}. The file was left as it is; resume from "
        "another checkpoint in the same directory (fxrl resume DIR --checkpoint NAME) or "
        "start a new run."
    )


def _check_expected(path: Path, meta: dict[str, Any], expect: dict[str, Any]) -> None:
    for key, want in expect.items():
        got = meta.get(key)
        if got == want:
            continue
        if isinstance(got, dict) and isinstance(want, dict):
            diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            shown = ", ".join(
                f"{k}: {got.get(k)!r} in the file, {want.get(k)!r} here" for k in diff
            )
            raise CheckpointError(
                f"checkpoint {path} has another {key}: {shown}. Load it with the {key} it was "
                "written with (fxrl resume reads it from the run's config.json)."
            )
        raise CheckpointError(
            f"checkpoint {path} has {key} {got!r}, expected {want!r}: it belongs to another "
            "run. Point at the run directory that wrote it."
        )


def load(
    path: str | Path, template: Any, *, expect: dict[str, Any] | None = None
) -> tuple[Any, dict[str, Any]]:
    """Read a checkpoint into a tree shaped like ``template``.

    Args:
      path: a file written by ``save``.
      template: a tree with the structure, shapes and dtypes the checkpoint must have
        (``vmap(algo.init)(keys)`` for a run's TrainState); its values are not used. Each
        leaf is loaded onto its template leaf's device (checkpoints hold CPU tensors, so a
        run trained on a GPU loads on a CPU-only machine, and the other way round).
      expect: header entries that must match (``{"algorithm": "ppo", "config": {...}}``).
    Returns:
      ``(state, meta)``.
    Raises:
      CheckpointError: truncated or corrupt file, other algorithm/config, or a tree that
        differs from the template (the message names the leaf); the file is not touched.
    """
    path = Path(path)
    meta = read_meta(path)
    if meta.get("format") != FORMAT:
        raise CheckpointError(
            f"checkpoint {path} has format {meta.get('format')!r}; this fxrl "
            f"({fxrl.__version__}) reads format {FORMAT}. Load it with fxrl "
            f"{meta.get('fxrl_version')}."
        )
    _check_expected(path, meta, expect or {})
    try:
        tensors = _st_load(path.read_bytes())
    except Exception as e:
        raise _corrupt(path, f"safetensors cannot read it ({e})") from None
    if _digest(tensors) != meta.get("sha256"):
        raise _corrupt(path, "its tensor bytes do not match the SHA-256 in its header")
    want = _named_leaves("checkpoint.load", template)
    _check_tree(path, meta, tensors, want)
    strides = meta.get("strides", {})
    leaves = [_with_strides(tensors[n], strides.get(n), want[n].device) for n in want]
    return tree.unflatten(tree.structure(template), leaves), meta


def _with_strides(t: torch.Tensor, stride: list[int] | None, device: torch.device) -> torch.Tensor:
    """``t`` copied into fresh (allocator-aligned) memory on ``device`` with the strides
    it was saved with: a permuted or padded layout as it was, a broadcast (stride-0) dim
    expanded again. Files without strides (older ones) or with a layout that is not one of
    these load contiguous."""

    def contiguous() -> torch.Tensor:
        return t.to(device, memory_format=torch.contiguous_format, copy=True)

    if stride is None or len(stride) != t.dim():
        return contiguous()
    base = t
    expanded = [d for d, (n, s) in enumerate(zip(t.shape, stride, strict=True)) if s == 0 and n > 1]
    for d in expanded:
        base = base.narrow(d, 0, 1)
        if not torch.equal(base.expand_as(t), t):  # not a broadcast after all
            return contiguous()
    try:
        out = torch.empty_strided(base.shape, stride, dtype=t.dtype, device=device).copy_(base)
    except RuntimeError:  # overlapping strides (an as_strided window): no faithful copy
        return contiguous()
    return out.expand(t.shape) if expanded else out


def _check_tree(
    path: Path, meta: dict[str, Any], got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]
) -> None:
    missing, extra = [n for n in want if n not in got], [n for n in got if n not in want]
    problems = []
    if missing:
        problems.append(f"missing leaves {missing[:5]}")
    if extra:
        problems.append(f"unexpected leaves {extra[:5]}")
    for n, t in want.items():
        if n in got and (got[n].shape != t.shape or got[n].dtype != t.dtype):
            g = got[n]
            problems.append(
                f"leaf {n!r} is {list(g.shape)} {g.dtype} in the file, "
                f"{list(t.shape)} {t.dtype} here"
            )
    if problems:
        raise CheckpointError(
            f"checkpoint {path} does not fit this TrainState: {'; '.join(problems[:3])}. It "
            f"was written by fxrl {meta.get('fxrl_version')} (this is {fxrl.__version__}) "
            "with another algorithm, config or number of seeds; load it with those, or "
            "start a new run."
        )
