"""Host-env run directories (fxrl.run.host_run): ALE Pong through `fxrl export` and
`fxrl eval --video`, from the checkpoint and from the ONNX export, as a user runs them.

The agent is an untrained Nature DQN whose last bias is minus its mean Q-values over a
few Pong screens: the Q-values then differ by what moves on the screen, so its greedy
actions vary from step to step (an untrained net's do not) and agreement means something.
"""

import functools
import json
import os

import numpy as np
import pytest
import torch
from zygote import shared

from fxrl import envs, nn, random
from fxrl.cli import main
from fxrl.envs.host import seeds_from_key
from fxrl.run import host_run, video

pytest.importorskip("ale_py")
pytest.importorskip("onnxruntime")

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
NETWORK = {"name": "atari_dqn", "num_actions": 6, "in_channels": 1}
PREPROCESS = [["to_tensor_image"], ["resize", 84, 84, "nearest"], ["grayscale"]]
STEPS = 40  # video steps


def fxrl(*args):
    out = shared(ENV).run(list(args))  # a process forked from tests/run/zygote.py
    assert out.returncode == 0, f"fxrl {args} failed:\n{out.stdout}\n{out.stderr}"
    return out.stdout


@functools.cache
def _centred():
    q, pre = nn.atari_dqn(6, in_channels=1), host_run.build_preprocess(PREPROCESS)
    params = q.init(random.key(0))
    last = params["head"]["layers"][-1]
    last["b"] = torch.zeros_like(last["b"])
    env = envs.atari("Pong")
    state, ts = env.reset(random.key(5))
    screens = []
    for _ in range(30):
        screens.append(ts.obs)
        state, ts = env.step(state, torch.tensor(0))
    env.close()
    with torch.no_grad():
        last["b"] = -q.apply(params, pre(torch.stack(screens))).mean(0)
    return params


def centred_params():
    return {k: v for k, v in _centred().items()}  # leaves are not mutated


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("host") / "pong"
    host_run.save_host_run(d, centred_params(), algorithm="dqn", env="ALE/Pong-v5",
                           network=NETWORK, preprocess=PREPROCESS, steps=123)  # fmt: skip
    return d


@pytest.fixture(scope="module")
def exported(run_dir):
    """`fxrl export RUN --format onnx` in a process of its own."""
    out = fxrl("export", run_dir, "--format", "onnx")
    assert out.strip() == str(run_dir / "policy.onnx")
    return run_dir / "policy.onnx"


def gif_frames(path):
    """Every frame of a GIF as RGB uint8 and its duration (Pillow merges repeated frames)."""
    from PIL import Image, ImageSequence

    with Image.open(path) as im:
        return [
            (np.asarray(f.convert("RGB")), f.info["duration"]) for f in ImageSequence.Iterator(im)
        ]


def test_the_run_directory_reads_back_with_its_params(run_dir):
    config = json.loads((run_dir / "config.json").read_text())
    assert config["kind"] == "host" and config["env"] == "ALE/Pong-v5"
    assert config["network"] == NETWORK and config["preprocess"] == PREPROCESS
    run = host_run.load_host_run(run_dir)
    want = centred_params()
    assert run.meta["steps"] == 123 and host_run.is_host_run(run_dir)
    for got, exp in zip(run.params["head"]["layers"], want["head"]["layers"], strict=True):
        assert torch.equal(got["w"], exp["w"]) and torch.equal(got["b"], exp["b"])
    with pytest.raises(ValueError, match="do not fit network"):
        host_run.save_host_run(run_dir / "other", nn.atari_dqn(4, 1).init(random.key(0)),
                               algorithm="dqn", env="ALE/Pong-v5", network=NETWORK,
                               preprocess=PREPROCESS, steps=0)  # fmt: skip


