"""Seaquest-MinAtar against the ``minatar`` package (1.0.15).

The strongest check feeds the package's own spawn draws to this env's game step, so every
step of long trajectories is compared, spawns included: observation, reward, terminal and
each object list (order included) as the package holds it. The env's own ``step`` (its
draws from the key) is checked between spawns; the slot capacities at the hardest level;
the spawn odds; params and render.

tests/envs/test_minatar.py checks the rest for every MinAtar game, this one included: the
random policy's return and length distributions against the package's (default sticky
actions), the env contract, one fxrl.compile program against the eager step, export of
step and render."""

import types

import numpy as np
import pytest
import torch
from minatar_reference import (
    stepped_in_parity,
)

from fxrl import envs, random, tree
from fxrl.envs.minatar import Seaquest, from_minatar, palette
from fxrl.envs.minatar.seaquest import CAPACITY, _dynamics

minatar = pytest.importorskip("minatar")

ID = "Seaquest-MinAtar"
SCALARS = (
    "oxygen",
    "diver_count",
    "sub_x",
    "sub_y",
    "e_spawn_speed",
    "e_spawn_timer",
    "d_spawn_timer",
    "move_speed",
    "ramp_index",
    "shot_timer",
)
WIDTH = {"f_bullets": 3, "e_bullets": 3, "e_fish": 4, "e_subs": 5, "divers": 4}


class Recorder:
    """The game's RandomState, remembering what it drew."""

    def __init__(self, seed: int) -> None:
        self.state = np.random.RandomState(seed)
        self.drawn: list[float] = []

    def rand(self) -> float:
        self.drawn.append(self.state.rand())
        return self.drawn[-1]

    def randint(self, low: int, high: int) -> int:
        self.drawn.append(int(self.state.randint(low=low, high=high)))
        return self.drawn[-1]


def _words_for(drawn: list, enemy: bool, diver: bool) -> list[torch.Tensor]:
    """The spawn word that makes the game step draw what the package drew (the bit
    layout of ``seaquest._spawn_draws``): enemy side, kind and row, diver side and row."""
    drawn = list(drawn)
    lr, kind, y = drawn[:3] if enemy else (0.9, 0.9, 1)
    drawn = drawn[3:] if enemy else drawn
    d_lr, d_y = drawn[:2] if diver else (0.9, 1)
    assert not 1 / 3 <= kind < 1 / 3 + 1e-7  # where the 24-bit threshold could disagree
    field = min(int(kind * 2**24), 2**24 - 1)
    v = int(lr < 0.5) | (y - 1) << 1 | int(d_lr < 0.5) << 4 | (d_y - 1) << 5 | field << 8
    return [torch.tensor(v - 2**32 if v >= 2**31 else v, dtype=torch.int32)]


def _lists(state) -> dict[str, list[tuple]]:
    """The state's slot lists as the package's lists (alive slots by stamp)."""
    out = {}
    for name in CAPACITY:
        s = getattr(state, name)
        rows = []
        for i in sorted(torch.nonzero(s.alive).flatten().tolist(), key=lambda i: int(s.order[i])):
            fields = (s.x[i], s.y[i], s.right[i], s.move[i], s.shot[i])
            rows.append(tuple(int(f) for f in fields[: WIDTH[name]]))
        out[name] = rows
    return out


def _package_lists(game) -> dict[str, list[tuple]]:
    return {
        name: [tuple(int(v) for v in it) for it in getattr(game.env, name)] for name in CAPACITY
    }


def _same_game(state, game, where: str) -> None:
    g = game.env
    for f in SCALARS:
        assert int(getattr(state, f)) == int(getattr(g, f)), f"{where}: {f}"
    assert bool(state.sub_right) == bool(g.sub_or) and bool(state.surface) == bool(g.surface)
    assert bool(state.terminal) == bool(g.terminal), where
    assert _lists(state) == _package_lists(game), where


def _policy(game, rng: np.random.Generator, stay_up: bool) -> int:
    """Random play, nudged to pick up divers and surface with them (so that surfacing,
    the oxygen bonus and the ramp happen); ``stay_up``: keep to the surface row, where
    nothing can hit the player, so that enemies pile up."""
    g = game.env
    if stay_up:
        return int(rng.choice([0, 1, 3, 5]))
    if rng.random() < 0.4:
        return int(rng.integers(6))
    if g.diver_count >= 6 or (g.diver_count > 0 and g.oxygen < 60):
        return 2  # up
    if g.divers:
        x, y = g.divers[0][0], g.divers[0][1]
        if y != g.sub_y:
            return 4 if y > g.sub_y else 2
        return 3 if x > g.sub_x else 1
    return int(rng.choice([1, 3, 4, 5]))


def _start(seed: int, hard: bool, rng: np.random.Generator):
    game = minatar.Environment("seaquest", sticky_action_prob=0.0)
    game.env.random = Recorder(seed)
    game.reset()
    if hard:  # late-game difficulty, a few divers on board
        game.env.e_spawn_speed = game.env.e_spawn_timer = int(rng.integers(1, 6))
        game.env.move_speed = int(rng.integers(2, 4))
        game.env.ramp_index = int(rng.integers(5, 20))
        game.env.diver_count = int(rng.integers(0, 7))
    return game


