"""SpaceInvaders-MinAtar in pure torch: ``minatar/environments/space_invaders.py`` (1.0.15).

The player moves a cannon along the bottom row and shoots upward at a 4 x 6 block of
aliens that marches sideways, one column per move, and steps down one row (reversing
direction) when it reaches a side. Each alien hit gives +1 and removes it. The alien
nearest the cannon's column fires every ``enemy_shot_interval + 1`` steps; the block
moves every ``min(aliens left, enemy_move_interval) + 1`` steps, so the last aliens speed
up. A cleared wave is replaced by a fresh one and, with ``difficulty_ramping``, moves one
step faster (down to an interval of 6). The episode ends when an alien or an enemy bullet
reaches the cannon.

Observation: float32 ``[10, 10, 6]``, channels (the package's order) cannon, alien,
alien_left, alien_right (the alien map repeated in the channel of the block's direction),
friendly_bullet, enemy_bullet. Actions: the package's six, ``n l u r d f`` (no-op, left,
up, right, down, fire); up and down do nothing here. Sticky actions as the package's
``Environment``: with probability ``sticky_action_prob`` the previous action is repeated.

The game draws no random numbers (only the sticky actions do), so the start state is the
same for every key. Every step of the package is reproduced exactly, including its
``np.roll`` wrap-arounds: ``fxrl.envs.minatar.from_minatar`` builds this env's state from a
running ``minatar.Environment`` and the tests step both side by side.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import tree
from fxrl.envs.core import params_as_tensors
from fxrl.envs.minatar import _common

__all__ = ["SpaceInvaders", "SpaceInvadersParams", "SpaceInvadersState"]

CHANNELS = ("cannon", "alien", "alien_left", "alien_right", "friendly_bullet", "enemy_bullet")
_MIN_MOVE_INTERVAL = 6  # the ramp stops once aliens move every 6 + 1 steps (package constant)


@tree.dataclass
class SpaceInvadersParams:
    """The package's ``Environment`` arguments and the game's module constants.

    Attributes:
      sticky_action_prob: with this probability a step repeats the previous action.
      difficulty_ramping: each cleared wave moves one step faster (down to interval 6).
      minimal_action_set: actions index ``(n, l, r, f)`` instead of all 6.
      shot_cool_down: steps between the player's shots.
      enemy_move_interval: the first wave's alien move interval.
      enemy_shot_interval: steps between alien shots.
    """

    sticky_action_prob: Any = 0.1
    difficulty_ramping: Any = True
    minimal_action_set: Any = False
    shot_cool_down: Any = 5
    enemy_move_interval: Any = 12
    enemy_shot_interval: Any = 10


@tree.dataclass
class SpaceInvadersState:
    """The package's game variables (``space_invaders.Env``'s attributes), plus the
    sticky action, step count, key and params. Leading batch dims allowed."""

    pos: Tensor  # [] int64, the cannon's column (row 9)
    # maps as int32 0/1, not bool: inductor's vectorised loops load and store bool tensors
    # element by element, int32 at full speed
    alien: Tensor  # [10, 10] int32, the package's alien_map (row, column)
    f_bullet: Tensor  # [10, 10] int32, friendly bullets
    e_bullet: Tensor  # [10, 10] int32, enemy bullets
    alien_dir: Tensor  # [] int64, -1 (left) or +1 (right)
    enemy_move_interval: Tensor  # [] int64, this wave's move interval
    alien_move_timer: Tensor  # [] int64
    alien_shot_timer: Tensor  # [] int64
    ramp_index: Tensor  # [] int64, waves cleared with the ramp on
    shot_timer: Tensor  # [] int64, the player's cool-down
    terminal: Tensor  # [] bool, the package's ``terminal``: further steps do nothing
    last_action: Tensor  # [] int64, for sticky actions
    t: Tensor  # [] int64 steps since reset
    key: Tensor  # [2] int64
    params: SpaceInvadersParams


def _first_wave(like: Tensor) -> Tensor:
    """The package's ``alien_map[0:4, 2:8] = 1``: bool [*like.shape, 10, 10]."""
    # built here, not a module-level tensor: a global constant read inside fxrl.scan's
    # loop body (PPO's compiled rollout) fails in inductor ("scan might be aliasing the
    # input or the output")
    i = torch.arange(10, device=like.device)
    wave = (i[:, None] < 4) & (i[None, :] >= 2) & (i[None, :] < 8)
    return wave.expand(*like.shape, 10, 10)


