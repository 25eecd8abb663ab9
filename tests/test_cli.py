"""`fxrl` as a user runs it: processes of the real command on PPO CartPole, tiny budgets.

Each command is a process of its own forked from one that has imported fxrl's command
already (tests/run/zygote.py: ``fxrl.cli.main`` as ``python -m fxrl.cli`` runs it, its exit
status and output its own); the progress-bar test starts ``python -m fxrl.cli`` itself, on
a terminal.
"""

import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from fxrl import tree
from fxrl.cli import main
from fxrl.run.evaluate import load_run, seed_params
from fxrl.run.metrics import read_rows

sys.path.insert(0, str(Path(__file__).resolve().parent / "run"))
from zygote import shared

FXRL = [sys.executable, "-m", "fxrl.cli"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
TRAIN = ["train", "ppo", "--env", "CartPole-v1", "--seeds", "2", "--total-steps", "4096"]
TRAIN += ["--threads", "1", "--no-compile"]  # eager: these tests are not about compiling


def fxrl(*args, check=True, timeout=600):
    out = shared(ENV).run(list(args), timeout=timeout)
    if check and out.returncode != 0:
        raise AssertionError(f"fxrl {args} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


def without_timing(rows):
    return [{k: v for k, v in r.items() if k not in ("steps_per_s", "time")} for r in rows]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli") / "run"
    fxrl(*TRAIN, "--out", d, "--tensorboard", "--quiet")
    return d


def test_train_writes_every_file_of_a_run_directory(run_dir):
    info = json.loads((run_dir / "config.json").read_text())
    assert info["algorithm"] == "ppo" and info["num_seeds"] == 2
    assert info["config"]["total_steps"] == 4096 and info["config"]["env"] == "CartPole-v1"
    assert info["torch_version"] == torch.__version__ and info["key"] == [0, 0]
    rows = read_rows(run_dir / "metrics.jsonl")
    assert len(rows) == 2 * 8 and {r["seed"] for r in rows} == {0, 1}
    assert rows[-1]["steps"] == 4096 and all("loss" in r and "steps_per_s" in r for r in rows)
    header = (run_dir / "metrics.csv").read_text().splitlines()[0].split(",")
    assert header[:4] == ["iteration", "seed", "steps", "episodes"] and "policy_loss" in header
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    for name in ("latest", "best"):
        assert (run_dir / "checkpoints" / f"{name}.safetensors").stat().st_size > 0


def test_the_curve_is_a_valid_png_image(run_dir):
    import matplotlib.image

    image = matplotlib.image.imread(run_dir / "curve.png")
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


def run_main(capsys, *args):
    """``fxrl.cli.main`` in this process (cheaper than a subprocess for argument errors)."""
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exit_info.value.code, out.out, out.err


def test_a_command_run_in_this_process_gives_back_torchs_thread_count(capsys, tmp_path):
    # `fxrl train --threads 2` sets torch's threads for its run; the caller's count (this
    # worker's) comes back when main returns, as it does when the command fails
    import torch

    before = torch.get_num_threads()
    args = ["--num-envs", "2", "--num-steps", "8", "--total-steps", "16", "--quiet"]
    for threads in (before + 1, before + 2):
        code, _, _ = run_main(capsys, "train", "ppo", "--out", tmp_path / str(threads),
                              "--threads", threads, "--no-compile", *args)  # fmt: skip
        assert code == 0 and torch.get_num_threads() == before
    code, _, _ = run_main(capsys, "train", "ppo", "--threads", before + 1, "--lr", "-1", *args)
    assert code != 0 and torch.get_num_threads() == before


def test_help_lists_each_config_field_with_its_default(capsys):
    code, out, _ = run_main(capsys, "train", "ppo", "--help")
    assert code == 0
    for flag in ("--lr", "--num-envs", "--gae-lambda", "--hidden", "--seeds", "--out", "--quiet"):
        assert flag in out
    assert "(default: 0.00025)" in out and "discount" in out


def test_an_unknown_flag_is_a_one_line_error_with_the_closest_flag_as_a_user_sees_it(tmp_path):
    out = fxrl("train", "ppo", "--out", tmp_path / "r", "--lrr", "1e-3", check=False)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == (
        "fxrl train: error: unknown flag --lrr. Did you mean --lr? See fxrl train ppo --help.\n"
    )
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "CartPol-v1"], "env='CartPol-v1' is not allowed"),
        (["--env", "CartPol-v1"], "Did you mean 'CartPole-v1'?"),
        (["--lr", "fast"], "Error parsing --lr: could not convert string to float: 'fast'"),
        (["--num-minibatches", "7"], "num_minibatches=7 is not allowed; expected a divisor"),
        (["--seeds"], "Missing value for argument '--seeds'"),
    ],
)
def test_a_bad_value_or_env_id_is_a_one_line_error(capsys, tmp_path, args, message):
    code, _, err = run_main(capsys, "train", "ppo", "--out", tmp_path / "r", *args)
    assert code == 2 and err.startswith("fxrl train: error: ")
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "r").exists()


def test_an_unknown_command_or_algorithm_names_the_closest_one(capsys):
    code, _, err = run_main(capsys, "trian")
    assert code == 2 and "Did you mean 'train'?" in err
    code, _, err = run_main(capsys, "train", "ppp")
    assert code == 2 and "Did you mean 'ppo'?" in err


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory, run_dir):
    """The fixture's run, interrupted by Ctrl-C after its first iteration, then resumed."""
    d = tmp_path_factory.mktemp("cli") / "interrupted"
    proc = shared(ENV).start([*TRAIN, "--out", d, "--quiet"])
    deadline = time.time() + 120
    while time.time() < deadline and not (
        (d / "metrics.jsonl").exists() and (d / "metrics.jsonl").read_text()
    ):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, _ = proc.communicate(timeout=120)
    resumed = fxrl("resume", d, "--quiet")
    return d, proc.returncode, stdout, resumed


