"""Wrappers: auto_reset, time_limit, batch, episode_stats, checked, and make()."""

import re

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import envs, random, tree
from fxrl.envs.wrappers import episode_key
from fxrl.testing import assert_trees_close, keys


def _about_to_fall(env, key=0):
    """A CartPole state (of ``env``'s innermost env) one push away from terminating."""
    state, _ = env.reset(random.key(key))
    return state.replace(x=torch.tensor(2.39), x_dot=torch.tensor(2.0))


# ------------------------------------------------------------------------------ auto_reset


def test_auto_reset_reports_the_final_step_and_returns_a_fresh_episode():
    base = envs.CartPole()
    env = envs.auto_reset(base)
    state, _ = env.reset(random.key(5))
    state = state.replace(inner=_about_to_fall(base, 5))
    new, ts = env.step(state, torch.tensor(1))
    _, final = base.step(state.inner, torch.tensor(1))
    assert bool(final.terminated)
    assert_trees_close(
        (ts.obs, ts.reward, ts.terminated, ts.truncated),
        (final.obs, final.reward, final.terminated, final.truncated),
    )
    fresh, fresh_ts = base.reset(episode_key(state.key_hi, state.key_lo, torch.tensor(1)))
    assert_trees_close(new.inner, fresh)
    assert_trees_close(ts.info["next_obs"], fresh_ts.obs)
    assert_trees_close(env.observe(new), fresh_ts.obs)
    assert int(new.episode) == 1 and int(new.inner.t) == 0


def test_auto_reset_leaves_running_episodes_alone():
    base = envs.CartPole()
    env = envs.auto_reset(base)
    state, _ = env.reset(random.key(1))
    new, ts = env.step(state, torch.tensor(0))
    moved, moved_ts = base.step(state.inner, torch.tensor(0))
    assert_trees_close(new.inner, moved)
    assert_trees_close(ts.info["next_obs"], moved_ts.obs)
    assert int(new.episode) == 0


def test_every_episode_of_every_env_starts_from_its_own_draw():
    env = envs.batch(envs.make("CartPole-v1"), 64)
    state, ts = env.reset(random.key(0))
    starts = [ts.obs]
    for t in range(60):
        state, ts = env.step(state, random.randint(random.key(t), (64,), 0, 2))
        done = ts.terminated | ts.truncated
        starts.append(ts.info["next_obs"][done])
    starts = torch.cat(starts)
    assert len(starts) > 100
    assert len(torch.unique(starts, dim=0)) == len(starts)


def test_auto_reset_refuses_an_env_that_already_resets():
    with pytest.raises(ValueError, match="already resets itself"):
        envs.auto_reset(envs.make("CartPole-v1"))


# ------------------------------------------------------------------------------ time_limit


def test_time_limit_truncates_at_exactly_max_steps_and_auto_reset_starts_over():
    env = envs.make("Pendulum-v1", max_steps=7, episode_stats=False)
    state, _ = env.reset(random.key(0))
    flags = []
    for _ in range(15):
        state, ts = env.step(state, torch.zeros(1))
        flags.append(bool(ts.truncated))
    assert flags == [False] * 6 + [True] + [False] * 6 + [True] + [False]
    assert int(env.step_count(state)) == 1


def test_time_limit_outside_auto_reset_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=re.escape("auto_reset(time_limit(env, 10))")):
        envs.time_limit(envs.make("CartPole-v1"), 10)


@pytest.mark.parametrize(
    ("env_id", "limit"),
    [
        ("CartPole-v1", 500),
        ("Pendulum-v1", 200),
        ("MountainCar-v0", 200),
        ("MountainCarContinuous-v0", 999),
        ("Acrobot-v1", 500),
    ],
)
def test_make_applies_gymnasiums_time_limit(env_id, limit):
    env = envs.make(env_id)
    assert repr(env) == f"episode_stats(auto_reset(time_limit({env.unwrapped()!r}, {limit})))"
    base = envs.make(env_id, auto_reset=False, episode_stats=False)
    state, _ = base.reset(random.key(0))
    for steps in (limit - 1, limit):
        late = state.replace(t=torch.tensor(steps - 1))
        _, ts = base.step(late, base.action_spec.zeros())
        assert bool(ts.truncated) == (steps == limit)


