"""`fxrl eval` and `fxrl export` on a recurrent run: the carry is fed back and reset by
is_init at each episode's start, and the exported program takes and returns it."""

import json

import numpy as np
import pytest
import torch

from fxrl.algorithms import core
from fxrl.cli import main
from fxrl.run.evaluate import evaluate_run, load_run, seed_params
from fxrl.run.export_run import export_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("recurrent") / "run"
    argv = ["train", "recurrent_ppo", "--env", "CartPole-v1", "--seeds", "2"]
    argv += ["--total-steps", "1024", "--mask-velocity", "--threads", "1", "--quiet"]
    argv += ["--no-compile"]
    with pytest.raises(SystemExit) as done:
        main([*argv, "--out", str(d)])
    assert done.value.code in (0, None)
    return d


def test_eval_feeds_the_carry_back_like_core_evaluate(run_dir):
    result = evaluate_run(run_dir, episodes=3, gymnasium=True)
    assert (
        json.loads((run_dir / "eval.json").read_text())["gymnasium"]["1"] == result["gymnasium"][1]
    )
    info, algo, state, _ = load_run(run_dir)
    assert algo.config.mask_velocity
    for s in range(info["num_seeds"]):
        assert len(result["pure"][s]) == 3 and all(r >= 8 for r in result["pure"][s])
        # core.evaluate's gymnasium loop (written apart) plays the same episodes
        reference = core.evaluate(algo, seed_params(state, s), episodes=3, seed=0)
        assert result["gymnasium"][s] == reference.tolist()


def test_export_takes_carry_and_is_init_and_onnx_runtime_plays_like_torch(run_dir):
    import gymnasium
    import onnxruntime as ort

    path = export_run(run_dir, "onnx")
    record = json.loads(path.with_name(path.name + ".json").read_text())
    _, algo, state, _ = load_run(run_dir, record["checkpoint"])
    params = seed_params(state, record["seed"])
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    assert len(names) == 3, names  # obs, carry (GRU: one tensor), is_init
    env = gymnasium.make("CartPole-v1")
    obs, _ = env.reset(seed=3)
    carry = algo.initial_carry((1,))
    onnx_carry = np.full(tuple(carry.shape), 7.0, np.float32)  # is_init must reset it
    first, done, steps = True, False, 0
    while not done:
        x = torch.as_tensor(obs, dtype=torch.float32)[None]
        is_init = torch.full((1,), first)
        with torch.no_grad():
            action, carry = algo.policy(params, x, carry, is_init, mode="mode")
        onnx_action, onnx_carry = session.run(
            None, dict(zip(names, (x.numpy(), onnx_carry, is_init.numpy()), strict=True))
        )
        np.testing.assert_array_equal(onnx_action, action.numpy())
        np.testing.assert_allclose(onnx_carry, carry.numpy(), rtol=1e-5, atol=1e-5)
        obs, _, terminated, truncated, _ = env.step(int(action[0]))
        first, done, steps = False, terminated or truncated, steps + 1
    assert steps >= 8
