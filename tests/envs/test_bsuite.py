"""bsuite tasks against the bsuite package (0.3.6): the package's env is put into the same
state as the pure env (its random draws replaced by the pure env's where it makes any),
both are stepped with the same random actions, and obs, reward and discount must agree."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fxrl import envs, random, tree
from fxrl.compile import compile as fxrl_compile
from fxrl.envs.bsuite import Catch, DeepSea, DiscountingChain, MemoryChain, UmbrellaChain
from fxrl.testing import assert_trees_close

bsuite_envs = pytest.importorskip("bsuite.environments")
from bsuite.environments import catch as bs_catch  # noqa: E402
from bsuite.environments import deep_sea as bs_deep_sea  # noqa: E402
from bsuite.environments import discounting_chain as bs_discounting  # noqa: E402
from bsuite.environments import memory_chain as bs_memory  # noqa: E402
from bsuite.environments import umbrella_chain as bs_umbrella  # noqa: E402

IDS = ["Catch-bsuite", "DeepSea-bsuite", "DiscountingChain-bsuite", "MemoryChain-bsuite",
       "UmbrellaChain-bsuite"]  # fmt: skip


def bare(id: str, **params):
    """The env without time limit, auto-reset or stats: what the package steps."""
    return envs.make(id, max_steps=None, auto_reset=False, episode_stats=False, **params)


def assert_same_step(ts, bts, where: str) -> None:
    """obs, reward and discount of a pure TimeStep against a dm_env TimeStep."""
    obs = torch.from_numpy(np.asarray(bts.observation, dtype=np.float32)).reshape(ts.obs.shape)
    assert torch.equal(ts.obs, obs), where
    if bts.first():  # dm_env's restart has no reward or discount
        assert float(ts.reward) == 0.0 and not bool(ts.terminated | ts.truncated), where
        return
    assert float(ts.reward) == pytest.approx(float(bts.reward), abs=1e-6), where
    assert bool(ts.terminated) == bts.last(), where
    assert float(bts.discount) == (0.0 if bool(ts.terminated) else 1.0), where


class Draws:
    """Stands in for a bsuite env's ``np.random.RandomState``: returns the given draws."""

    def __init__(self, **values: float) -> None:
        self.values = values

    def rand(self) -> float:
        return self.values["rand"]

    def randn(self) -> float:
        return self.values["randn"]

    def binomial(self, n: int, p: float, size=None):
        return self.values["binomial" if size is None else "binomial_size"]


# ------------------------------------------------------------------------------ Catch


@pytest.mark.parametrize("rows, columns, seed", [(10, 5, 0), (6, 3, 1)])
def test_catch_follows_bsuite_over_300_episodes_of_random_actions(rows, columns, seed):
    ref = bs_catch.Catch(rows=rows, columns=columns, seed=seed)
    env = Catch(rows, columns)
    actions = np.random.default_rng(seed).integers(0, 3, 300 * rows)
    key, i = random.key(seed), 0
    for episode in range(300):
        bts = ref.reset()
        state, ts = env.reset(random.fold_in(key, episode))
        state = state.replace(ball_x=torch.tensor(ref._ball_x))  # the package's draw
        ts = ts.replace(obs=env.observe(state))
        assert_same_step(ts, bts, f"reset of episode {episode}")
        while not bts.last():
            a = int(actions[i])
            i += 1
            state, ts = env.step(state, torch.tensor(a))
            bts = ref.step(a)
            assert_same_step(ts, bts, f"episode {episode}, action {a}")
        assert bool(ts.terminated) and int(state.t) == rows - 1


def test_catch_drops_the_ball_in_a_uniform_column_with_the_paddle_centred():
    state, ts = torch.func.vmap(Catch().reset)(random.split(random.key(0), 5000))
    counts = torch.bincount(state.ball_x, minlength=5).double()
    # each column 1000 +- 5 sigma (sigma = sqrt(5000 * 0.2 * 0.8) = 28)
    assert ((counts - 1000).abs() < 5 * 28.3).all(), counts
    assert (state.paddle_x == 2).all() and (state.ball_y == 0).all()
    assert (ts.obs.sum((-1, -2)) == 2).all()  # ball and paddle, never on one cell at reset


def test_catch_terminates_after_rows_minus_1_steps_with_plus_or_minus_1():
    env = bare("Catch-bsuite")
    state, _ = env.reset(random.key(3))
    state = state.replace(ball_x=torch.tensor(4))
    rewards = []
    for _ in range(9):
        state, ts = env.step(state, torch.tensor(2))  # always right: ends under column 4
        rewards.append(float(ts.reward))
    assert rewards == [0.0] * 8 + [1.0] and bool(ts.terminated)


# ------------------------------------------------------------------------------ DeepSea


