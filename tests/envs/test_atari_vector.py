"""fxrl.envs.atari(game, num_envs=N) through ale-py's C++ vector env: checked against
single ALE games, and its C++ preprocessing against fxrl's transforms."""

import numpy as np
import pytest
import torch
from ale_py.vector_env import AtariVectorEnv
from hypothesis import given, settings
from hypothesis import strategies as st

from fxrl import envs, random
from fxrl import transforms as T
from fxrl.collector import collector
from fxrl.envs.atari import AtariVector, atari_screen
from fxrl.envs.atari_vector import _area_weights


def test_vector_breakout_plays_the_games_of_single_envs_screen_for_screen_through_game_overs():
    # Without sticky actions the games are deterministic, so each game of the vector env
    # must show what a single fxrl.envs.atari("Breakout") shows under the same actions,
    # also where a game ends (final screen, lives 0) and the next one begins.
    n, kw = 2, {"repeat_action_probability": 0.0}
    vec = envs.atari("Breakout", num_envs=n, **kw)
    singles = [envs.atari("Breakout", **kw) for _ in range(n)]
    assert isinstance(vec, AtariVector) and vec.batch_shape == (n,)
    assert repr(vec.observation_spec) == repr(singles[0].observation_spec)
    state, ts = vec.reset(random.key(0))
    single = [env.reset(random.key(i)) for i, env in enumerate(singles)]
    for i in range(n):
        assert torch.equal(ts.obs[i], single[i][1].obs)
    actions = [(1 if t % 10 == 0 else 3, 1 if t % 7 == 0 else 2) for t in range(300)]  # FIRE, L/R
    ended = 0
    for a in torch.tensor(actions):
        state, ts = vec.step(state, a)
        for i in range(n):
            s, t = singles[i].step(single[i][0], a[i])
            single[i] = (s, t)
            assert torch.equal(ts.obs[i], t.obs)  # the last screen where a game ended
            assert torch.equal(ts.info["next_obs"][i], t.info["next_obs"])  # then a new one
            assert (float(ts.reward[i]), bool(ts.terminated[i])) == (
                float(t.reward),
                bool(t.terminated),
            )
            assert int(ts.info["lives"][i]) == int(t.info["lives"])
        ended += int(ts.terminated.sum())
    assert ended >= 3
    vec.close()


def test_at_a_frame_limit_ale_pys_vector_env_reports_the_screen_of_the_step_before():
    # A known difference (ale-py 0.12.1): where the frame limit truncates an episode, the
    # vector env's final screen is the one of the previous step (frame 196 of 200), the
    # single env's the last frame. Only the 108,000-frame limit meets it by default.
    kw = {"repeat_action_probability": 0.0, "max_num_frames_per_episode": 200}
    vec, one = envs.atari("Pong", num_envs=1, **kw), envs.atari("Pong", **kw)
    (state, ts), (s1, t1) = vec.reset(random.key(0)), one.reset(random.key(0))
    before = None
    for a in random.randint(random.key(1), (50, 1), 0, 6):
        before = t1.obs
        (state, ts), (s1, t1) = vec.step(state, a), one.step(s1, a[0])
    assert bool(ts.truncated[0]) and bool(t1.truncated)
    assert torch.equal(ts.obs[0], before) and not torch.equal(ts.obs[0], t1.obs)
    assert torch.equal(ts.info["next_obs"][0], t1.info["next_obs"])  # the same fresh start
    vec.close()


def test_the_same_key_replays_the_same_run_with_sticky_actions():
    runs = []
    for _ in range(2):
        env = envs.atari("Pong", num_envs=2)
        state, ts = env.reset(random.key(3))
        screens = [ts.obs]
        for a in random.randint(random.key(4), (60, 2), 0, 6):
            state, ts = env.step(state, a)
            screens.append(ts.obs)
        runs.append(torch.stack(screens))
        env.close()
    assert torch.equal(runs[0], runs[1])


