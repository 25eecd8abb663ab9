"""MountainCar-v0 against gymnasium's MountainCarEnv: one step, episodes, resets, vmap."""

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
from gymnasium.envs.classic_control import MountainCarEnv
from hypothesis import example, given
from hypothesis import strategies as st

from fxrl import envs, random
from fxrl.testing import assert_trees_close, check_vmap, keys

FIELDS = ("position", "velocity")


@st.composite
def at_goal(draw: st.DrawFn) -> tuple[float, float, int]:
    """(position, velocity, action) whose step lands within ~1e-7 of position 0.5."""
    position, action = draw(st.floats(0.44, 0.56)), draw(st.integers(0, 2))
    push = (action - 1) * 0.001 + math.cos(3 * position) * -0.0025
    offset = draw(st.sampled_from([0.0, 1e-12, -1e-12, 1e-7, -1e-7]))
    return position, 0.5 + offset - position - push, action


plain = st.tuples(
    st.floats(-1.2, 0.6) | st.sampled_from([-1.2, -1.19, 0.6]),  # walls
    st.floats(-0.07, 0.07) | st.sampled_from([-0.07, 0.07]),  # speed limits
    st.integers(0, 2),
)


@given(case=plain | at_goal())
@example(case=(-1.2, -0.01, 0))  # at the left wall, moving left: stops dead
@example(case=(0.5, 0.0025 * math.cos(1.5), 1))  # lands on the goal with velocity exactly 0
def test_one_float64_step_matches_gymnasium_to_1e_10(case):
    position, velocity, action = case
    env = envs.MountainCar(dtype=torch.float64)
    moved, ts = env.step(
        fx_state(env, torch.float64, position=position, velocity=velocity), torch.tensor(action)
    )
    expected, reward, terminated = gym_step(
        MountainCarEnv(), np.array([position, velocity]), action
    )
    assert_trees_close(
        torch.stack([moved.position, moved.velocity]), torch.from_numpy(expected), **F64
    )
    assert (float(ts.reward), bool(ts.terminated)) == (reward, terminated)


@given(case=plain | at_goal())
def test_one_float32_step_matches_gymnasium_to_float32_tolerance(case):
    position, velocity, action = as_f32(case[0]), as_f32(case[1]), case[2]
    env = envs.MountainCar()
    _, ts = env.step(
        fx_state(env, torch.float32, position=position, velocity=velocity), torch.tensor(action)
    )
    expected, reward, terminated = gym_step(
        MountainCarEnv(), np.array([position, velocity]), action
    )
    assert_trees_close(ts.obs, torch.from_numpy(expected).float())
    assert float(ts.reward) == reward
    if not (near(expected[0], [0.5], 1e-5) or near(expected[1], [0.0], 1e-5)):
        assert bool(ts.terminated) == terminated


@pytest.mark.parametrize("seed", [0, 1])
def test_float64_episodes_follow_gymnasium_for_200_steps(seed):
    genv = MountainCarEnv()
    genv.reset(seed=seed)
    env = envs.MountainCar(dtype=torch.float64)
    state = fx_state(env, torch.float64, **dict(zip(FIELDS, genv.state.tolist(), strict=True)))
    # push in the direction of motion: reaches the goal within 200 steps
    for _ in range(200):
        action = 2 if float(state.velocity) >= 0 else 0
        state, ts = env.step(state, torch.tensor(action))
        _, reward, terminated, _, _ = genv.step(action)
        assert_trees_close(
            torch.stack([state.position, state.velocity]),
            torch.tensor(genv.state, dtype=torch.float64),
            **F64,
        )
        assert (float(ts.reward), bool(ts.terminated)) == (reward, terminated)
        if terminated:
            break
    assert terminated


def test_reset_draws_position_uniformly_in_gymnasiums_range_at_rest():
    state, _ = envs.MountainCar().reset(random.split(random.key(2), 4000))
    assert_uniform(state.position, -0.6, -0.4)
    assert bool((state.velocity == 0).all())
    gym = MountainCarEnv()
    assert_same_distribution(state.position, [gym.reset(seed=s)[0][0] for s in range(500)])


@given(key=keys(), actions=st.lists(st.integers(0, 2), min_size=1, max_size=6))
def test_vmapped_step_equals_python_loop(key, actions):
    env = envs.MountainCar()
    state, _ = torch.func.vmap(env.reset)(random.split(key, len(actions)))
    check_vmap(env.step, state, torch.tensor(actions))