def _dynamics(s: SpaceInvadersState, a: Tensor) -> tuple[SpaceInvadersState, Tensor]:
    """The package's ``Env.act`` for a live game: (next state, reward as int64).

    Elementwise over leading batch dims: scalars are [*B], maps [*B, 10, 10].
    """
    p = s.params
    i = torch.arange(10, device=s.pos.device)  # row or column numbers (see _first_wave)
    bottom = (i == 9)[:, None]  # [10, 1] the bottom row

    def at(x: Tensor) -> Tensor:  # [*B] -> [*B, 1, 1], to broadcast against maps
        return x[..., None, None]

    # player: fire if the cool-down is over, else move (left 1, right 3)
    fire = (a == _common.FIRE) & (s.shot_timer == 0)
    pos = torch.where(a == _common.LEFT, (s.pos - 1).clamp(min=0), s.pos)
    pos = torch.where(a == _common.RIGHT, (pos + 1).clamp(max=9), pos)
    column = i == pos[..., None]  # [*B, 10] the cannon's column
    f_bullet = (s.f_bullet | (at(fire) & bottom & column[..., None, :])).to(torch.int32)
    shot_timer = torch.where(fire, p.shot_cool_down, s.shot_timer)

    # bullets: friendly up one row (row 9 cleared), enemy down one row (row 0 cleared);
    # maps are rolled as int32 (a rolled bool map would be stored as bool)
    f_bullet = (torch.roll(f_bullet, -1, -2) != 0) & ~bottom
    e_bullet = (torch.roll(s.e_bullet, 1, -2) != 0) & (i != 0)[:, None]
    terminal = s.terminal | (e_bullet[..., 9, :] & column).any(-1)

    # aliens: sideways, or one row down and turn at an edge; the timer is set before moving
    alien = s.alien != 0
    terminal = terminal | (alien[..., 9, :] & column).any(-1)
    move = s.alien_move_timer == 0
    count = alien.flatten(-2).sum(-1)
    alien_move_timer = torch.where(
        move, torch.minimum(count, s.enemy_move_interval), s.alien_move_timer
    )
    left = s.alien_dir < 0
    edge = (alien[..., :, 0].any(-1) & left) | (alien[..., :, 9].any(-1) & ~left)
    down, sideways = move & edge, move & ~edge
    terminal = terminal | (down & alien[..., 9, :].any(-1))
    alien_dir = torch.where(down, -s.alien_dir, s.alien_dir)
    # int32 maps select with torch.where (ONNX Runtime has no bool Where kernel)
    a32 = s.alien
    shifted = torch.where(at(left), torch.roll(a32, -1, -1), torch.roll(a32, 1, -1))
    alien = (
        torch.where(at(down), torch.roll(a32, 1, -2), torch.where(at(sideways), shifted, a32)) != 0
    )
    terminal = terminal | (move & (alien[..., 9, :] & column).any(-1))

    # the alien nearest the cannon's column (ties: the left one) fires from its lowest cell
    shoot = s.alien_shot_timer == 0
    alien_shot_timer = torch.where(shoot, p.enemy_shot_interval, s.alien_shot_timer)
    rank = (i - pos[..., None]).abs() * 10 + i  # the package's stable sort by distance
    col = torch.where(alien.any(-2), rank, 1000).argmin(-1)  # [*B]
    in_col = alien & (i == col[..., None])[..., None, :]
    row = torch.where(in_col, i[:, None], -1).flatten(-2).amax(-1)
    e_bullet = e_bullet | (at(shoot) & _common.cells(row, col))

    # hits
    kill = alien & f_bullet
    reward = kill.flatten(-2).sum(-1)
    alien, f_bullet = alien & ~kill, f_bullet & ~kill

    # timers, and a new wave when the aliens are gone
    cleared = ~alien.flatten(-2).any(-1)
    ramp = cleared & (s.enemy_move_interval > _MIN_MOVE_INTERVAL) & p.difficulty_ramping
    moved = s.replace(
        pos=pos,
        alien=_common.select(at(cleared), _first_wave(cleared), alien).to(torch.int32),
        f_bullet=f_bullet.to(torch.int32),
        e_bullet=e_bullet.to(torch.int32),
        alien_dir=alien_dir,
        enemy_move_interval=s.enemy_move_interval - ramp.long(),
        alien_move_timer=alien_move_timer - 1,
        alien_shot_timer=alien_shot_timer - 1,
        ramp_index=s.ramp_index + ramp.long(),
        shot_timer=shot_timer - (shot_timer > 0).long(),
        terminal=terminal,
    )
    return moved, reward


