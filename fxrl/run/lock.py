"""A run directory is held by the one process that trains it: ``DIR/run.lock``.

    with hold("runs/a", "fxrl train"):     # RunLockedError if a live process holds it
        ...                                 # train, write checkpoints and metrics

Two processes writing one run directory would write over each other's checkpoints and
metrics, so ``fxrl train --out DIR`` and ``fxrl resume DIR`` hold ``DIR/run.lock`` while
they live: a JSON file naming the owner (pid, host, command, start time) under an
exclusive POSIX record lock (``fcntl.lockf``). The kernel releases that lock when the
owner's process ends, however it ends (SIGKILL included; on NFS a node lost altogether
loses its locks when its lease with the server ends), so a lock file left behind by a
dead process is taken over by the next run, and a run never waits for a lock nobody
holds. A normal exit also removes the file. On a filesystem without record locks the
owner's pid decides instead: a lock naming a pid that is not alive on this host is stale
and taken over.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["LOCK_NAME", "RunLockedError", "hold", "owner"]

LOCK_NAME = "run.lock"
# Directories this process holds: POSIX record locks belong to the process, so a second
# holder in the same process would get the lock again (and its close would release it).
_held: dict[Path, dict[str, Any]] = {}
_guard = threading.Lock()


class RunLockedError(RuntimeError):
    """The run directory is held by another live process (the message names it)."""


def owner(run_dir: str | Path) -> dict[str, Any] | None:
    """What ``DIR/run.lock`` says about its holder (``pid``, ``host``, ``command``,
    ``since``), or None if there is no readable lock file. It says nothing about whether
    that holder still lives (``hold`` finds out)."""
    held = _held.get(Path(run_dir).resolve())
    if held is not None:  # ours: reading the file would close it, releasing our lock
        return dict(held)
    try:
        data = json.loads((Path(run_dir) / LOCK_NAME).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@contextlib.contextmanager
def hold(run_dir: str | Path, command: str) -> Iterator[Path]:
    """Hold ``run_dir`` (which must exist) for the block; released when it ends.

    Args:
      run_dir: the run directory.
      command: what holds it, for the message another process gets (``"fxrl resume"``).
    Raises:
      RunLockedError: a live process holds it; the message names its pid, host, command
        and start time.
    """
    key = Path(run_dir).resolve()
    with _guard:
        if key in _held:
            raise RunLockedError(_message(run_dir, _held[key]))
        fd, info = _acquire(Path(run_dir) / LOCK_NAME, command)
        _held[key] = info
    try:
        yield Path(run_dir) / LOCK_NAME
    finally:
        with _guard:
            _held.pop(key, None)
            _release(Path(run_dir) / LOCK_NAME, fd)


def _acquire(path: Path, command: str) -> tuple[int, dict[str, Any]]:
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not _lock(fd, path):
                raise RunLockedError(_message(path.parent, owner(path.parent)))
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # the owner removed the file as it exited: lock the new one
                os.close(fd)
                continue
            info = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "command": command,
                "since": time.strftime("%Y-%m-%d %H:%M:%S"),
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
            os.fsync(fd)
            return fd, info
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise


def _lock(fd: int, path: Path) -> bool:
    """Take the record lock without waiting: True if taken. Where the filesystem has no
    record locks, the lock file's pid decides (a pid alive on this host holds it)."""
    import fcntl

    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EAGAIN):
            return False
        if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise
    held = owner(path.parent)
    return held is None or not _alive(held)


def _alive(info: dict[str, Any]) -> bool:
    """Whether the process a lock file names is alive. One on another host cannot be
    checked from here: it counts as alive."""
    if info.get("host") != socket.gethostname():
        return True
    pid = info.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _release(path: Path, fd: int) -> None:
    # Remove the file while still holding the lock, then close (which releases it): a
    # process that opened the old file meanwhile finds it gone and locks a new one.
    with contextlib.suppress(OSError):
        os.unlink(path)
    with contextlib.suppress(OSError):
        os.close(fd)


def _message(run_dir: str | Path, info: dict[str, Any] | None) -> str:
    if not info:
        who = "another process (its lock file could not be read)"
        stop = ""
    else:
        who = (
            f"pid {info.get('pid')} on host {info.get('host')} "
            f"({info.get('command', 'fxrl')}, since {info.get('since', '?')})"
        )
        stop = f" (kill -TERM {info.get('pid')} stops it with a checkpoint)"
    return (
        f"{run_dir} is in use by a live run: {who}. Two processes on one run directory "
        f"would write over each other's checkpoints and metrics; wait for it to end or stop "
        f"it{stop}, then run this again. If that process is gone, delete "
        f"{Path(run_dir) / LOCK_NAME}."
    )
