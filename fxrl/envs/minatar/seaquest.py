"""Seaquest-MinAtar in pure torch: ``minatar/environments/seaquest.py`` (1.0.15).

The player steers a two-cell submarine (front and back, so its heading shows) and fires
bullets sideways. Enemy fish and enemy submarines (which fire bullets) enter rows 1-8
from either side; a hit gives +1 and removes the enemy. Divers drift across too: touching
one picks it up (at most 6). Oxygen (200) falls by 1 each step below the surface; going up
to row 0 with a diver on board refills it and drops one diver, or with 6 divers drops all
and pays ``oxygen * 10 // 200``; each such surfacing (with ``difficulty_ramping``) makes
enemies spawn and move faster. The episode ends when the player touches an enemy or an
enemy bullet, runs out of oxygen, or surfaces with no diver.

Observation: float32 ``[10, 10, 10]``, channels (the package's order) sub_front, sub_back,
friendly_bullet, trail, enemy_bullet, enemy_fish, enemy_sub, oxygen_guage, diver_guage,
diver. Actions: the package's six, ``n l u r d f``.

Lists as slots. The package keeps bullets, fish, submarines and divers in Python lists; the
state here holds each list as fixed-size slot arrays (``Slots``: position, direction,
timers, an ``alive`` mask and an insertion stamp ``order``, so that "the first fish in the
list" is the live one with the smallest stamp). Everything is ``torch.where`` over fixed
shapes. Capacities (``CAPACITY``), and why they suffice:

- friendly bullets, 2: one shot per 5 steps, each gone within 10 steps;
- divers, 2: one spawn per 30 steps, each crosses the grid in at most 59 steps;
- fish and submarines, 30 each: enemies spawn at most once a step and cross in at most
  ``10 * move_speed + 9`` steps; at the hardest level (spawn every step, move_speed 2)
  that is 29 at once. The tests run the package there for 20,000 steps (a player that
  stays on the surface cannot be hit) and find at most 22 fish and 13 submarines;
- enemy bullets, 30: one per submarine at a time (a submarine fires every 11 steps, a
  bullet lives at most 10); the same run finds at most 6.

Should a list ever be full, the new object is not added (the spawn, shot or diver is
lost); apart from the submarine odds (1/3 + 4e-8, see ``_spawn_draws``) that is the one
way this env's games could depart from the package's.

The package's step draws random numbers only to spawn an enemy (every ``e_spawn_speed``
steps) or a diver (every 30 steps); this env draws its spawns from the state's key, so
``fxrl.envs.minatar.from_minatar`` states step exactly as the package in between.
Reproduced package quirks: a submarine removed this step (shot or off the grid) still
fires if its shot timer is due; surfacing with 6 divers leaves ``diver_count`` at -1 (the
package sets it to 0, then takes one away). The package removes list items by equality
(``list.remove``), which would differ from removing the object in hand only for two
identical objects (same cell, direction and timers) in one list; spawn and move timing
keep that from happening in a game, and none occurred in the tests.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import tree
from fxrl.envs.core import params_as_tensors
from fxrl.envs.minatar import _common
from fxrl.envs.minatar._common import DOWN, FIRE, LEFT, RIGHT, UP

__all__ = ["CAPACITY", "Seaquest", "SeaquestParams", "SeaquestState", "Slots"]

CHANNELS = (
    "sub_front",
    "sub_back",
    "friendly_bullet",
    "trail",
    "enemy_bullet",
    "enemy_fish",
    "enemy_sub",
    "oxygen_guage",
    "diver_guage",
    "diver",
)
# slots per package list (see the module docstring)
CAPACITY = {"f_bullets": 2, "e_bullets": 30, "e_fish": 30, "e_subs": 30, "divers": 2}
_BIG = 2**62  # larger than any stamp


@tree.dataclass
class SeaquestParams:
    """The package's ``Environment`` arguments and the game's module constants.

    (The package's ``ramp_interval`` and ``enemy_move_interval`` constants are unused by
    its code and left out.)
    """

    sticky_action_prob: Any = 0.1
    difficulty_ramping: Any = True  # each surfacing with divers: faster spawns and moves
    minimal_action_set: Any = False  # the package's minimal set is all 6 actions
    max_oxygen: Any = 200
    init_spawn_speed: Any = 20  # steps between enemy spawns at the start
    diver_spawn_speed: Any = 30  # steps between diver spawns
    init_move_interval: Any = 5  # enemies move every move_speed + 1 steps
    shot_cool_down: Any = 5
    enemy_shot_interval: Any = 10  # a submarine fires every 11 steps
    diver_move_interval: Any = 5  # divers move every 6 steps


@tree.dataclass
class Slots:
    """One package list as ``K`` slots: each field [..., K]."""

    x: Tensor  # int64 column
    y: Tensor  # int64 row
    right: Tensor  # bool, moving right (the package's ``lr`` / ``sub_or``)
    move: Tensor  # int64 move timer (fish, submarines, divers)
    shot: Tensor  # int64 shot timer (submarines)
    order: Tensor  # int64 insertion stamp: list order is increasing ``order``
    alive: Tensor  # bool, the slot holds an object


@tree.dataclass
class SeaquestState:
    """The package's game variables (``seaquest.Env``'s attributes, its lists as
    ``Slots``), plus the next insertion stamp, sticky action, step count, key and params.
    Leading batch dims allowed."""

    oxygen: Tensor  # [] int64
    diver_count: Tensor  # [] int64 (-1 after surfacing with 6, as the package)
    sub_x: Tensor  # [] int64 the player's front cell
    sub_y: Tensor  # [] int64
    sub_right: Tensor  # [] bool, facing right (the package's sub_or)
    f_bullets: Slots
    e_bullets: Slots
    e_fish: Slots
    e_subs: Slots
    divers: Slots
    e_spawn_speed: Tensor  # [] int64
    e_spawn_timer: Tensor  # [] int64
    d_spawn_timer: Tensor  # [] int64
    move_speed: Tensor  # [] int64
    ramp_index: Tensor  # [] int64
    shot_timer: Tensor  # [] int64
    surface: Tensor  # [] bool
    stamps: Tensor  # [] int64, the next insertion stamp
    terminal: Tensor  # [] bool
    last_action: Tensor  # [] int64
    t: Tensor  # [] int64
    key: Tensor  # [2] int64
    params: SeaquestParams


def _empty(like: Tensor, k: int) -> Slots:
    zeros = torch.zeros((*like.shape, k), dtype=torch.int64, device=like.device)
    no = torch.zeros_like(zeros, dtype=torch.bool)
    return Slots(zeros, zeros.clone(), no, zeros.clone(), zeros.clone(), zeros.clone(), no.clone())


def _add(
    s: Slots, on: Tensor, x: Any, y: Any, right: Any, move: Any, shot: Any, stamp: Tensor
) -> Slots:
    """Append one object (where ``on``) in the first free slot; dropped if none is free."""
    free = ~s.alive
    put = free & (free.long().cumsum(-1) == 1) & on[..., None]

    def field(old: Tensor, new: Any) -> Tensor:
        new = torch.as_tensor(new, device=old.device)
        return _common.select(put, new[..., None] if new.ndim else new, old)

    return Slots(
        field(s.x, x),
        field(s.y, y),
        field(s.right, right),
        field(s.move, move),
        field(s.shot, shot),
        field(s.order, stamp),
        s.alive | put,
    )


def _pick(s: Slots, one: Tensor) -> tuple[Tensor, ...]:
    """The fields of slot 1 of a 2-slot list where ``one`` [...] is True, else of slot 0:
    (x, y, right, move, alive). Elementwise, no reductions (cheaper to compile)."""

    def get(v: Tensor) -> Tensor:
        return _common.select(one, v[..., 1], v[..., 0])

    return get(s.x), get(s.y), get(s.right), get(s.move), get(s.alive)


def _first(mask: Tensor, order: Tensor) -> Tensor:
    """The slot of ``mask`` with the smallest stamp (the first in list order), as a mask."""
    least = torch.where(mask, order, _BIG).amin(-1, keepdim=True)
    return mask & (order == least)


def _last(mask: Tensor, order: Tensor) -> Tensor:
    """The slot of ``mask`` with the largest stamp (the last in list order), as a mask."""
    most = torch.where(mask, order, -1).amax(-1, keepdim=True)
    return mask & (order == most)


def _sequence(s: Slots, newest_first: bool) -> list[tuple[Tensor, Tensor]]:
    """The slots of a 2-slot list in list order (or newest first): for each, ``one``
    [...] (True: slot 1) and its mask [..., 2]."""
    ids = torch.arange(2, device=s.order.device)
    newest = s.order[..., 1] > s.order[..., 0]  # slot 1 was added last
    order = [newest, ~newest] if newest_first else [~newest, newest]
    return [(one, ids == one.long()[..., None]) for one in order]


def _step_dir(right: Tensor) -> Tensor:
    return torch.where(right, 1, -1)


def _off(x: Tensor) -> Tensor:
    return (x < 0) | (x > 9)


def _enemies_move(
    e: Slots,
    px: Tensor,
    py: Tensor,
    move_speed: Tensor,
    f_bullets: Slots,
    terminal: Tensor,
    reward: Tensor,
) -> tuple[Slots, Tensor, Tensor, Slots, Tensor, Tensor]:
    """The package's loop over fish or submarines (newest first), vectorized.

    Returns (enemies, their new x, alive before the loop, bullets, terminal, reward).
    Each enemy that moved onto a friendly bullet takes the first bullet left in that cell;
    processed newest first, the k-th newest enemy in a cell gets the k-th bullet there in
    list order, which is what the matching below computes bullet by bullet.
    """
    at_player = (e.x == px[..., None]) & (e.y == py[..., None])
    terminal = terminal | (e.alive & at_player).any(-1)
    moving = e.alive & (e.move == 0)
    move = torch.where(moving, move_speed[..., None], torch.where(e.alive, e.move - 1, e.move))
    x = torch.where(moving, e.x + _step_dir(e.right), e.x)
    out = moving & _off(x)
    onto_player = moving & ~out & (x == px[..., None]) & (e.y == py[..., None])
    terminal = terminal | onto_player.any(-1)
    eligible = moving & ~out & ~onto_player
    taken = torch.zeros_like(eligible)
    f_alive = f_bullets.alive
    for one, sel in _sequence(f_bullets, newest_first=False):
        bx, by, _, _, b_alive = _pick(f_bullets, one)
        cand = (
            eligible & ~taken & (x == bx[..., None]) & (e.y == by[..., None]) & b_alive[..., None]
        )
        got = cand.any(-1)
        taken = taken | _last(cand, e.order)
        f_alive = f_alive & ~(sel & got[..., None])
        reward = reward + got.long()
    before = e.alive
    e = e.replace(x=x, move=move, alive=e.alive & ~out & ~taken)
    return e, x, before, f_bullets.replace(alive=f_alive), terminal, reward


def _spawn_draws(word: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """A step's spawn draws from one 32-bit word (int32): enemy side (bit 0, the package's
    ``rand() < 1/2``), enemy row (bits 1-3, ``randint(1, 9)``), diver side (bit 4), diver
    row (bits 5-7), and whether the enemy is a submarine (bits 8-31 as a 24-bit fraction
    below 1/3: probability 1/3 + 4e-8). Returns (lr, is_sub, row, diver lr, diver row)."""
    w = word.to(torch.int64) & 0xFFFFFFFF
    lr = (w & 1) == 1
    row = ((w >> 1) & 7) + 1
    d_lr = ((w >> 4) & 1) == 1
    d_row = ((w >> 5) & 7) + 1
    is_sub = ((w >> 8) & 0xFFFFFF) * 3 < 2**24
    return lr, is_sub, row, d_lr, d_row


def _dynamics(s: SeaquestState, a: Tensor, w: list[Tensor]) -> tuple[SeaquestState, Tensor]:
    """The package's ``Env.act`` for a live game, its random draws taken from ``w``."""
    p = s.params
    reward = torch.zeros_like(s.oxygen)
    terminal = s.terminal
    stamp = s.stamps

    # spawn an enemy (not in a row that has one heading the other way) and a diver
    spawn = s.e_spawn_timer == 0
    lr, is_sub, ey, d_lr, dy = _spawn_draws(w[0])
    ex = torch.where(lr, 0, 9)
    fish, subs = s.e_fish, s.e_subs
    blocked = (fish.alive & (fish.y == ey[..., None]) & (fish.right != lr[..., None])).any(-1) | (
        subs.alive & (subs.y == ey[..., None]) & (subs.right != lr[..., None])
    ).any(-1)
    ok = spawn & ~blocked
    subs = _add(subs, ok & is_sub, ex, ey, lr, s.move_speed, p.enemy_shot_interval, stamp)
    fish = _add(fish, ok & ~is_sub, ex, ey, lr, s.move_speed, 0, stamp)
    e_spawn_timer = torch.where(spawn, s.e_spawn_speed, s.e_spawn_timer)
    d_spawn = s.d_spawn_timer == 0
    divers = _add(
        s.divers, d_spawn, torch.where(d_lr, 0, 9), dy, d_lr, p.diver_move_interval, 0, stamp + 1
    )
    d_spawn_timer = torch.where(d_spawn, p.diver_spawn_speed, s.d_spawn_timer)

    # the player: fire (cool-down permitting), or move
    fire = (a == FIRE) & (s.shot_timer == 0)
    f_bullets = _add(s.f_bullets, fire, s.sub_x, s.sub_y, s.sub_right, 0, 0, stamp + 2)
    stamp = stamp + 3
    shot_timer = torch.where(fire, p.shot_cool_down, s.shot_timer)
    px = torch.where(a == LEFT, (s.sub_x - 1).clamp(min=0), s.sub_x)
    px = torch.where(a == RIGHT, (px + 1).clamp(max=9), px)
    right = (s.sub_right & (a != LEFT)) | (a == RIGHT)  # bool: no Where (ONNX Runtime)
    py = torch.where(a == UP, (s.sub_y - 1).clamp(min=0), s.sub_y)
    py = torch.where(a == DOWN, (py + 1).clamp(max=8), py)

    # friendly bullets, newest first: move; hit the first fish, else the first submarine
    for one, sel in _sequence(f_bullets, newest_first=True):
        bx, by, b_right, _, b_alive = _pick(f_bullets, one)
        bx = bx + _step_dir(b_right)
        live = b_alive & ~_off(bx)
        here = live[..., None]
        hit_fish = _first(
            fish.alive & (fish.x == bx[..., None]) & (fish.y == by[..., None]) & here, fish.order
        )
        got_fish = hit_fish.any(-1)
        sub_here = subs.alive & (subs.x == bx[..., None]) & (subs.y == by[..., None])
        hit_sub = _first(sub_here & (here & ~got_fish[..., None]), subs.order)
        hit = got_fish | hit_sub.any(-1)
        fish = fish.replace(alive=fish.alive & ~hit_fish)
        subs = subs.replace(alive=subs.alive & ~hit_sub)
        reward = reward + hit.long()
        f_bullets = f_bullets.replace(
            x=torch.where(sel, bx[..., None], f_bullets.x),
            alive=_common.select(sel, (live & ~hit)[..., None], f_bullets.alive),
        )

    # divers, newest first: picked up on touching the player (while fewer than 6)
    diver_count = s.diver_count
    for one, sel in _sequence(divers, newest_first=True):
        dx, d_y, d_right, d_move, d_alive = _pick(divers, one)
        pick = d_alive & (dx == px) & (d_y == py) & (diver_count < 6)
        rest = d_alive & ~pick
        moving = rest & (d_move == 0)
        d_move = torch.where(moving, p.diver_move_interval, torch.where(rest, d_move - 1, d_move))
        dx = torch.where(moving, dx + _step_dir(d_right), dx)
        out = moving & _off(dx)
        pick_after = moving & ~out & (dx == px) & (d_y == py) & (diver_count < 6)
        diver_count = diver_count + (pick | pick_after).long()
        divers = divers.replace(
            x=torch.where(sel, dx[..., None], divers.x),
            move=torch.where(sel, d_move[..., None], divers.move),
            alive=_common.select(
                sel, (d_alive & ~(pick | out | pick_after))[..., None], divers.alive
            ),
        )

    # enemy submarines: move, collide, take bullets; each due one fires where it now is
    subs, sx, had, f_bullets, terminal, reward = _enemies_move(
        subs, px, py, s.move_speed, f_bullets, terminal, reward
    )
    fires = had & (subs.shot == 0)
    subs = subs.replace(
        shot=torch.where(
            fires, p.enemy_shot_interval[..., None], torch.where(had, subs.shot - 1, subs.shot)
        )
    )
    e_bullets = s.e_bullets
    free = ~e_bullets.alive
    match = (
        fires[..., :, None]
        & free[..., None, :]
        & (
            (fires.long().cumsum(-1) - 1)[..., :, None]
            == (free.long().cumsum(-1) - 1)[..., None, :]
        )
    )  # [..., subs, bullets]: the k-th firing submarine fills the k-th free slot
    put = match.any(-2)
    # appended newest submarine first, as the package's loop: later stamps for older subs
    newer = (fires[..., None, :] & (subs.order[..., None, :] > subs.order[..., :, None])).sum(-1)
    e_bullets = Slots(
        x=torch.where(put, (match * sx[..., :, None]).sum(-2), e_bullets.x),
        y=torch.where(put, (match * subs.y[..., :, None]).sum(-2), e_bullets.y),
        right=_common.select(put, (match & subs.right[..., :, None]).any(-2), e_bullets.right),
        move=e_bullets.move,
        shot=e_bullets.shot,
        order=torch.where(
            put, (match * (stamp[..., None] + newer)[..., :, None]).sum(-2), e_bullets.order
        ),
        alive=e_bullets.alive | put,
    )

    # enemy bullets: hit the player before or after moving
    eb = e_bullets
    terminal = terminal | (eb.alive & (eb.x == px[..., None]) & (eb.y == py[..., None])).any(-1)
    bx = torch.where(eb.alive, eb.x + _step_dir(eb.right), eb.x)
    b_alive = eb.alive & ~_off(bx)
    terminal = terminal | (b_alive & (bx == px[..., None]) & (eb.y == py[..., None])).any(-1)
    e_bullets = eb.replace(x=bx, alive=b_alive)

    # enemy fish: as the submarines, without firing
    fish, _, _, f_bullets, terminal, reward = _enemies_move(
        fish, px, py, s.move_speed, f_bullets, terminal, reward
    )

    # timers, oxygen and surfacing
    def count_down(v: Tensor) -> Tensor:
        return v - (v > 0).long()

    terminal = terminal | (s.oxygen <= 0)
    under = py > 0
    oxygen = torch.where(under, s.oxygen - 1, s.oxygen)
    surfacing = ~under & ~s.surface
    terminal = terminal | (surfacing & (diver_count == 0))
    refill = surfacing & (diver_count != 0)
    full = refill & (diver_count == 6)
    reward = reward + torch.where(
        full, torch.div(oxygen * 10, p.max_oxygen, rounding_mode="floor"), 0
    )
    diver_count = torch.where(full, 0, diver_count) - refill.long()
    oxygen = torch.where(refill, p.max_oxygen, oxygen)
    surface = ~under & (s.surface | refill)
    ramp = refill & p.difficulty_ramping & ((s.e_spawn_speed > 1) | (s.move_speed > 2))
    slower = ramp & (s.move_speed > 2) & (s.ramp_index % 2 == 1)
    moved = s.replace(
        oxygen=oxygen,
        diver_count=diver_count,
        sub_x=px,
        sub_y=py,
        sub_right=right,
        f_bullets=f_bullets,
        e_bullets=e_bullets,
        e_fish=fish,
        e_subs=subs,
        divers=divers,
        e_spawn_speed=s.e_spawn_speed - (ramp & (s.e_spawn_speed > 1)).long(),
        e_spawn_timer=count_down(e_spawn_timer),
        d_spawn_timer=count_down(d_spawn_timer),
        move_speed=s.move_speed - slower.long(),
        ramp_index=s.ramp_index + ramp.long(),
        shot_timer=count_down(shot_timer),
        surface=surface,
        stamps=stamp + CAPACITY["e_subs"],
        terminal=terminal,
    )
    return moved, reward


