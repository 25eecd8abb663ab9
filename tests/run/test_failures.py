"""What a run does when the machine fails it: a full disk, a host env that raises, no memory.

Each ends the command with a one-line error naming the cause and the fix, a non-zero exit
status, and the last checkpoint and metrics as they were, so ``fxrl resume`` continues.
The full disk is a real one for the process: ``RLIMIT_FSIZE`` (the file-size limit of
``ulimit -f``) set in the child before it starts, with SIGXFSZ ignored (as Python does)
so a write past it fails with EFBIG instead of killing the process. A small tmpfs would
need mount rights a test cannot count on. CUDA running out of memory is injected: the
update raises torch's ``OutOfMemoryError`` with the message torch gives.
"""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import toy_algo
from safetensors.torch import load_file
from zygote import shared

from fxrl import tree
from fxrl.cli import main
from fxrl.run import checkpoint, loop
from fxrl.run.config_io import read_run_config
from fxrl.run.metrics import read_rows
from fxrl.run.video import write_video

HERE = Path(__file__).parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore",
       "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parents[1]),
                                      os.environ.get("PYTHONPATH", "")])}  # fmt: skip
CONFIG = toy_algo.Config(total_steps=16 * 12)
TIMING = ("steps_per_s", "time")


def fxrl(args: list, *, limit: int | None = None, expect: int = 0) -> subprocess.CompletedProcess:
    """``fxrl ARGS`` in a process forked from tests/run/zygote.py; ``limit``: a file-size
    limit (RLIMIT_FSIZE, SIGXFSZ ignored) on that process, as a user's quota would be."""
    out = shared(ENV).run(list(args), timeout=600, fsize=limit)
    assert out.returncode == expect, f"fxrl {args}: {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


