"""Every registered MinAtar game: the env contract, vmap, one compiled program for all games,
render, params through make, and random-policy statistics against the package.

Each game's step-for-step parity with the package is in its own file
(tests/envs/test_minatar_<game>.py).
"""

import numpy as np
import pytest
import torch
from minatar_reference import (
    GAMES,
    assert_same_distribution,
    bare,
    package_env,
    package_episodes,
)

import fxrl
from fxrl import envs, random, specs, tree
from fxrl.envs import minatar, params_as_tensors
from fxrl.testing import assert_trees_close, check_env

IDS = sorted(minatar.registered())
# games whose reset draws enough randomness that two keys should differ (Breakout's one
# bit often agrees; Asterix, Space Invaders and Seaquest start the same every time)
RANDOM_RESET = {"Freeway-MinAtar"}
# random-policy episodes compared per game: fxrl's, the package's (Freeway's last 2501 steps)
EPISODES = {"Breakout-MinAtar": (1000, 1000), "Asterix-MinAtar": (1000, 1000)}
EPISODES["Freeway-MinAtar"] = (128, 100)
DEFAULT_EPISODES = (500, 500)


def test_every_game_is_registered_with_its_time_limit():
    assert set(GAMES) >= set(IDS) and {"Breakout-MinAtar", "Freeway-MinAtar"} <= set(IDS)
    assert set(IDS) <= set(envs.registered())
    assert repr(envs.make("Breakout-MinAtar")).startswith("episode_stats(auto_reset(time_limit(")
    assert repr(envs.make("Freeway-MinAtar")) == "episode_stats(auto_reset(Freeway()))"


@pytest.mark.parametrize("id", IDS)
def test_make_gives_an_env_that_keeps_the_pure_env_contract(id):
    # a 64-step limit so that Freeway's 2501-step games end by truncation too
    check_env(
        envs.make(id, max_steps=64),
        max_examples=10,
        random_reset=id in RANDOM_RESET,
        auto_reset_steps=200,
    )


@pytest.mark.parametrize("id", IDS)
def test_the_bare_game_keeps_the_contract_and_stays_put_once_over(id):
    env = bare(id)
    check_env(env, max_examples=10, random_reset=id in RANDOM_RESET)
    state, _ = env.reset(random.key(0))
    over = state.replace(terminal=torch.tensor(True))
    _, ts = env.step(over, torch.tensor(1))
    assert float(ts.reward) == 0 and bool(ts.terminated)
    assert torch.equal(ts.obs, env.observe(over))


@pytest.mark.parametrize("id", IDS)
def test_reset_and_step_give_every_leaf_its_own_tensor(id):
    # fxrl.compile traces one fake tensor per distinct input tensor: a state holding one
    # tensor twice would compile a program that reads one input for both
    env = bare(id)
    state, _ = env.reset(random.key(0))
    batched, _ = envs.batch(env, 3).reset(random.key(0))
    for s in (state, env.step(state, torch.tensor(0))[0], batched):
        leaves = tree.leaves(s)
        assert len({x.data_ptr() for x in leaves}) == len(leaves)


@pytest.mark.parametrize("id", IDS)
def test_spaces_are_the_packages(id):
    env = bare(id)
    game = package_env(id, seed=0)
    assert env.observation_spec.shape == tuple(game.state_shape())
    assert env.observation_spec.dtype == torch.float32
    assert isinstance(env.action_spec, specs.Discrete)
    assert env.action_spec.n == game.num_actions() == 6
    small = bare(id, minimal_action_set=True)
    assert small.action_spec.n == len(game.minimal_action_set())
    assert env.minimal_actions == tuple(game.minimal_action_set())


@pytest.mark.parametrize("id", IDS)
def test_a_minimal_set_action_is_the_full_action_it_names(id):
    full = bare(id, sticky_action_prob=0.0)
    small = bare(id, sticky_action_prob=0.0, minimal_action_set=True)
    state, _ = torch.func.vmap(full.reset)(random.split(random.key(1), 16))
    small_params = params_as_tensors(small.default_params, torch.float32)
    names = torch.tensor(package_env(id, seed=0).minimal_action_set())
    for t in range(20):
        index = random.randint(random.key(t), (16,), 0, len(names))
        one = small.step(state.replace(params=small_params), index)
        two = full.step(state, names[index])
        assert_trees_close(one[1], two[1], rtol=0, atol=0)
        state = two[0]


def test_params_are_overridable_through_make_and_checked():
    env = envs.make("Asterix-MinAtar", sticky_action_prob=0.25, difficulty_ramping=False)
    state, _ = env.reset(random.key(0))
    assert float(state.params.sticky_action_prob) == 0.25
    assert not bool(state.params.difficulty_ramping)
    with pytest.raises(TypeError, match="sticky_action_prob"):
        envs.make("Asterix-MinAtar", sticky_action_probability=0.0)


@pytest.mark.parametrize("id", IDS)
def test_sticky_actions_repeat_the_previous_action_one_time_in_ten(id):
    env = bare(id)
    state, _ = torch.func.vmap(env.reset)(random.split(random.key(2), 2000))
    state = state.replace(last_action=torch.full((2000,), 4))
    moved, _ = env.step(state, torch.full((2000,), 3))
    kept = float((moved.last_action == 4).double().mean())
    assert set(moved.last_action.tolist()) == {3, 4}
    assert abs(kept - 0.1) < 4 * (0.1 * 0.9 / 2000) ** 0.5


