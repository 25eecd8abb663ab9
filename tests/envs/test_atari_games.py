"""fxrl.envs.atari(game, num_envs=N, driver="fxrl"): fxrl's own loop of ALE games,
checked against ale-py's C++ vector env, fxrl's atari_screen and CleanRL's game starts."""

import ale_py
import numpy as np
import pytest
import torch

from fxrl import envs, random
from fxrl.envs.atari import atari_screen

FRAMES = {"repeat_action_probability": 0.0, "frameskip": 4, "maxpool": False}


def test_without_noops_or_fire_the_games_are_ale_pys_vector_envs_step_for_step():
    # ale-py's raw screens through atari_screen (what an exported policy computes) must be
    # the driver's newest frame; rewards, ends, lives and the first frames of new games
    # must be ale-py's. Where a game ends inside a step, ale-py reports the screen of the
    # step before (its frame grab comes after the end check); the driver reports the
    # screen at the end.
    kw = {**FRAMES, "max_num_frames_per_episode": 640}  # truncations as well as game overs
    cpp = envs.atari("Breakout", num_envs=2, **kw)
    ours = envs.atari("Breakout", num_envs=2, driver="fxrl", preprocess="ale", **kw)
    screen = atari_screen()
    (s1, t1), (s2, t2) = cpp.reset(random.key(0)), ours.reset(random.key(0))
    assert torch.equal(screen(t1.obs)[:, 0], t2.obs[:, 3])
    assert (t2.obs[:, :3] == 0).all()  # a new game's stack is padded with zeros, as ale-py's
    ended = {"terminated": 0, "truncated": 0}
    for a in random.randint(random.key(1), (500, 2), 0, 4):
        before = t2.info.get("next_obs", t2.obs)
        (s1, t1), (s2, t2) = cpp.step(s1, a), ours.step(s2, a)
        for field in ("reward", "terminated", "truncated"):
            assert torch.equal(getattr(t1, field), getattr(t2, field)), field
        assert torch.equal(t1.info["lives"], t2.info["lives"])
        assert torch.equal(screen(t1.info["next_obs"])[:, 0], t2.info["next_obs"][:, 3])
        new = t1.terminated | t1.truncated
        assert torch.equal(screen(t1.obs)[~new, 0], t2.obs[~new, 3])
        assert torch.equal(screen(t1.obs)[new, 0], before[new, 3])  # ale-py: the step before
        assert (t2.info["next_obs"][new, :3] == 0).all()
        for field in ended:
            ended[field] += int(getattr(t1, field).sum())
    assert ended["terminated"] > 0 and ended["truncated"] > 0  # both kinds of end were seen
    cpp.close(), ours.close()


def _start_frames(seed: int, noops: int, fire: bool) -> int:
    """Emulator frames a game of the driver took before its first observation."""
    env = envs.atari("Breakout", num_envs=1, driver="fxrl", preprocess="ale",
                     noop_reset=noops, fire_reset=fire, **FRAMES)  # fmt: skip
    env.reset(random.key(seed))
    ale = env.gymnasium_env.games[0]
    frames = ale.getEpisodeFrameNumber()
    env.close()
    return frames


def test_games_start_as_cleanrls_wrappers_start_them():
    # NoopResetEnv: 1..30 NOOP frames; FireResetEnv: a FIRE step, then a step of action 2
    # (4 frames each); the count comes from the seed, so a reset key replays its start.
    base = _start_frames(0, 0, False)
    counts = [_start_frames(s, 30, True) - base - 8 for s in range(12)]
    assert all(1 <= c <= 30 for c in counts)
    assert len(set(counts)) >= 6  # the starts vary
    assert _start_frames(3, 30, True) - base - 8 == counts[3]


def test_fire_reset_serves_the_ball_before_the_agent_acts():
    # Breakout's ball appears once FIRE is pressed: with fire_reset the first frames
    # differ from those of a game where nothing was pressed
    frames = {}
    for fire in (False, True):
        env = envs.atari("Breakout", num_envs=1, driver="fxrl", preprocess="ale",
                         fire_reset=fire, **FRAMES)  # fmt: skip
        state, ts = env.reset(random.key(0))
        for _ in range(6):
            state, ts = env.step(state, torch.zeros(1, dtype=torch.int64))
        frames[fire] = ts.obs
        env.close()
    assert not torch.equal(frames[False], frames[True])


