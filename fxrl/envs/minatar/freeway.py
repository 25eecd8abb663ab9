"""Freeway-MinAtar in pure torch: the ``minatar`` package's ``environments/freeway.py``.

A chicken in column 4 crosses 8 lanes of traffic (rows 1 to 8) from the bottom row to
the top: UP and DOWN move it one row, at most once every 3 steps. Reaching row 0 gives +1,
puts it back on row 9 and draws new speeds for all cars; a car on its cell (before or
after the car moves) also sends it back to row 9. Car ``i`` drives in row ``i + 1``,
moving one column every ``|speed|`` + 1 steps in the direction of ``speed``'s sign and
wrapping around; its trail (the cell behind it) is drawn in one of 5 channels, one per
speed. The game ends after 2501 steps (its own timer; no time limit in ``make``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import tree
from fxrl.envs.minatar._common import (
    DOWN,
    NOOP,
    UP,
    MinAtarEnv,
    MinAtarParams,
    cells,
    common_fields,
    digits,
    lanes,
    observation,
    register,
    words,
)

__all__ = ["Freeway", "FreewayState"]

PLAYER_SPEED = 3  # steps between chicken moves
TIME_LIMIT = 2500  # the game's terminate_timer: it ends when the timer goes below 0
CARS = 8


@tree.dataclass
class FreewayState:
    pos: Tensor  # [] int64, the chicken's row (column 4)
    car_x: Tensor  # [8] int64 columns; car i is in row i + 1
    car_timer: Tensor  # [8] int64 steps until the car next moves
    car_speed: Tensor  # [8] int64 in +-1..5: sign the direction, size the period
    move_timer: Tensor  # [] int64 steps until the chicken may move
    terminate_timer: Tensor  # [] int64
    terminal: Tensor  # [] bool
    last_action: Tensor  # [] int64, for sticky actions
    t: Tensor  # [] int64 steps since reset
    key: Tensor  # [2] int64
    params: MinAtarParams


def _speeds(hi: Tensor, lo: Tensor) -> Tensor:
    """8 signed speeds [..., 8]: the package's ``randint(1, 6)`` times the sign of
    ``rand() - 0.5`` per car, one of 10 outcomes each, from 8 base-10 digits of two words."""
    d = torch.stack(digits(hi, lo, 10, CARS), dim=-1)
    return (1 + d // 2) * (d % 2 * 2 - 1)


def _from_minatar(environment: Any, key: Tensor) -> FreewayState:
    e = environment.env
    cars = torch.tensor([[int(v) for v in car] for car in e.cars], dtype=torch.int64)
    if cars.shape != (CARS, 4) or not torch.equal(cars[:, 1], torch.arange(1, CARS + 1)):
        raise ValueError(f"from_minatar: Freeway cars {e.cars!r} are not 8 cars in rows 1..8.")
    return FreewayState(
        pos=torch.tensor(int(e.pos)),
        car_x=cars[:, 0].clone(),
        car_timer=cars[:, 2].clone(),
        car_speed=cars[:, 3].clone(),
        move_timer=torch.tensor(int(e.move_timer)),
        terminate_timer=torch.tensor(int(e.terminate_timer)),
        **common_fields(environment, key),
    )


@register("Freeway-MinAtar", None, _from_minatar)
class Freeway(MinAtarEnv):
    """Freeway-MinAtar: observation [10, 10, 7] (chicken, car, speed1..speed5),
    Discrete(6) (minimal set: NOOP, UP, DOWN). Episodes last 2501 steps (the game's timer),
    so ``make`` adds no time limit."""

    game = "freeway"
    channels = ("chicken", "car", "speed1", "speed2", "speed3", "speed4", "speed5")
    minimal_actions = (NOOP, UP, DOWN)
    step_blocks = 2  # word 0: sticky action; words 1, 2: new speeds when the chicken scores

    def _start(self, key: Tensor, params: MinAtarParams) -> FreewayState:
        speed = _speeds(*words(key, 0, 1))
        zero = torch.zeros_like(key[..., 0])
        return FreewayState(
            pos=zero + 9,
            car_x=torch.zeros_like(speed),
            car_timer=speed.abs(),
            car_speed=speed,
            move_timer=zero + PLAYER_SPEED,
            terminate_timer=zero + TIME_LIMIT,
            terminal=torch.zeros_like(zero, dtype=torch.bool),
            last_action=zero,
            t=zero,
            key=key,
            params=params,
        )

    def _act(self, s: FreewayState, action: Tensor, w: list[Tensor]) -> tuple[Any, Tensor]:
        ready = s.move_timer == 0
        up, down = ready & (action == UP), ready & (action == DOWN)
        move_timer = torch.where(up | down, PLAYER_SPEED, s.move_timer)
        pos = torch.where(up, (s.pos - 1).clamp(min=0), s.pos)
        pos = torch.where(down, (pos + 1).clamp(max=9), pos)
        win = pos == 0
        speed = torch.where(win[..., None], _speeds(w[0], w[1]), s.car_speed)
        timer = torch.where(win[..., None], speed.abs(), s.car_timer)
        pos = torch.where(win, 9, pos)
        # cars in turn; a hit only ever sends the chicken to row 9, where no car drives,
        # so checking all cars against the same row is the package's sequential loop
        row = torch.arange(1, CARS + 1, device=pos.device)
        lane = row == pos[..., None]
        hit = lane & (s.car_x == 4)
        moves = timer == 0
        x = torch.where(moves, (s.car_x + speed.sign()) % 10, s.car_x)
        hit = hit | (lane & moves & (x == 4))
        timer = torch.where(moves, speed.abs(), timer - 1)
        pos = torch.where(hit.any(-1), 9, pos)
        terminate_timer = s.terminate_timer - 1
        moved = s.replace(
            pos=pos,
            car_x=x,
            car_timer=timer,
            car_speed=speed,
            move_timer=move_timer - (move_timer > 0).to(torch.int64),
            terminate_timer=terminate_timer,
            terminal=terminate_timer < 0,
        )
        return moved, win.to(torch.int64)

    def observe(self, state: FreewayState) -> Tensor:
        """[..., 10, 10, 7]: chicken, cars, then the cell behind each car in the channel
        of its speed (1 to 5)."""
        s = state
        back = (s.car_x - s.car_speed.sign()) % 10
        trails = [lanes(back, s.car_speed.abs() == k) for k in range(1, 6)]
        return observation(
            [cells(s.pos, torch.full_like(s.pos, 4)), lanes(s.car_x), *trails], self.dtype
        )
