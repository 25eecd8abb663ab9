"""A scoped fix of inductor's CPU vector-ISA check (torch 2.13), for fxrl's compiles: each
process once paid about 1 s to learn what an earlier one already knew.

Before its first CPU kernel, each process asks which vector instruction sets
(AVX512-VNNI, AVX512, AVX2 here) inductor can use (``cpu_vec_isa.valid_vec_isa_list``):
for each, ``VecISA.check_build`` builds a small library into the inductor cache (once per
cache: the file is found there afterwards) and then ``_probe_load`` starts a Python
subprocess that only ``dlopen``s it, every time, in every process: six subprocesses and
0.9 of the 1.1 s the check took in a warm process (cProfile, quiet 2-core AMD EPYC). The
library's path names what it was built from (the probe code, the compiler's version, the
ISA flags and torch's version), so a library that loaded once loads again.

Inside ``patched()``, ``_probe_load`` returns True for a library beside which a marker
file says it loaded before; otherwise it probes as inductor does and, when the library
loads, writes the marker (whole, by rename). A library that failed to load is probed
again each time, as before. Only on torch 2.13 (the version read for this); on any other
``patched()`` does nothing. The generated code and the FX graph cache key are unchanged.

The first check in an inductor cache is the costly one: g++ builds each probe library
(ATen's vector headers included), several seconds of a cold compile. ``check_in_background()``
starts that check in a thread (each g++ its own process) when a CPU program's compile
begins, so that it runs on a second core while fxrl traces the function on the first;
``wait()`` joins it before inductor's lowering, which asks for the result (cached by
inductor for the process). A check that fails in the thread is left to inductor's own,
which then runs as before and reports what went wrong. ``FXRL_ISA_BACKGROUND=0`` in the
environment turns the thread off (for comparisons).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any

import torch

from fxrl._cache_file import write_cache_file
from fxrl._class_patch import CountedPatch

PATCHED_TORCH = "2.13."  # the torch release whose inductor this was written for
MARKER = ".fxrl-loads"  # beside the probed library: it loaded in an earlier process
BACKGROUND = os.environ.get("FXRL_ISA_BACKGROUND", "1") != "0"

_started: threading.Thread | None = None  # the check's thread, once per process
_start_lock = threading.Lock()


def applies() -> bool:
    """Whether this torch is the one the patch was written for."""
    return torch.__version__.startswith(PATCHED_TORCH)


def _probe_once(self: Any, output_path: str) -> bool:
    marker = output_path + MARKER
    if os.path.isfile(marker):
        return True
    loads = _patch.saved["_probe_load"](self, output_path)
    if loads:  # not written: the next process probes again
        write_cache_file(marker, "loaded by a probe\n")
    return loads


def _vec_isa() -> type:
    from torch._inductor.cpu_vec_isa import VecISA

    return VecISA


_patch = CountedPatch(_vec_isa, {"_probe_load": _probe_once})


def patched() -> contextlib.AbstractContextManager[None]:
    """Inside this block, a vector-ISA library that loaded in an earlier process is not
    probed again."""
    return _patch.applied(applies())


def _check() -> None:
    try:
        with patched():
            from torch._inductor import cpu_vec_isa

            cpu_vec_isa.valid_vec_isa_list()  # functools.cache: the process's answer
    except Exception:  # inductor's own check runs again and reports it
        pass


def check_in_background() -> None:
    """Start inductor's vector-ISA check in a thread, once per process (torch 2.13, unless
    ``BACKGROUND`` is off); ``wait()`` before inductor lowers anything."""
    global _started
    if not (BACKGROUND and applies()):
        return
    with _start_lock:
        if _started is None:
            import torch._inductor.cpu_vec_isa  # noqa: F401  (imported here, not in the thread)

            _started = threading.Thread(target=_check, name="fxrl-isa-check", daemon=True)
            _started.start()


def wait() -> None:
    """Block until the background check (if one was started) has finished."""
    if _started is not None:
        _started.join()
