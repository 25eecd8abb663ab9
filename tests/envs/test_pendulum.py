"""Pendulum-v1 against gymnasium's PendulumEnv: one step, whole episodes, resets, vmap."""

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
)
from gymnasium.envs.classic_control import PendulumEnv
from hypothesis import example, given
from hypothesis import strategies as st

from fxrl import envs, random
from fxrl.envs.pendulum import angle_normalize
from fxrl.testing import assert_trees_close, check_vmap, keys

FIELDS = ("angle", "velocity")
# angles around the wrap of angle_normalize, velocities at the speed limit, torques past the
# torque limit (clipped)
angles = st.floats(-20, 20) | st.sampled_from([math.pi, -math.pi, 3 * math.pi, 0.0])
velocities = st.floats(-8, 8) | st.sampled_from([8.0, -8.0, 7.99, -7.99])
torques = st.floats(-2, 2) | st.floats(-5, 5) | st.sampled_from([2.0, -2.0, 0.0])


@given(angle=angles, velocity=velocities, torque=torques)
@example(angle=math.pi, velocity=8.0, torque=2.0)
def test_one_float64_step_matches_gymnasium_to_1e_10(angle, velocity, torque):
    env = envs.Pendulum(dtype=torch.float64)
    moved, ts = env.step(
        fx_state(env, torch.float64, angle=angle, velocity=velocity),
        torch.tensor([torque], dtype=torch.float64),
    )
    expected, reward, _ = gym_step(PendulumEnv(), np.array([angle, velocity]), np.array([torque]))
    assert_trees_close(
        torch.stack([moved.angle, moved.velocity]), torch.from_numpy(expected), **F64
    )
    assert_trees_close(ts.reward, torch.tensor(reward, dtype=torch.float64), **F64)
    assert not bool(ts.terminated) and not bool(ts.truncated)


@given(angle=angles, velocity=velocities, torque=torques)
def test_one_float32_step_matches_gymnasium_to_float32_tolerance(angle, velocity, torque):
    angle, velocity, torque = as_f32(angle), as_f32(velocity), as_f32(torque)
    env = envs.Pendulum()
    _, ts = env.step(
        fx_state(env, torch.float32, angle=angle, velocity=velocity), torch.tensor([torque])
    )
    gym = PendulumEnv()
    _, reward, _ = gym_step(gym, np.array([angle, velocity]), np.array([torque], dtype=np.float32))
    assert_trees_close(ts.obs, torch.from_numpy(gym._get_obs()))
    assert_trees_close(ts.reward, torch.tensor(reward, dtype=torch.float32))


@pytest.mark.parametrize("seed", [0, 1])
def test_float64_episodes_follow_gymnasium_for_200_steps(seed):
    genv = PendulumEnv()
    genv.reset(seed=seed)
    env = envs.Pendulum(dtype=torch.float64)
    state = fx_state(env, torch.float64, **dict(zip(FIELDS, genv.state.tolist(), strict=True)))
    for u in np.random.default_rng(seed).uniform(-2.5, 2.5, (200, 1)):
        state, ts = env.step(state, torch.from_numpy(u))
        _, reward, _, _, _ = genv.step(u)
        assert_trees_close(
            torch.stack([state.angle, state.velocity]),
            torch.from_numpy(np.asarray(genv.state)),
            **F64,
        )
        assert_trees_close(ts.reward, torch.tensor(reward, dtype=torch.float64), **F64)


def test_reset_draws_angle_and_velocity_uniformly_in_gymnasiums_ranges():
    state, _ = envs.Pendulum().reset(random.split(random.key(1), 4000))
    assert_uniform(state.angle, -math.pi, math.pi)
    assert_uniform(state.velocity, -1.0, 1.0)
    gym = PendulumEnv()
    gym_starts = np.array([gym.reset(seed=s) and gym.state for s in range(500)])
    assert_same_distribution(state.angle, gym_starts[:, 0])
    assert_same_distribution(state.velocity, gym_starts[:, 1])


def test_angle_normalize_wraps_into_minus_pi_pi():
    x = torch.tensor([0.0, math.pi, -math.pi, 3 * math.pi, -7.0, 7.0], dtype=torch.float64)
    y = angle_normalize(x)
    assert bool(((y >= -math.pi) & (y < math.pi)).all())
    assert_trees_close(torch.cos(y), torch.cos(x), **F64)


@given(key=keys(), n=st.integers(1, 6))
def test_vmapped_step_equals_python_loop(key, n):
    env = envs.Pendulum()
    state, _ = torch.func.vmap(env.reset)(random.split(key, n))
    torque = random.uniform(random.fold_in(key, 1), (n, 1), -3.0, 3.0)
    check_vmap(env.step, state, torque)
