"""Acrobot-v1 against gymnasium's AcrobotEnv (RK4): one step, episodes, resets, vmap."""

import math

import numpy as np
import pytest
import torch
from gym_reference import F64, as_f32, assert_same_distribution, assert_uniform, fx_state, gym_step
from gymnasium.envs.classic_control import AcrobotEnv
from hypothesis import given
from hypothesis import strategies as st

from fxrl import envs, random
from fxrl.envs.acrobot import wrap
from fxrl.testing import assert_trees_close, check_vmap, keys

FIELDS = ("theta1", "theta2", "dtheta1", "dtheta2")
PI = math.pi


@st.composite
def states(draw: st.DrawFn) -> tuple[float, float, float, float]:
    """Anywhere in the state space, at the velocity limits, or near the tip-above-bar line
    (-cos t1 - cos(t1 + t2) = 1) with small velocities."""
    anywhere = st.tuples(
        st.floats(-PI, PI),
        st.floats(-PI, PI),
        st.floats(-4 * PI, 4 * PI) | st.sampled_from([4 * PI, -4 * PI]),
        st.floats(-9 * PI, 9 * PI) | st.sampled_from([9 * PI, -9 * PI]),
    )
    near_goal = st.builds(
        lambda t1, d: (t1, math.acos(max(-1.0, min(1.0, -1.0 - math.cos(t1)))) - t1 + d, 0.0, 0.0),
        st.floats(2.1, PI),
        st.floats(-0.05, 0.05),
    )
    return draw(anywhere | near_goal)


@given(state=states(), action=st.integers(0, 2))
def test_one_float64_step_matches_gymnasium_to_1e_10(state, action):
    env = envs.Acrobot(dtype=torch.float64)
    moved, ts = env.step(
        fx_state(env, torch.float64, **dict(zip(FIELDS, state, strict=True))), torch.tensor(action)
    )
    expected, reward, terminated = gym_step(AcrobotEnv(), np.array(state), action)
    assert_trees_close(
        torch.stack([getattr(moved, f) for f in FIELDS]), torch.from_numpy(expected), **F64
    )
    assert (float(ts.reward), bool(ts.terminated)) == (reward, terminated)


@given(state=states(), action=st.integers(0, 2))
def test_one_float32_step_matches_gymnasium_to_float32_tolerance(state, action):
    state = tuple(as_f32(v) for v in state)
    env = envs.Acrobot()
    moved, ts = env.step(
        fx_state(env, torch.float32, **dict(zip(FIELDS, state, strict=True))), torch.tensor(action)
    )
    gym = AcrobotEnv()
    expected, reward, terminated = gym_step(gym, np.array(state), action)
    assert_trees_close(
        torch.stack([getattr(moved, f) for f in FIELDS]), torch.from_numpy(expected).float()
    )
    assert_trees_close(ts.obs, torch.from_numpy(gym._get_ob()))
    # terminal test runs in float64 on the unrounded state, as gymnasium's
    assert (float(ts.reward), bool(ts.terminated)) == (reward, terminated)


@pytest.mark.parametrize("seed", [0, 1])
def test_float64_episodes_follow_gymnasium_for_500_steps(seed):
    genv = AcrobotEnv()
    genv.reset(seed=seed)
    env = envs.Acrobot(dtype=torch.float64)
    state = fx_state(env, torch.float64, **dict(zip(FIELDS, genv.state.tolist(), strict=True)))
    # pump energy: torque along the second joint's velocity ends an episode in ~100 steps
    for steps in range(1, 501):  # noqa: B007 (read after the loop)
        action = 2 if float(state.dtheta2) >= 0 else 0
        state, ts = env.step(state, torch.tensor(action))
        _, reward, terminated, _, _ = genv.step(action)
        assert_trees_close(
            torch.stack([getattr(state, f) for f in FIELDS]),
            torch.from_numpy(np.asarray(genv.state)),
            **F64,
        )
        assert (float(ts.reward), bool(ts.terminated)) == (reward, terminated)
        if terminated:
            break
    assert terminated and steps > 10


def test_reset_draws_each_variable_uniformly_in_gymnasiums_range():
    state, _ = envs.Acrobot().reset(random.split(random.key(4), 4000))
    gym = AcrobotEnv()
    gym_starts = np.array([gym.reset(seed=s) and gym.state for s in range(500)])
    for i, f in enumerate(FIELDS):
        assert_uniform(getattr(state, f), -0.1, 0.1)
        assert_same_distribution(getattr(state, f), gym_starts[:, i])


def test_wrap_shifts_by_whole_periods_like_gymnasium():
    from gymnasium.envs.classic_control.acrobot import wrap as gym_wrap

    for x in [0.0, PI, -PI, PI + 1e-12, 3.5, -3.5, 7.0, -9.5, 2 * PI]:
        got = float(wrap(torch.tensor(x, dtype=torch.float64), -PI, PI))
        assert got == pytest.approx(gym_wrap(x, -PI, PI), abs=1e-12)


@given(key=keys(), actions=st.lists(st.integers(0, 2), min_size=1, max_size=6))
def test_vmapped_step_equals_python_loop(key, actions):
    env = envs.Acrobot()
    state, _ = torch.func.vmap(env.reset)(random.split(key, len(actions)))
    check_vmap(env.step, state, torch.tensor(actions))