def train(run_dir: Path, **kw):
    return loop.train("toy_algo", CONFIG, run_dir, num_seeds=2, quiet=True, compile=False,
                      checkpoint_every=0.0, **kw)  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``(stopped, whole)``: a toy run stopped after 3 iterations (a checkpoint after each)
    and the same run uninterrupted."""
    root = tmp_path_factory.mktemp("failures")
    train(root / "stopped", max_iterations=3)
    train(root / "whole")
    return root / "stopped", root / "whole"


@pytest.fixture
def stopped(runs, tmp_path):
    d = tmp_path / "run"
    shutil.copytree(runs[0], d)
    return d


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def leftovers(*dirs: Path) -> list[Path]:
    return [p for d in dirs for p in d.glob(f"{checkpoint.TMP_PREFIX}*.tmp-*")]


def without_timing(rows):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def assert_same_run(run_dir: Path, reference: Path) -> None:
    assert without_timing(read_rows(run_dir / "metrics.jsonl")) == without_timing(
        read_rows(reference / "metrics.jsonl")
    )
    got, want = (load_file(d / "checkpoints" / "latest.safetensors") for d in (run_dir, reference))
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in got)


def one_line_error(out: subprocess.CompletedProcess, command: str) -> str:
    assert out.stderr.count("\n") == 1 and out.stderr.startswith(f"fxrl {command}: error: ")
    return out.stderr


# ----------------------------------------------------------------------------- disk


def test_a_checkpoint_write_that_fails_ends_the_run_in_one_line_and_keeps_the_last_one(
    stopped, runs
):
    ckpts = stopped / "checkpoints"
    before, rows = files(ckpts), read_rows(stopped / "metrics.jsonl")
    # a checkpoint no longer fits (their sizes differ by the digits of their headers)
    limit = (ckpts / "latest.safetensors").stat().st_size - 500
    assert (stopped / "metrics.jsonl").stat().st_size + 1000 < limit  # its rows still do
    err = one_line_error(fxrl(["resume", stopped, "--quiet"], limit=limit, expect=2), "resume")
    latest = ckpts / "latest.safetensors"
    assert f"could not write {latest}: File too large. latest.safetensors was left as" in err
    assert "Raise the file-size limit (ulimit -f)" in err
    assert "stopped after iteration 4; its last checkpoint (iteration 3) and metrics" in err
    assert f"`fxrl resume {stopped}` continues from there" in err
    assert files(ckpts) == before and not leftovers(stopped, ckpts)  # latest, previous, best
    after = read_rows(stopped / "metrics.jsonl")
    assert after[: len(rows)] == rows and {r["iteration"] for r in after[len(rows) :]} == {4}
    assert not (stopped / "run.lock").exists()
    fxrl(["resume", stopped, "--quiet"])  # space again: the same run as the uninterrupted one
    assert_same_run(stopped, runs[1])


def test_a_metrics_write_that_fails_leaves_no_half_row_behind(stopped, runs):
    before = files(stopped)
    limit = (stopped / "metrics.jsonl").stat().st_size + 100  # less than one more iteration
    err = one_line_error(fxrl(["resume", stopped, "--quiet"], limit=limit, expect=2), "resume")
    assert f"could not write {stopped / 'metrics.jsonl'}: File too large" in err
    assert "stopped after iteration 4; its last checkpoint (iteration 3)" in err
    after = files(stopped)
    for name in ("metrics.jsonl", "metrics.csv", "config.json"):
        assert after[name] == before[name], name
    # byte for byte the stopped run, which resumes exactly (the test above)
    assert files(stopped / "checkpoints") == files(runs[0] / "checkpoints")
    assert not leftovers(stopped, stopped / "checkpoints")


@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_an_export_that_fails_leaves_the_policy_file_there_was(stopped, fmt):
    policy = stopped / f"policy.{fmt}"
    policy.write_bytes(b"the policy an earlier export wrote")
    before = files(stopped)
    args = ["export", stopped, "--format", fmt]
    err = one_line_error(fxrl(args, limit=1024, expect=2), "export")
    assert f"could not write {policy}: File too large. policy.{fmt} was left as it was." in err
    assert files(stopped) == before and not leftovers(stopped)


def test_a_video_write_that_fails_leaves_the_video_there_was(stopped, tmp_path):
    video = tmp_path / "videos" / "agent.gif"
    write_video(video, np.zeros((3, 8, 8, 3), dtype=np.uint8))
    before = video.read_bytes()
    out = fxrl(["eval", stopped, "--episodes", "1", "--video", video], limit=8192, expect=2)
    err = one_line_error(out, "eval")
    assert f"could not write {video}: File too large. agent.gif was left as it was." in err
    assert video.read_bytes() == before and not leftovers(video.parent)


# ----------------------------------------------------------------------------- host env


def test_a_host_env_that_raises_ends_the_run_in_one_line_naming_it_and_keeps_the_checkpoint(
    tmp_path,
):
    d = tmp_path / "host"
    # 2 envs x 4 steps an update; the env raises at its 21st step, in the 3rd update
    out = fxrl(["train", "host_algo", "--fail-at", "20", "--seeds", "1", "--no-compile",
                "--checkpoint-every", "0", "--threads", "1", "--quiet", "--out", d],
               expect=2)  # fmt: skip
    err = one_line_error(out, "train")
    assert 'HostEnvError: host env gym("FlakyCartPole-v0", num_envs=2) raised in step: ' in err
    assert "ConnectionError: the simulator lost its licence server." in err
    assert "The env's own code failed, not fxrl's: run the env alone" in err
    assert "stopped after iteration 2; its last checkpoint (iteration 2) and metrics" in err
    info = read_run_config(d)
    _, template = loop.build(info)
    state, meta = checkpoint.load(d / "checkpoints" / "latest.safetensors", template)
    assert meta["iteration"] == 2 and int(state.steps) == 8
    assert [r["iteration"] for r in read_rows(d / "metrics.jsonl")] == [1, 2]
    assert not (d / "run.lock").exists()


# ----------------------------------------------------------------------------- memory

# torch's message when CUDA runs out of memory (torch 2.x), as a user sees it
CUDA_OOM = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB "
    "of which 1.17 GiB is free. Including non-PyTorch memory, this process has 77.97 GiB "
    "memory in use. Of the allocated memory 75.10 GiB is allocated by PyTorch, and 1.36 GiB "
    "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
    "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
)


def test_cuda_out_of_memory_ends_the_run_in_one_line_with_the_fix_and_keeps_the_checkpoint(
    runs, tmp_path, monkeypatch, capsys
):
    real = loop.batched_update

    def third_update_runs_out(*args, **kwargs):
        update, calls = real(*args, **kwargs), []

        def update_or_fail(state):
            calls.append(1)
            if len(calls) == 3:
                raise torch.OutOfMemoryError(CUDA_OOM)
            return update(state)

        return update_or_fail

    monkeypatch.setattr(loop, "batched_update", third_update_runs_out)
    d = tmp_path / "oom"
    with pytest.raises(SystemExit) as exit_:
        main(["train", "toy_algo", "--total-steps", str(CONFIG.total_steps), "--seeds", "2",
              "--no-compile", "--checkpoint-every", "0", "--threads", str(torch.get_num_threads()),
              "--quiet", "--out", str(d)])  # fmt: skip
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1
    assert err.startswith(
        "fxrl train: error: OutOfMemoryError: the GPU ran out of memory while "
        "training (tried to allocate 2.00 GiB; 1.17 GiB free of 79.15 GiB)."
    )
    assert "other processes may hold it: nvidia-smi" in err and "fewer --seeds or --num-envs" in err
    assert "stopped after iteration 2; its last checkpoint (iteration 2) and metrics" in err
    monkeypatch.undo()
    result = loop.resume(d, quiet=True)  # the memory is back: the run continues, exactly
    assert result.iteration == 12 and not result.interrupted
    assert_same_run(d, runs[1])
    whole, _ = checkpoint.load(runs[1] / "checkpoints" / "latest.safetensors", result.state)
    leaves = zip(tree.leaves(whole), tree.leaves(result.state), strict=True)
    assert all(torch.equal(a, b) for a, b in leaves)


def test_the_machine_running_out_of_memory_says_so_without_naming_a_gpu(tmp_path, monkeypatch):
    def out_of_memory(state):
        raise MemoryError()

    monkeypatch.setattr(loop, "batched_update", lambda *args, **kwargs: out_of_memory)
    with pytest.raises(MemoryError) as raised:
        train(tmp_path / "ram")
    message = str(raised.value)
    assert message.startswith("the machine ran out of memory while training. Free memory")
    assert "stopped after iteration 0, before its first checkpoint" in message
    assert "GPU" not in message and not list((tmp_path / "ram" / "checkpoints").iterdir())
