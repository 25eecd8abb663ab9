"""fxrl.exploration: greedy heads, epsilon-greedy, Gaussian and Ornstein-Uhlenbeck noise."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import exploration as X
from fxrl import random, specs
from fxrl.testing import assert_trees_close, check_vmap, from_spec, keys

batch = st.lists(st.integers(1, 4), max_size=2).map(tuple)


@given(key=keys(), shape=batch, n=st.integers(1, 6))
def test_q_value_is_the_argmax_and_its_value_as_index_or_one_hot(key, shape, n):
    q = random.normal(key, (*shape, n))
    action, value = X.q_value(q)
    assert_trees_close(action, q.argmax(-1))
    assert_trees_close(value, q.max(-1).values)
    one_hot, value_1h = X.q_value(q, one_hot=True)
    assert_trees_close(one_hot, torch.nn.functional.one_hot(q.argmax(-1), n).float())
    assert_trees_close(value_1h, (q * one_hot).sum(-1))


def test_q_value_respects_the_action_mask():
    q = torch.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 1.0]])
    mask = torch.tensor([[False, True, True], [True, False, True]])
    action, value = X.q_value(q, mask=mask)
    assert action.tolist() == [2, 2]
    assert value.tolist() == [2.0, 1.0]


@pytest.mark.parametrize(
    "spec",
    [specs.Discrete(5), specs.MultiDiscrete([2, 3]), specs.Box(-1.0, 1.0, (2,)), specs.Binary(3)],
)
@given(data=st.data(), key=keys())
def test_egreedy_with_epsilon_0_is_greedy_and_with_1_stays_in_the_spec(spec, data, key):
    action = data.draw(from_spec(spec, (6,)))
    assert_trees_close(X.egreedy(key, action, spec, 0.0), action)
    explored = X.egreedy(key, action, spec, 1.0)
    assert explored.shape == action.shape
    assert bool(spec.contains(explored))


def test_egreedy_explores_with_probability_epsilon_at_a_fixed_key():
    n, spec = 40_000, specs.Discrete(4)
    greedy = torch.zeros(n, dtype=torch.int64)
    out = X.egreedy(random.key(0), greedy, spec, 0.3)
    # A random action equals the greedy one a quarter of the time: P(change) = 0.3 * 3/4.
    changed = float((out != greedy).double().mean())
    assert abs(changed - 0.225) < 4 * math.sqrt(0.225 * 0.775 / n)
    counts = torch.bincount(out[out != 0], minlength=4)[1:].double()
    assert (counts / counts.sum() - 1 / 3).abs().max() < 4 * math.sqrt(2 / 9 / counts.sum())


def test_egreedy_one_hot_and_mask():
    spec = specs.Discrete(4)
    greedy = torch.nn.functional.one_hot(torch.zeros(500, dtype=torch.int64), 4).float()
    out = X.egreedy(random.key(1), greedy, spec, 1.0, one_hot=True)
    assert out.dtype == torch.float32
    assert (out.sum(-1) == 1).all()
    assert len(set(out.argmax(-1).tolist())) == 4
    mask = torch.tensor([False, True, False, True]).expand(500, 4)
    masked = X.egreedy(random.key(1), torch.ones(500, dtype=torch.int64), spec, 1.0, mask=mask)
    assert set(masked.tolist()) == {1, 3}


@given(step=st.integers(0, 3000))
def test_linear_anneal_is_linear_then_flat(step):
    eps = float(X.linear_anneal(step, 1.0, 0.1, 1000))
    assert eps == pytest.approx(1.0 - 0.9 * min(step, 1000) / 1000, abs=1e-12)


@given(key=keys(), n=st.integers(1, 5))
def test_vmapped_egreedy_over_envs_equals_a_loop(key, n):
    spec = specs.Discrete(3)
    keys_ = random.split(key, n)
    greedy = random.randint(key, (n,), 0, 3)
    eps = X.linear_anneal(torch.arange(n) * 300, 1.0, 0.05, 1000)
    check_vmap(lambda k, a, e: X.egreedy(k, a, spec, e), keys_, greedy, eps)


def test_gaussian_noise_has_sigma_and_is_projected_into_the_box():
    wide = specs.Box(-100.0, 100.0, (2,))
    action = torch.full((20_000, 2), 0.5)
    noisy = X.gaussian_noise(random.key(0), action, wide, 0.3)
    assert abs(float((noisy - 0.5).double().std()) - 0.3) < 4 * 0.3 / math.sqrt(2 * 40_000)
    narrow = specs.Box(-1.0, 1.0, (2,))
    clipped = X.gaussian_noise(random.key(0), action, narrow, 2.0)
    assert bool(narrow.contains(clipped))
    assert float(clipped.max()) == 1.0


def test_ornstein_uhlenbeck_follows_its_recurrence_and_resets_on_is_init():
    spec = specs.Box(-10.0, 10.0, (2,))
    state = X.ou_init(spec, (3,))
    action = torch.zeros(3, 2)
    theta, sigma, dt = 0.15, 0.2, 1e-2
    ks = random.split(random.key(0), 4)
    noise = torch.zeros(3, 2)
    for t in range(4):
        is_init = torch.tensor([t == 2, False, t == 3])
        out, state = X.ornstein_uhlenbeck(ks[t], action, state, spec, 0.5, is_init=is_init)
        noise = torch.where(is_init[:, None], 0.0, noise)
        eps = random.normal(ks[t], (3, 2), torch.float64).float()
        noise = noise + theta * (0.0 - noise) * dt + sigma * math.sqrt(dt) * eps
        assert_trees_close(state.noise, noise)
        assert_trees_close(out, 0.5 * noise)


def test_ornstein_uhlenbeck_reaches_its_stationary_std():
    spec = specs.Box(-10.0, 10.0, (1,))
    n, theta, sigma, dt = 4000, 1.0, 0.5, 0.1
    state = X.ou_init(spec, (n,))
    for k in random.split(random.key(1), 60).unbind(0):
        _, state = X.ornstein_uhlenbeck(
            k, torch.zeros(n, 1), state, spec, theta=theta, sigma=sigma, dt=dt
        )
    # Discrete-time AR(1): x' = (1 - theta dt) x + sigma sqrt(dt) eps.
    a = 1 - theta * dt
    std = sigma * math.sqrt(dt * (1 - a**120) / (1 - a**2))
    assert abs(float(state.noise.double().std()) - std) < 4 * std / math.sqrt(2 * n)


def test_bad_inputs_give_clear_errors():
    with pytest.raises(ValueError, match=r"egreedy: action has shape \[4\]; expected \[\*B, 2\]"):
        X.egreedy(random.key(0), torch.zeros(4), specs.Box(-1.0, 1.0, (2,)), 0.1)
    with pytest.raises(ValueError, match=r"one_hot needs a Discrete spec"):
        X.egreedy(random.key(0), torch.zeros(4, 2), specs.Binary(2), 0.1, one_hot=True)
    with pytest.raises(ValueError, match=r"q must be a float tensor \[\*B, num_actions\]"):
        X.q_value(torch.tensor([1, 2]))
    spec = specs.Box(-1.0, 1.0, (2,))
    with pytest.raises(
        ValueError,
        match=r"state.noise has shape \[2\] but action \[3, 2\]; make "
        r"the state with ou_init\(spec, \(3,\)\)",
    ):
        X.ornstein_uhlenbeck(random.key(0), torch.zeros(3, 2), X.ou_init(spec), spec)
