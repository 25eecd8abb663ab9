"""Breakout-MinAtar against the minatar package's breakout.py."""

import numpy as np
import torch
from minatar_reference import (
    assert_same_distribution,
    bare,
    fxrl_episodes,
    package_env,
    package_episodes,
    stepped_in_parity,
)

from fxrl import random
from fxrl.envs.minatar import from_minatar

ID = "Breakout-MinAtar"


def test_random_trajectories_match_the_package_step_for_step():
    # Breakout's steps draw nothing: only resets resync, every step is compared
    counts = stepped_in_parity(ID, num_envs=16, steps=400, seed=0)
    assert counts["compared"] == 16 * 400 and counts["resynced"] == 0
    assert counts["rewards"] > 100 and counts["terminals"] > 50, counts


def test_always_sticky_actions_repeat_the_last_action_as_the_package_does():
    counts = stepped_in_parity(ID, num_envs=8, steps=60, seed=1, sticky_action_prob=1.0)
    assert counts["compared"] == 8 * 60


def test_random_policy_returns_and_lengths_match_the_package():
    ours = fxrl_episodes(ID, 1000, seed=0)
    theirs = package_episodes(ID, 1000, seed=0)
    assert_same_distribution("return", ours[0], theirs[0])
    assert_same_distribution("length", ours[1], theirs[1])


def test_the_reset_starts_the_ball_on_either_side_as_the_package():
    env = bare(ID)
    state, _ = torch.func.vmap(env.reset)(random.split(random.key(0), 400))
    starts = {(int(x), int(d)) for x, d in zip(state.ball_x, state.ball_dir, strict=True)}
    assert starts == {(0, 2), (9, 3)}  # reset(): [(0, 2), (9, 3)][randint(2)]
    right = float((state.ball_x == 9).double().mean())
    assert abs(right - 0.5) < 4 * (0.25 / 400) ** 0.5


def test_a_cleared_wall_comes_back_when_the_ball_reaches_the_paddle_row():
    game = package_env(ID, seed=0, sticky_action_prob=0.0)
    game.env.brick_map[:] = 0  # the wall cleared, the ball on its way down
    state = from_minatar(game, random.key(0))
    env = bare(ID)
    refilled = False
    for _ in range(30):
        expected = game.act(0)
        state, ts = env.step(state, torch.tensor(0))
        assert (float(ts.reward), bool(ts.terminated)) == expected
        assert np.array_equal(ts.obs.numpy(), game.state())
        refilled = refilled or bool(ts.obs[1:4, :, 3].all())
        if expected[1]:
            break
    assert refilled and bool(state.bricks[1:4].all()) and not bool(state.bricks[4:].any())
