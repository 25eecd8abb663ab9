"""A small file in inductor's cache directory that fxrl's compile fixes keep beside
inductor's own (``fxrl._isa_patch``'s probe markers, ``fxrl._direct``'s index): written
whole by rename, so a reader sees it complete or not at all, and never a reason to fail
a compile (a file that cannot be written only means the next process works it out again).
Crash-safe files users keep (checkpoints, buffers) go through ``fxrl.run.checkpoint``'s
``atomic_write`` instead, with fsync."""

from __future__ import annotations

import contextlib
import os


def write_cache_file(path: str, text: str) -> None:
    """Write ``text`` to ``path`` by a temporary file and ``os.replace`` (its folder made if
    missing); an ``OSError`` leaves no file and is not raised."""
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.remove(tmp)
