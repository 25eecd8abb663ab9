"""Resume == uninterrupted, bit for bit, for every algorithm `fxrl train` trains (issue 26).

Each algorithm's tiny run is trained once uninterrupted (the reference), and once more
through a chain of interruptions, each followed by `fxrl resume`, all as subprocesses of
the real command: SIGKILL inside a checkpoint write (between the temporary file and its
rename, hit deterministically by the FXRL_TEST_SIGNAL_IN_WRITE hook), Ctrl-C (SIGINT) and
SIGKILL from outside at whatever moment the run is in. The chain's metrics.jsonl (the
wall-clock columns aside) and its final checkpoint's tensor bytes must equal the
reference's. Sweeps (PPO, DQN: combinations x seeds in one vmapped update) are checked
the same way, as is a task ensemble (PPO over pole lengths). PPO is also checked
compiled, with a second Ctrl-C inside the final write, killed before its first
checkpoint, stopped by a scheduler's SIGTERM or SIGUSR1, and with the one-line messages
for a resume that cannot be exact.

The commands are real processes, each forked from one that has imported fxrl's command
already (tests/run/zygote.py): the same `fxrl.cli.main` as ``python -m fxrl.cli``, its
signals and exit statuses those of a process of its own, less ~3 s of imports apiece.
"""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from zygote import shared

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
HOOK = "FXRL_TEST_SIGNAL_IN_WRITE"
TIMING = ("steps_per_s", "time")
ITERATIONS = 24

OFF_POLICY = ["--num-envs", "2", "--num-steps", "4", "--gradient-steps", "2",
              "--buffer-size", "64", "--batch-size", "8", "--hidden", "16", "16"]  # fmt: skip
# name -> (fxrl train arguments, env steps per iteration, seeds)
ALGOS = {
    "ppo": (["ppo", "--env", "CartPole-v1", "--num-envs", "4", "--num-steps", "16",
             "--update-epochs", "2", "--num-minibatches", "2", "--hidden", "32", "32"], 64, 1),
    "recurrent_ppo": (["recurrent_ppo", "--env", "CartPole-v1", "--num-envs", "4",
                       "--num-steps", "8", "--update-epochs", "2", "--num-minibatches", "2",
                       "--rnn-hidden", "8", "--hidden", "16"], 32, 2),
    "dqn": (["dqn", "--env", "CartPole-v1", *OFF_POLICY, "--learning-starts", "16",
             "--target-update-every", "3", "--eps-decay-steps", "100"], 8, 2),
    "dqn_prioritized": (["dqn", "--env", "CartPole-v1", *OFF_POLICY, "--learning-starts",
                         "16", "--target-update-every", "3", "--eps-decay-steps", "100",
                         "--prioritized"], 8, 2),
    "sac": (["sac", "--env", "Pendulum-v1", *OFF_POLICY, "--learning-starts", "16"], 8, 2),
    "td3": (["td3", "--env", "Pendulum-v1", *OFF_POLICY, "--learning-starts", "16"], 8, 2),
    "td3_ou": (["td3", "--env", "MountainCarContinuous-v0", *OFF_POLICY,
                "--learning-starts", "16", "--noise-type", "ou"], 8, 2),
    # a sweep: 2 x 2 combinations x 2 seeds as one vmapped update (8 rows an iteration)
    "ppo_sweep": (["ppo", "--env", "CartPole-v1", "--num-envs", "4", "--num-steps", "16",
                   "--update-epochs", "2", "--num-minibatches", "2", "--hidden", "16", "16",
                   "--sweep", "lr=2.5e-4,1e-3", "--sweep", "ent_coef=0,0.01"], 64, 2),
    "dqn_sweep": (["dqn", "--env", "CartPole-v1", *OFF_POLICY, "--learning-starts", "16",
                   "--target-update-every", "3", "--eps-decay-steps", "100",
                   "--sweep", "lr=1e-3,1e-2"], 8, 2),
    # a task ensemble: 2 pole lengths x 2 seeds as one vmapped update (4 rows an iteration)
    "ppo_tasks": (["ppo", "--env", "CartPole-v1", "--num-envs", "4", "--num-steps", "16",
                   "--update-epochs", "2", "--num-minibatches", "2", "--hidden", "16", "16",
                   "--tasks", "2", "--task-param", "length=0.25:1.0"], 64, 2),
}  # fmt: skip
# rows per iteration: seeds x combinations (x tasks)
COMBINATIONS = {"ppo_sweep": 4, "dqn_sweep": 2, "ppo_tasks": 2}


