"""Breakout-MinAtar in pure torch: the ``minatar`` package's ``environments/breakout.py``.

A paddle on the bottom row (moved by LEFT and RIGHT) bounces a ball that travels along
diagonals and breaks 3 rows of bricks (+1 each); a cleared wall comes back when the ball
next reaches the bottom row. The ball is reflected by the walls, the ceiling and bricks;
on the bottom row it bounces off the paddle (back the way it came if the paddle is where
the ball was, sideways if it is where the ball goes) or the game ends. The trail channel
marks the ball's previous cell. The reset's only draw is the ball's start (left or right).
Directions: 0 up-left, 1 up-right, 2 down-right, 3 down-left.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import tree
from fxrl.envs.minatar._common import (
    LEFT,
    NOOP,
    RIGHT,
    MinAtarEnv,
    MinAtarParams,
    below,
    cells,
    common_fields,
    observation,
    register,
    words,
)

__all__ = ["Breakout", "BreakoutState"]


@tree.dataclass
class BreakoutState:
    ball_y: Tensor  # [] int64 row
    ball_x: Tensor  # [] int64 column
    ball_dir: Tensor  # [] int64 in 0..3 (see the module)
    pos: Tensor  # [] int64 paddle column
    bricks: Tensor  # [10, 10] int32, 1 where a brick is (int32, not bool: inductor's
    # vectorised loops load and store bool tensors element by element, int32 at full speed)
    strike: Tensor  # [] bool, the ball hit a brick last step (it then passes through one)
    last_y: Tensor  # [] int64, the ball's previous cell (the trail)
    last_x: Tensor  # [] int64
    terminal: Tensor  # [] bool
    last_action: Tensor  # [] int64, for sticky actions
    t: Tensor  # [] int64 steps since reset
    key: Tensor  # [2] int64
    params: MinAtarParams


def _wall(on: Tensor) -> Tensor:
    """The three rows of bricks (rows 1 to 3) where ``on`` [...] is True: bool [..., 10, 10],
    computed from ``on`` so that a vmapped reset gives a real batch (no stride-0 view)."""
    rows = torch.arange(10, device=on.device)[:, None].expand(10, 10)
    return (rows >= 1) & (rows <= 3) & on[..., None, None]


def _from_minatar(environment: Any, key: Tensor) -> BreakoutState:
    e = environment.env
    i64 = lambda v: torch.tensor(int(v), dtype=torch.int64)
    return BreakoutState(
        ball_y=i64(e.ball_y),
        ball_x=i64(e.ball_x),
        ball_dir=i64(e.ball_dir),
        pos=i64(e.pos),
        bricks=torch.as_tensor(e.brick_map != 0).to(torch.int32),
        strike=torch.tensor(bool(e.strike)),
        last_y=i64(e.last_y),
        last_x=i64(e.last_x),
        **common_fields(environment, key),
    )


@register("Breakout-MinAtar", 1000, _from_minatar)
class Breakout(MinAtarEnv):
    """Breakout-MinAtar: observation [10, 10, 4] (paddle, ball, trail, brick), Discrete(6)
    (minimal set: NOOP, LEFT, RIGHT). Time limit in ``make``: 1000 steps, as gymnax."""

    game = "breakout"
    channels = ("paddle", "ball", "trail", "brick")
    minimal_actions = (NOOP, LEFT, RIGHT)
    step_blocks = 1

    def _start(self, key: Tensor, params: MinAtarParams) -> BreakoutState:
        right = below(words(key, 0, 1)[0], 2) == 1  # package: randint(2) picks (0, 2) or (9, 3)
        x = torch.where(right, 9, 0)
        zero = torch.zeros_like(x)
        false = torch.zeros_like(right)
        return BreakoutState(
            ball_y=zero + 3,
            ball_x=x,
            ball_dir=torch.where(right, 3, 2),
            pos=zero + 4,
            bricks=_wall(x >= 0).to(torch.int32),
            strike=false,
            last_y=zero + 3,
            last_x=x,
            terminal=false,
            last_action=zero,
            t=zero,
            key=key,
            params=params,
        )

    def _act(self, s: BreakoutState, action: Tensor, w: list[Tensor]) -> tuple[Any, Tensor]:
        pos = torch.where(action == LEFT, (s.pos - 1).clamp(min=0), s.pos)
        pos = torch.where(action == RIGHT, (pos + 1).clamp(max=9), pos)
        d = s.ball_dir
        new_x = s.ball_x + torch.where((d == 1) | (d == 2), 1, -1)
        new_y = s.ball_y + torch.where(d <= 1, -1, 1)
        side = (new_x < 0) | (new_x > 9)
        new_x = new_x.clamp(0, 9)
        d = torch.where(side, d ^ 1, d)  # [1, 0, 3, 2]: mirror left-right
        top = new_y < 0
        new_y = new_y.clamp(min=0)
        d = torch.where(top, 3 - d, d)  # [3, 2, 1, 0]: mirror up-down
        at = cells(new_y, new_x)
        old_bricks = s.bricks != 0
        brick = ~top & (old_bricks & at).any((-1, -2))
        hit = brick & ~s.strike  # a brick right after a strike is passed through
        bricks = old_bricks & ~(at & hit[..., None, None])
        new_y = torch.where(hit, s.ball_y, new_y)
        d = torch.where(hit, 3 - d, d)
        bottom = ~top & ~brick & (new_y == 9)
        refill = bottom & ~bricks.any((-1, -2))
        bricks = bricks | _wall(refill)
        back = bottom & (s.ball_x == pos)  # paddle under the ball's old column
        sideways = bottom & ~back & (new_x == pos)
        d = torch.where(back, 3 - d, torch.where(sideways, d ^ 2, d))
        new_y = torch.where(back | sideways, s.ball_y, new_y)
        moved = s.replace(
            ball_y=new_y,
            ball_x=new_x,
            ball_dir=d,
            pos=pos,
            bricks=bricks.to(torch.int32),
            strike=brick,
            last_y=s.ball_y,
            last_x=s.ball_x,
            terminal=bottom & ~back & ~sideways,
        )
        return moved, hit.to(torch.int64)

    def observe(self, state: BreakoutState) -> Tensor:
        """[..., 10, 10, 4]: paddle (bottom row), ball, trail (previous cell), bricks."""
        s = state
        return observation(
            [
                cells(torch.full_like(s.pos, 9), s.pos),
                cells(s.ball_y, s.ball_x),
                cells(s.last_y, s.last_x),
                s.bricks != 0,
            ],
            self.dtype,
        )