def test_the_same_key_gives_the_same_games():
    def run() -> list[torch.Tensor]:
        env = envs.atari("Breakout", num_envs=2, driver="fxrl", preprocess="ale",
                         noop_reset=30, fire_reset=True, **FRAMES)  # fmt: skip
        state, ts = env.reset(random.key(7))
        out = [ts.obs]
        for a in random.randint(random.key(8), (40, 2), 0, 4):
            state, ts = env.step(state, a)
            out.append(ts.obs)
        env.close()
        return out

    first, second = run(), run()
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


def test_maxpool_takes_the_brighter_of_the_last_two_frames():
    env = envs.atari("Breakout", num_envs=1, driver="fxrl", preprocess="ale",
                     **{**FRAMES, "maxpool": True})  # fmt: skip
    games = env.gymnasium_env
    state, ts = env.reset(random.key(0))
    state, ts = env.step(state, torch.ones(1, dtype=torch.int64))
    last, before = games.screens[0, 1], games.screens[0, 0]
    pooled = torch.from_numpy(np.maximum(last, before))
    expected = atari_screen()(pooled.unsqueeze(-1).expand(-1, -1, 3).contiguous())
    assert torch.equal(ts.obs[0, 3], expected[0])
    env.close()


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"driver": "cpp"}, "driver must be 'ale'"),
        ({"driver": "fxrl", "asynchronous": True}, "no asynchronous"),
        ({"driver": "fxrl", "stack_num": 2}, "with raw screens"),
        ({"driver": "fxrl", "preprocess": "ale", "num_envs": 0}, "num_envs must be a positive"),
        ({"driver": "fxrl", "preprocess": "ale", "episodic_life": True}, "no episodic_life"),
        ({"driver": "fxrl", "preprocess": "ale", "grayscale": False}, "unknown arguments"),
    ],
)
def test_bad_driver_arguments_say_what_to_give(kwargs, words):
    with pytest.raises((ValueError, TypeError), match=words) as info:
        envs.atari("Breakout", **{"num_envs": 2, **kwargs})
    assert "\n" not in str(info.value)


def test_raw_screens_are_ale_pys_raw_screens_and_atari_screen_makes_the_frames():
    kw = {**FRAMES, "max_num_frames_per_episode": 400}
    raw = envs.atari("Breakout", num_envs=2, driver="fxrl", **kw)
    pre = envs.atari("Breakout", num_envs=2, driver="fxrl", preprocess="ale", **kw)
    cpp = envs.atari("Breakout", num_envs=2, **kw)
    assert tuple(raw.observation_spec.shape) == (210, 160, 3)
    (s1, t1), (s2, t2), (s3, t3) = (
        raw.reset(random.key(0)),
        pre.reset(random.key(0)),
        cpp.reset(random.key(0)),
    )
    for a in random.randint(random.key(2), (120, 2), 0, 4):
        (s1, t1), (s2, t2), (s3, t3) = raw.step(s1, a), pre.step(s2, a), cpp.step(s3, a)
        assert torch.equal(atari_screen()(t1.info["next_obs"])[:, 0], t2.info["next_obs"][:, 3])
        new = t3.terminated | t3.truncated
        assert torch.equal(t1.info["next_obs"], t3.info["next_obs"])
        assert torch.equal(t1.obs[~new], t3.obs[~new])
    raw.close(), pre.close(), cpp.close()


@pytest.mark.parametrize("driver", ["ale", "fxrl"])
@pytest.mark.parametrize("actions", [[5, 0], [-1, 0], [0, 1, 2], [0.0, 1.0]])
def test_an_action_outside_the_games_set_is_refused_in_one_line(driver, actions):
    # ale-py's C++ vector env hangs on one (its worker thread throws): checked before
    env = envs.atari("Breakout", num_envs=2, driver=driver, preprocess="ale")
    state, _ = env.reset(random.key(0))
    with pytest.raises(ValueError, match=r"actions must be 2 ints in 0\.\.3") as info:
        env.step(state, torch.tensor(actions))
    assert "\n" not in str(info.value)
    state, ts = env.step(state, torch.tensor([1, 3]))  # the env is usable after
    assert ts.obs.shape == (2, 4, 84, 84)
    env.close()


def test_the_driver_is_an_ale_py_loop_of_the_games_minimal_action_set():
    env = envs.atari("Breakout", num_envs=3, driver="fxrl", preprocess="ale")
    games = env.gymnasium_env
    assert len(games.games) == 3 and all(isinstance(g, ale_py.ALEInterface) for g in games.games)
    assert env.action_spec.n == 4 and tuple(env.observation_spec.shape) == (4, 84, 84)
    assert "driver='fxrl'" in repr(env)
    env.close()
