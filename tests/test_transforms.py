"""fxrl.transforms: each one as an env wrapper and as policy preprocessing, same object."""

import numpy as np
import pytest
import torch
from gymnasium.wrappers.utils import RunningMeanStd
from hypothesis import given
from hypothesis import strategies as st

from fxrl import envs, random, specs, transforms, tree
from fxrl.envs import Env, TimeStep
from fxrl.testing import assert_trees_close, check_env, keys


@tree.dataclass
class ScreenState:
    frame: torch.Tensor  # [] int64, the frame counter
    t: torch.Tensor
    key: torch.Tensor
    params: dict


class Screens(Env):
    """A toy pixel env: uint8 [6, 8, 3] screens that change with every step."""

    observation_spec = specs.Box(0, 255, shape=(6, 8, 3), dtype=torch.uint8)
    action_spec = specs.Discrete(2)
    default_params = None

    def reset(self, key, params=None):
        start = random.randint(key, (1,), 0, 100)[..., 0]
        state = ScreenState(start, torch.zeros_like(start), key, {})
        return state, self._ts(state, torch.tensor(False))

    def step(self, state, action):
        new = state.replace(frame=state.frame + 1 + action, t=state.t + 1)
        return new, self._ts(new, new.frame % 7 == 0)

    def _ts(self, state, terminated):
        return TimeStep(
            self.observe(state),
            (state.frame % 3).float(),
            terminated,
            torch.zeros_like(terminated),
            {},
        )

    def observe(self, state):
        grid = torch.arange(6 * 8 * 3).reshape(6, 8, 3)
        return ((grid * 37 + state.frame * 11) % 256).to(torch.uint8)


def _bilinear_reference(img: np.ndarray, h: int, w: int) -> np.ndarray:
    """Half-pixel-centre bilinear resize (align_corners=False) of [C, H, W], by hand."""
    c, hh, ww = img.shape
    out = np.zeros((c, h, w))
    for i in range(h):
        for j in range(w):
            y = max((i + 0.5) * hh / h - 0.5, 0.0)
            x = max((j + 0.5) * ww / w - 0.5, 0.0)
            y0, x0 = min(int(y), hh - 1), min(int(x), ww - 1)
            y1, x1 = min(y0 + 1, hh - 1), min(x0 + 1, ww - 1)
            dy, dx = y - y0, x - x0
            out[:, i, j] = (
                (1 - dy) * (1 - dx) * img[:, y0, x0]
                + (1 - dy) * dx * img[:, y0, x1]
                + dy * (1 - dx) * img[:, y1, x0]
                + dy * dx * img[:, y1, x1]
            )
    return out


# ------------------------------------------------------------------------------ pixels


def test_to_tensor_image_makes_chw_floats_in_0_1():
    pixels = torch.arange(2 * 4 * 3, dtype=torch.uint8).reshape(2, 4, 3) * 10
    out = transforms.to_tensor_image()(pixels)
    assert out.shape == (3, 2, 4) and out.dtype == torch.float32
    assert_trees_close(out, pixels.permute(2, 0, 1).float() / 255)
    spec = transforms.to_tensor_image().observation_spec(Screens.observation_spec)
    assert (spec.shape, spec.dtype, float(spec.high.max())) == ((3, 6, 8), torch.float32, 1.0)


def test_resize_nearest_takes_the_floor_source_pixel():
    img = torch.arange(2 * 6 * 9, dtype=torch.float32).reshape(2, 6, 9)
    out = transforms.resize(4, 5, "nearest")(img)
    rows, cols = [int(i * 6 / 4) for i in range(4)], [int(j * 9 / 5) for j in range(5)]
    assert_trees_close(out, img[:, rows][:, :, cols])


@given(h=st.integers(1, 7), w=st.integers(1, 7))
def test_resize_bilinear_matches_a_hand_written_reference(h, w):
    img = torch.rand(
        2, 5, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(h * 10 + w)
    )
    out = transforms.resize(h, w, "bilinear")(img[None])[0]  # leading batch dims work too
    assert_trees_close(out, torch.from_numpy(_bilinear_reference(img.numpy(), h, w)))