def train_args(name: str, out: Path, *extra: str) -> list[str]:
    """``fxrl train`` of ``name``'s tiny run, eager unless ``extra`` asks to compile."""
    args, per_iteration, seeds = ALGOS[name]
    eager = [] if "--compile" in extra else ["--no-compile"]
    return ["train", *args, *eager, "--seeds", str(seeds), "--total-steps",
            str(ITERATIONS * per_iteration), "--threads", "1", "--quiet", "--out", str(out),
            *extra]  # fmt: skip


def fxrl(args: list[str], *, hook: str = "", expect: int = 0) -> subprocess.CompletedProcess:
    out = shared(ENV).run(args, {HOOK: hook} if hook else {}, timeout=600)
    assert out.returncode == expect, f"fxrl {args}: {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


def fxrl_stopped(args: list[str], run_dir: Path, num_rows: int, sig: int) -> str:
    """Start `fxrl ARGS`, send it ``sig`` from outside once its metrics have ``num_rows``
    rows (wherever it then is: updating, writing metrics or a checkpoint, plotting);
    returns its stdout. A stop signal (Ctrl-C's SIGINT, a scheduler's SIGTERM or SIGUSR1)
    exits with 128 + the signal, SIGKILL kills."""
    proc = shared(ENV).start(args)
    metrics, deadline = run_dir / "metrics.jsonl", time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= num_rows:
            break
        time.sleep(0.01)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=300)
    want = -sig if sig == signal.SIGKILL else 128 + sig
    assert proc.returncode == want, f"{args}: {proc.returncode}\n{stdout}\n{stderr}"
    return stdout


def rows(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(r).items() if k not in TIMING} for r in lines]


def header(path: Path) -> dict:
    with safe_open(str(path), "pt") as f:
        return json.loads(f.metadata()["fxrl"])


def tensors(path: Path) -> dict[str, bytes]:
    return {k: t.contiguous().view(torch.uint8).numpy().tobytes()
            for k, t in load_file(str(path)).items()}  # fmt: skip


def assert_same_run(run_dir: Path, reference: Path) -> None:
    """Same metrics rows (wall-clock columns aside) and final checkpoint, bit for bit."""
    assert rows(run_dir) == rows(reference)
    got, want = (d / "checkpoints" / "latest.safetensors" for d in (run_dir, reference))
    assert tensors(got) == tensors(want)
    a, b = header(got), header(want)
    for key in ("iteration", "steps", "returns", "leaves", "sha256", "strides"):
        assert a[key] == b[key], key
    assert a["iteration"] == ITERATIONS


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """Uninterrupted runs, one per algorithm (and flags): ``references(name)`` starts it in
    the background (it runs beside the interrupted runs) and returns a function that waits
    for it and gives its directory."""
    root, procs = tmp_path_factory.mktemp("reference"), {}

    def start(name: str, *extra: str):
        key = (name, *extra)
        if key not in procs:
            d = root / f"{name}{len(procs)}"
            procs[key] = d, shared(ENV).start(train_args(name, d, *extra))

        def wait() -> Path:
            d, proc = procs[key]
            stdout, stderr = proc.communicate(timeout=600)
            assert proc.returncode == 0, f"reference {key}: {proc.returncode}\n{stdout}\n{stderr}"
            return d

        return wait

    yield start
    for _, proc in procs.values():
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("name", list(ALGOS))
def test_an_interrupted_and_resumed_run_equals_the_uninterrupted_one(name, references, tmp_path):
    reference = references(name)
    d, seeds = tmp_path / name, ALGOS[name][2] * COMBINATIONS.get(name, 1)
    ckpts = d / "checkpoints"
    train = train_args(name, d, "--checkpoint-every", "0")  # a checkpoint every iteration
    if name == "ppo":  # the user's case, and the loop's every moment
        # SIGKILL inside the 3rd checkpoint write, between the temporary file and its rename
        fxrl(train, hook="latest.safetensors:3:KILL", expect=-signal.SIGKILL)
        assert header(ckpts / "latest.safetensors")["iteration"] == 2  # the old one, intact
        assert list(ckpts.glob(".latest.safetensors.tmp-*"))  # the write cut short
        assert max(r["iteration"] for r in rows(d)) == 3  # a row after the checkpoint
        # Ctrl-C from outside, whatever the run is doing at that moment
        fxrl_stopped(["resume", str(d), "--quiet"], d, 8 * seeds, signal.SIGINT)
    else:
        # Ctrl-C inside the 3rd checkpoint write: the write completes, the run stops
        fxrl(train, hook="latest.safetensors:3:INT", expect=130)
        assert header(ckpts / "latest.safetensors")["iteration"] == 3
    # SIGKILL from outside, whatever the run is doing at that moment
    fxrl_stopped(["resume", str(d), "--quiet"], d, 14 * seeds, signal.SIGKILL)
    assert header(ckpts / "latest.safetensors")["iteration"] < ITERATIONS
    assert fxrl(["resume", str(d), "--quiet"]).stderr == ""  # same threads: nothing to warn
    assert not list(ckpts.glob(".*.tmp-*"))  # cut-short writes cleaned up
    assert_same_run(d, reference())