@pytest.mark.parametrize("id", IDS)
def test_the_elementwise_batch_step_equals_vmap_and_a_loop(id):
    env = envs.make(id, max_steps=20)
    state, _ = torch.func.vmap(env.reset)(random.split(random.key(3), 5))
    for t in range(30):
        action = random.randint(random.key(t), (5,), 0, 6)
        direct = env.step(state, action)  # MinAtar games are elementwise: no vmap needed
        vmapped = torch.func.vmap(env.step)(state, action)
        looped = tree.stack([env.step(tree.index(state, i), action[i]) for i in range(5)])
        assert_trees_close(direct, vmapped, rtol=0, atol=0)
        assert_trees_close(direct, looped, rtol=0, atol=0)
        state = direct[0]


def test_from_minatar_names_what_it_expected():
    with pytest.raises(ValueError, match=r"minatar\.Environment"):
        minatar.from_minatar(object(), random.key(0))


# ---------------------------------------------------------------- compiled programs


# a time limit no random-policy game reaches (the longest, Freeway's, is 2500 steps)
NO_LIMIT = 10**6


class Program:
    """One game's envs as ``make`` builds them (auto-reset, time limit, episode stats),
    batched and stepped by one fxrl.compile program, as many as the random-policy
    statistics take. The time limit is lifted past any random-policy game, so each env's
    first episode is a whole game, as the package plays it. Actions come from a seeded
    numpy generator (test code)."""

    def __init__(self, id):
        self.batch = envs.batch(
            envs.make(id, max_steps=NO_LIMIT), EPISODES.get(id, DEFAULT_EPISODES)[0]
        )
        self.compiled = fxrl.compile(self.batch.step)
        self.start = self.batch.reset(random.key(7))[0]

    def actions(self, rng):
        return torch.from_numpy(rng.integers(0, 6, self.batch.batch_shape))


@pytest.fixture(scope="module")
def programs():
    """Compiled once per game for the module, on first use."""
    cache = {}

    def get(id):
        if id not in cache:
            cache[id] = Program(id)
        return cache[id]

    return get


@pytest.mark.parametrize("id", IDS)
def test_the_compiled_step_equals_the_eager_step(id, programs):
    program = programs(id)
    states = eager = program.start
    rng = np.random.default_rng(0)
    for _ in range(8):
        actions = program.actions(rng)
        states, out = program.compiled(states, actions)
        eager, eager_out = program.batch.step(eager, actions)
        assert_trees_close((states, out), (eager, eager_out), rtol=0, atol=0)


@pytest.mark.parametrize("id", IDS)
def test_random_policy_returns_and_lengths_match_the_package(id, programs):
    # each env's first episode under a uniformly random policy (default params: sticky
    # actions 0.1), played by the compiled program until every env has finished one: its
    # return and length as episode_stats reports them where it ends
    program = programs(id)
    states, n = program.start, program.batch.num_envs
    total = torch.zeros(n, dtype=torch.float64)
    length = torch.zeros(n, dtype=torch.int64)
    done = torch.zeros(n, dtype=torch.bool)
    rng = np.random.default_rng(1)
    while not bool(done.all()):
        states, ts = program.compiled(states, program.actions(rng))
        assert not bool(ts.truncated.any())  # no game reaches the lifted limit
        first = ts.terminated & ~done
        total = torch.where(first, ts.info["episode_return"].double(), total)
        length = torch.where(first, ts.info["episode_length"].long(), length)
        done = done | ts.terminated
    theirs = package_episodes(id, EPISODES.get(id, DEFAULT_EPISODES)[1], seed=0)
    assert_same_distribution(f"{id} return", total.numpy(), theirs[0])
    assert_same_distribution(f"{id} length", length.numpy(), theirs[1])


# ---------------------------------------------------------------- render
# (export of make(id)'s step and render, to torch.export and ONNX Runtime, for every game:
# tests/envs/test_env_export.py)


@pytest.fixture(scope="module")
def played():
    """Four envs of every game after 12 random steps."""
    out = {}
    for id in IDS:
        env = envs.batch(bare(id), 4)
        state, _ = env.reset(random.key(5))
        for t in range(12):
            state, _ = env.step(state, random.randint(random.key(t), (4,), 0, 6))
        out[id] = state
    return out


def test_the_compiled_vmapped_render_equals_the_eager_render(played):
    renders = {id: torch.func.vmap(bare(id).render) for id in IDS}
    frames = fxrl.compile(lambda states: {id: renders[id](s) for id, s in states.items()})(played)
    for id in IDS:
        eager = torch.stack([bare(id).render(tree.index(played[id], i)) for i in range(4)])
        assert torch.equal(bare(id).render(played[id]), eager)  # elementwise over the batch
        assert torch.equal(frames[id], eager)


@pytest.mark.parametrize("id", IDS)
def test_render_is_the_packages_colored_grid(id):
    game = package_env(id, seed=3, sticky_action_prob=0.0)
    rng = np.random.RandomState(0)
    env, seen = bare(id), set()
    for _ in range(40):
        if game.act(int(rng.randint(6)))[1]:
            game.reset()
        frame = env.render(minatar.from_minatar(game, random.key(0)))
        assert frame.shape == (160, 160, 3) and frame.dtype == torch.uint8
        # gymnasium's rgb_array of minatar.gym: the palette display_state uses
        state = game.state()
        index = np.amax(state * np.arange(1, state.shape[-1] + 1), axis=2)
        colors = np.round(255 * np.array([(0.0, 0.0, 0.0), *_seaborn(state.shape[-1])]))
        centers = frame[8::16, 8::16].numpy().astype(int)
        assert np.abs(centers - colors[index]).max() <= 2  # matplotlib's 256-entry table
        cell = frame[16:32, 32:48].reshape(-1, 3)  # every pixel of a cell is one color
        assert (cell == cell[0]).all()
        seen |= set(index.flatten().tolist())
    assert len(seen) >= 3


def _seaborn(n):
    import seaborn

    return seaborn.color_palette("cubehelix", n)
