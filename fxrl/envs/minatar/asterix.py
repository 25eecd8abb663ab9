"""Asterix-MinAtar in pure torch: the ``minatar`` package's ``environments/asterix.py``.

The player moves in the 4 directions (columns 0 to 9, rows 1 to 8). Enemies and gold
enter from the left or right edge in one of 8 lanes (rows 1 to 8, one object per lane),
every ``spawn_speed`` steps: left or right with probability 1/2, gold with 1/3, into a
free lane drawn uniformly (nothing enters when all are taken, but the draws are made).
Objects move one column every ``move_speed`` steps and leave at the far edge. Touching
gold gives +1 and removes it; touching an enemy ends the game (after the rest of the
step: gold touched in the same step still counts). With difficulty ramping, once every
102 steps an object enters one step more often (down to every step) and, on every other
ramp, objects move one step more often (down to every step); ramping stops when both
are at 1. The trail channel marks the cell behind each object.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import tree
from fxrl.envs.minatar._common import (
    DOWN,
    LEFT,
    NOOP,
    RIGHT,
    UP,
    MinAtarEnv,
    MinAtarParams,
    below,
    cells,
    common_fields,
    lanes,
    observation,
    register,
    select,
)

__all__ = ["Asterix", "AsterixState"]

RAMP_INTERVAL = 100
INIT_SPAWN_SPEED = 10
INIT_MOVE_INTERVAL = 5
SLOTS = 8


@tree.dataclass
class AsterixState:
    player_x: Tensor  # [] int64
    player_y: Tensor  # [] int64
    ent_x: Tensor  # [8] int64 columns; object i is in row i + 1
    ent_on: Tensor  # [8] bool, slot i holds an object
    ent_right: Tensor  # [8] bool, it moves right (entered on the left)
    ent_gold: Tensor  # [8] bool, gold (else an enemy)
    spawn_speed: Tensor  # [] int64
    spawn_timer: Tensor  # [] int64
    move_speed: Tensor  # [] int64
    move_timer: Tensor  # [] int64
    ramp_timer: Tensor  # [] int64
    ramp_index: Tensor  # [] int64
    terminal: Tensor  # [] bool
    last_action: Tensor  # [] int64, for sticky actions
    t: Tensor  # [] int64 steps since reset
    key: Tensor  # [2] int64
    params: MinAtarParams


def _from_minatar(environment: Any, key: Tensor) -> AsterixState:
    e = environment.env
    ents = [x if x is not None else [0, i + 1, False, False] for i, x in enumerate(e.entities)]
    if len(ents) != SLOTS or any(int(x[1]) != i + 1 for i, x in enumerate(ents)):
        raise ValueError(f"from_minatar: Asterix entities {e.entities!r} are not 8 lanes.")
    i64 = lambda v: torch.tensor(int(v), dtype=torch.int64)
    return AsterixState(
        player_x=i64(e.player_x),
        player_y=i64(e.player_y),
        ent_x=torch.tensor([int(x[0]) for x in ents], dtype=torch.int64),
        ent_on=torch.tensor([x is not None for x in e.entities]),
        ent_right=torch.tensor([bool(x[2]) for x in ents]),
        ent_gold=torch.tensor([bool(x[3]) for x in ents]),
        spawn_speed=i64(e.spawn_speed),
        spawn_timer=i64(e.spawn_timer),
        move_speed=i64(e.move_speed),
        move_timer=i64(e.move_timer),
        ramp_timer=i64(e.ramp_timer),
        ramp_index=i64(e.ramp_index),
        **common_fields(environment, key),
    )


def _spawn(s: AsterixState, w: list[Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``_spawn_entity``: the slots after one new object enters (where one can). One word:
    bit 0 the side, bits 1-15 gold (probability 10923 / 32768 for 1/3), bits 16-31 the
    lane (each free lane within 8 / 65536 of its share)."""
    right = below(w[0], 2, shift=0, width=1) == 1
    gold = below(w[0], 3, shift=1, width=15) == 0
    free = ~s.ent_on
    n_free = free.sum(-1)
    k = below(w[0], n_free.clamp(min=1), shift=16, width=16)  # the k-th free lane
    slot = free & (free.cumsum(-1) - 1 == k[..., None])
    x = torch.where(slot, torch.where(right, 0, 9)[..., None], s.ent_x)
    return (
        x,
        s.ent_on | slot,
        select(slot, right[..., None].expand_as(slot), s.ent_right),
        select(slot, gold[..., None].expand_as(slot), s.ent_gold),
    )