def test_vector_breakout_reports_the_lives_of_the_step_where_a_game_ended():
    env = envs.atari("Breakout", num_envs=2)
    state, ts = env.reset(random.key(0))
    for t in range(1000):
        state, ts = env.step(state, torch.full((2,), 1 if t % 10 == 0 else 3))  # FIRE, LEFT
        if ts.terminated.any():
            break
    assert ts.terminated.any()
    assert ts.info["lives"][ts.terminated].tolist() == [0] * int(ts.terminated.sum())
    state, ts = env.step(state, torch.ones(2, dtype=torch.int64))
    assert (ts.info["lives"] > 0).all()  # the ended game started over
    env.close()


def test_collector_gathers_batches_from_the_vector_env():
    env = envs.atari("Pong", num_envs=2)
    c = collector(env, None, None, random.key(0), 64, total_frames=128, learning_starts=128)
    batches = [batch for batch, _ in c]
    assert len(batches) == 2
    for batch in batches:
        assert batch["obs"].shape == (64, 210, 160, 3) and batch["obs"].dtype == torch.uint8
        assert batch["action"].shape == (64,) and batch["reward"].shape == (64,)
    env.close()


def ale_frames(num_steps, game="pong", **settings):
    """Screens of one game (Pong by default) from ale-py's vector env itself, without
    sticky actions."""
    env = AtariVectorEnv(
        game, 1, repeat_action_probability=0.0, noop_max=0, use_fire_reset=False,
        reward_clipping=False, **settings,
    )  # fmt: skip
    obs, _ = env.reset(seed=np.array([1], dtype=np.int32))
    frames = [obs[0]]
    actions = env.single_action_space.n
    for a in random.randint(random.key(5), (num_steps,), 0, actions).tolist():
        obs, *_ = env.step(np.array([a]))
        frames.append(obs[0])
    env.close()
    return torch.from_numpy(np.stack(frames))


RAW = {"img_height": 210, "img_width": 160, "grayscale": False, "stack_num": 1, "maxpool": False}


@pytest.fixture(scope="module")
def raw_screens():
    return ale_frames(150, **RAW)[:, 0]  # [T, 210, 160, 3]


def test_atari_screen_equals_ales_cpp_grayscale_and_area_resize_exactly(raw_screens):
    cpp = ale_frames(150, stack_num=1, maxpool=False)[:, 0]  # [T, 84, 84]
    ours = atari_screen()(raw_screens)
    assert ours.shape == (151, 1, 84, 84) and ours.dtype == torch.uint8
    assert torch.equal(ours[:, 0], cpp)


def test_atari_screen_rounds_ties_as_ales_cpp_resize_does_on_breakout():
    # Breakout's frames hold pixels whose area average is exactly k + 1/2: OpenCV rounds
    # those half to even; a float64 average rounded afterwards missed some of them
    cpp = ale_frames(300, "breakout", stack_num=1, maxpool=False)[:, 0]
    raw = ale_frames(300, "breakout", **RAW)[:, 0]
    ours = atari_screen()(raw)[:, 0]
    assert torch.equal(ours, cpp)
    x = raw.double()
    gray = (0.299 * x[..., 0] + 0.587 * x[..., 1] + 0.114 * x[..., 2]).round()
    rows, cols = (_area_weights(n, 84) for n in (210, 160))
    as_float = (rows @ gray @ cols.T).round().to(torch.uint8)
    assert not torch.equal(as_float, cpp)  # the ties are there: the test can fail