def test_grayscale_weights_are_itu_r_601():
    img = torch.tensor([[[1.0]], [[0.0]], [[0.0]]]).expand(3, 2, 2)
    assert_trees_close(transforms.grayscale()(img), torch.full((1, 2, 2), 0.2989))
    rgb = torch.rand(4, 3, 5, 5, generator=torch.Generator().manual_seed(0))
    expected = 0.2989 * rgb[:, 0] + 0.587 * rgb[:, 1] + 0.114 * rgb[:, 2]
    assert_trees_close(transforms.grayscale()(rgb), expected[:, None])
    as_bytes = transforms.grayscale()(torch.full((3, 1, 1), 200, dtype=torch.uint8))
    assert as_bytes.dtype == torch.uint8 and int(as_bytes) == 199  # truncated, as torchvision


def test_a_pixel_pipeline_gives_the_policy_what_the_env_gives_it():
    pipeline = transforms.compose(
        transforms.to_tensor_image(), transforms.resize(3, 4), transforms.grayscale()
    )
    env = envs.transform(envs.auto_reset(Screens()), pipeline)
    assert env.observation_spec.shape == (1, 3, 4)
    raw_env = envs.auto_reset(Screens())
    state, ts = env.reset(random.key(0))
    raw_state, raw_ts = raw_env.reset(random.key(0))
    for t in range(12):
        assert_trees_close(ts.obs, pipeline(raw_ts.obs))
        assert_trees_close(ts.info["next_obs"], pipeline(raw_ts.info["next_obs"]))
        state, ts = env.step(state, torch.tensor(t % 2))
        raw_state, raw_ts = raw_env.step(raw_state, torch.tensor(t % 2))
    check_env(env, max_examples=5)


# ------------------------------------------------------------------------------ normalisation


def test_fixed_observation_norm_and_its_spec():
    norm = transforms.observation_norm(loc=[1.0, 2.0], scale=[2.0, -4.0])
    assert_trees_close(norm(torch.tensor([3.0, 6.0])), torch.tensor([1.0, -1.0]))
    spec = norm.observation_spec(specs.Box([-1.0, -2.0], [1.0, 2.0]))
    assert_trees_close((spec.low, spec.high), (torch.tensor([-1.0, 0.0]), torch.tensor([0.0, 1.0])))


def test_running_observation_norm_follows_gymnasiums_running_mean_std_across_episodes():
    env = envs.transform(
        envs.make("CartPole-v1", dtype=torch.float64), transforms.observation_norm(running=True)
    )
    raw = envs.make("CartPole-v1", dtype=torch.float64)
    state, ts = env.reset(random.key(0))
    raw_state, raw_ts = raw.reset(random.key(0))
    rms = RunningMeanStd(shape=(4,), dtype=np.float64)
    rms.update(raw_ts.obs.numpy()[None])
    for _ in range(80):  # several CartPole episodes: the statistics outlive them
        action = torch.tensor(1)
        state, ts = env.step(state, action)
        raw_state, raw_ts = raw.step(raw_state, action)
        rms.update(raw_ts.obs.numpy()[None])
        expected = (raw_ts.obs.numpy() - rms.mean) / np.sqrt(rms.var + 1e-8)
        assert_trees_close(ts.obs, torch.from_numpy(expected), rtol=1e-9, atol=1e-9)
    assert int(raw_state.inner.episode) >= 3
    stats = state.transform
    frozen = transforms.observation_norm(running=True).freeze(stats)
    assert_trees_close(frozen(raw_ts.obs), ts.obs, rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="needs its statistics"):
        transforms.observation_norm(running=True)(raw_ts.obs)


def test_running_norm_outside_a_batch_shares_one_set_of_statistics():
    env = envs.transform(
        envs.batch(envs.make("Pendulum-v1"), 5), transforms.observation_norm(running=True)
    )
    state, _ = env.reset(random.key(0))
    assert state.transform.mean.shape == (3,)
    assert float(state.transform.count) == pytest.approx(5 + 1e-4)
    inside = envs.batch(
        envs.transform(envs.make("Pendulum-v1"), transforms.observation_norm(running=True)), 5
    )
    assert inside.reset(random.key(0))[0].transform.mean.shape == (5, 3)