# ------------------------------------------------------------------------------ batch


@given(key=keys(), n=st.integers(1, 5))
def test_batch_is_vmap_over_split_keys(key, n):
    env = envs.make("Acrobot-v1")
    state, ts = envs.batch(env, n).reset(key)
    one_by_one = [env.reset(k) for k in random.split(key, n)]
    assert_trees_close((state, ts), tree.stack(one_by_one))


def test_batch_takes_per_env_params():
    env = envs.CartPole(dtype=torch.float64)
    gravity = torch.tensor([1.0, 9.8, 30.0], dtype=torch.float64)
    benv = envs.batch(env, 3)
    state, _ = benv.reset(random.key(0), env.default_params.replace(gravity=gravity))
    assert_trees_close(state.params.gravity, gravity)
    new, ts = benv.step(state, torch.tensor([1, 1, 1]))
    for i, g in enumerate(gravity.tolist()):
        one = tree.index(state, i)
        expected, _ = env.step(one, torch.tensor(1))
        assert_trees_close(tree.index(new, i), expected)
        assert float(expected.params.gravity) == g
    assert len(set(ts.obs[:, 3].tolist())) == 3  # the pole falls at three speeds


def test_batch_reset_wants_one_key():
    with pytest.raises(ValueError, match=r"key has shape \[4, 2\]"):
        envs.batch(envs.CartPole(), 4).reset(random.split(random.key(0), 4))


# ------------------------------------------------------------------------------ episode stats


@pytest.mark.parametrize("outside", [True, False])
def test_episode_stats_sum_rewards_and_count_steps_of_finished_episodes(outside):
    if outside:
        env = envs.make("Pendulum-v1", max_steps=20)  # episode_stats(auto_reset(...))
    else:
        env = envs.auto_reset(
            envs.episode_stats(
                envs.make("Pendulum-v1", max_steps=20, auto_reset=False, episode_stats=False)
            )
        )
    state, _ = env.reset(random.key(0))
    total, finished = 0.0, []
    for t in range(45):
        state, ts = env.step(state, random.uniform(random.key(t), (1,), -2.0, 2.0))
        total += float(ts.reward)
        if bool(ts.truncated):
            finished.append((float(ts.info["episode_return"]), int(ts.info["episode_length"])))
            assert float(ts.info["episode_return"]) == pytest.approx(total, rel=1e-6)
            total = 0.0
    assert [n for _, n in finished] == [20, 20]


# ------------------------------------------------------------------------------ checked


def test_checked_rejects_actions_outside_the_spec_with_the_fix():
    env = envs.checked(envs.make("CartPole-v1"))
    state, _ = env.reset(random.key(0))
    env.step(state, torch.tensor(1))
    with pytest.raises(ValueError, match=r"action \[2\] is outside Discrete\(n=2"):
        env.step(state, torch.tensor(2))
    with pytest.raises(ValueError, match=r"One-hot or logits\? Pass action.argmax\(-1\)"):
        env.step(state, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"shape \[\] float32; expected \[\] int64.*Cast it"):
        env.step(state, torch.tensor(1.0))
    with pytest.raises(TypeError, match=r"Wrap numbers with torch\.tensor"):
        env.step(state, 1)


def test_checked_batch_checks_the_batch_shape_and_every_value():
    env = envs.checked(envs.batch(envs.make("Pendulum-v1"), 4))
    state, _ = env.reset(random.key(0))
    env.step(state, torch.zeros(4, 1))
    with pytest.raises(ValueError, match=r"expected \[4, 1\] float32"):
        env.step(state, torch.zeros(4))
    with pytest.raises(ValueError, match=r"action \[3.0\] is outside Box"):
        env.step(state, torch.tensor([[0.0], [3.0], [0.0], [1.0]]))


