"""The run loop with a tiny algorithm: files, resume bit for bit, NaN stops, checkpoints."""

import json
import math

import pytest
import torch
import toy_algo

from fxrl import tree
from fxrl.run import checkpoint
from fxrl.run.checkpoint import CheckpointError
from fxrl.run.config_io import read_run_config
from fxrl.run.loop import NonFiniteError, build, resume, train
from fxrl.run.metrics import read_rows

TIMING = ("steps_per_s", "time")


def run(tmp_path, name, **kw):
    config = toy_algo.Config(total_steps=kw.pop("total_steps", 128), **kw.pop("config", {}))
    return train("toy_algo", config, tmp_path / name, num_seeds=2, quiet=True, compile=False, **kw)


def without_timing(rows):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def leaves_equal(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(tree.leaves(a), tree.leaves(b), strict=True))


def test_a_run_writes_config_metrics_curve_and_checkpoints(tmp_path):
    result = run(tmp_path, "r")
    d = result.run_dir
    info = json.loads((d / "config.json").read_text())
    assert info["algorithm"] == "toy_algo" and info["num_seeds"] == 2
    assert info["config"]["total_steps"] == 128 and info["key"] == [0, 0]
    assert {"fxrl_version", "torch_version"} <= set(info)
    rows = read_rows(d / "metrics.jsonl")
    assert [(r["iteration"], r["seed"]) for r in rows] == [
        (i, s) for i in range(1, 9) for s in (0, 1)
    ]
    assert all("loss" in r and "steps_per_s" in r for r in rows)
    assert [r["steps"] for r in rows[::2]] == [16 * i for i in range(1, 9)]
    csv_lines = (d / "metrics.csv").read_text().splitlines()
    assert len(csv_lines) == 1 + len(rows) and csv_lines[0].startswith("iteration,seed,steps")
    assert (d / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for name in ("latest", "best"):
        assert (d / "checkpoints" / f"{name}.safetensors").exists()
    assert result.iteration == 8 and result.steps == 128 and not result.interrupted


def test_a_resumed_run_equals_the_uninterrupted_run_bit_for_bit(tmp_path):
    whole = run(tmp_path, "whole")
    part = run(tmp_path, "part", max_iterations=3)
    assert part.iteration == 3
    # Rows written after the checkpoint (a crash) are dropped and written again.
    with open(part.run_dir / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"iteration": 4, "seed": 0, "steps": -1}) + "\n")
    resumed = resume(part.run_dir, quiet=True)
    assert resumed.iteration == whole.iteration and leaves_equal(resumed.state, whole.state)
    assert without_timing(read_rows(resumed.run_dir / "metrics.jsonl")) == without_timing(
        read_rows(whole.run_dir / "metrics.jsonl")
    )


def test_a_nan_loss_stops_the_run_naming_iteration_and_metric(tmp_path):
    with pytest.raises(NonFiniteError, match=r"iteration 4: loss is not finite .* seeds \[0, 1\]"):
        run(tmp_path, "nan", config={"poison_iteration": 4}, checkpoint_every=0.0)
    d = tmp_path / "nan"
    _, template = build(read_run_config(d))
    state, meta = checkpoint.load(d / "checkpoints" / "latest.safetensors", template)
    assert meta["iteration"] == 3
    assert all(bool(torch.isfinite(x).all()) for x in tree.leaves(state.params))
    assert max(r["iteration"] for r in read_rows(d / "metrics.jsonl")) == 3


def test_td3_with_ou_noise_runs_through_nan_losses_before_learning_and_resumes(tmp_path):
    # Off-policy losses are NaN while nothing is learnt (before learning_starts; TD3's
    # actor loss between delayed steps): not a divergence. The OU noise state and the
    # replay buffer are in the checkpoint, so the resumed run equals the whole one.
    from fxrl.algorithms import td3

    config = td3.Config(env="MountainCarContinuous-v0", total_steps=48, num_envs=2,
                        num_steps=4, buffer_size=64, batch_size=8, learning_starts=16,
                        hidden=(8, 8), noise_type="ou")  # fmt: skip
    whole = train("td3", config, tmp_path / "whole", num_seeds=2, quiet=True, compile=False)
    rows = read_rows(whole.run_dir / "metrics.jsonl")
    assert rows[0]["critic_loss"] is None and math.isfinite(rows[-1]["critic_loss"])  # NaN: null
    assert bool((whole.state.noise.noise != 0).any())
    part = train(
        "td3", config, tmp_path / "part", num_seeds=2, quiet=True, compile=False, max_iterations=3
    )
    resumed = resume(part.run_dir, quiet=True)
    assert resumed.iteration == whole.iteration == 6
    assert leaves_equal(resumed.state, whole.state)


def test_train_refuses_a_directory_that_holds_a_run(tmp_path):
    run(tmp_path, "r", total_steps=16)
    with pytest.raises(FileExistsError, match="fxrl resume"):
        run(tmp_path, "r", total_steps=16)


def test_resume_from_a_corrupt_checkpoint_raises_and_the_previous_one_still_loads(tmp_path):
    part = run(tmp_path, "r", max_iterations=2, checkpoint_every=0.0)
    latest = part.run_dir / "checkpoints" / "latest.safetensors"
    data = bytearray(latest.read_bytes())
    data[-3] ^= 0xFF
    latest.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="is corrupt"):
        resume(part.run_dir, quiet=True)
    assert latest.read_bytes() == bytes(data)
    done = resume(part.run_dir, checkpoint_name="previous", quiet=True)
    assert done.iteration == 8


def test_the_best_checkpoint_holds_the_best_mean_return_seen_at_a_checkpoint(tmp_path):
    result = run(tmp_path, "r", checkpoint_every=0.0)
    best = checkpoint.read_meta(result.run_dir / "checkpoints" / "best.safetensors")
    rows = read_rows(result.run_dir / "metrics.jsonl")
    last: dict = {}
    means = []
    for i in range(1, 9):
        for r in rows:
            if r["iteration"] == i and r["episode_return"] is not None:
                last[r["seed"]] = r["episode_return"]
        means.append(sum(last.values()) / len(last) if last else -math.inf)
    assert best["best_return"] == pytest.approx(max(means))
    assert best["iteration"] == 1 + means.index(max(means))


@pytest.mark.parametrize("num_seeds", [1, 3])
def test_the_run_loop_ends_where_core_train_ends(tmp_path, num_seeds):
    from fxrl import random
    from fxrl.algorithms import core

    config = toy_algo.Config(total_steps=64)
    result = train(
        "toy_algo", config, tmp_path / "r", num_seeds=num_seeds, quiet=True, compile=False
    )
    state, metrics = core.train(toy_algo.make(config), random.key(0), num_seeds, compile=False)
    if num_seeds == 1:
        state = tree.map(lambda x: x.unsqueeze(0), state)
    assert leaves_equal(result.state, state)
    rows = read_rows(tmp_path / "r" / "metrics.jsonl")
    losses = metrics["loss"].reshape(4, num_seeds)
    assert [r["loss"] for r in rows] == losses.reshape(-1).tolist()