def test_clip_and_reward_scale():
    env = envs.transform(
        envs.make("Pendulum-v1"),
        transforms.clip(-0.5, 0.5),
        transforms.reward_scale(0.1, loc=1.0),
        transforms.clip(-0.2, 0.0, of="reward"),
    )
    raw = envs.make("Pendulum-v1")
    state, _ = env.reset(random.key(3))
    raw_state, _ = raw.reset(random.key(3))
    for _ in range(5):
        state, ts = env.step(state, torch.ones(1))
        raw_state, raw_ts = raw.step(raw_state, torch.ones(1))
        assert_trees_close(ts.obs, raw_ts.obs.clamp(-0.5, 0.5))
        assert_trees_close(ts.reward, (raw_ts.reward * 0.1 + 1.0).clamp(-0.2, 0.0))
    assert float(env.observation_spec.high.max()) == 0.5


# ------------------------------------------------------------------------------ with state


def test_frame_stack_keeps_the_last_frames_and_restarts_with_each_episode():
    env = envs.transform(envs.make("CartPole-v1", max_steps=4), transforms.frame_stack(3))
    raw = envs.make("CartPole-v1", max_steps=4)
    state, ts = env.reset(random.key(0))
    raw_state, raw_ts = raw.reset(random.key(0))
    frames = [raw_ts.obs] * 3
    assert_trees_close(ts.obs, torch.cat(frames))
    for t in range(9):
        state, ts = env.step(state, torch.tensor(t % 2))
        raw_state, raw_ts = raw.step(raw_state, torch.tensor(t % 2))
        frames = [*frames[1:], raw_ts.obs]
        assert_trees_close(ts.obs, torch.cat(frames))  # the final stack, where it ended
        if bool(raw_ts.truncated):
            frames = [raw_ts.info["next_obs"]] * 3
        assert_trees_close(ts.info["next_obs"], torch.cat(frames))
        assert_trees_close(env.observe(state), torch.cat(frames))


def test_frame_stack_on_the_policy_side_matches_the_env():
    stack = transforms.frame_stack(4, dim=-3)
    frames = [torch.full((1, 2, 2), float(i)) for i in range(6)]
    carry = stack.init(frames[0])
    assert_trees_close(stack(frames[0]), carry)  # bare call: the start of an episode
    for f in frames[1:]:
        carry = stack.push(carry, f)
    assert_trees_close(carry, torch.cat(frames[2:], dim=-3))
    assert stack.observation_spec(specs.Box(0.0, 1.0, (1, 84, 84))).shape == (4, 84, 84)
    with pytest.raises(ValueError, match="dim must be negative"):
        transforms.frame_stack(4, dim=0)


def test_step_counter_counts_and_truncates_inside_auto_reset_only():
    env = envs.auto_reset(envs.transform(envs.CartPole(), transforms.step_counter(3)))
    state, ts = env.reset(random.key(0))
    counts, truncs = [], []
    for _ in range(7):
        state, ts = env.step(state, torch.tensor(0))
        counts.append(int(ts.info["step_count"]))
        truncs.append(bool(ts.truncated))
    assert counts == [1, 2, 3, 1, 2, 3, 1] and truncs == [False, False, True] * 2 + [False]
    with pytest.raises(ValueError, match=r"Apply it inside auto_reset"):
        envs.transform(envs.make("CartPole-v1"), transforms.step_counter(3))
    counting = envs.transform(envs.make("CartPole-v1"), transforms.step_counter())
    check_env(counting, max_examples=5)


@given(key=keys())
def test_noop_reset_starts_after_1_to_noops_noop_steps(key):
    base = envs.CartPole()
    env = envs.transform(base, transforms.noop_reset(5, action=torch.tensor(1)))
    state, ts = env.reset(key)
    reset_key, noop_key = random.split(key).unbind(-2)
    n = int(random.randint(noop_key, (), 1, 6))
    expected, _ = base.reset(reset_key)
    for _ in range(n):
        expected, expected_ts = base.step(expected, torch.tensor(1))
    assert_trees_close(state.inner, expected)
    assert_trees_close(ts.obs, expected_ts.obs)
    assert float(ts.reward) == 0.0


def test_noop_reset_over_an_auto_resetting_env_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"auto_reset\(transform\(env, noop_reset\(30\)\)\)"):
        envs.transform(envs.make("CartPole-v1"), transforms.noop_reset())
    env = envs.auto_reset(
        envs.transform(
            envs.make("CartPole-v1", auto_reset=False, episode_stats=False),
            transforms.noop_reset(3),
        )
    )
    check_env(env, max_examples=5)


# ------------------------------------------------------------------------------ structure