def test_checked_under_vmap_checks_shapes_not_values():
    env = envs.batch(envs.checked(envs.make("CartPole-v1")), 3)
    state, _ = env.reset(random.key(0))
    env.step(state, torch.tensor([0, 1, 5]))  # values cannot be read under vmap
    with pytest.raises(ValueError, match="has shape"):
        env.step(state, torch.zeros(3, 2, dtype=torch.int64))


def test_checked_refuses_a_foreign_state():
    env = envs.checked(envs.CartPole())
    with pytest.raises(TypeError, match="pass the state returned by this env"):
        env.step(envs.CartPole().reset(random.key(0))[0], torch.tensor(0))


# ------------------------------------------------------------------------------ make


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [
        ("CartPole-v0", "CartPole-v1"),
        ("cartpole", "CartPole-v1"),
        ("MountainCar-v1", "MountainCar-v0"),
    ],
)
def test_make_names_the_closest_id_and_lists_the_known_ones(typo, suggestion):
    with pytest.raises(ValueError, match=f"Did you mean '{suggestion}'") as err:
        envs.make(typo)
    for known in envs.registered():
        assert known in str(err.value)


def test_make_takes_param_overrides_and_names_unknown_ones():
    env = envs.make("CartPole-v1", gravity=20.0)
    state, _ = env.reset(random.key(0))
    assert float(state.params.gravity) == 20.0
    with pytest.raises(TypeError, match="Did you mean 'gravity'"):
        envs.make("CartPole-v1", gravty=20.0)


def test_reprs_read_like_the_calls_that_build_them():
    from fxrl import transforms

    env = envs.checked(
        envs.batch(
            envs.transform(
                envs.make("CartPole-v1", dtype=torch.float64), transforms.frame_stack(4)
            ),
            8,
        )
    )
    assert repr(env) == (
        "checked(batch(transform(episode_stats(auto_reset(time_limit("
        "CartPole(dtype=torch.float64), 500))), frame_stack(4, dim=-1)), 8))"
    )


def _vectorized_cases():
    from fxrl import transforms

    yield from (envs.make(env_id) for env_id in envs.registered())
    yield envs.make("Acrobot-v1", dtype=torch.float64)
    yield envs.transform(
        envs.make("CartPole-v1"),
        transforms.frame_stack(3),
        transforms.reward_scale(0.5),
        transforms.step_counter(),
    )
    yield envs.auto_reset(
        envs.transform(
            envs.make("CartPole-v1", auto_reset=False, episode_stats=False),
            transforms.noop_reset(4),
        )
    )


@pytest.mark.parametrize("env", list(_vectorized_cases()), ids=repr)
def test_batch_steps_elementwise_envs_without_vmap_to_the_same_bits(env):
    assert env.vectorized
    benv = envs.batch(env, 5)
    vmapped = torch.func.vmap(env.step)
    state, _ = benv.reset(random.key(0))
    other = state
    for t in range(40):
        action = benv.action_spec.sample(random.key(t), benv.batch_shape)
        state, ts = benv.step(state, action)
        other, other_ts = vmapped(other, action)
        assert_trees_close((state, ts), (other, other_ts), rtol=0, atol=0)


def test_envs_that_are_not_elementwise_are_batched_with_vmap():
    from fxrl import transforms

    assert not envs.checked(envs.CartPole()).vectorized
    norm = envs.transform(envs.make("CartPole-v1"), transforms.observation_norm(running=True))
    assert not norm.vectorized  # pooled statistics over leading dims; per env under vmap
    state, _ = envs.batch(norm, 3).reset(random.key(0))
    assert state.transform.mean.shape == (3, 4)
