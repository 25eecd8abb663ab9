"""SpaceInvaders-MinAtar against the ``minatar`` package (1.0.15): step-by-step parity from
``from_minatar`` states over long random trajectories, wave clearing and the ramp, params,
sticky and minimal actions, render colors.

tests/envs/test_minatar.py checks the rest for every MinAtar game, this one included: the
random policy's return and length distributions against the package's (default sticky
actions), the env contract, one fxrl.compile program against the eager step, export of
step and render."""

import numpy as np
import pytest
import torch

from fxrl import envs, random, tree
from fxrl.envs.minatar import SpaceInvaders, from_minatar, palette

minatar = pytest.importorskip("minatar")

ID = "SpaceInvaders-MinAtar"
GAME_FIELDS = (
    "pos",
    "alien",
    "f_bullet",
    "e_bullet",
    "alien_dir",
    "enemy_move_interval",
    "alien_move_timer",
    "alien_shot_timer",
    "ramp_index",
    "shot_timer",
    "terminal",
)


def _package(seed: int, sticky: float = 0.0, ramping: bool = True):
    game = minatar.Environment(
        "space_invaders", sticky_action_prob=sticky, difficulty_ramping=ramping
    )
    game.seed(seed)
    game.reset()
    return game


def _thin_the_wave(game, rng: np.random.Generator) -> None:
    """Start from a smaller wave and a random move interval, so that waves are cleared,
    the last aliens speed up and the ramp runs within a short random episode."""
    keep = rng.random((10, 10)) < rng.uniform(0.05, 0.3)
    alien = game.env.alien_map * keep
    alien[2:] = 0  # the top rows only: the wave takes its time to come down
    if not alien.any():
        alien[3, 4] = 1
    game.env.alien_map = alien
    game.env.enemy_move_interval = int(rng.integers(6, 13))
    game.env.alien_move_timer = int(rng.integers(0, game.env.enemy_move_interval + 1))


def _aim(game) -> int:
    """Move under the nearest alien column and fire (so that waves get cleared)."""
    columns = np.flatnonzero(game.env.alien_map.any(0))
    target = columns[np.argmin(np.abs(columns - game.env.pos))]
    return 5 if target == game.env.pos else (1 if target < game.env.pos else 3)


def _same_game(state, game) -> None:
    built = from_minatar(game, state.key)
    for f in GAME_FIELDS:
        assert torch.equal(getattr(state, f), getattr(built, f)), f


@pytest.mark.parametrize("thin, ramping", [(False, True), (True, True), (True, False)])
def test_long_random_trajectories_match_the_package_step_for_step(thin, ramping):
    """The package's step draws no random number in Space Invaders (sticky actions off on
    both sides), so every step must agree: observation, reward, terminal, and the whole
    game state as read back by from_minatar. Episodes are chained to >= 2000 steps."""
    env = SpaceInvaders()
    rng = np.random.default_rng(int(thin) * 2 + int(ramping))
    steps = episodes = waves = 0
    while steps < 2000:
        game = _package(episodes, ramping=ramping)
        if thin:
            _thin_the_wave(game, rng)
        state = from_minatar(game, random.key(episodes))
        assert torch.equal(env.observe(state), torch.from_numpy(game.state()).float())
        while True:
            action = _aim(game) if thin and rng.random() < 0.8 else int(rng.integers(6))
            reward, terminal = game.act(action)
            state, ts = env.step(state, torch.tensor(action))
            steps += 1
            assert torch.equal(ts.obs, torch.from_numpy(game.state()).float()), steps
            assert (float(ts.reward), bool(ts.terminated)) == (float(reward), terminal), steps
            if steps % 7 == 0 or terminal:
                _same_game(state, game)
            if terminal:
                break
        # a finished game stands still and pays nothing, in both
        for action in range(6):
            assert game.act(action) == (0, True)
            state, ts = env.step(state, torch.tensor(action))
            assert torch.equal(ts.obs, torch.from_numpy(game.state()).float())
            assert (float(ts.reward), bool(ts.terminated)) == (0.0, True)
        assert bool(state.params.difficulty_ramping) == ramping  # read off the package
        waves += game.env.ramp_index
        episodes += 1
    if thin and ramping:
        assert waves >= 1  # a wave was cleared and the ramp ran


