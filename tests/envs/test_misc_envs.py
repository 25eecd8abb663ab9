"""The misc (meta-RL) tasks against gymnax's published definitions: naive Python loops
written here from gymnax's ``environments/misc/*.py`` are fed the pure env's own random
draws and must give the same observations, rewards and flags over long random
trajectories; task distributions are checked in distribution; every id keeps the env
contract, compiles, exports, renders and trains one agent per sampled task."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fxrl import envs, random, tree
from fxrl.algorithms import ppo, tasks
from fxrl.compile import compile as fxrl_compile
from fxrl.envs.misc import BernoulliBandit, FourRooms, GaussianBandit, MetaMaze, PointRobot
from fxrl.testing import assert_trees_close

IDS = ["BernoulliBandit-misc", "GaussianBandit-misc", "FourRooms-misc", "MetaMaze-misc",
       "PointRobot-misc"]  # fmt: skip
MOVES = [(-1, 0), (0, 1), (1, 0), (0, -1)]  # gymnax's up, right, down, left

# gymnax's four_rooms_map, and its generate_maze_layout(9, 3) written out
ROOMS = [
    "xxxxxxxxxxxxx",
    "x     x     x",
    "x     x     x",
    "x           x",
    "x     x     x",
    "x     x     x",
    "xx xxxx     x",
    "x     xxx xxx",
    "x     x     x",
    "x     x     x",
    "x           x",
    "x     x     x",
    "xxxxxxxxxxxxx",
]
MAZE = ["x" * 11] + ["x" + " " * 9 + "x", "x x x x x x"] * 4 + ["x" + " " * 9 + "x", "x" * 11]


def open_coords(grid: list[str]) -> list[tuple[int, int]]:
    return [(r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == " "]


def u64(key: torch.Tensor) -> float:
    return float(random.uniform(key, (), dtype=torch.float64))


def rint(key: torch.Tensor, n: int) -> int:
    return int(random.randint(key, (), 0, n))


def time_rep(t: int, normalize: bool) -> float:
    return 2 * t / 100 - 1 if normalize else float(t)


# ------------------------------------------------------------------------------ bandits


def test_bernoulli_bandit_follows_gymnax_given_the_same_draws():
    env = BernoulliBandit()
    for episode in range(10):
        state, ts = env.reset(random.key(episode))
        _, k_task = random.split(random.key(episode))
        p = 0.1 if u64(k_task) < 0.5 else 0.9  # choice([reward_prob, 1 - reward_prob])
        assert float(state.prob_0) == pytest.approx(p)
        assert ts.obs.tolist() == [0.0, 1.0, 0.0, -1.0]
        actions = np.random.default_rng(episode).integers(0, 2, 100)
        for t, a in enumerate(actions, start=1):
            _, k_pull = random.split(state.key)
            reward = float(u64(k_pull) < (p if a == 0 else 1 - p))
            state, ts = env.step(state, torch.tensor(int(a)))
            expected = [reward, float(a == 0), float(a == 1), 2 * t / 100 - 1]
            assert ts.obs.tolist() == pytest.approx(expected, abs=1e-6)
            assert float(ts.reward) == reward and not bool(ts.terminated)


def test_bernoulli_bandit_tasks_and_rewards_have_gymnax_distributions():
    env = BernoulliBandit()
    keys = random.split(random.key(0), 4000)
    state, _ = torch.func.vmap(env.reset)(keys)
    assert sorted(set(state.prob_0.tolist())) == pytest.approx([0.1, 0.9])
    assert abs(float((state.prob_0 > 0.5).double().mean()) - 0.5) < 5 * (0.25 / 4000) ** 0.5
    state, ts = torch.func.vmap(env.step)(state, torch.zeros(4000, dtype=torch.long))
    rate = float(ts.reward.double().mean())
    assert abs(rate - float(state.prob_0.double().mean())) < 5 * (0.25 / 4000) ** 0.5


def test_gaussian_bandit_follows_gymnax_given_the_same_draws():
    env = GaussianBandit(dtype=torch.float64)
    state, ts = env.reset(random.key(3))
    _, k_task = random.split(random.key(3))
    mu = -1.0 + 1.0 * float(random.normal(k_task, (), torch.float64))
    assert float(state.mu) == pytest.approx(mu, abs=1e-12)
    for t, a in enumerate(np.random.default_rng(0).integers(0, 2, 100), start=1):
        _, k_pull = random.split(state.key)
        z = float(random.normal(k_pull, (), torch.float64))
        reward = 0.0 if a == 0 else mu + 0.1 * z
        state, ts = env.step(state, torch.tensor(int(a)))
        expected = [reward, float(a == 0), float(a == 1), 2 * t / 100 - 1]
        assert ts.obs.tolist() == pytest.approx(expected, abs=1e-12)
        assert float(ts.reward) == pytest.approx(reward, abs=1e-12)


def test_gaussian_bandit_means_are_normal_around_mean_mu():
    env = GaussianBandit()
    params = env.default_params.replace(mean_mu=0.5, sigma_p=2.0)
    mus = torch.func.vmap(env.sample_params, in_dims=(0, None))(
        random.split(random.key(1), 4000), params
    ).mu.double()
    assert abs(float(mus.mean()) - 0.5) < 5 * 2 / 4000**0.5
    assert abs(float(mus.std()) - 2.0) < 0.1


# ------------------------------------------------------------------------------ grids


@pytest.mark.parametrize("resample", [False, True])
def test_four_rooms_follows_gymnax_over_1500_random_steps(resample):
    env = FourRooms()
    params = env.default_params.replace(resample_init_pos=resample, resample_goal_pos=resample)
    coords = open_coords(ROOMS)
    rng = np.random.default_rng(int(resample))
    ts, episodes, slips, wins = None, 0, 0, 0
    for _ in range(1500):
        if ts is None or bool(ts.terminated):
            key = random.key(100 * episodes + int(resample))
            state, ts = env.reset(key, params)
            _, k_goal, k_pos = random.split(key, 3)
            goal = coords[rint(k_goal, len(coords))] if resample else (8, 9)
            j = rint(k_pos, len(coords) - 1)
            start = (coords[-1] if coords[j] == goal else coords[j]) if resample else (4, 1)
            pos, episodes = start, episodes + 1
            assert ts.obs.tolist() == [*start, *goal]
        chosen = a = int(rng.integers(0, 4))
        _, k_fail, k_action = random.split(state.key, 3)
        if u64(k_fail) < (1 / 3) * 4 / 3:  # gymnax: a uniform action instead
            a, slips = rint(k_action, 4), slips + 1
        r, c = pos[0] + MOVES[a][0], pos[1] + MOVES[a][1]
        pos = (r, c) if ROOMS[r][c] == " " else pos
        state, ts = env.step(state, torch.tensor(chosen))
        assert ts.obs.tolist() == [*pos, *goal]
        assert bool(ts.terminated) == (pos == goal) and float(ts.reward) == float(pos == goal)
        wins += pos == goal
    assert 350 < slips < 1000 and episodes > 1 and wins > 0


def test_meta_maze_layout_and_start_are_gymnax_s():
    env = MetaMaze()
    assert env.free.tolist() == [[ch == " " for ch in row] for row in MAZE]
    state, ts = env.reset(random.key(0))
    assert state.pos.tolist() == [5, 5]
    assert ts.obs[:9].tolist() == [1, 0, 1, 0, 0, 0, 1, 0, 1]  # walls around (5, 5)


def test_meta_maze_follows_gymnax_over_2000_random_steps():
    env = MetaMaze()
    params = env.default_params.replace(punishment=-0.5)
    coords = open_coords(MAZE)
    rng = np.random.default_rng(0)
    ts, episodes, goals, bumps, t = None, 0, 0, 0, 0
    for _ in range(2000):
        if ts is None or bool(ts.terminated | ts.truncated):
            state, ts = env.reset(random.key(episodes), params)
            _, k_goal = random.split(random.key(episodes))
            goal, pos, t, episodes = coords[rint(k_goal, len(coords))], (5, 5), 0, episodes + 1
        a = int(rng.integers(0, 4))
        _, k_pos = random.split(state.key)
        r, c = pos[0] + MOVES[a][0], pos[1] + MOVES[a][1]
        free = MAZE[r][c] == " "
        pos = (r, c) if free else pos
        reward = 10.0 * (pos == goal) - 0.5 * (not free)
        if pos == goal:  # gymnax: teleport to a uniform open cell
            pos, goals = coords[rint(k_pos, len(coords))], goals + 1
        bumps += not free
        t += 1
        state, ts = env.step(state, torch.tensor(a))
        view = [float(MAZE[pos[0] + i][pos[1] + j] == "x") for i in (-1, 0, 1) for j in (-1, 0, 1)]
        expected = view + [float(a == k) for k in range(4)] + [reward, float(t)]
        assert ts.obs.tolist() == pytest.approx(expected)
        assert float(ts.reward) == pytest.approx(reward)
        assert bool(ts.terminated) == (pos == goal)
        ts = ts.replace(truncated=torch.tensor(t >= 200))
    assert goals > 3 and bumps > 100


# ------------------------------------------------------------------------------ point robot


@pytest.mark.parametrize("dense", [False, True])
def test_point_robot_follows_gymnax_over_1200_random_steps(dense):
    env = PointRobot(dtype=torch.float64)
    params = env.default_params.replace(dense_reward=dense, goal_radius=0.3)
    rng = np.random.default_rng(int(dense))

    def start(key):
        k_radius, k_angle = random.split(key)
        radius, angle = u64(k_radius), math.pi * u64(k_angle)
        return np.array([radius * math.cos(angle), radius * math.sin(angle)])

    goals = 0
    for episode in range(12):
        key = random.key(episode)
        state, ts = env.reset(key, params)
        _, k_goal, k_pos = random.split(key, 3)
        angle = math.pi * u64(k_goal)
        goal, pos = np.array([math.cos(angle), math.sin(angle)]), start(k_pos)
        assert ts.obs.numpy() == pytest.approx([*pos, 0, 0, 0, -1], abs=1e-12)
        for t in range(1, 101):
            # drift towards the goal so that it is reached now and then
            a = 0.15 * (goal - pos) / np.linalg.norm(goal - pos) + rng.normal(0, 0.1, 2)
            _, k_pos = random.split(state.key)
            distance = np.linalg.norm(goal - pos)
            reward = -distance if dense else float(distance <= 0.3)
            pos = start(k_pos) if distance <= 0.3 else pos + np.clip(a, -0.1, 0.1)
            goals += distance <= 0.3
            state, ts = env.step(state, torch.from_numpy(a))
            expected = [*pos, reward, *a, 2 * t / 100 - 1]
            assert ts.obs.numpy() == pytest.approx(expected, abs=1e-12)
            assert float(ts.reward) == pytest.approx(reward, abs=1e-12)
    assert goals > 12


def test_point_robot_goals_lie_on_the_upper_half_circle():
    env = PointRobot()
    params = env.default_params.replace(circle_radius=2.0)
    state, _ = torch.func.vmap(env.reset, in_dims=(0, None))(
        random.split(random.key(0), 2000), params
    )
    assert torch.allclose(state.goal.norm(dim=-1), torch.tensor(2.0))
    assert (state.goal[:, 1] >= 0).all()
    angle = torch.atan2(state.goal[:, 1], state.goal[:, 0]).double()
    assert abs(float(angle.mean()) - math.pi / 2) < 5 * (math.pi / 12**0.5) / 2000**0.5
    assert (state.pos.norm(dim=-1) <= 2.0).all() and (state.pos[:, 1] >= 0).all()


# ------------------------------------------------------------------------------ tasks

# envs with a task distribution: the misc tasks and DeepSea (its action mapping)
TASK_IDS = [*IDS, "DeepSea-bsuite"]


@pytest.mark.parametrize("id", TASK_IDS)
def test_make_and_batch_forward_sample_params_so_vmap_over_tasks_is_one_line(id):
    env = envs.make(id, max_steps=5)
    keys = random.split(random.key(0), 4)
    task = torch.func.vmap(env.sample_params)(keys)  # through the wrappers make adds
    direct = torch.func.vmap(env.unwrapped().sample_params)(keys)
    assert_trees_close(task, direct, rtol=0, atol=0)
    assert any(not bool((f == f[0]).all()) for f in tree.leaves(task)), "all tasks alike"
    benv = envs.batch(env, 4)
    # the batch draws one task per env from the keys its reset would split
    assert_trees_close(benv.sample_params(random.key(0)), task, rtol=0, atol=0)
    state, _ = benv.reset(random.key(1), task)
    # a loop of single envs, each with its task and the key the batch gave it
    keys = random.split(random.key(1), 4)
    alone = [env.reset(k, tree.index(task, i))[0] for i, k in enumerate(keys)]
    for t in range(8):  # across auto-resets (5-step limit) each env keeps its task
        action = benv.action_spec.sample(random.key(t), (4,))
        state, ts = benv.step(state, action)
        stepped = [env.step(s, action[i]) for i, s in enumerate(alone)]
        alone = [s for s, _ in stepped]
        assert_trees_close(ts, tree.stack([x for _, x in stepped]), rtol=0, atol=0)
    assert_trees_close(state.params, direct, rtol=0, atol=0)
    assert_trees_close(state, tree.stack(alone), rtol=0, atol=0)


def test_sample_params_is_forwarded_only_where_the_env_has_one():
    assert not hasattr(envs.make("CartPole-v1"), "sample_params")
    assert not hasattr(envs.batch(envs.make("Catch-bsuite"), 2), "sample_params")
    assert hasattr(envs.checked(envs.batch(envs.make("MetaMaze-misc"), 2)), "sample_params")
    with pytest.raises(ValueError, match=r"sample_params: key has shape \[3, 2\]"):
        envs.batch(envs.make("MetaMaze-misc"), 3).sample_params(random.split(random.key(0), 3))


@pytest.mark.parametrize("id", IDS)
def test_sampled_tasks_hold_across_episodes(id):
    env = envs.make(id, max_steps=50)
    n = 6
    task = torch.func.vmap(env.sample_params)(random.split(random.key(0), n))
    benv = envs.batch(env, n)
    state, _ = benv.reset(random.key(1), task)
    assert tasks.num_tasks(task) == n
    first = tree.map(torch.clone, state.inner.inner)
    for t in range(60):
        action = benv.action_spec.sample(random.key(t), benv.batch_shape)
        state, _ = benv.step(state, action)
    inner = state.inner.inner
    assert int(state.inner.episode.min()) >= 1  # every env began a new episode
    for name in ("prob_0", "mu", "goal"):
        if hasattr(inner, name):
            assert torch.equal(getattr(inner, name), getattr(first, name)), name
    different = [f for f in tree.leaves(task) if not bool((f == f[0]).all())]
    assert different, "sample_params gave every task the same params"


def test_tasks_trains_one_ppo_agent_per_sampled_meta_maze():
    env = envs.make("MetaMaze-misc")
    env_params = torch.func.vmap(env.unwrapped().sample_params)(random.split(random.key(0), 3))
    algo = ppo.make(ppo.Config(env="MetaMaze-misc", num_envs=2, num_steps=8, num_minibatches=2,
                               update_epochs=1, total_steps=64))  # fmt: skip
    state = tasks.init_tasks(algo, random.key(1), env_params)
    goals = state.env_state.inner.inner.goal  # [task, env, 2]
    expected = torch.stack([env_params.goal_row, env_params.goal_col], -1)
    assert torch.equal(goals, expected[:, None].expand_as(goals))
    update = tasks.update_tasks(algo, 3, compile=False)
    before = state.params
    state, metrics = update(state)
    assert bool(torch.isfinite(metrics["loss"]).all()) and metrics["loss"].shape == (3,)
    assert not all(
        torch.equal(a, b)
        for a, b in zip(tree.leaves(before), tree.leaves(state.params), strict=True)
    )
    returns = tasks.evaluate_tasks(algo, state.params, env_params, episodes=2)
    assert returns.shape == (3, 2) and bool(torch.isfinite(returns).all())


# ------------------------------------------------------------------------------ all tasks


# The pure env contract of make(id) for each task: tests/envs/test_check_env.py's
# test_check_env_passes_on_every_built_in_env (the same check_env arguments, random_reset
# for PointRobot alone, and 15 examples instead of 10).


# Each task compiles its own program: one program for all of them compiles longer than
# the five separately (inductor's time grows faster than the graph).
@pytest.mark.parametrize("id", IDS)
def test_compiled_batched_steps_and_renders_equal_the_eager_ones_with_one_program(id):
    env = envs.batch(envs.make(id), 8)

    def step(state, key):  # a step and the frames of its states, in one program
        new, ts = env.step(state, env.action_spec.sample(key, env.batch_shape))
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