@pytest.mark.parametrize("size, mapping_seed", [(8, 0), (10, 3)])
def test_deterministic_deep_sea_follows_bsuite_over_150_episodes(size, mapping_seed):
    ref = bs_deep_sea.DeepSea(size=size, mapping_seed=mapping_seed, seed=0)
    env = DeepSea(size)
    params = env.default_params.replace(action_mapping=torch.from_numpy(ref._action_mapping))
    rng = np.random.default_rng(size)
    total = 0.0
    for episode in range(150):
        bts = ref.reset()
        state, ts = env.reset(random.key(episode), params)
        assert_same_step(ts, bts, "reset")
        # mostly-right policies, so that some episodes reach the treasure
        p_right = rng.uniform(0.5, 1.0)
        while not bts.last():
            right = int(ref._action_mapping[ref._row, ref._column])
            a = right if rng.uniform() < p_right else 1 - right
            state, ts = env.step(state, torch.tensor(a))
            bts = ref.step(a)
            assert_same_step(ts, bts, f"episode {episode}, action {a}")
            total += float(ts.reward)
        assert (int(state.row), int(state.column)) == (ref._row, ref._column)
        assert bool(state.bad_episode) == ref._bad_episode
    assert total > 1.0  # the treasure was found at least twice


def test_stochastic_deep_sea_follows_bsuite_given_the_same_draws():
    size = 6
    ref = bs_deep_sea.DeepSea(size=size, deterministic=False, mapping_seed=1, seed=0)
    env = DeepSea(size)
    params = env.default_params.replace(
        action_mapping=torch.from_numpy(ref._action_mapping), deterministic=False
    )
    actions = np.random.default_rng(0).integers(0, 2, 250 * size)
    noisy, failed, i = 0, 0, 0
    for episode in range(250):
        bts = ref.reset()
        state, ts = env.reset(random.key(episode), params)
        while not bts.last():
            _, k_move, k_noise = random.split(state.key, 3)  # the pure env's draws
            u = float(random.uniform(k_move, (), dtype=torch.float64))
            z = float(random.normal(k_noise, ()))
            ref._rng = Draws(rand=u, randn=z)
            a = int(actions[i])
            i += 1
            noisy += ref._row == size - 1 and ref._column in (0, size - 1)
            failed += a == ref._action_mapping[ref._row, ref._column] and u <= 1 / size
            state, ts = env.step(state, torch.tensor(a))
            bts = ref.step(a)
            assert_same_step(ts, bts, f"episode {episode}, action {a}")
    assert noisy > 30 and failed > 30  # both random parts were exercised


def test_stochastic_deep_sea_moves_right_with_probability_1_minus_1_over_size():
    size, n = 5, 4000
    env = DeepSea(size)
    params = env.default_params.replace(action_mapping=torch.ones(size, size, dtype=torch.long))
    state, _ = torch.func.vmap(env.reset, in_dims=(0, None))(
        random.split(random.key(0), n), params.replace(deterministic=False)
    )
    state, _ = torch.func.vmap(env.step)(state, torch.ones(n, dtype=torch.long))
    moved = state.column.double().mean()
    assert abs(moved - 0.8) < 5 * (0.8 * 0.2 / n) ** 0.5


# ------------------------------------------------------------------------------ chains


@pytest.mark.parametrize("mapping_seed", [0, 3, 7])
def test_discounting_chain_follows_bsuite_for_every_first_action(mapping_seed):
    ref = bs_discounting.DiscountingChain(mapping_seed=mapping_seed)
    env = DiscountingChain()
    params = env.default_params.replace(bonus_action=mapping_seed % 5)
    actions = np.random.default_rng(mapping_seed).integers(0, 5, 10 * 100)
    returns = []
    for episode in range(10):
        bts = ref.reset()
        state, ts = env.reset(random.key(episode), params)
        assert_same_step(ts, bts, "reset")
        total, t = 0.0, 0
        first = episode % 5  # every chain chosen twice
        while not bts.last():
            a = first if t == 0 else int(actions[100 * episode + t])
            state, ts = env.step(state, torch.tensor(a))
            bts = ref.step(a)
            assert_same_step(ts, bts, f"episode {episode}, step {t}")
            total, t = total + float(ts.reward), t + 1
        returns.append(total)
    assert t == 100 and sorted(set(returns)) == pytest.approx([1.0, 1.1])