@pytest.mark.parametrize("ramping", [True, False])
@pytest.mark.parametrize("interval", [6, 7, 12])
def test_clearing_a_wave_brings_a_new_one_and_ramps_as_the_package(interval, ramping):
    """The last alien is shot: a fresh wave appears and, with ramping and an interval
    above 6, moves one step faster; then 60 random steps agree."""
    env = SpaceInvaders()
    rng = np.random.default_rng(interval)
    game = _package(0, ramping=ramping)
    alien = np.zeros((10, 10))
    alien[3, 6] = 1
    game.env.alien_map, game.env.enemy_move_interval = alien, interval
    game.env.alien_move_timer = 1  # it does not move on the next step
    game.env.f_bullet_map[4, 6] = 1  # it is hit on the next step
    state = from_minatar(game, random.key(0))
    for t in range(60):
        action = 0 if t == 0 else int(rng.integers(6))
        reward, terminal = game.act(action)
        state, ts = env.step(state, torch.tensor(action))
        assert torch.equal(ts.obs, torch.from_numpy(game.state()).float())
        assert (float(ts.reward), bool(ts.terminated)) == (float(reward), terminal)
        if t == 0:
            assert reward == 1 and game.env.alien_map.sum() == 24
            assert game.env.ramp_index == int(ramping and interval > 6)
        _same_game(state, game)
        if terminal:
            break


# The pure env contract of make(ID): tests/envs/test_check_env.py's
# test_check_env_passes_on_every_built_in_env (random_reset=False and 2000 auto-reset steps
# as here before, and 15 examples instead of 10).


def test_make_passes_the_packages_params_and_the_games_constants():
    env = envs.make(ID, sticky_action_prob=0.0, difficulty_ramping=False, shot_cool_down=2)
    state, _ = env.reset(random.key(0))
    params = state.params
    assert float(params.sticky_action_prob) == 0.0 and not bool(params.difficulty_ramping)
    assert int(params.shot_cool_down) == 2 and int(params.enemy_move_interval) == 12
    assert SpaceInvaders().default_params.sticky_action_prob == 0.1
    with pytest.raises(TypeError, match="unknown SpaceInvaders param 'sticky_prob'"):
        envs.make(ID, sticky_prob=0.0)


def test_sticky_actions_repeat_the_previous_action_with_their_probability():
    env = SpaceInvaders()
    n = 4000
    state, _ = torch.func.vmap(env.reset)(random.split(random.key(3), n))
    _, ts = torch.func.vmap(env.step)(state, torch.full((n,), 1))  # left (or sticky no-op)
    left = ts.obs[:, 9, 4, 0] == 1  # the cannon moved from column 5 to 4
    assert abs(left.float().mean() - 0.9) < 4 * (0.09 / n) ** 0.5
    always = envs.make(ID, sticky_action_prob=1.0, max_steps=None, auto_reset=False)
    state, _ = always.reset(random.key(0))
    for _ in range(5):
        state, ts = always.step(state, torch.tensor(3))
    assert ts.obs[9, 5, 0] == 1  # sticky forever: the first action (no-op) repeats


def test_minimal_action_set_maps_onto_the_packages_actions():
    env = envs.make(ID, minimal_action_set=True, sticky_action_prob=0.0, max_steps=None)
    assert env.action_spec.n == 4
    state, _ = env.reset(random.key(0))
    state, ts = env.step(state, torch.tensor(2))  # minimal index 2 is 'r' (action 3)
    assert ts.obs[9, 6, 0] == 1


def test_render_paints_each_cell_in_the_packages_color_of_its_top_channel():
    env = SpaceInvaders()
    game = _package(0)
    for _ in range(30):
        game.act(5)
    states = tree.stack([env.reset(random.key(0))[0], from_minatar(game, random.key(1))])
    frames = torch.func.vmap(env.render)(states)
    assert frames.shape == (2, 160, 160, 3) and frames.dtype == torch.uint8
    colors = torch.tensor(palette(6), dtype=torch.uint8)
    state = game.state()
    top = np.amax(state * np.arange(1, 7), axis=2)  # display_state's channel index
    centers = frames[1, 8::16, 8::16]  # one pixel per cell
    assert torch.equal(centers, colors[torch.from_numpy(top)])
    assert torch.equal(frames[0], env.render(tree.index(states, 0)))
