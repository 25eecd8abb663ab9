"""Freeway-MinAtar against the minatar package's freeway.py."""

import numpy as np
import torch
from minatar_reference import bare, package_env, stepped_in_parity
from scipy import stats

from fxrl import random
from fxrl.envs.minatar import from_minatar
from fxrl.envs.minatar.freeway import _speeds

ID = "Freeway-MinAtar"
UP, DOWN = 2, 4


def test_random_trajectories_match_the_package_step_for_step():
    # uniform actions: the chicken rarely scores, so no step draws and every step is compared
    counts = stepped_in_parity(ID, num_envs=8, steps=600, seed=0)
    assert counts["compared"] == 8 * 600 and counts["resynced"] == 0


def test_trajectories_that_score_match_the_package_around_each_new_draw():
    # mostly UP: the chicken crosses often; a crossing draws new speeds (then resync), but
    # the chicken, the cars, the reward and the terminal never depend on that draw
    p = [0.1, 0.05, 0.6, 0.05, 0.15, 0.05]
    counts = stepped_in_parity(
        ID, num_envs=16, steps=500, seed=1, action_p=p, drawn_channels=(0, 1), drawn_reward=True
    )
    assert counts["resynced"] >= 10 and counts["drawn_rewards"] == counts["resynced"]
    assert counts["compared"] == 16 * 500 - counts["resynced"]


def test_a_game_ends_after_2501_steps_as_the_package():
    game = package_env(ID, seed=2, sticky_action_prob=0.0)
    ours, _ = bare(ID).reset(random.key(2))
    assert int(ours.terminate_timer) == game.env.terminate_timer == 2500
    game.env.terminate_timer = 5  # the last 6 steps of a game
    state, env = from_minatar(game, random.key(2)), bare(ID)
    ended = []
    for _ in range(8):
        reward, terminal = game.act(0)
        state, ts = env.step(state, torch.tensor(0))
        assert (float(ts.reward), bool(ts.terminated)) == (reward, terminal)
        ended.append(terminal)
    assert ended == [False] * 5 + [True] * 3


def test_always_sticky_actions_repeat_the_last_action_as_the_package_does():
    counts = stepped_in_parity(ID, num_envs=4, steps=60, seed=3, sticky_action_prob=1.0)
    assert counts["compared"] == 4 * 60


def test_new_speeds_are_uniform_over_the_packages_ten_outcomes():
    # package: randint(1, 6) times sign(rand() - 0.5), per car, independently
    hi, lo = random.bits(random.key(0), (2, 4000)).to(torch.int32)
    speed = _speeds(hi, lo)
    counts = np.array(
        [
            [(speed[:, c] == v).sum().item() for v in (-5, -4, -3, -2, -1, 1, 2, 3, 4, 5)]
            for c in range(8)
        ]
    )
    assert counts.sum() == 8 * 4000
    assert stats.chisquare(counts.flatten()).pvalue > 1e-3
    pairs = np.histogram2d(speed[:, 0].numpy(), speed[:, 1].numpy(), bins=[np.arange(-5.5, 6)] * 2)
    table = pairs[0][pairs[0].sum(1) > 0][:, pairs[0].sum(0) > 0]
    assert stats.chi2_contingency(table).pvalue > 1e-3  # neighbouring cars independent


def test_scoring_puts_the_chicken_back_and_gives_new_speeds():
    game = package_env(ID, seed=4, sticky_action_prob=0.0)
    game.env.pos, game.env.move_timer = 1, 0
    for car in game.env.cars:
        car[0] = 0  # no car in column 4
    state = from_minatar(game, random.key(4))
    reward, terminal = game.act(UP)
    state, ts = bare(ID).step(state, torch.tensor(UP))
    assert (float(ts.reward), bool(ts.terminated)) == (reward, terminal) == (1, False)
    assert int(state.pos) == 9 and np.array_equal(ts.obs[..., :2].numpy(), game.state()[..., :2])
    speed = state.car_speed
    assert bool(((speed.abs() >= 1) & (speed.abs() <= 5)).all())
    assert torch.equal(state.car_timer, speed.abs() - 1)  # set, then counted down
