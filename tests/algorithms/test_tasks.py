"""Task ensembles: vmapped task training = a loop over tasks, params ranges, evaluation."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import envs, random, tree
from fxrl.algorithms import dqn, ppo, tasks
from fxrl.testing import assert_trees_close, keys

SMALL = {"num_envs": 4, "num_steps": 16, "update_epochs": 2, "num_minibatches": 2}


def _loop_over_tasks(algo, key, env_params, num_updates):
    """The reference: one agent per task, initialised and updated one after the other."""
    n = tasks.num_tasks(env_params)
    states, metrics = [], []
    for i, k in enumerate(random.split(key, n)):
        state = algo.init(k, env_params=tree.index(env_params, i))
        for _ in range(num_updates):
            state, m = algo.update(state)
        states.append(state)
        metrics.append(m)
    return tree.stack(states), tree.stack(metrics)


@pytest.mark.parametrize(
    ("env_id", "ranges"),
    [
        ("CartPole-v1", {"length": (0.25, 1.0), "masspole": (0.05, 0.5)}),
        ("Pendulum-v1", {"gravity": (5.0, 15.0), "mass": (0.5, 1.5)}),
    ],
)
def test_vmapped_task_training_equals_a_python_loop_over_tasks(env_id, ranges):
    key = random.key(3)
    env = envs.make(env_id)
    env_params = tasks.sample_params(env, random.key(7), 3, ranges)
    algo = ppo.make(ppo.Config(env=env_id, **SMALL))
    state = tasks.init_tasks(algo, key, env_params)
    update = tasks.update_tasks(algo, 3, compile=False)
    state, metrics = update(state)
    expected_state, expected_metrics = _loop_over_tasks(algo, key, env_params, 1)
    assert_trees_close(state, expected_state, rtol=1e-5, atol=1e-6)
    assert_trees_close(metrics, expected_metrics, rtol=1e-5, atol=1e-6)
    # each task's envs run with that task's params, shared by its num_envs envs
    for name in ranges:
        carried = getattr(state.env_state.params, name)
        assert carried.shape == (3, SMALL["num_envs"])
        assert torch.equal(carried, getattr(env_params, name)[:, None].expand(3, 4))


def test_task_params_change_what_an_agent_sees():
    """The same key with other env params gives another trajectory: the params are used."""
    algo = ppo.make(ppo.Config(env="CartPole-v1", **SMALL))
    env_params = tasks.task_params(envs.make("CartPole-v1"), length=[0.5, 1.0])
    update = tasks.update_tasks(algo, 2, compile=False)
    state, _ = update(tasks.init_tasks(algo, random.key(0), env_params))
    default = algo.init(random.split(random.key(0), 2)[1])
    default, _ = algo.update(default)
    assert not torch.allclose(state.obs[1], default.obs)


def test_sample_params_draws_each_param_inside_its_range_and_keeps_the_rest():
    env = envs.make("CartPole-v1")
    p = tasks.sample_params(env, random.key(0), 64, {"length": (0.25, 1.0), "masspole": (2, 3)})
    assert p.length.shape == p.masspole.shape == p.gravity.shape == (64,)
    assert bool(((p.length >= 0.25) & (p.length < 1.0)).all())
    assert bool(((p.masspole >= 2) & (p.masspole < 3)).all())
    assert p.length.std() > 0.1  # spread over the range, not one value
    assert torch.equal(p.gravity, torch.full((64,), 9.8))
    assert torch.equal(p.masscart, torch.full((64,), 1.0))
    assert tasks.num_tasks(p) == 64


@given(key=keys(), low=st.floats(-10, 10), width=st.floats(0, 5), n=st.integers(1, 16))
def test_sample_params_is_a_pure_function_of_its_key(key, low, width, n):
    env = envs.make("Pendulum-v1")
    ranges = {"gravity": (low, low + width)}
    a, b = (tasks.sample_params(env, key, n, ranges) for _ in range(2))
    assert_trees_close(a, b)
    assert bool(((a.gravity >= low - 1e-5) & (a.gravity <= low + width + 1e-5)).all())


def test_sample_params_with_other_keys_gives_other_tasks():
    env = envs.make("Pendulum-v1")
    a, b = (tasks.sample_params(env, random.key(s), 8, {"mass": (0.5, 1.5)}) for s in (0, 1))
    assert not torch.equal(a.mass, b.mass)


@pytest.mark.parametrize(
    ("ranges", "num", "match"),
    [
        ({"lenght": (0.2, 1.0)}, 4, r"CartPoleParams param 'lenght'\. Did you mean 'length'\?"),
        ({"length": (1.0, 0.2)}, 4, r"ranges\['length'\] = \(1\.0, 0\.2\); expected \(low, high\)"),
        ({"length": (0.2, math.inf)}, 4, r"finite low <= high"),
        ({"length": (0.2,)}, 4, r"ranges\['length'\] = \(0\.2,\)"),
        ({"length": "wide"}, 4, r"ranges\['length'\] = 'wide'"),
        ({}, 4, r"ranges names no param; expected some of \['gravity'"),
        ({"length": (0.2, 1.0)}, 0, r"num_tasks must be a positive int, got 0"),
        ({"length": (0.2, 1.0)}, 2.0, r"num_tasks must be a positive int, got 2\.0"),
    ],
)
def test_sample_params_rejects_bad_ranges_and_counts(ranges, num, match):
    with pytest.raises(ValueError, match=match):
        tasks.sample_params(envs.make("CartPole-v1"), random.key(0), num, ranges)


def test_task_params_rejects_ragged_and_non_finite_values():
    env = envs.make("CartPole-v1")
    with pytest.raises(ValueError, match=r"one value per task; got sizes \{'length': 2, "):
        tasks.task_params(env, length=[0.5, 1.0], masspole=[0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=r"length has \[2\] values \[0\.5, nan\]"):
        tasks.task_params(env, length=[0.5, float("nan")])
    with pytest.raises(ValueError, match=r"name at least one param"):
        tasks.task_params(env)


def test_init_tasks_rejects_params_of_another_env_and_algorithms_without_env_params():
    algo = ppo.make(ppo.Config(env="CartPole-v1", **SMALL))
    pendulum = tasks.task_params(envs.make("Pendulum-v1"), gravity=[9.0, 11.0])
    with pytest.raises(TypeError, match=r"env_params is a PendulumParams; expected CartPoleParams"):
        tasks.init_tasks(algo, random.key(0), pendulum)
    ragged = tasks.task_params(algo.env, length=[0.5, 1.0]).replace(masspole=torch.ones(3))
    with pytest.raises(ValueError, match=r"expected tensors \[num_tasks\], the same for every"):
        tasks.init_tasks(algo, random.key(0), ragged)
    q = dqn.make(dqn.Config(env="CartPole-v1"))
    with pytest.raises(TypeError, match=r"init\(key\) takes no env_params"):
        tasks.init_tasks(q, random.key(0), tasks.task_params(q.env, length=[0.5, 1.0]))


def _episode_return(env, algo, params, task, key):
    """One greedy episode, stepped by hand until it ends."""
    state, ts = env.reset(key, task)
    total = 0.0
    while True:
        state, ts = env.step(state, algo.policy(params, ts.obs, None, mode="mode"))
        total += float(ts.reward)
        if bool(ts.terminated | ts.truncated):
            return total


def test_evaluate_tasks_equals_episodes_played_one_by_one():
    algo = ppo.make(ppo.Config(env="CartPole-v1", **SMALL))
    env_params = tasks.task_params(algo.env, length=[0.3, 0.9], masspole=[0.4, 0.1])
    state = tasks.init_tasks(algo, random.key(1), env_params)
    returns = tasks.evaluate_tasks(algo, state.params, env_params, episodes=2, seed=5)
    assert returns.shape == (2, 2) and returns.dtype == torch.float64
    env = envs.make("CartPole-v1")
    for i, k in enumerate(random.split(random.key(5), 2)):
        k_reset = random.split(k)[0]
        p, task = tree.index(state.params, i), tree.index(env_params, i)
        expected = [_episode_return(env, algo, p, task, k) for k in random.split(k_reset, 2)]
        assert returns[i].tolist() == pytest.approx(expected)


@pytest.mark.parametrize(
    ("env_id", "values"),
    [
        ("CartPole-v1", {"length": [0.3, 0.9], "masspole": [0.4, 0.05], "masscart": [2.0, 0.5]}),
        ("Pendulum-v1", {"gravity": [4.0, 14.0], "mass": [0.6, -1.3], "length": [0.8, 1.2]}),
    ],
)
def test_gymnasium_env_steps_like_the_pure_env_with_the_same_task_params(env_id, values):
    env = envs.make(
        env_id, dtype=torch.float64, max_steps=None, auto_reset=False, episode_stats=False
    )
    env_params = tasks.task_params(env, **values)
    fields = (
        ("x", "x_dot", "theta", "theta_dot") if env_id == "CartPole-v1" else ("angle", "velocity")
    )
    for i in range(2):
        task = tree.index(env_params, i)
        gym_env = tasks.gymnasium_env(env_id, task)
        gym_env.reset(seed=i)
        state, _ = env.reset(random.key(i), task)
        gym_env.unwrapped.state = np.array([float(getattr(state, f)) for f in fields])
        for t in range(20):
            action = env.action_spec.sample(random.key(100 + t))
            state, ts = env.step(state, action)
            _, reward, terminated, _, _ = gym_env.step(
                action.item() if action.ndim == 0 else action.numpy()
            )
            assert float(ts.reward) == pytest.approx(reward, rel=1e-6, abs=1e-8)
            assert bool(ts.terminated) == terminated
            if terminated:
                break
            ours = [float(getattr(state, f)) for f in fields]
            np.testing.assert_allclose(ours, gym_env.unwrapped.state, rtol=1e-9, atol=1e-12)
        gym_env.close()


def test_gymnasium_env_names_the_supported_ids():
    p = tree.index(tasks.task_params(envs.make("Acrobot-v1"), link_length_1=[1.0]), 0)
    with pytest.raises(ValueError, match=r"'Acrobot-v1' has no task params mapping; supported"):
        tasks.gymnasium_env("Acrobot-v1", p)


def test_evaluate_tasks_with_sampled_actions_equals_a_loop_over_tasks():
    algo = ppo.make(ppo.Config(env="Pendulum-v1", **SMALL))
    env_params = tasks.task_params(algo.env, gravity=[6.0, 13.0], mass=[1.2, 0.8])
    state = tasks.init_tasks(algo, random.key(2), env_params)
    returns = tasks.evaluate_tasks(algo, state.params, env_params, 2, seed=3, mode="random")
    benv = envs.batch(algo.env, 2)
    for i, k in enumerate(random.split(random.key(3), 2)):
        k_reset, k_act = random.split(k).unbind(-2)
        p = tree.index(state.params, i)
        env_state, ts = benv.reset(k_reset, tree.index(env_params, i))
        total = torch.zeros(2, dtype=torch.float64)
        for t in range(200):  # Pendulum's episodes all last 200 steps
            action = algo.policy(p, ts.obs, random.fold_in(k_act, t), mode="random")
            env_state, ts = benv.step(env_state, action)
            total += ts.reward.double()
        torch.testing.assert_close(returns[i], total)
    greedy = tasks.evaluate_tasks(algo, state.params, env_params, 2, seed=3)
    assert not torch.equal(greedy, returns)