@pytest.mark.parametrize("memory_length, num_bits", [(5, 1), (3, 4)])
def test_memory_chain_follows_bsuite_over_200_episodes(memory_length, num_bits):
    ref = bs_memory.MemoryChain(memory_length=memory_length, num_bits=num_bits, seed=0)
    env = MemoryChain(num_bits)
    params = env.default_params.replace(memory_length=memory_length)
    actions = np.random.default_rng(num_bits).integers(0, 2, 200 * (memory_length + 1))
    i, rewards = 0, []
    for episode in range(200):
        bts = ref.reset()
        state, ts = env.reset(random.key(episode), params)
        ref._context, ref._query = state.context.numpy().copy(), int(state.query)  # its draws
        assert_same_step(ts, bts._replace(observation=ref._get_observation()), "reset")
        while not bts.last():
            a = int(actions[i])
            i += 1
            state, ts = env.step(state, torch.tensor(a))
            bts = ref.step(a)
            assert_same_step(ts, bts, f"episode {episode}, action {a}")
        rewards.append(float(ts.reward))
    assert int(state.t) == memory_length + 1 and sorted(set(rewards)) == [-1.0, 1.0]


@pytest.mark.parametrize("chain_length, n_distractor", [(10, 0), (4, 3)])
def test_umbrella_chain_follows_bsuite_given_the_same_draws(chain_length, n_distractor):
    ref = bs_umbrella.UmbrellaChain(chain_length=chain_length, n_distractor=n_distractor)
    env = UmbrellaChain(n_distractor)
    params = env.default_params.replace(chain_length=chain_length)
    actions = np.random.default_rng(chain_length).integers(0, 2, 80 * chain_length)
    i, finals = 0, []
    for episode in range(80):
        bts = ref.reset()
        state, ts = env.reset(random.key(episode), params)
        ref._need_umbrella, ref._has_umbrella = int(state.need_umbrella), int(state.has_umbrella)
        ref._rng = Draws(binomial_size=state.distractor.numpy())  # the pure env's draws
        assert_same_step(ts, bts._replace(observation=ref._get_observation()), "reset")
        while not bts.last():
            _, k_reward, k_bits = random.split(state.key, 3)  # the pure env's draws
            bit = int(random.bernoulli(k_reward, 0.5))
            bits = random.bernoulli(k_bits, 0.5, (n_distractor,)).float().numpy()
            ref._rng = Draws(binomial=bit, binomial_size=bits)
            a = int(actions[i])
            i += 1
            state, ts = env.step(state, torch.tensor(a))
            bts = ref.step(a)
            assert_same_step(ts, bts, f"episode {episode}, action {a}")
        finals.append(float(ts.reward))
    assert sorted(set(finals)) == [-1.0, 1.0]


def test_umbrella_chain_noise_rewards_are_fair_coins():
    env = UmbrellaChain()
    state, _ = torch.func.vmap(env.reset)(random.split(random.key(0), 4000))
    _, ts = torch.func.vmap(env.step)(state, torch.zeros(4000, dtype=torch.long))
    assert set(ts.reward.tolist()) == {-1.0, 1.0}
    assert abs(float(ts.reward.double().mean())) < 5 / 4000**0.5
    assert abs(float(state.need_umbrella.double().mean()) - 0.5) < 5 * 0.5 / 4000**0.5


# ------------------------------------------------------------------------------ all tasks


# The pure env contract of make(id) for each task: tests/envs/test_check_env.py's
# test_check_env_passes_on_every_built_in_env (random_reset=False and 3000 auto-reset steps
# as here before, and 15 examples instead of 10).


# Each task compiles its own program: one program for all of them compiles longer than
# the five separately (inductor's time grows faster than the graph).
@pytest.mark.parametrize("id", IDS)
def test_compiled_batched_steps_and_renders_equal_the_eager_ones_with_one_program(id):
    env = envs.batch(envs.make(id), 8)

    def step(state, key):  # a step and the frames of its states, in one program
        new, ts = env.step(state, random.randint(key, env.batch_shape, 0, env.action_spec.n))
        return new, ts, env.render(new)

    compiled = fxrl_compile(step)
    state = eager = env.reset(random.key(0))[0]
    for t in range(12):
        key = random.key(100 + t)
        state, ts, frames = compiled(state, key)
        eager, eager_ts, eager_frames = step(eager, key)
        assert_trees_close((state, ts, frames), (eager, eager_ts, eager_frames), rtol=0, atol=0)
    assert len(compiled._programs) == 1


@pytest.mark.parametrize("id", IDS)
def test_render_is_a_uint8_image_and_vmaps(id):
    env = envs.make(id, auto_reset=False, episode_stats=False).unwrapped()
    states, _ = torch.func.vmap(env.reset)(random.split(random.key(0), 3))
    frames = torch.func.vmap(env.render)(states)
    one = env.render(tree.index(states, 1))
    assert one.dtype == torch.uint8 and one.ndim == 3 and one.shape[-1] == 3
    assert torch.equal(frames[1], one)
    assert len(torch.unique(one.reshape(-1, 3), dim=0)) >= 2  # something is drawn
