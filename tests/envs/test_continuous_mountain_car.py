"""MountainCarContinuous-v0 against gymnasium's Continuous_MountainCarEnv."""

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
from gymnasium.envs.classic_control import Continuous_MountainCarEnv
from hypothesis import example, given
from hypothesis import strategies as st

from fxrl import envs, random
from fxrl.testing import assert_trees_close, check_vmap, keys

FIELDS = ("position", "velocity")
# gymnasium's arithmetic is float64 only for a float64 force inside [-1, 1]: a clipped force
# becomes a Python float, which numpy then adds to its float32 state in float32
forces = st.floats(-1, 1) | st.sampled_from([1.0, -1.0, 0.0])
clipped_forces = forces | st.floats(-3, 3)


@st.composite
def at_goal(draw: st.DrawFn) -> tuple[float, float, float]:
    """(position, velocity, force) whose step lands within ~1e-7 of position 0.45."""
    position, force = draw(st.floats(0.4, 0.5)), draw(st.floats(-1, 1))
    push = force * 0.0015 - 0.0025 * math.cos(3 * position)
    offset = draw(st.sampled_from([0.0, 1e-12, -1e-12, 1e-7, -1e-7]))
    return position, 0.45 + offset - position - push, force


def _as_gymnasium_holds_it(position: float, velocity: float) -> np.ndarray:
    """gymnasium's state: float64 right after a reset, float32 after any step (where it
    computes 3 * position in float32); a float32-representable state stands for the latter."""
    exact = all(float(np.float32(v)) == v for v in (position, velocity))
    return np.array([position, velocity], dtype=np.float32 if exact else np.float64)


plain = st.tuples(
    st.floats(-1.2, 0.6) | st.sampled_from([-1.2, 0.6]),
    st.floats(-0.07, 0.07) | st.sampled_from([-0.07, 0.07]),
    forces,
)
plain_clipped = st.tuples(plain.map(lambda c: c[:2]), clipped_forces).map(lambda c: (*c[0], c[1]))


@given(case=plain | at_goal())
@example(case=(-1.2, -0.01, -1.0))
def test_one_float64_step_matches_gymnasium_to_1e_10(case):
    position, velocity, force = case
    env = envs.ContinuousMountainCar(dtype=torch.float64)
    moved, ts = env.step(
        fx_state(env, torch.float64, position=position, velocity=velocity),
        torch.tensor([force], dtype=torch.float64),
    )
    expected, reward, terminated = gym_step(
        Continuous_MountainCarEnv(), _as_gymnasium_holds_it(position, velocity), np.array([force])
    )
    assert_trees_close(
        torch.stack([moved.position, moved.velocity]), torch.from_numpy(expected), **F64
    )
    assert_trees_close(ts.reward, torch.tensor(reward, dtype=torch.float64), **F64)
    assert bool(ts.terminated) == terminated


@given(case=plain_clipped | at_goal())
def test_one_float32_step_matches_gymnasium_to_float32_tolerance(case):
    position, velocity, force = (as_f32(v) for v in case)
    env = envs.ContinuousMountainCar()
    _, ts = env.step(
        fx_state(env, torch.float32, position=position, velocity=velocity), torch.tensor([force])
    )
    expected, reward, terminated = gym_step(
        Continuous_MountainCarEnv(),
        _as_gymnasium_holds_it(position, velocity),
        np.array([force], dtype=np.float32),
    )
    assert_trees_close(ts.obs, torch.from_numpy(expected).float())
    if not (near(expected[0], [0.45], 1e-5) or near(expected[1], [0.0], 1e-5)):
        assert bool(ts.terminated) == terminated
    # the +100 goes with the flag; the rest must match in any case
    bonus = 100.0 * float(ts.terminated) - 100.0 * terminated
    assert_trees_close(ts.reward - bonus, torch.tensor(reward, dtype=torch.float32))


def test_reward_squares_the_unclipped_action_as_gymnasium():
    env = envs.ContinuousMountainCar(dtype=torch.float64)
    state = fx_state(env, torch.float64, position=-0.5, velocity=0.0)
    _, ts = env.step(state, torch.tensor([3.0], dtype=torch.float64))
    assert float(ts.reward) == pytest.approx(-0.9)


@pytest.mark.parametrize("seed", [0, 1])
def test_float64_episodes_follow_gymnasium_until_they_end(seed):
    genv = Continuous_MountainCarEnv()
    genv.reset(seed=seed)
    env = envs.ContinuousMountainCar(dtype=torch.float64)
    state = fx_state(env, torch.float64, **dict(zip(FIELDS, genv.state.tolist(), strict=True)))
    noise = np.random.default_rng(seed).uniform(-0.1, 0.1, 999)
    for eps in noise:
        force = np.array([(0.9 if float(state.velocity) >= 0 else -0.9) + eps])
        state, ts = env.step(state, torch.from_numpy(force))
        _, reward, terminated, _, _ = genv.step(force)
        assert_trees_close(
            torch.stack([state.position, state.velocity]),
            torch.from_numpy(genv.state.astype(np.float64)),
            **F64,
        )
        assert_trees_close(ts.reward, torch.tensor(reward, dtype=torch.float64), **F64)
        assert bool(ts.terminated) == terminated
        if terminated:
            break
    assert terminated


def test_reset_draws_position_uniformly_in_gymnasiums_range_at_rest():
    state, _ = envs.ContinuousMountainCar().reset(random.split(random.key(3), 4000))
    assert_uniform(state.position, -0.6, -0.4)
    assert bool((state.velocity == 0).all())
    gym = Continuous_MountainCarEnv()
    assert_same_distribution(state.position, [gym.reset(seed=s)[0][0] for s in range(500)])


@given(key=keys(), n=st.integers(1, 6))
def test_vmapped_step_equals_python_loop(key, n):
    env = envs.ContinuousMountainCar()
    state, _ = torch.func.vmap(env.reset)(random.split(key, n))
    check_vmap(env.step, state, random.uniform(random.fold_in(key, 1), (n, 1), -2.0, 2.0))