def _grid(y: Tensor, x: Tensor, on: Tensor) -> Tensor:
    """The cells of ``K`` objects [..., K] where ``on`` and inside the grid: bool
    [..., 10, 10]. Scattered into 100 cells plus one that catches the objects not shown:
    K writes per grid, where comparing every object with every cell costs K x 100 (most of
    a compiled step's work with Seaquest's 30-slot lists)."""
    cell = torch.where(on & (x >= 0) & (x <= 9), y * 10 + x, 100)
    grid = torch.zeros((*cell.shape[:-1], 101), dtype=torch.bool, device=cell.device)
    return grid.scatter(-1, cell, True)[..., :100].unflatten(-1, (10, 10))


def _slots(items: list, name: str) -> Slots:
    """A package list as slots (stamps 0, 1, ... in list order)."""
    k = CAPACITY[name]
    if len(items) > k:
        raise ValueError(
            f"fxrl.envs.minatar.from_minatar: the seaquest game's {name} list holds "
            f"{len(items)} objects; Seaquest keeps at most {k} (CAPACITY[{name!r}])."
        )
    rows = [[int(v) for v in it] + [0] * (5 - len(it)) for it in items] + [[0] * 5] * (
        k - len(items)
    )
    t = torch.tensor(rows, dtype=torch.int64).reshape(k, 5)
    alive = torch.arange(k) < len(items)
    return Slots(t[:, 0], t[:, 1], t[:, 2] != 0, t[:, 3], t[:, 4], torch.arange(k), alive)