def _from_minatar(environment: Any, key: Tensor) -> SpaceInvadersState:
    """The state of a ``minatar.Environment("space_invaders")``'s current game."""
    g = environment.env

    def i64(v: Any) -> Tensor:
        return torch.tensor(int(v), dtype=torch.int64)

    def grid(m: Any) -> Tensor:
        return torch.as_tensor(m != 0).to(torch.int32)

    common = _common.common_fields(environment, key)
    params = _common.params_of(environment)
    return SpaceInvadersState(
        pos=i64(g.pos),
        alien=grid(g.alien_map),
        f_bullet=grid(g.f_bullet_map),
        e_bullet=grid(g.e_bullet_map),
        alien_dir=i64(g.alien_dir),
        enemy_move_interval=i64(g.enemy_move_interval),
        alien_move_timer=i64(g.alien_move_timer),
        alien_shot_timer=i64(g.alien_shot_timer),
        ramp_index=i64(g.ramp_index),
        shot_timer=i64(g.shot_timer),
        terminal=common["terminal"],
        last_action=common["last_action"],
        t=common["t"],
        key=common["key"],
        params=params_as_tensors(
            SpaceInvadersParams(
                sticky_action_prob=float(params.sticky_action_prob),
                difficulty_ramping=bool(params.difficulty_ramping),
            ),
            torch.float32,
        ),
    )


@_common.register("SpaceInvaders-MinAtar", 1000, _from_minatar)
class SpaceInvaders(_common.MinAtarEnv):
    """SpaceInvaders-MinAtar: observation [10, 10, 6] in {0, 1}, action Discrete(6).

    Args:
      dtype: float dtype of the observation and reward (float32 by default).
    """

    game = "space_invaders"
    channels = CHANNELS
    minimal_actions = (0, 1, 3, 5)  # the package's minimal_action_set(): n, l, r, f
    step_blocks = 1  # one word for the sticky action; the game draws nothing

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        super().__init__(dtype)
        self.default_params = SpaceInvadersParams()

    def _start(self, key: Tensor, params: SpaceInvadersParams) -> SpaceInvadersState:
        """The package's ``reset``: cannon in column 5, aliens in rows 0-3, columns 2-7,
        moving left. Deterministic: ``key`` drives only the sticky actions."""
        zero = torch.zeros_like(key[..., 0])
        return SpaceInvadersState(
            pos=zero + 5,
            alien=_first_wave(zero).to(torch.int32),
            f_bullet=torch.zeros((*zero.shape, 10, 10), dtype=torch.int32, device=key.device),
            e_bullet=torch.zeros((*zero.shape, 10, 10), dtype=torch.int32, device=key.device),
            alien_dir=zero - 1,
            enemy_move_interval=zero + params.enemy_move_interval,
            alien_move_timer=zero + params.enemy_move_interval,
            alien_shot_timer=zero + params.enemy_shot_interval,
            ramp_index=zero.clone(),
            shot_timer=zero.clone(),
            terminal=torch.zeros_like(zero, dtype=torch.bool),
            last_action=zero.clone(),
            t=zero.clone(),
            key=key,
            params=params,
        )

    def _act(
        self, state: SpaceInvadersState, action: Tensor, w: list[Tensor]
    ) -> tuple[SpaceInvadersState, Tensor]:
        return _dynamics(state, action)

    def observe(self, state: SpaceInvadersState) -> Tensor:
        """``Environment.state()``: float [..., 10, 10, 6]."""
        cannon = _common.cells(torch.full_like(state.pos, 9), state.pos)
        alien = state.alien != 0
        left = alien & (state.alien_dir < 0)[..., None, None]
        right = alien & (state.alien_dir >= 0)[..., None, None]
        channels = [cannon, alien, left, right, state.f_bullet != 0, state.e_bullet != 0]
        return _common.observation(channels, self.dtype)