@register("Asterix-MinAtar", 1000, _from_minatar)
class Asterix(MinAtarEnv):
    """Asterix-MinAtar: observation [10, 10, 4] (player, enemy, trail, gold), Discrete(6)
    (minimal set: NOOP, LEFT, UP, RIGHT, DOWN). Time limit in ``make``: 1000 steps, as
    gymnax."""

    game = "asterix"
    channels = ("player", "enemy", "trail", "gold")
    minimal_actions = (NOOP, LEFT, UP, RIGHT, DOWN)
    step_blocks = 1  # word 0: sticky action; word 1: side, gold and lane of a new object

    def _start(self, key: Tensor, params: MinAtarParams) -> AsterixState:
        zero = torch.zeros_like(key[..., 0])
        slots = zero[..., None] + torch.zeros(SLOTS, dtype=torch.int64, device=zero.device)
        false = torch.zeros_like(zero, dtype=torch.bool)
        return AsterixState(
            player_x=zero + 5,
            player_y=zero + 5,
            ent_x=slots,
            ent_on=slots != 0,
            ent_right=slots != 0,
            ent_gold=slots != 0,
            spawn_speed=zero + INIT_SPAWN_SPEED,
            spawn_timer=zero + INIT_SPAWN_SPEED,
            move_speed=zero + INIT_MOVE_INTERVAL,
            move_timer=zero + INIT_MOVE_INTERVAL,
            ramp_timer=zero + RAMP_INTERVAL,
            ramp_index=zero,
            terminal=false,
            last_action=zero,
            t=zero,
            key=key,
            params=params,
        )

    def _act(self, s: AsterixState, action: Tensor, w: list[Tensor]) -> tuple[Any, Tensor]:
        spawn = s.spawn_timer == 0
        x, on, right, gold = _spawn(s, w)
        x = torch.where(spawn[..., None], x, s.ent_x)
        on = select(spawn[..., None], on, s.ent_on)
        right = select(spawn[..., None], right, s.ent_right)
        gold = select(spawn[..., None], gold, s.ent_gold)
        spawn_timer = torch.where(spawn, s.spawn_speed, s.spawn_timer)
        px = (s.player_x + (action == RIGHT).long() - (action == LEFT).long()).clamp(0, 9)
        py = (s.player_y + (action == DOWN).long() - (action == UP).long()).clamp(1, 8)
        lane = torch.arange(1, SLOTS + 1, device=px.device) == py[..., None]
        touch = on & lane & (x == px[..., None])
        reward = (touch & gold).sum(-1)
        dead = (touch & ~gold).any(-1)
        on = on & ~(touch & gold)
        moves = s.move_timer == 0
        x = torch.where(moves[..., None] & on, x + torch.where(right, 1, -1), x)
        on = on & (x >= 0) & (x <= 9)
        touch = moves[..., None] & on & lane & (x == px[..., None])
        reward = reward + (touch & gold).sum(-1)
        dead = dead | (touch & ~gold).any(-1)
        on = on & ~(touch & gold)
        move_timer = torch.where(moves, s.move_speed, s.move_timer) - 1
        # difficulty: while something can still speed up, count down, then ramp once
        ramping = s.params.difficulty_ramping & ((s.spawn_speed > 1) | (s.move_speed > 1))
        ramp = ramping & (s.ramp_timer < 0)
        faster_moves = ramp & (s.move_speed > 1) & (s.ramp_index % 2 == 1)
        faster_spawns = ramp & (s.spawn_speed > 1)
        moved = s.replace(
            player_x=px,
            player_y=py,
            ent_x=x,
            ent_on=on,
            ent_right=right,
            ent_gold=gold,
            spawn_speed=s.spawn_speed - faster_spawns.long(),
            spawn_timer=spawn_timer - 1,
            move_speed=s.move_speed - faster_moves.long(),
            move_timer=move_timer,
            ramp_timer=torch.where(
                ramp, RAMP_INTERVAL, torch.where(ramping, s.ramp_timer - 1, s.ramp_timer)
            ),
            ramp_index=s.ramp_index + ramp.long(),
            terminal=dead,
        )
        return moved, reward

    def observe(self, state: AsterixState) -> Tensor:
        """[..., 10, 10, 4]: player, enemies, trails (the cell behind each object, if on
        the grid), gold."""
        s = state
        back = s.ent_x - torch.where(s.ent_right, 1, -1)
        return observation(
            [
                cells(s.player_y, s.player_x),
                lanes(s.ent_x, s.ent_on & ~s.ent_gold),
                lanes(back, s.ent_on),
                lanes(s.ent_x, s.ent_on & s.ent_gold),
            ],
            self.dtype,
        )
