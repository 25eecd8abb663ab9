"""int8 ONNX export: ``to_onnx(..., quantize="int8", calibration=...)`` and ``fxrl export
RUN --quantize int8``. The quantized file holds int8 weights, runs in ONNX Runtime with the
float32 file's calling convention, and picks the float32 policy's actions; bad requests get
one-line errors. (The Pong figures, a trained DQN over whole episodes, are a recorded script
result: examples/quantize_pong.py -> docs/results/pong_int8_30k.jsonl.)"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from safetensors.torch import load_file

from fxrl import _quantize, envs, nn, random
from fxrl.algorithms import ppo
from fxrl.cli import main
from fxrl.export import export, load_onnx, to_onnx
from fxrl.run.evaluate import load_run, seed_params
from fxrl.run.export_run import record_inputs
from fxrl.run.loop import train

pytest.importorskip("onnxruntime.quantization")

# A small conv Q-network on 3-channel 16x16 images: the Atari policy's shape, in miniature.
CONV = nn.conv2d(3, 8, 3, stride=2)
HEAD = nn.mlp(8 * 7 * 7, 4, hidden=(32,))


def conv_q(params, images):
    """images uint8 [B, 16, 16, 3] -> Q-values [B, 4] (pixels / 255, conv, relu, MLP)."""
    x = images.movedim(-1, -3).float() / 255
    h = torch.relu(CONV.apply(params["conv"], x)).flatten(-3)
    return HEAD.apply(params["head"], h)


def _images(key, n):
    return random.randint(key, (n, 16, 16, 3), 0, 256).to(torch.uint8)


@pytest.fixture(scope="module")
def conv(tmp_path_factory):
    params = {"conv": CONV.init(random.key(0)), "head": HEAD.init(random.key(1))}
    exported = export(conv_q, params, _images(random.key(2), 4), dynamic_batch=True)
    calibration = [_images(random.key(10 + i), 32) for i in range(8)]
    path = tmp_path_factory.mktemp("int8") / "conv.onnx"
    to_onnx(exported, path, quantize="int8", calibration=calibration)
    return params, exported, path


def _initializer_dtypes(path):
    model = onnx.load(str(path))
    return {i.name: i.data_type for i in model.graph.initializer}, model


def test_the_int8_file_holds_int8_weights_and_says_so_in_its_metadata(conv):
    _, exported, path = conv
    dtypes, model = _initializer_dtypes(path)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Conv") == 1 and "DequantizeLinear" in ops and "QuantizeLinear" in ops
    weights = [n.input[0] for n in model.graph.node if n.op_type == "DequantizeLinear"]
    int8_weights = [w for w in weights if dtypes.get(w) == onnx.TensorProto.INT8]
    # the conv's and the hidden dense layer's; the Q-value head stays float32 (and so does
    # no first layer: the input is uint8 pixels)
    assert int8_weights == ["conv_w_quantized", "head_layers_0_w_quantized"]
    last = [n for n in model.graph.node if n.op_type in ("MatMul", "Gemm")][-1]
    assert {dtypes.get(i) for i in last.input} & {onnx.TensorProto.FLOAT}
    meta = json.loads({p.key: p.value for p in model.metadata_props}["fxrl"])
    assert meta["quantize"] == "int8" and meta["inputs"] == exported.meta["inputs"]


def test_int8_q_values_are_close_and_clear_decisions_agree(conv):
    params, _, path = conv
    policy = load_onnx(path, threads=1)
    for batch in (1, 64):  # the dynamic batch dim survives quantization
        images = _images(random.key(100 + batch), batch)
        want = conv_q(params, images).detach().numpy()
        got = policy(images.numpy())
        assert got.shape == want.shape and got.dtype == np.float32
        # 8-bit steps, not a wrong graph: small on average (a rare clipped activation, one
        # outside the calibration's range, errs more) and the same ordering of outputs.
        spread = want.max() - want.min()
        assert np.abs(got - want).mean() < 0.01 * spread
        if batch > 1:
            assert np.corrcoef(got.ravel(), want.ravel())[0, 1] > 0.999
        err = np.abs(got - want).max()
        top2 = np.sort(want, -1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 2 * err  # the int8 error cannot flip these
        assert (got.argmax(-1) == want.argmax(-1))[clear].all()


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("int8_run") / "cartpole"
    config = ppo.Config(env="CartPole-v1", total_steps=1024)
    train("ppo", config, run, num_seeds=1, quiet=True, compile=False)
    return run


def test_the_cli_int8_export_plays_the_float32_actions(cartpole_run, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["export", str(cartpole_run), "--quantize", "int8"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    path = cartpole_run / "policy.onnx"
    assert out.startswith(str(path)) and "int8: greedy actions equal float32's on" in out
    record = json.loads((cartpole_run / "policy.onnx.json").read_text())
    assert record["quantize"] == "int8" and record["calibration_frames"] == 64 * 256
    dtypes, _ = _initializer_dtypes(path)
    assert onnx.TensorProto.INT8 in dtypes.values()
    # Independently of the record: frames of the torch policy playing from another key.
    _, algo, state, _ = load_run(cartpole_run, record["checkpoint"])
    params = seed_params(state, record["seed"])
    frames = torch.cat([obs for (obs,) in record_inputs(algo, params, random.key(7), 8, 64)])
    want = algo.policy(params, frames, mode="mode")
    got = load_onnx(path)(frames.numpy())
    assert (got == want.numpy()).mean() >= 0.99


def test_quantize_without_calibration_or_an_unknown_kind_is_a_clear_error(conv, tmp_path):
    _, exported, _ = conv
    frames = [_images(random.key(3), 4)]
    with pytest.raises(ValueError, match=r"quantize='int8'\) needs calibration.*got none"):
        to_onnx(exported, tmp_path / "a.onnx", quantize="int8")
    with pytest.raises(ValueError, match=r"needs calibration.*got list of length 0"):
        to_onnx(exported, tmp_path / "a.onnx", quantize="int8", calibration=[])
    message = r"to_onnx: unknown quantize 'int4'\. Did you mean 'int8'\? Expected one of: int8\."
    with pytest.raises(ValueError, match=message + r" None \(the default\) writes float32\."):
        to_onnx(exported, tmp_path / "a.onnx", quantize="int4", calibration=frames)
    with pytest.raises(ValueError, match="calibration was given but quantize was not"):
        to_onnx(exported, tmp_path / "a.onnx", calibration=frames)
    bad = [frames[0], _images(random.key(4), 4)[..., :2]]
    with pytest.raises(ValueError, match=r"calibration\[1\]: input 'images' has shape"):
        to_onnx(exported, tmp_path / "a.onnx", quantize="int8", calibration=bad)
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "pt2", "--quantize", "int8"], "--format pt2 cannot be quantized"),
        (["--format", "web", "--quantize", "int8"], "--quantize int8 needs --format onnx"),
        (["--quantize", "int4"], "unknown --quantize 'int4'"),
    ],
)
def test_the_cli_refuses_quantizing_what_it_cannot_in_one_line(cartpole_run, capsys, args, message):
    with pytest.raises(SystemExit) as exit_:
        main(["export", str(cartpole_run), *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------ agreement on a trained policy
# The actor of a PPO agent trained to CartPole's greedy return of 500 (the docs' live page's
# seed 0: MLP 4-64-64-2, tanh), 18 KB of safetensors.
ACTOR = Path(__file__).parent / "data" / "int8_cartpole_actor.safetensors"


def cartpole_actor(w, obs):
    """obs float [B, 4] -> greedy action [B] (the PPO policy's mode)."""
    h = torch.tanh(obs @ w["0.w"].T + w["0.b"])
    h = torch.tanh(h @ w["1.w"].T + w["1.b"])
    return (h @ w["2.w"].T + w["2.b"]).argmax(-1)


def _episodes(w, key, n):
    """Every observation of ``n`` whole episodes of the float32 actor in fxrl's CartPole-v1
    (500 steps at most), side by side from ``key``: [frames, 4]."""
    env = envs.batch(envs.make("CartPole-v1", auto_reset=False, episode_stats=False), n)
    state, ts = env.reset(key)
    alive, frames = torch.ones(n, dtype=torch.bool), []
    while alive.any():
        frames.append(ts.obs[alive])
        state, ts = env.step(state, cartpole_actor(w, ts.obs))
        alive &= ~(ts.terminated | ts.truncated)
    return torch.cat(frames)


@pytest.fixture(scope="module")
def cartpole_int8(tmp_path_factory):
    w = load_file(str(ACTOR))
    exported = export(cartpole_actor, w, torch.zeros(2, 4), dynamic_batch=True)
    work = tmp_path_factory.mktemp("int8_cartpole")
    calibration = [_episodes(w, random.key(100), 4)]
    recorded = _episodes(w, random.key(7), 4)  # other episodes: 4 x 500 frames
    fp32 = to_onnx(exported, work / "fp32.onnx")  # one export, quantized two ways
    feeds = _quantize.feeds(exported, calibration)
    default, all_int8 = work / "int8.onnx", work / "all_int8.onnx"
    _quantize.quantize_file(fp32, default, feeds, exported.meta, "fxrl")  # to_onnx's choice
    # every layer int8: the options before these measurements
    _quantize.quantize_file(fp32, all_int8, feeds, exported.meta, "fxrl", float_first=False,
                            float_head=False)  # fmt: skip
    return w, recorded, default, all_int8


def test_int8_picks_the_float32_action_on_99_percent_of_recorded_episodes(cartpole_int8):
    w, recorded, default, all_int8 = cartpole_int8
    assert len(recorded) == 4 * 500  # the trained actor balances all four to the time limit
    want = cartpole_actor(w, recorded).numpy()
    same = (load_onnx(default, threads=1)(recorded.numpy()) == want).mean()
    assert same >= 0.99, f"int8 chose float32's action on {same:.2%} of the frames"
    # The measurement can fail: quantizing every layer (the float observation's 4 features
    # under one uint8 scale, the logits head in int8) flips far more close decisions.
    coarse = (load_onnx(all_int8, threads=1)(recorded.numpy()) == want).mean()
    assert coarse < 0.99 and coarse < same
    print(f"int8 {same:.4f}, every layer int8 {coarse:.4f} of {len(want)} frames")
