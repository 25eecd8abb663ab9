"""fxrl.envs.atari: ALE games through ale-py as host envs, checked against gymnasium's
ALE/Pong-v5, and the TorchRL Atari screen pipeline built from fxrl.transforms."""

import ale_py
import gymnasium
import numpy as np
import pytest
import torch

from fxrl import envs, random, specs
from fxrl import transforms as T
from fxrl.envs.atari import games
from fxrl.envs.host import seeds_from_key

gymnasium.register_envs(ale_py)


def test_pong_matches_gymnasium_ale_pong_v5_for_300_steps():
    key = random.key(5)
    env, raw = envs.atari("Pong"), gymnasium.make("ALE/Pong-v5")
    state, ts = env.reset(key)
    obs, _ = raw.reset(seed=seeds_from_key(key))
    assert ts.obs.shape == (210, 160, 3) and ts.obs.dtype == torch.uint8
    assert np.array_equal(ts.obs.numpy(), obs)
    rewards = 0
    for a in random.randint(random.key(6), (300,), 0, 6):
        state, ts = env.step(state, a)
        obs, reward, terminated, truncated, info = raw.step(int(a))
        assert np.array_equal(ts.obs.numpy(), obs)
        assert (float(ts.reward), bool(ts.terminated), bool(ts.truncated)) == (
            reward,
            terminated,
            truncated,
        )
        assert int(ts.info["lives"]) == info["lives"]
        rewards += reward != 0
    assert rewards >= 1  # the run reached at least one point


def test_pong_out_of_the_box_is_ale_v5_raw_rgb_with_frameskip_and_sticky_actions():
    env = envs.atari("Pong")
    assert repr(env.observation_spec) == repr(specs.Box(0, 255, (210, 160, 3), torch.uint8))
    assert repr(env.action_spec) == repr(specs.Discrete(6))
    ale = env.gymnasium_env.unwrapped.ale
    assert ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    state, _ = env.reset(random.key(0))
    env.step(state, torch.tensor(0))
    assert ale.getEpisodeFrameNumber() == 4
    assert envs.atari("Pong", full_action_space=True).action_spec.n == 18
    assert repr(envs.atari("ALE/Pong-v5")) == 'atari("ALE/Pong-v5")'


def test_preprocessing_as_env_transform_and_as_policy_preprocessing_gives_identical_tensors():
    # TorchRL's Atari pipeline: ToTensorImage, Resize(84, 84, nearest), GrayScale, StepCounter.
    pre = T.compose(T.to_tensor_image(), T.resize(84, 84, "nearest"), T.grayscale())
    env = envs.transform(envs.atari("Pong"), pre, T.step_counter())
    raw = envs.atari("Pong")
    assert repr(env.observation_spec) == repr(specs.Box(0.0, 1.0, (1, 84, 84)))
    key = random.key(1)
    (state, ts), (raw_state, raw_ts) = env.reset(key), raw.reset(key)
    assert torch.equal(ts.obs, pre(raw_ts.obs))
    screens, seen = [raw_ts.obs], [ts.obs]
    for t, a in enumerate(random.randint(random.key(2), (40,), 0, 6)):
        state, ts = env.step(state, a)
        raw_state, raw_ts = raw.step(raw_state, a)
        assert torch.equal(ts.obs, pre(raw_ts.obs))
        assert torch.equal(ts.info["next_obs"], pre(raw_ts.info["next_obs"]))
        assert int(ts.info["step_count"]) == t + 1
        screens.append(raw_ts.obs)
        seen.append(ts.obs)
    # In front of a policy the same objects take a batch of raw screens.
    assert torch.equal(pre(torch.stack(screens)), torch.stack(seen))
    assert seen[-1].shape == (1, 84, 84) and seen[-1].dtype == torch.float32


def test_unknown_game_names_the_known_games():
    with pytest.raises(
        ValueError,
        match=r"unknown game 'Pongg'\. Did you mean 'pong'\? "
        r"Expected one of: .*breakout.*pong",
    ):
        envs.atari("Pongg")
    # A full id is compared by its game, without the prefix and version.
    with pytest.raises(ValueError, match=r"unknown game 'ALE/Pongg-v5'\. Did you mean 'pong'\?"):
        envs.atari("ALE/Pongg-v5")
    assert "space_invaders" in games()
    assert repr(envs.atari("SpaceInvaders")) == 'atari("SpaceInvaders")'


def test_a_missing_rom_says_where_it_looked_and_lists_the_games_found(tmp_path, monkeypatch):
    (tmp_path / "breakout.bin").write_bytes(b"")
    monkeypatch.setenv("ALE_ROMS_DIR", str(tmp_path))
    with pytest.raises(
        FileNotFoundError,
        match=r"no ROM for 'Pong' \(pong.bin\) in .*"
        r"Games with a ROM here: breakout\.",
    ):
        envs.atari("Pong")


def test_noop_reset_starts_games_after_1_to_30_noop_steps_reproducibly():
    env = envs.atari("Pong", noop_reset=30)
    ale = env.gymnasium_env.unwrapped.ale
    frames = []
    for seed in (0, 1, 2, 0):
        env.reset(random.key(seed))
        frames.append(ale.getEpisodeFrameNumber())
    assert all(4 <= f <= 120 and f % 4 == 0 for f in frames)
    assert frames[0] == frames[3] and len(set(frames)) > 1


def test_episodic_life_ends_the_episode_at_a_lost_life_but_not_the_game():
    env = envs.atari("Breakout", episodic_life=True)
    ale = env.gymnasium_env.unwrapped.ale
    state, ts = env.reset(random.key(0))
    assert int(ts.info["lives"]) == 5
    for t in range(300):
        state, ts = env.step(state, torch.tensor(1 if t % 10 == 0 else 3))  # FIRE, LEFT
        if ts.terminated:
            break
    assert bool(ts.terminated) and int(ts.info["lives"]) == 4
    assert ale.getEpisodeFrameNumber() > 0  # the same game goes on


def test_vector_envs_report_the_lives_of_the_step_where_a_game_ended():
    env = envs.atari("Breakout", num_envs=2)
    state, ts = env.reset(random.key(0))
    for t in range(1000):
        state, ts = env.step(state, torch.full((2,), 1 if t % 10 == 0 else 3))  # FIRE, LEFT
        if ts.terminated.any():
            break
    assert ts.terminated.any()
    # The game over, not the fresh game that gymnasium's vector env already started.
    assert ts.info["lives"][ts.terminated].tolist() == [0] * int(ts.terminated.sum())
    env.close()


def test_a_vector_of_pong_games_steps_in_one_call():
    env = envs.atari("Pong", num_envs=2)
    state, ts = env.reset(random.key(0))
    state, ts = env.step(state, torch.tensor([0, 1]))
    assert ts.obs.shape == (2, 210, 160, 3) and ts.info["lives"].shape == (2,)
    env.close()


def test_noop_reset_transform_refuses_a_host_env_and_names_the_atari_option():
    env = envs.transform(envs.atari("Pong", auto_reset=False), T.noop_reset(30))
    with pytest.raises(TypeError, match=r"atari\('Pong', noop_reset=30\)"):
        env.reset(random.key(0))