def _from_minatar(environment: Any, key: Tensor) -> SeaquestState:
    """The state of a ``minatar.Environment("seaquest")``'s current game."""
    g = environment.env
    common = _common.common_fields(environment, key)
    base = _common.params_of(environment)
    params = params_as_tensors(
        SeaquestParams(
            sticky_action_prob=float(base.sticky_action_prob),
            difficulty_ramping=bool(base.difficulty_ramping),
        ),
        torch.float32,
    )
    lists = {name: getattr(g, name) for name in CAPACITY}

    def i64(v: Any) -> Tensor:
        return torch.tensor(int(v), dtype=torch.int64)

    return SeaquestState(
        oxygen=i64(g.oxygen),
        diver_count=i64(g.diver_count),
        sub_x=i64(g.sub_x),
        sub_y=i64(g.sub_y),
        sub_right=torch.tensor(bool(g.sub_or)),
        **{name: _slots(items, name) for name, items in lists.items()},
        e_spawn_speed=i64(g.e_spawn_speed),
        e_spawn_timer=i64(g.e_spawn_timer),
        d_spawn_timer=i64(g.d_spawn_timer),
        move_speed=i64(g.move_speed),
        ramp_index=i64(g.ramp_index),
        shot_timer=i64(g.shot_timer),
        surface=torch.tensor(bool(g.surface)),
        stamps=i64(max(len(v) for v in lists.values())),
        terminal=common["terminal"],
        last_action=common["last_action"],
        t=common["t"],
        key=common["key"],
        params=params,
    )


