"""CartPole-v1 against gymnasium's CartPoleEnv: one step, whole episodes, resets, vmap."""

import math

import numpy as np
import pytest
import torch
from gym_reference import (
    F64,
    as_f32,
    assert_same_distribution,
    assert_uniform,
    fx_state,
    gym_step,
    near,
)
from gymnasium.envs.classic_control import CartPoleEnv
from hypothesis import example, given
from hypothesis import strategies as st

from fxrl import envs, random
from fxrl.testing import assert_trees_close, check_vmap, keys

FIELDS = ("x", "x_dot", "theta", "theta_dot")
X_MAX, THETA_MAX, TAU = 2.4, 12 * 2 * math.pi / 360, 0.02


def _edge(threshold: float) -> st.SearchStrategy[tuple[float, float]]:
    """(position, velocity) whose Euler step lands within ~1e-7 of +-threshold."""
    offsets = st.sampled_from([0.0, 1e-13, -1e-13, 1e-9, -1e-9, 1e-7, -1e-7])
    return st.builds(
        lambda v, side, d: (side * threshold - TAU * v + d, v),
        st.just(0.0) | st.floats(-3, 3),  # velocity 0: lands exactly on the threshold
        st.sampled_from([-1.0, 1.0]),
        offsets,
    )


@st.composite
def states(draw: st.DrawFn) -> tuple[float, float, float, float]:
    x, x_dot = draw(st.tuples(st.floats(-2.6, 2.6), st.floats(-3, 3)) | _edge(X_MAX))
    theta, theta_dot = draw(
        st.tuples(st.floats(-0.25, 0.25), st.floats(-3.5, 3.5)) | _edge(THETA_MAX)
    )
    return x, x_dot, theta, theta_dot


EXACTLY_AT_THRESHOLDS = [
    (X_MAX, 0.0, 0.0, 0.0),
    (-X_MAX, 0.0, 0.0, 0.0),
    (0.0, 0.0, THETA_MAX, 0.0),
    (0.0, 0.0, -THETA_MAX, 0.0),
]


@given(state=states(), action=st.integers(0, 1))
@example(state=EXACTLY_AT_THRESHOLDS[0], action=0)
@example(state=EXACTLY_AT_THRESHOLDS[1], action=1)
@example(state=EXACTLY_AT_THRESHOLDS[2], action=0)
@example(state=EXACTLY_AT_THRESHOLDS[3], action=1)
def test_one_float64_step_matches_gymnasium_to_1e_10(state, action):
    env = envs.CartPole(dtype=torch.float64)
    moved, ts = env.step(
        fx_state(env, torch.float64, **dict(zip(FIELDS, state, strict=True))), torch.tensor(action)
    )
    expected, reward, terminated = gym_step(CartPoleEnv(), np.array(state), action)
    got = torch.stack([getattr(moved, f) for f in FIELDS])
    assert_trees_close(got, torch.from_numpy(expected), **F64)
    assert_trees_close(ts.obs, torch.from_numpy(expected), **F64)
    assert (float(ts.reward), bool(ts.terminated), bool(ts.truncated)) == (
        reward,
        terminated,
        False,
    )
    assert int(moved.t) == 1


@given(state=states(), action=st.integers(0, 1))
def test_one_float32_step_matches_gymnasium_to_float32_tolerance(state, action):
    state = tuple(as_f32(v) for v in state)
    env = envs.CartPole()
    _, ts = env.step(
        fx_state(env, torch.float32, **dict(zip(FIELDS, state, strict=True))), torch.tensor(action)
    )
    expected, reward, terminated = gym_step(CartPoleEnv(), np.array(state), action)
    assert_trees_close(ts.obs, torch.from_numpy(expected).float())
    assert float(ts.reward) == reward
    # Within float32 rounding of a threshold either answer is right; elsewhere it must agree.
    x, _, theta, _ = expected
    if not (near(x, [X_MAX, -X_MAX], 1e-5) or near(theta, [THETA_MAX, -THETA_MAX], 1e-5)):
        assert bool(ts.terminated) == terminated


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_float64_episodes_follow_gymnasium_until_they_end(seed):
    genv = CartPoleEnv()
    genv.reset(seed=seed)
    env = envs.CartPole(dtype=torch.float64)
    state = fx_state(env, torch.float64, **dict(zip(FIELDS, genv.state.tolist(), strict=True)))
    actions = np.random.default_rng(seed).integers(0, 2, 500)
    for steps, a in enumerate(actions, start=1):  # noqa: B007 (read after the loop)
        state, ts = env.step(state, torch.tensor(int(a)))
        _, reward, terminated, _, _ = genv.step(int(a))
        assert_trees_close(ts.obs, torch.from_numpy(np.asarray(genv.state)), **F64)
        assert (float(ts.reward), bool(ts.terminated)) == (reward, terminated)
        if terminated:
            break
    assert terminated and steps > 5  # the episode ended, and not at once


def test_reset_draws_each_variable_uniformly_in_gymnasiums_range():
    state, ts = envs.CartPole().reset(random.split(random.key(0), 4000))
    for f in FIELDS:
        assert_uniform(getattr(state, f), -0.05, 0.05)
    gym_starts = np.array([CartPoleEnv().reset(seed=s)[0] for s in range(500)])
    for i, f in enumerate(FIELDS):
        assert_same_distribution(getattr(state, f), gym_starts[:, i])
    assert ts.obs.shape == (4000, 4) and ts.obs.dtype == torch.float32


@given(key=keys(), n=st.integers(1, 6), actions=st.lists(st.integers(0, 1), min_size=6, max_size=6))
def test_vmapped_step_equals_python_loop(key, n, actions):
    env = envs.CartPole()
    state, _ = torch.func.vmap(env.reset)(random.split(key, n))
    check_vmap(env.step, state, torch.tensor(actions[:n]))


def test_any_action_but_1_pushes_left_as_gymnasium():
    env = envs.CartPole(dtype=torch.float64)
    state, _ = env.reset(random.key(3))
    left, _ = env.step(state, torch.tensor(0))
    other, _ = env.step(state, torch.tensor(7))
    assert_trees_close(left, other)
