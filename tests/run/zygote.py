"""Run `fxrl` commands as real processes without paying Python's and torch's import each time.

``python tests/run/zygote.py`` imports fxrl's command (torch, dynamo, matplotlib) once,
then reads one JSON request a line on stdin: ``{"argv": [...], "env": {...}, "dir": D}``
(optionally ``"fsize": N``: the command's RLIMIT_FSIZE, SIGXFSZ ignored, as a
``preexec_fn`` would set them).
For each it forks a monitor, which forks the command's process and waits for it. The
command's process runs ``fxrl.cli.main(argv)`` with ``env`` over the zygote's environment,
its stdout and stderr in ``D/stdout`` and ``D/stderr``, and exits as ``python -m fxrl.cli``
would: the command's exit status, or killed by the signal that killed it. The monitor
writes the process's id to ``D/pid`` and, once it has ended, its return code (negative:
the signal) to ``D/returncode``, each file renamed into place whole. `Zygote.start` gives
an object that is used as `subprocess.Popen` is (pid, poll, wait, send_signal, kill,
communicate). `shared(env)` is one zygote per environment for the whole test process,
shared by the test files that run fxrl commands, closed when the process exits.

A tiny `fxrl train` costs ~5 s of CPU as a fresh process, ~3 s of it importing; each
test of tests/run/test_resume_exact.py starts four or five of them.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _run_command(argv: list[str], env: dict[str, str], d: Path, fsize: int | None) -> None:
    """In the command's process: ``fxrl ARGV`` and exit as ``python -m fxrl.cli`` does."""
    import resource
    import traceback

    import fxrl.cli

    if fsize is not None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, resource.RLIM_INFINITY))
    os.environ.update(env)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        out = os.open(d / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
    sys.argv = [fxrl.cli.__file__, *argv]
    code = 0
    try:
        fxrl.cli.main(argv)
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:  # Python dies of the SIGINT it did not handle
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _monitor(request: dict) -> None:
    """In the monitor: fork the command's process, record its id and its return code."""
    d = Path(request["dir"])
    pid = os.fork()
    if pid == 0:
        try:
            _run_command(request["argv"], request.get("env", {}), d, request.get("fsize"))
        finally:
            os._exit(1)
    _write(d / "pid", str(pid))
    _, status = os.waitpid(pid, 0)
    _write(d / "returncode", str(os.waitstatus_to_exitcode(status)))
    os._exit(0)


def serve(root: Path) -> None:
    """Serve requests until stdin closes (the test process closed it or ended), then
    remove ``root``, the folder of the commands' output files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot
    import torch._dynamo  # noqa: F401

    import fxrl.cli
    import fxrl.run.plots  # noqa: F401

    print("ready", flush=True)
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], 0.05)
        while True:  # reap monitors that are done
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if not ready:
            continue
        chunk = os.read(0, 1 << 16)
        if not chunk:
            shutil.rmtree(root, ignore_errors=True)
            return
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            request = json.loads(line)
            if os.fork() == 0:
                try:
                    _monitor(request)
                finally:
                    os._exit(1)


class Run:
    """One `fxrl` command started by the zygote, used as `subprocess.Popen` is."""

    def __init__(self, d: Path, deadline_s: float = 60.0):
        self.dir, self.returncode = d, None
        end = time.monotonic() + deadline_s
        while not (d / "pid").exists():
            assert time.monotonic() < end, f"zygote did not start {d}"
            time.sleep(0.005)
        self.pid = int((d / "pid").read_text())

    def poll(self) -> int | None:
        if self.returncode is None and (self.dir / "returncode").exists():
            self.returncode = int((self.dir / "returncode").read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(f"fxrl in {self.dir}", timeout)
            time.sleep(0.005)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return (self.dir / "stdout").read_text(), (self.dir / "stderr").read_text()


class Zygote:
    """The zygote process, started with environment ``env``."""

    def __init__(self, env: dict[str, str]):
        self.root = Path(tempfile.mkdtemp(prefix="fxrl-zygote-"))
        self.proc = subprocess.Popen([sys.executable, __file__, str(self.root)], env=env,
                                     text=True, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)  # fmt: skip
        assert self.proc.stdout.readline().strip() == "ready", "the zygote did not start"
        self.count = 0

    def start(
        self, argv: list[str], env: dict[str, str] | None = None, fsize: int | None = None
    ) -> Run:
        self.count += 1
        d = self.root / str(self.count)
        d.mkdir()
        request = {"argv": [str(a) for a in argv], "env": env or {}, "dir": str(d),
                   "fsize": fsize}  # fmt: skip
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return Run(d)

    def run(self, argv: list[str], env: dict[str, str] | None = None, timeout: float = 600,
            fsize: int | None = None) -> subprocess.CompletedProcess:  # fmt: skip
        run = self.start(argv, env, fsize)
        stdout, stderr = run.communicate(timeout)
        return subprocess.CompletedProcess(argv, run.returncode, stdout, stderr)

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.root, ignore_errors=True)


_SHARED: dict[tuple, Zygote] = {}


def shared(env: dict[str, str]) -> Zygote:
    """The test process's zygote for ``env``, started on first use."""
    key = tuple(sorted(env.items()))
    if key not in _SHARED:
        _SHARED[key] = zygote = Zygote(env)
        atexit.register(zygote.close)
    return _SHARED[key]


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