def test_ale_preprocessing_without_maxpool_is_atari_screen_and_frame_stack_through_resets():
    kw = {"repeat_action_probability": 0.0, "max_num_frames_per_episode": 200}
    cpp = envs.atari("Pong", num_envs=2, preprocess="ale", maxpool=False, **kw)
    raw = envs.atari("Pong", num_envs=2, **kw)
    fx = envs.transform(raw, atari_screen(), T.frame_stack(4, dim=-3))
    assert repr(cpp.observation_spec) == repr(fx.observation_spec)
    (s1, t1), (s2, t2) = cpp.reset(random.key(0)), fx.reset(random.key(0))
    since_start = 0
    for a in random.randint(random.key(6), (70, 2), 0, 6):
        # ale-py pads a new episode's stack with zeros, fxrl's frame_stack with its first
        # frame (gymnasium's FrameStackObservation's default): equal once the stack is full
        pad = max(0, 3 - since_start)
        assert torch.equal(t1.obs[:, pad:], t2.obs[:, pad:])
        assert (t1.obs[:, :pad] == 0).all()
        (s1, t1), (s2, t2) = cpp.step(s1, a), fx.step(s2, a)
        since_start += 1
        if t1.truncated.any():  # at the frame limit: the screens of the step before
            assert t1.truncated.all() and t2.truncated.all()
            assert torch.equal(t1.info["next_obs"][:, 3], t2.info["next_obs"][:, 3])
            t1, t2, since_start = (
                t1.replace(obs=t1.info["next_obs"]),
                t2.replace(obs=t2.info["next_obs"]),
                0,
            )
    cpp.close(), raw.close()


def test_how_closely_fxrls_float_pipeline_and_maxpool_match_ales_cpp_preprocessing(raw_screens):
    cpp = ale_frames(150, stack_num=1, maxpool=False)[:, 0].double()
    # fxrl's usual Atari pipeline (ITU-R 601 luma on floats, then a resize): close, not equal
    for mode, bound in (("bilinear", 1.5), ("nearest", 4.0)):
        pre = T.compose(T.to_tensor_image(), T.grayscale(), T.resize(84, mode))
        diff = (pre(raw_screens)[:, 0].double() * 255 - cpp).abs()
        assert diff.mean() < bound  # measured: bilinear 1.12, nearest 2.83 (of 255)
    # ale-py's default max-pools the last two frames of each frameskip: where sprites
    # move the result differs from the last frame alone (what a raw single env shows).
    pooled = ale_frames(150, stack_num=1)[:, 0].double()
    last = atari_screen()(ale_frames(150, **{**RAW, "frameskip": 4})[:, 0])[:, 0].double()
    differs = (pooled != last).double().mean()
    assert 0 < differs < 0.05  # measured: 0.17% of pixels (Pong, random actions)


def test_bad_atari_vector_arguments_say_what_to_use():
    with pytest.raises(ValueError, match="preprocess='ale' is ale-py's vector env"):
        envs.atari("Pong", preprocess="ale")
    with pytest.raises(ValueError, match="asynchronous=True"):
        envs.atari("Pong", num_envs=2, frameskip=(2, 5))
    with pytest.raises(TypeError, match=r"unknown arguments \['mode'\]"):
        envs.atari("Pong", num_envs=2, mode=1)
    with pytest.raises(ValueError, match="expects raw"):
        atari_screen()(torch.zeros(84, 84, dtype=torch.uint8))


def test_atari_screen_works_on_the_screens_device_whatever_the_default_device(raw_screens):
    # its resize constants are made on the CPU and moved to the screens' device, so a
    # default device set elsewhere (here one the screens are not on) changes nothing
    want = atari_screen()(raw_screens[:4])
    torch.set_default_device("meta")
    try:
        got = atari_screen()(raw_screens[:4])
    finally:
        torch.set_default_device(None)
    assert got.device == raw_screens.device and torch.equal(got, want)


@settings(deadline=None)
@given(
    st.integers(1, 4),
    st.sampled_from([((210, 160), (84, 84)), ((250, 160), (84, 84)), ((210, 160), (64, 48))]),
    st.integers(0, 2**31 - 1),
    st.sampled_from([256, 2]),
)
def test_the_gathered_area_resize_is_the_matmul_one_pixel_for_pixel(n, sizes, seed, levels):
    # the host driver's resize (a few gathered rows per output row) must give the numbers
    # the matmul form (atari_screen's, exported) gives; 2 levels (0 and 255) make ties
    from fxrl.envs.atari_vector import AreaResize

    resize = AreaResize(*sizes)
    g = torch.Generator().manual_seed(seed)
    frames = torch.randint(0, levels, (n, *sizes[0]), generator=g)
    frames = (frames * (255 // (levels - 1))).to(torch.uint8)
    assert torch.equal(resize.gathered(frames), resize(frames))
