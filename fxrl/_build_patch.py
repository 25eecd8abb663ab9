"""A scoped change to how inductor builds a CPU program with a C++ wrapper (torch 2.13), for
fxrl's compiles: the wrapper and the kernels compile at the same time.

With ``cpp_wrapper_build_separate`` (one of ``fxrl.compile``'s CPU defaults) inductor
writes a program as two C++ files, the wrapper (built at ``-Og``) and the kernels (at
``-O3``), and builds them with three g++ runs one after the other: the wrapper's object,
the kernels' object, then the link (``codecache._worker_compile_cpp``). The two objects
do not depend on each other, so inside ``patched()`` they compile side by side (the
wrapper's g++ in a second thread, each g++ its own process) and the link waits for both.
The same commands run, in the same directories, under the same lock, so the library and
the cache keys are those of inductor's order; what changes is the wall: on two free cores
a cold compile waits for the longer of the two compiles instead of their sum. A build
that is not this wrapper-and-kernels triple runs as inductor runs it. Only on torch 2.13
(the version read for this); on any other ``patched()`` does nothing. ``FXRL_PARALLEL_BUILD=0``
in the environment turns it off (for comparisons).

Inside ``patched()`` the kernels also compile at ``-O2`` where inductor asks g++ for
``-O3``. Inductor writes its kernels' vector code itself (``at::vec``, g++'s loop
vectorizer off), so ``-O3``'s further passes buy little: g++ took about a third less CPU
on the very large kernels of a MinAtar Seaquest step and as much on PPO's and SAC's,
and steady PPO, DQN and SAC updates ran as fast from either build, within the noise of
the measurements (compiling page, "Where a cold compile goes"). ``FXRL_KERNELS_O2=0``
keeps inductor's ``-O3``. The flag is part of the command line, which inductor's key for
the built library includes, so the two builds never share a file.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from fxrl._class_patch import CountedPatch

PATCHED_TORCH = "2.13."  # the torch release whose inductor this was written for
ENABLED = os.environ.get("FXRL_PARALLEL_BUILD", "1") != "0"
KERNELS_O2 = os.environ.get("FXRL_KERNELS_O2", "1") != "0"


def _this_torch() -> bool:
    return torch.__version__.startswith(PATCHED_TORCH)


def applies() -> bool:
    """Whether this torch is the one the patch was written for (and it is not turned off)."""
    return ENABLED and _this_torch()


def _missing(builder: Any) -> bool:
    return not os.path.exists(builder.get_target_file_path())


def build_side_by_side(lock_path: str, cpp_builders: Sequence[Any]) -> None:
    """``codecache._worker_compile_cpp`` with a (wrapper, kernels, link) triple's two
    compiles run at once; anything else as inductor builds it."""
    if len(cpp_builders) != 3:
        _inductors()(lock_path, cpp_builders)
        return
    from torch._inductor.codecache import LOCK_TIMEOUT
    from torch.utils._filelock import FileLock

    wrapper, kernels, link = cpp_builders
    with FileLock(lock_path, timeout=LOCK_TIMEOUT):
        failed: list[BaseException] = []

        def build_wrapper() -> None:
            try:
                wrapper.build()
            except BaseException as e:  # raised again in the calling thread
                failed.append(e)

        side = None
        if _missing(wrapper):
            side = threading.Thread(target=build_wrapper, name="fxrl-wrapper-g++")
            side.start()
        try:
            if _missing(kernels):
                kernels.build()
        finally:
            if side is not None:
                side.join()
        if failed:
            raise failed[0]
        if _missing(link):
            link.build()


def _inductors() -> Any:
    """Inductor's own ``_worker_compile_cpp``: the one the patch replaced, or, in a compile
    worker process (which unpickles a build by its name, this function, with no patch
    applied there), the module's."""
    return _patch.saved.get("_worker_compile_cpp") or _codecache()._worker_compile_cpp


def _codecache() -> Any:
    import torch._inductor.codecache  # noqa: F401  (the module, for its attributes)

    return sys.modules["torch._inductor.codecache"]


def _cpp_builder() -> Any:
    import torch._inductor.cpp_builder  # noqa: F401  (the module, for its attributes)

    return sys.modules["torch._inductor.cpp_builder"]


def kernel_cflags(cpp_compiler: str, min_optimize: bool = False) -> tuple[list[str], list[str]]:
    """``cpp_builder._get_optimization_cflags`` with ``-O2`` for its ``-O3`` (the kernels;
    the wrapper's level, ``min_optimize``, is left as it is)."""
    cflags, ldflags = _flags.saved["_get_optimization_cflags"](cpp_compiler, min_optimize)
    if not min_optimize:
        cflags = ["O2" if flag == "O3" else flag for flag in cflags]
    return cflags, ldflags


_patch = CountedPatch(_codecache, {"_worker_compile_cpp": build_side_by_side})
_flags = CountedPatch(_cpp_builder, {"_get_optimization_cflags": kernel_cflags})


@contextlib.contextmanager
def patched() -> Iterator[None]:
    """Inside this block, a C++-wrapper program's wrapper and kernels compile at once, and
    the kernels at ``-O2`` (unless ``KERNELS_O2`` is off)."""
    with _patch.applied(applies()), _flags.applied(KERNELS_O2 and _this_torch()):
        yield