@pytest.mark.parametrize(
    "hard, stay_up, steps", [(False, False, 2500), (True, False, 1500), (True, True, 1500)]
)
def test_long_trajectories_match_the_package_given_its_draws(hard, stay_up, steps):
    env = Seaquest()
    rng = np.random.default_rng(int(hard) + 2 * int(stay_up))
    seen = dict.fromkeys(["spawns", "hits", "pickups", "surfacings", "ramps", "bonus"], 0)
    most = dict.fromkeys(CAPACITY, 0)
    done = episodes = 0
    while done < steps:
        game = _start(episodes, hard, rng)
        state = from_minatar(game, random.key(episodes))
        _same_game(state, game, "from_minatar")
        while True:
            g = game.env
            enemy, diver = g.e_spawn_timer == 0, g.d_spawn_timer == 0
            before = (g.diver_count, g.ramp_index)
            g.random.drawn = []
            action = _policy(game, rng, stay_up and done % 300 < 250)
            reward, terminal = g.act(action)
            state, r = _dynamics(
                state, torch.tensor(action), _words_for(g.random.drawn, enemy, diver)
            )
            done += 1
            where = f"episode {episodes} step {done} action {action}"
            obs = env.observe(state)
            assert torch.equal(obs, torch.from_numpy(game.state()).float()), where
            assert (int(r), bool(state.terminal)) == (reward, terminal), where
            _same_game(state, game, where)
            seen["spawns"] += int(enemy) + int(diver)
            seen["pickups"] += int(g.diver_count > before[0] and g.sub_y > 0)
            seen["surfacings"] += int(g.diver_count < before[0])
            seen["ramps"] += g.ramp_index - before[1]
            seen["bonus"] += int(reward > 1)
            seen["hits"] += reward if reward <= 1 else 0
            for name in CAPACITY:
                most[name] = max(most[name], len(getattr(g, name)))
            if terminal:
                break
        episodes += 1
    assert seen["spawns"] > 100 and (stay_up or seen["hits"] > 10), seen
    if not hard:
        assert seen["pickups"] > 10 and seen["surfacings"] > 3 and seen["ramps"] > 3, seen
    if stay_up:
        assert most["e_fish"] + most["e_subs"] > 15, most  # crowded: the slots get used
    assert all(most[name] <= CAPACITY[name] for name in CAPACITY), most


def _scene(**fields):
    """A package game set up by hand (sticky actions off), and its fxrl state."""
    game = minatar.Environment("seaquest", sticky_action_prob=0.0)
    game.reset()
    for name, value in fields.items():
        setattr(game.env, name, value)
    return game, from_minatar(game, random.key(0))


