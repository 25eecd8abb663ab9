"""A run saved before issue 29 renamed two Config fields (DQN's ``init_random_frames`` is
``learning_starts``; the off-policy ``rollout_steps`` is ``num_steps``) still loads,
evaluates and resumes: ``fxrl.run.config_io.RENAMED_FIELDS`` maps old to new."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fxrl import run
from fxrl.algorithms import dqn, ppo, sac, td3
from fxrl.run import checkpoint
from fxrl.run.config_io import RENAMED_FIELDS, config_from_json, read_run_config
from fxrl.run.loop import build

OLD = {new: old for old, new in RENAMED_FIELDS.items()}
# what the header of a checkpoint holds besides the caller's meta
_HEADER = {"format", "fxrl_version", "torch_version", "leaves", "strides", "sha256"}


@pytest.mark.parametrize("module", [dqn, sac, td3])
def test_an_old_config_json_loads_under_the_new_names(module):
    data = {"rollout_steps": 3, "num_envs": 2}
    if module is dqn:
        data["init_random_frames"] = 5
    config = config_from_json(module.Config, data)
    assert config.num_steps == 3 and config.num_envs == 2
    assert config.learning_starts == (5 if module is dqn else module.Config().learning_starts)


def test_a_config_without_the_new_field_keeps_the_old_name_and_unknown_names_still_fail():
    @dataclasses.dataclass(frozen=True)
    class Custom:  # a user's algorithm whose own field happens to be called rollout_steps
        rollout_steps: int = 1

    assert config_from_json(Custom, {"rollout_steps": 7}).rollout_steps == 7
    with pytest.raises(ValueError, match=r"fields \['rollout_length'\] that fxrl"):
        config_from_json(ppo.Config, {"rollout_length": 7})


def _make_old(run_dir: Path) -> None:
    """Rewrite a run as fxrl wrote it before the renames: config.json and every
    checkpoint's header name the old fields."""
    info = read_run_config(run_dir)
    _, template = build(info)
    for path in sorted((run_dir / "checkpoints").glob("*.safetensors")):
        state, meta = checkpoint.load(path, template)
        meta = {k: v for k, v in meta.items() if k not in _HEADER}
        meta["config"] = {OLD.get(k, k): v for k, v in meta["config"].items()}
        checkpoint.save(path, state, meta)
    raw = json.loads((run_dir / "config.json").read_text())
    raw["config"] = {OLD.get(k, k): v for k, v in raw["config"].items()}
    (run_dir / "config.json").write_text(json.dumps(raw, indent=2))


def test_an_old_dqn_run_evaluates_and_resumes(tmp_path):
    config = dqn.Config(num_envs=2, num_steps=4, gradient_steps=1, buffer_size=64,
                        batch_size=8, learning_starts=8, hidden=(16,), total_steps=32)  # fmt: skip
    run_dir = tmp_path / "old"
    run.train("dqn", config, run_dir, compile=False, quiet=True)
    before = (run_dir / "metrics.jsonl").read_text()
    _make_old(run_dir)
    assert '"init_random_frames": 8' in (run_dir / "config.json").read_text()

    assert read_run_config(run_dir)["config"] == config
    result = run.evaluate_run(run_dir, episodes=1)
    assert result["steps"] == 32 and len(result["pure"]) == 1
    run.resume(run_dir, quiet=True)  # the finished run: its checks pass, nothing to add
    assert (run_dir / "metrics.jsonl").read_text() == before