@_common.register("Seaquest-MinAtar", 1000, _from_minatar)
class Seaquest(_common.MinAtarEnv):
    """Seaquest-MinAtar: observation [10, 10, 10] in {0, 1}, action Discrete(6).

    Args:
      dtype: float dtype of the observation and reward (float32 by default).
    """

    game = "seaquest"
    channels = CHANNELS
    minimal_actions = (0, 1, 2, 3, 4, 5)  # the package's minimal_action_set(): all six
    step_blocks = 1  # one word for the sticky action, one for the spawns (_spawn_draws)

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        super().__init__(dtype)
        self.default_params = SeaquestParams()

    def _start(self, key: Tensor, params: SeaquestParams) -> SeaquestState:
        """The package's ``reset``: the player at the surface, column 5, facing left,
        full oxygen, no enemies or divers. Deterministic: ``key`` drives later draws."""
        zero = torch.zeros_like(key[..., 0])
        no = torch.zeros_like(zero, dtype=torch.bool)
        return SeaquestState(
            oxygen=zero + params.max_oxygen,
            diver_count=zero.clone(),
            sub_x=zero + 5,
            sub_y=zero.clone(),
            sub_right=no.clone(),
            **{name: _empty(zero, k) for name, k in CAPACITY.items()},
            e_spawn_speed=zero + params.init_spawn_speed,
            e_spawn_timer=zero + params.init_spawn_speed,
            d_spawn_timer=zero + params.diver_spawn_speed,
            move_speed=zero + params.init_move_interval,
            ramp_index=zero.clone(),
            shot_timer=zero.clone(),
            surface=~no,
            stamps=zero.clone(),
            terminal=no.clone(),
            last_action=zero.clone(),
            t=zero.clone(),
            key=key,
            params=params,
        )

    def _act(
        self, state: SeaquestState, action: Tensor, w: list[Tensor]
    ) -> tuple[SeaquestState, Tensor]:
        return _dynamics(state, action, w)

    def observe(self, state: SeaquestState) -> Tensor:
        """``Environment.state()``: float [..., 10, 10, 10]."""
        s = state
        p = s.params
        back = torch.where(s.sub_right, s.sub_x - 1, s.sub_x + 1) % 10  # numpy's [-1] is 9
        col = torch.arange(10, device=s.sub_x.device)
        bottom = (col == 9)[:, None]
        oxygen = torch.div(s.oxygen.clamp(min=0) * 10, p.max_oxygen, rounding_mode="floor")
        oxygen = bottom & (col < oxygen[..., None, None])
        divers = bottom & (col >= 9 - s.diver_count[..., None, None]) & (col < 9)
        movers = (s.e_fish, s.e_subs, s.divers)  # each leaves a trail behind it
        trail_x = [torch.where(o.right, o.x - 1, o.x + 1) for o in movers]
        trail = _grid(
            torch.cat([o.y for o in movers], -1),
            torch.cat(trail_x, -1),
            torch.cat([o.alive for o in movers], -1),
        )
        channels = [
            _common.cells(s.sub_y, s.sub_x),
            _common.cells(s.sub_y, back),
            _grid(s.f_bullets.y, s.f_bullets.x, s.f_bullets.alive),
            trail,
            _grid(s.e_bullets.y, s.e_bullets.x, s.e_bullets.alive),
            _grid(s.e_fish.y, s.e_fish.x, s.e_fish.alive),
            _grid(s.e_subs.y, s.e_subs.x, s.e_subs.alive),
            oxygen,
            divers,
            _grid(s.divers.y, s.divers.x, s.divers.alive),
        ]
        return _common.observation(channels, self.dtype)