def test_cat_joins_entries_of_a_dict_observation():
    t = transforms.cat(["a", "b"], out="ab")
    obs = {"a": torch.zeros(5, 2), "c": torch.ones(5, 1), "b": torch.ones(5, 3)}
    out = t(obs)
    assert list(out) == ["c", "ab"] and out["ab"].shape == (5, 5)
    spec = t.observation_spec(
        specs.Composite(
            a=specs.Box(0.0, 1.0, (2,)), b=specs.Box(-1.0, 2.0, (3,)), c=specs.Discrete(4)
        )
    )
    assert spec["ab"].shape == (5,) and float(spec["ab"].low.min()) == -1.0
    with pytest.raises(ValueError, match="expects a dict observation"):
        t(torch.zeros(3))


def test_compose_is_application_in_order_and_unpacks_into_wrappers():
    a, b = transforms.clip(-0.1, 0.1), transforms.observation_norm(loc=0.0, scale=0.1)
    obs = torch.linspace(-1, 1, 9)
    assert_trees_close(transforms.compose(a, b)(obs), b(a(obs)))
    one = envs.transform(envs.make("Pendulum-v1"), transforms.compose(a, b))
    two = envs.transform(envs.make("Pendulum-v1"), a, b)
    assert repr(one) == repr(two)
    assert_trees_close(one.reset(random.key(0)), two.reset(random.key(0)))


def test_resize_with_a_mode_as_second_argument_makes_a_square():
    from fxrl import random as fxrandom

    pixels = fxrandom.uniform(fxrandom.key(0), (3, 210, 160))
    for mode in ("nearest", "bilinear"):
        square = transforms.resize(84, mode)(pixels)
        assert square.shape == (3, 84, 84)
        assert torch.equal(square, transforms.resize(84, 84, mode)(pixels))


# ----------------------------------------------------------------------------- select


@given(key=keys(), batch=st.integers(0, 3))
def test_select_keeps_the_named_entries_in_order_with_any_batch_dims(key, batch):
    obs = random.normal(key, (batch, 5) if batch else (5,))
    out = transforms.select([3, 0, -1])(obs)
    expected = torch.stack([obs[..., 3], obs[..., 0], obs[..., 4]], dim=-1)
    assert torch.equal(out, expected)
    assert torch.equal(torch.func.vmap(transforms.select([3, 0, -1]))(obs.reshape(-1, 5)),
                       expected.reshape(-1, 3))  # fmt: skip


def test_select_spec_keeps_the_bounds_of_the_kept_entries():
    full = envs.make("CartPole-v1").observation_spec
    spec = transforms.select([0, 2]).observation_spec(full)
    assert spec.shape == (2,)
    assert torch.equal(spec.low, full.low[[0, 2]]) and torch.equal(spec.high, full.high[[0, 2]])
    scalar_bounds = transforms.select([1]).observation_spec(specs.Box(-1.0, 2.0, (3,)))
    assert scalar_bounds.shape == (1,) and float(scalar_bounds.low) == -1.0


def test_masked_cartpole_env_observes_positions_only_and_matches_the_full_env():
    masked = envs.transform(envs.make("CartPole-v1"), transforms.select([0, 2]))
    full = envs.make("CartPole-v1")
    check_env(masked, max_examples=5)
    (ms, mts), (fs, fts) = masked.reset(random.key(1)), full.reset(random.key(1))
    for a in [1, 0, 0, 1, 1, 1, 0, 1] * 4:
        (ms, mts), (fs, fts) = masked.step(ms, torch.tensor(a)), full.step(fs, torch.tensor(a))
        assert torch.equal(mts.obs, fts.obs[[0, 2]])
        assert torch.equal(mts.info["next_obs"], fts.info["next_obs"][[0, 2]])
        assert torch.equal(mts.reward, fts.reward) and torch.equal(mts.terminated, fts.terminated)
        assert masked.observation_spec.contains(mts.info["next_obs"])


def test_select_rejects_bad_indices_with_what_was_expected():
    with pytest.raises(ValueError, match=r"indices \[4\] are out of range .*4 entries"):
        transforms.select([0, 4])(torch.zeros(4))
    with pytest.raises(ValueError, match="repeat an entry"):
        transforms.select([1, 1])
    with pytest.raises(ValueError, match="non-empty sequence of ints"):
        transforms.select([])
    with pytest.raises(TypeError, match="select: expects a Box"):
        transforms.select([0]).observation_spec(specs.Discrete(3))
