"""A run directory is held by its live process: ``DIR/run.lock`` (fxrl.run.lock).

In this process (``hold``, ``owner``), with another process holding the lock, without
record locks (the pid decides), and as a user meets it: a second ``fxrl train --out DIR``
or ``fxrl resume DIR`` on a live run is refused in one line naming the owner, and a run
killed with SIGKILL leaves a lock the next ``fxrl resume`` takes over.
"""

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from zygote import Run, shared

from fxrl.run import lock
from fxrl.run.lock import LOCK_NAME, RunLockedError, hold, owner

HERE = Path(__file__).parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore",
       "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parents[1]),
                                      os.environ.get("PYTHONPATH", "")])}  # fmt: skip
HOST = socket.gethostname()
# A script that holds DIR until it is killed, saying "held" once it does.
HOLDER = (
    "import sys, time\nfrom fxrl.run.lock import hold\n"
    "with hold(sys.argv[1], 'holder'):\n    print('held', flush=True)\n    time.sleep(600)\n"
)


def test_a_held_directory_names_its_owner_and_the_file_goes_when_released(tmp_path):
    with hold(tmp_path, "train") as path:
        assert path == tmp_path / LOCK_NAME
        info = json.loads(path.read_text())
        assert (info["pid"], info["host"], info["command"]) == (os.getpid(), HOST, "train")
        assert owner(tmp_path) == info
        refused = pytest.raises(RunLockedError, match=rf"pid {os.getpid()} on host {HOST} \(train")
        with refused, hold(tmp_path, "resume"):
            pass
        assert owner(tmp_path) == info  # the refused attempt left the lock as it was
    assert not (tmp_path / LOCK_NAME).exists() and owner(tmp_path) is None
    with hold(tmp_path, "resume"):  # free again
        assert owner(tmp_path)["command"] == "resume"


@pytest.fixture
def holder(tmp_path):
    """Another process holding ``tmp_path``: ``(proc, run_dir)``."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], env=ENV,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout.readline().strip() == "held"
    yield proc, tmp_path
    proc.kill()
    proc.wait()


def test_a_directory_another_live_process_holds_is_refused_then_taken_over_once_it_dies(holder):
    proc, run_dir = holder
    with pytest.raises(RunLockedError) as refused, hold(run_dir, "resume"):
        pass
    message = str(refused.value)
    assert f"pid {proc.pid} on host {HOST} (holder, since " in message
    assert f"kill -TERM {proc.pid}" in message and "\n" not in message
    proc.send_signal(signal.SIGKILL)  # no clean exit: the lock file stays behind
    proc.wait()
    assert owner(run_dir)["pid"] == proc.pid
    with hold(run_dir, "resume"):  # the kernel released its record lock: taken over
        assert owner(run_dir)["pid"] == os.getpid()


def test_without_record_locks_a_live_pid_on_this_host_holds_and_a_dead_one_does_not(
    holder, monkeypatch
):
    proc, run_dir = holder

    def no_record_locks(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    import fcntl

    monkeypatch.setattr(fcntl, "lockf", no_record_locks)
    with pytest.raises(RunLockedError, match=rf"pid {proc.pid} on host {HOST}"), hold(run_dir, "x"):
        pass
    proc.kill()
    proc.wait()
    with hold(run_dir, "resume"):  # its pid is gone: a stale lock
        assert owner(run_dir)["pid"] == os.getpid()
    other = {"pid": os.getpid(), "host": HOST + "-elsewhere", "command": "train"}
    (run_dir / LOCK_NAME).write_text(json.dumps(other))
    # another host's process cannot be checked from here
    refused = pytest.raises(RunLockedError, match=rf"on host {HOST}-elsewhere .* delete")
    with refused, hold(run_dir, "resume"):
        pass
    assert lock._held == {}


# ------------------------------------------------------------------------ as a user


def start(args: list[str]) -> Run:
    """``fxrl ARGS`` as a process forked from tests/run/zygote.py."""
    return shared(ENV).start(args)


def wait_until(condition, proc: Run, what: str) -> None:
    deadline = time.time() + 300
    while not condition():
        assert proc.poll() is None, f"{what}: exited {proc.returncode}\n{proc.communicate()}"
        assert time.time() < deadline, what
        time.sleep(0.05)


def holds(run_dir: Path, proc: Run) -> bool:
    """``proc`` holds ``run_dir`` and has written a metrics row since."""
    info = owner(run_dir) or {}
    rows = run_dir / "metrics.jsonl"
    return info.get("pid") == proc.pid and rows.exists() and rows.stat().st_size > 0


def test_a_second_train_or_resume_on_a_live_run_is_refused_naming_its_owner(tmp_path):
    d = tmp_path / "run"
    train = ["train", "toy_algo", "--total-steps", "16000000", "--seeds", "2", "--no-compile",
             "--threads", "1", "--quiet", "--out", str(d)]  # fmt: skip
    live = start(train)
    try:
        wait_until(lambda: holds(d, live), live, "the first run")
        for args in (["resume", str(d)], train):
            out = shared(ENV).run(args, timeout=300)
            assert out.returncode == 2, out
            assert out.stderr.count("\n") == 1 and f"{d} is in use by a live run" in out.stderr
            assert f"pid {live.pid} on host {HOST} (train, since " in out.stderr
        assert live.poll() is None and owner(d)["pid"] == live.pid  # untouched by both
        # SIGKILL: no clean exit, run.lock stays; the next resume takes it over
        live.send_signal(signal.SIGKILL)
        live.wait()
        assert owner(d)["pid"] == live.pid
        (d / "metrics.jsonl").write_text("")
        live = start(["resume", str(d), "--quiet"])
        wait_until(lambda: holds(d, live), live, "the resumed run")
        live.send_signal(signal.SIGTERM)  # a clean stop: checkpoint, then the lock goes
        _, stderr = live.communicate(timeout=300)
        assert live.returncode == 128 + signal.SIGTERM, stderr
        assert not (d / LOCK_NAME).exists()
    finally:
        live.kill()
        live.communicate()