def test_surfacing_with_six_divers_pays_the_oxygen_bonus_and_leaves_minus_one_diver():
    game, state = _scene(diver_count=6, sub_y=1, surface=False, oxygen=150)
    reward, terminal = game.act(2)  # up
    state, ts = Seaquest().step(state, torch.tensor(2))
    assert (reward, terminal) == (150 * 10 // 200, False) == (float(ts.reward), False)
    assert game.env.diver_count == int(state.diver_count) == -1  # the package's quirk
    assert game.env.oxygen == int(state.oxygen) == 200 and int(state.ramp_index) == 1
    assert torch.equal(ts.obs, torch.from_numpy(game.state()).float())


def test_a_submarine_shot_while_its_shot_is_due_still_fires():
    # the submarine moves onto the bullet (+1, removed), then fires from where it died
    game, state = _scene(e_subs=[[3, 5, True, 0, 0]], f_bullets=[[5, 5, False]], sub_y=8)
    reward, terminal = game.act(0)
    state, ts = Seaquest().step(state, torch.tensor(0))
    assert (reward, terminal) == (1, False) == (float(ts.reward), bool(ts.terminated))
    assert game.env.e_subs == [] and not bool(state.e_subs.alive.any())
    assert [list(b) for b in game.env.e_bullets] == [[5, 5, True]]
    assert ts.obs[5, 5, 4] == 1  # enemy_bullet channel
    assert torch.equal(ts.obs, torch.from_numpy(game.state()).float())


def test_slot_capacities_hold_at_the_hardest_level():
    """The documented capacity claim: at the hardest level (an enemy every step, moving
    every 3 steps), a player that stays on the surface, where nothing hits it, lets the
    lists grow as large as they get. 20,000 package steps stay within the slots."""
    game = minatar.Environment("seaquest", sticky_action_prob=0.0)
    game.seed(0)
    game.reset()
    game.env.e_spawn_speed, game.env.move_speed, game.env.e_spawn_timer = 1, 2, 0
    most = dict.fromkeys(CAPACITY, 0)
    for _ in range(20_000):
        assert game.act(0) == (0, False)
        for name in CAPACITY:
            most[name] = max(most[name], len(getattr(game.env, name)))
    assert all(most[name] <= CAPACITY[name] for name in CAPACITY), most
    assert most["e_fish"] >= 15 and most["e_subs"] >= 8, most  # the crowded case was reached


def test_from_minatar_refuses_a_list_longer_than_its_slots():
    game = minatar.Environment("seaquest")
    game.env.e_fish = [[0, 1, True, 5]] * (CAPACITY["e_fish"] + 1)
    with pytest.raises(ValueError, match="e_fish list holds 31 objects"):
        from_minatar(game, random.key(0))


def test_a_spawn_into_full_slots_is_dropped_and_the_rest_of_the_step_goes_on():
    """The documented overflow behavior (never reached in a game): 30 fish, a fish due to
    spawn; the package's list grows to 31, fxrl keeps its 30 and steps the rest alike."""
    fish = [[x, 1 + (i % 8), True, 3, 0] for i, x in enumerate([0] * 8 + [1] * 8 + [2] * 14)]
    game, state = _scene(e_fish=[f[:4] for f in fish], e_spawn_timer=0)
    draws = iter([0.1, 0.9, 4])  # from the left, a fish, row 4
    game.env.random = types.SimpleNamespace(
        rand=lambda: next(draws), randint=lambda low, high: next(draws)
    )
    reward, terminal = game.act(0)
    state, r = _dynamics(state, torch.tensor(0), _words_for([0.1, 0.9, 4], True, False))
    assert len(game.env.e_fish) == 31 and int(state.e_fish.alive.sum()) == 30
    assert (int(r), bool(state.terminal)) == (reward, terminal)
    kept = _package_lists(game)["e_fish"][:30]  # all but the new fish
    assert _lists(state)["e_fish"] == kept


def test_env_step_matches_the_package_wherever_the_package_draws_nothing():
    """The env's own step (spawns drawn from its key), rebuilt from the package after
    each step that drew: 8 envs x 400 steps."""
    counts = stepped_in_parity(ID, num_envs=8, steps=400, seed=5)
    assert counts["compared"] > 2000 and counts["rewards"] > 0 and counts["terminals"] > 20


# The pure env contract of make(ID): tests/envs/test_check_env.py's
# test_check_env_passes_on_every_built_in_env (random_reset=False and 2000 auto-reset steps
# as here before, and 15 examples instead of 10).


def test_make_passes_the_packages_params_and_the_games_constants():
    kw = {"max_steps": None, "auto_reset": False, "episode_stats": False}
    env = envs.make(ID, sticky_action_prob=0.0, difficulty_ramping=False, max_oxygen=50, **kw)
    state, ts = env.reset(random.key(0))
    assert float(state.params.sticky_action_prob) == 0.0
    assert not bool(state.params.difficulty_ramping)
    assert int(state.params.max_oxygen) == 50 and int(state.oxygen) == 50
    assert int(ts.obs[9, :, 7].sum()) == 10  # the oxygen bar is full at 50 of 50
    assert Seaquest().default_params.sticky_action_prob == 0.1


def test_spawns_follow_the_packages_probabilities():
    """Side 1/2, submarine 1/3, rows 1-8 uniform: the first spawn of 4000 envs."""
    env = Seaquest()
    n = 4000
    state, _ = torch.func.vmap(env.reset)(random.split(random.key(11), n))
    state = state.replace(e_spawn_timer=torch.zeros(n, dtype=torch.long))
    state, _ = torch.func.vmap(env.step)(state, torch.zeros(n, dtype=torch.long))
    fish, subs = state.e_fish, state.e_subs
    assert bool((fish.alive.sum(-1) + subs.alive.sum(-1) == 1).all())
    is_sub = subs.alive.any(-1).double()
    assert abs(is_sub.mean() - 1 / 3) < 4 * (2 / 9 / n) ** 0.5
    right = torch.where(is_sub.bool(), subs.right[:, 0], fish.right[:, 0]).double()
    assert abs(right.mean() - 0.5) < 4 * (0.25 / n) ** 0.5
    row = torch.where(is_sub.bool(), subs.y[:, 0], fish.y[:, 0])
    counts = torch.bincount(row, minlength=10)
    assert counts[0] == 0 and counts[9] == 0
    assert float(((counts[1:9] - n / 8) ** 2 / (n / 8)).sum()) < 24.3  # chi2(7), p = 1e-3


def test_render_paints_each_cell_in_the_packages_color_of_its_top_channel():
    env = Seaquest()
    game = minatar.Environment("seaquest", sticky_action_prob=0.0)
    game.seed(2)
    game.reset()
    for a in [4, 4, 5, 3, 5, 4, 1, 5] * 6:
        game.act(a)
    states = tree.stack([env.reset(random.key(0))[0], from_minatar(game, random.key(1))])
    frames = torch.func.vmap(env.render)(states)
    assert frames.shape == (2, 160, 160, 3) and frames.dtype == torch.uint8
    colors = torch.tensor(palette(10), dtype=torch.uint8)
    top = np.amax(game.state() * np.arange(1, 11), axis=2)  # display_state's channel index
    assert torch.equal(frames[1, 8::16, 8::16], colors[torch.from_numpy(top)])
    assert torch.equal(frames[0], env.render(tree.index(states, 0)))
