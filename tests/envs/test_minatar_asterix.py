"""Asterix-MinAtar against the minatar package's asterix.py."""

import numpy as np
import pytest
import torch
from minatar_reference import bare, package_env, stepped_in_parity
from scipy import stats

from fxrl import random
from fxrl.envs.minatar import from_minatar

ID = "Asterix-MinAtar"
FIELDS = ("spawn_speed", "spawn_timer", "move_speed", "move_timer", "ramp_timer", "ramp_index")


@pytest.mark.parametrize("ramping", [True, False])
def test_random_trajectories_match_the_package_between_spawns(ramping):
    # a spawn draws (side, gold, lane): resync after it; the player never depends on it
    counts = stepped_in_parity(
        ID, num_envs=16, steps=300, seed=0, drawn_channels=(0,), difficulty_ramping=ramping
    )
    assert counts["compared"] >= 0.6 * 16 * 300, counts
    assert counts["rewards"] >= 20 and counts["terminals"] >= 20, counts


def test_always_sticky_actions_repeat_the_last_action_as_the_package_does():
    counts = stepped_in_parity(ID, num_envs=4, steps=60, seed=1, sticky_action_prob=1.0)
    assert counts["compared"] >= 4 * 60 * 0.7


def _timers(state):
    return {f: int(getattr(state, f)) for f in FIELDS}


@pytest.mark.parametrize("ramp_index", [0, 1, 6])
def test_the_difficulty_ramps_as_the_package_s(ramp_index):
    game = package_env(ID, seed=2, sticky_action_prob=0.0)
    e = game.env
    e.ramp_timer, e.ramp_index, e.spawn_timer = 1, ramp_index, 50  # no spawn in the way
    e.spawn_speed, e.move_speed = (10, 5) if ramp_index < 6 else (2, 2)
    state, env = from_minatar(game, random.key(2)), bare(ID)
    for _ in range(4):
        game.act(0)
        state, _ = env.step(state, torch.tensor(0))
        assert _timers(state) == {f: getattr(e, f) for f in FIELDS}
    assert e.ramp_index == ramp_index + 1  # it did ramp


def test_a_spawn_picks_side_gold_and_free_lane_with_the_package_s_odds():
    # lanes 1, 4 and 6 taken: the new object takes one of the 5 free lanes uniformly,
    # enters on the left (moving right) with probability 1/2, is gold with probability 1/3
    env, n = bare(ID, sticky_action_prob=0.0), 6000
    state, _ = torch.func.vmap(env.reset)(random.split(random.key(3), n))
    taken = torch.tensor([True, False, False, True, False, True, False, False])
    state = state.replace(
        ent_on=taken.expand(n, 8).clone(),
        ent_x=torch.full((n, 8), 5),
        spawn_timer=torch.zeros(n, dtype=torch.int64),
        move_timer=torch.full((n,), 3),
    )
    moved, _ = env.step(state, torch.zeros(n, dtype=torch.long))
    new = moved.ent_on & ~taken
    assert bool((new.sum(-1) == 1).all())
    lane = new.long().argmax(-1)
    assert stats.chisquare(np.bincount(lane.numpy(), minlength=8)[~taken.numpy()]).pvalue > 1e-3
    right, gold = moved.ent_right[new], moved.ent_gold[new]
    assert torch.equal(moved.ent_x[new], torch.where(right, 0, 9))
    assert stats.binomtest(int(right.sum()), n, 0.5).pvalue > 1e-3
    assert stats.binomtest(int(gold.sum()), n, 1 / 3).pvalue > 1e-3
    assert stats.chi2_contingency(np.histogram2d(right, gold, bins=2)[0]).pvalue > 1e-3


def test_nothing_enters_when_every_lane_is_taken():
    game = package_env(ID, seed=4, sticky_action_prob=0.0)
    game.env.entities = [[5, i + 1, True, False] for i in range(8)]
    game.env.player_x, game.env.spawn_timer = 0, 0
    state = from_minatar(game, random.key(4))
    game.act(0)
    moved, ts = bare(ID).step(state, torch.tensor(0))
    assert np.array_equal(ts.obs.numpy(), game.state())
    assert bool(moved.ent_on.all()) and int(moved.spawn_timer) == game.env.spawn_timer