def test_checkpoint_and_onnx_actions_agree_step_by_step(run_dir, exported):
    """The policy of the checkpoint and policy.onnx in ONNX Runtime choose the same action
    on every screen of a Pong trajectory, and those actions vary."""
    run, program = host_run.load_host_run(run_dir), video.onnx_policy(exported, batched=True)
    env = run.make_env()
    state, ts = env.reset(random.key(0))
    torch_actions, onnx_actions = [], []
    for _ in range(STEPS):
        torch_actions.append(int(run.act(ts.obs)))
        onnx_actions.append(int(program(ts.obs)))
        state, ts = env.step(state, torch.tensor(torch_actions[-1]))
    env.close()
    assert torch_actions == onnx_actions
    assert len(set(torch_actions)) >= 3, torch_actions


def test_cli_records_pong_from_the_checkpoint_and_from_onnx(run_dir, exported, tmp_path):
    import gymnasium

    out_ckpt = fxrl("eval", run_dir, "--episodes", "1", "--video", tmp_path / "ckpt.gif",
                    "--video-steps", STEPS, "--threads", "1")  # fmt: skip
    out_onnx = fxrl("eval", run_dir, "--episodes", "1", "--video", tmp_path / "onnx.gif",
                    "--video-steps", STEPS, "--onnx", "--threads", "1")  # fmt: skip
    assert "ALE episodes at step 123" in out_ckpt and f"[{STEPS}] steps" in out_ckpt
    assert "policy.onnx (ONNX Runtime)" in out_onnx and f"[{STEPS}] steps" in out_onnx
    ckpt, onnx = gif_frames(tmp_path / "ckpt.gif"), gif_frames(tmp_path / "onnx.gif")
    # same actions -> same game -> the same frames (GIFs of <= 256 colors are lossless)
    assert len(ckpt) == len(onnx) and sum(d for _, d in ckpt) == STEPS * 40
    for (a, da), (b, db) in zip(ckpt, onnx, strict=True):
        assert da == db and np.array_equal(a, b)
    # ALE's own picture: its render after reset with the seed fxrl's key gives
    import ale_py

    gymnasium.register_envs(ale_py)
    ale = gymnasium.make("ALE/Pong-v5", render_mode="rgb_array")
    ale.reset(seed=seeds_from_key(random.key(0)))
    first = ale.render()
    ale.close()
    assert ckpt[0][0].shape == (210, 160, 3) and np.array_equal(ckpt[0][0], first)
    assert not np.array_equal(ckpt[0][0], ckpt[-1][0])  # the game moved


def test_an_mp4_from_the_checkpoint(run_dir, tmp_path):
    import imageio.v3 as iio

    rec = host_run.record_host_run(run_dir, tmp_path / "pong.mp4", max_steps=10)
    frames = iio.imread(tmp_path / "pong.mp4")
    assert rec.lengths == [10] and frames.shape == (10, 210, 160, 3)


def run_main(capsys, *args):
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exit_info.value.code, out.out, out.err


def test_bad_input_is_one_line(run_dir, tmp_path, capsys):
    bare = tmp_path / "bare"
    host_run.save_host_run(bare, centred_params(), algorithm="dqn", env="ALE/Pong-v5",
                           network=NETWORK, preprocess=PREPROCESS, steps=0)  # fmt: skip
    cases = [
        (("eval", bare, "--video", tmp_path / "x.gif", "--onnx"), "fxrl export"),
        (("eval", run_dir, "--onnx"), "give --video"),
        (("eval", run_dir, "--gymnasium"), "host-env run"),
        (("export", run_dir, "--quantize", "int8"), "host-env run"),
        (("resume", run_dir), "cannot be resumed"),
        (("eval", run_dir, "--video", tmp_path / "x.avi2"), "x.avi2"),
    ]
    for args, words in cases:
        code, _, err = run_main(capsys, *args)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, (args, err)
    assert not (tmp_path / "x.gif").exists()
    with pytest.raises(ValueError, match="not an ALE id"):
        host_run.save_host_run(bare, centred_params(), algorithm="dqn", env="Pong",
                               network=NETWORK, preprocess=PREPROCESS, steps=0)  # fmt: skip
    with pytest.raises(ValueError, match="unknown preprocessing step"):
        host_run.save_host_run(bare, centred_params(), algorithm="dqn", env="ALE/Pong-v5",
                               network=NETWORK, preprocess=[["frame_stack", 4]],
                               steps=0)  # fmt: skip