def test_ctrl_c_writes_a_checkpoint_and_says_how_to_resume(interrupted):
    d, code, stdout, _ = interrupted
    assert code == 130 and f"fxrl resume {d}" in stdout


def test_a_resumed_run_equals_the_uninterrupted_one_bit_for_bit(interrupted, run_dir):
    d, *_ = interrupted
    _, _, whole, _ = load_run(run_dir)
    _, _, resumed, meta = load_run(d)
    assert meta["steps"] == 4096
    for a, b in zip(tree.leaves(whole), tree.leaves(resumed), strict=True):
        assert torch.equal(a, b)
    assert without_timing(read_rows(d / "metrics.jsonl")) == without_timing(
        read_rows(run_dir / "metrics.jsonl")
    )


def test_a_corrupt_checkpoint_is_a_clear_error_and_the_previous_one_still_loads(
    interrupted, tmp_path
):
    d = tmp_path / "copy"
    shutil.copytree(interrupted[0], d)
    latest = d / "checkpoints" / "latest.safetensors"
    data = bytearray(latest.read_bytes())
    data[len(data) // 2] ^= 0x55
    latest.write_bytes(bytes(data))
    out = fxrl("eval", d, "--episodes", "1", check=False)
    assert out.returncode == 2 and "is corrupt" in out.stderr and out.stderr.count("\n") == 1
    assert latest.read_bytes() == bytes(data)
    assert "mean" in fxrl("eval", d, "--episodes", "1", "--checkpoint", "previous").stdout


def test_eval_reports_greedy_returns_in_the_pure_env_and_in_gymnasium(run_dir):
    out = fxrl("eval", run_dir, "--episodes", "2", "--gymnasium").stdout
    assert "pure" in out and "gymnasium" in out
    result = json.loads((run_dir / "eval.json").read_text())
    assert len(result["pure"]["0"]) == 2 and len(result["gymnasium"]["1"]) == 2
    assert all(r >= 8 for rs in result["gymnasium"].values() for r in rs)  # CartPole's minimum


def test_export_writes_an_onnx_policy_that_onnx_runtime_runs_like_torch(run_dir):
    import onnxruntime as ort

    path = Path(fxrl("export", run_dir, "--format", "onnx").stdout.strip())
    assert path == run_dir / "policy.onnx"
    record = json.loads(path.with_name("policy.onnx.json").read_text())
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    (action,) = session.run(None, {session.get_inputs()[0].name: obs})
    _, algo, state, _ = load_run(run_dir, record["checkpoint"])
    expected = algo.policy(seed_params(state, record["seed"]), torch.from_numpy(obs), mode="mode")
    np.testing.assert_array_equal(action, expected.numpy())


def test_plot_overlays_runs_in_one_png(run_dir, tmp_path):
    out = tmp_path / "both.png"
    fxrl("plot", run_dir, run_dir, "--out", out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_progress_bar_in_a_terminal_shows_steps_rate_eta_and_returns(tmp_path):
    main, secondary = pty.openpty()
    env = {**ENV, "COLUMNS": "200", "TERM": "xterm"}
    args = ["train", "ppo", "--total-steps", "512", "--seeds", "2", "--out", tmp_path / "r"]
    args += ["--no-compile"]
    proc = subprocess.Popen(
        [*FXRL, *map(str, args)], stdout=secondary, stderr=secondary, env=env, close_fds=True
    )
    os.close(secondary)
    chunks = []
    while True:
        ready, _, _ = select.select([main], [], [], 120)
        try:
            data = os.read(main, 4096) if ready else b""
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(main)
    text = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, text
    assert "512/512" in text and "steps/s" in text and "ETA" in text
    assert "return" in text and "(min" in text and "━" in text  # rich's bar


def test_the_demo_trains_exports_and_replays_the_onnx_policy_in_gymnasium(capsys, tmp_path):
    code, out, _ = run_main(
        capsys, "demo", "--seeds", "2", "--total-steps", "1024", "--episodes", "2",
        "--out", tmp_path / "demo", "--quiet", "--threads", "1", "--eager",
    )  # fmt: skip
    assert code == 0 and "ONNX Runtime" in out
    summary = json.loads((tmp_path / "demo" / "demo.json").read_text())
    assert summary["gymnasium_onnx"] == summary["gymnasium_torch"]
    # the whole demo's time, as printed, is kept: the training is only part of it
    assert summary["seconds"] >= summary["train_seconds"] > 0
    assert f"demo finished in {summary['seconds']:.0f} s" in out
    assert (
        len(summary["gymnasium_greedy_mean"]) == 2 and (tmp_path / "demo" / "policy.onnx").exists()
    )


def test_export_pt2_under_out_loads_with_fxrl_export_load_and_acts_like_torch(
    capsys, run_dir, tmp_path
):
    from fxrl.export import load

    target = tmp_path / "deploy" / "cartpole.pt2"
    code, out, _ = run_main(capsys, "export", run_dir, "--format", "pt2", "--out", target)
    assert code == 0 and out.strip() == str(target)
    obs = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    _, algo, state, _ = load_run(run_dir, "best")
    seed = json.loads(target.with_name("cartpole.pt2.json").read_text())["seed"]
    expected = algo.policy(seed_params(state, seed), obs, mode="mode")
    assert torch.equal(load(target)(obs), expected)