def test_ppo_a_second_ctrl_c_inside_the_final_checkpoint_write_resumes_exactly(
    references, tmp_path
):
    reference = references("ppo")
    d = tmp_path / "ppo"
    # the first Ctrl-C comes in the 4th write (iteration 4): the loop stops and writes a
    # final checkpoint, where the second Ctrl-C interrupts at once, before the rename
    out = fxrl(train_args("ppo", d, "--checkpoint-every", "0"),
               hook="latest.safetensors:4:INT,latest.safetensors:5:INT", expect=130)  # fmt: skip
    assert "interrupted" in out.stderr
    assert header(d / "checkpoints" / "latest.safetensors")["iteration"] == 4
    fxrl(["resume", str(d), "--quiet"])
    assert_same_run(d, reference())


def test_ppo_killed_before_its_first_checkpoint_resumes_from_its_start(references, tmp_path):
    reference = references("ppo")
    d = tmp_path / "ppo"
    fxrl_stopped(train_args("ppo", d), d, 3, signal.SIGKILL)  # a checkpoint every 60 s
    assert not list((d / "checkpoints").glob("*.safetensors")) and rows(d)
    fxrl(["resume", str(d), "--quiet"])
    assert_same_run(d, reference())


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGUSR1"])
def test_ppo_stopped_by_a_scheduler_signal_checkpoints_and_resumes_exactly(
    sig, references, tmp_path
):
    # Slurm and Kubernetes stop a job with SIGTERM and SIGKILL after a grace period; Slurm's
    # --signal=USR1@SECONDS warns ahead of a job's end. Either is handled as Ctrl-C is.
    reference, signum = references("ppo"), getattr(signal, sig)
    d = tmp_path / "ppo"
    train = train_args("ppo", d, "--checkpoint-every", "3600")  # none but the signal's
    stdout = fxrl_stopped(train, d, 5, signum)
    assert f"interrupted by {sig} at step " in stdout and f"fxrl resume {d}" in stdout
    # the update in flight finished, its rows and the checkpoint agree
    stopped_at = header(d / "checkpoints" / "latest.safetensors")["iteration"]
    assert 5 <= stopped_at < ITERATIONS and max(r["iteration"] for r in rows(d)) == stopped_at
    assert not (d / "run.lock").exists()
    fxrl(["resume", str(d), "--quiet"])
    assert_same_run(d, reference())


@pytest.mark.slow  # compiling PPO's pieces costs ~40 s of CPU per process
def test_ppo_compiled_resumes_exactly(references, tmp_path):
    # the reference first: the runs below load its programs from inductor's on-disk cache
    # instead of compiling the same graphs again beside it
    reference = references("ppo", "--compile")()
    d = tmp_path / "ppo"
    fxrl(train_args("ppo", d, "--compile", "--checkpoint-every", "0"),
         hook="latest.safetensors:5:KILL", expect=-signal.SIGKILL)  # fmt: skip
    fxrl(["resume", str(d), "--quiet"])
    assert_same_run(d, reference)


# ------------------------------------------------------------------------------ bad input


@pytest.fixture
def finished(references, tmp_path):
    d = tmp_path / "copy"
    shutil.copytree(references("ppo")(), d)
    return d


def edit_config(run_dir: Path, **changes) -> None:
    info = json.loads((run_dir / "config.json").read_text())
    for k, v in changes.items():
        if k in info:
            info[k] = v
        else:
            info["config"][k] = v
    (run_dir / "config.json").write_text(json.dumps(info))


def test_resume_with_other_threads_says_so_in_one_line_and_continues(finished):
    err = fxrl(["resume", str(finished), "--quiet", "--threads", "2"]).stderr
    assert err.count("\n") == 1 and err.startswith("fxrl resume: warning: ")
    assert "threads 1" in err and "threads 2" in err
    assert "will not be bit-identical" in err and "--threads 1 restores that" in err


def test_resume_with_another_fxrl_version_names_it_in_one_line(finished):
    edit_config(finished, fxrl_version="0.0.1")
    err = fxrl(["resume", str(finished), "--quiet"]).stderr
    assert err.count("\n") == 1 and "fxrl 0.0.1" in err and "will not be bit-identical" in err


def test_resume_with_another_algorithm_config_is_a_one_line_error(finished):
    edit_config(finished, lr=0.5)
    err = fxrl(["resume", str(finished), "--quiet"], expect=2).stderr
    assert err.count("\n") == 1 and err.startswith("fxrl resume: error: ")
    assert "lr=0.00025 in the checkpoint, 0.5 in config.json" in err
    assert "would not continue the same run exactly" in err
