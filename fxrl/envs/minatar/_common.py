"""What the five MinAtar games share: params, action set, sticky actions, random words,
observation building, the colored-grid render and the ``from_minatar`` dispatch.

The reference is the ``minatar`` package (Young & Tian 2019, PyPI 1.0.15):
``minatar/environment.py`` (sticky actions, the 6-action set, ``display_state``'s
palette) and ``minatar/environments/<game>.py`` (each game's dynamics).

Randomness. A game's state keeps the key of its episode and its step count ``t``; step
``t`` (counting from 0) reads the Threefry-2x32 blocks at counters ``(t + 1, j)`` of that
key, the reset those at ``(0, j)``, so a step is a pure function of its state and no key
is split or carried per step. Every word is drawn on every step (branch-free code draws
whether or not the game needs it, so each game reads as few blocks as it can: a sticky
action takes a 24-bit uniform (``uniform24``), other draws bit fields turned into
integers in ``[0, n)`` by multiply-shift (``below``) or the digits of a 64-bit fraction
(``digits``), the package's ``numpy`` probabilities up to 2**-15 or less (noted per game).

Game modules subclass ``MinAtarEnv`` (one ``reset``/``step`` for all, written once
here) and define ``_start(key, params)``, ``_act(state, action, words) -> (state,
reward)`` and ``observe``; ``register`` puts them in ``fxrl.envs.make`` and
``from_minatar``'s table.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from fxrl import random, specs, tree
from fxrl.envs import _index
from fxrl.envs.core import Env, TimeStep, params_as_tensors

__all__ = [
    "ACTIONS",
    "DOWN",
    "FIRE",
    "LEFT",
    "NOOP",
    "RIGHT",
    "UP",
    "MinAtarEnv",
    "MinAtarParams",
    "below",
    "cells",
    "digits",
    "from_minatar",
    "lanes",
    "palette",
    "points",
    "register",
    "registered",
    "render_observation",
    "select",
    "uniform24",
    "words",
]

# The package's action_map, in its order: all games take these 6 actions.
ACTIONS = ("n", "l", "u", "r", "d", "f")
NOOP, LEFT, UP, RIGHT, DOWN, FIRE = range(6)
SIZE = 10  # the 10x10 grid
CELL = 16  # pixels per grid cell in render


@tree.dataclass
class MinAtarParams:
    """The package's ``Environment`` arguments, plus gymnasium's ``use_minimal_action_set``.

    Attributes:
      sticky_action_prob: with this probability a step repeats the previous action
        (``Environment.act``).
      difficulty_ramping: speed the game up over time (Asterix, Seaquest, Space Invaders;
        ignored by Breakout and Freeway, as in the package).
      minimal_action_set: actions index the game's ``minimal_action_set()`` instead of
        all 6 (``minatar.gym``'s ``MinAtar/<Game>-v1``); fixes the action spec at ``make``.
    """

    sticky_action_prob: Any = 0.1
    difficulty_ramping: Any = True
    minimal_action_set: Any = False


# ------------------------------------------------------------------------------ randomness


def words(key: Tensor, counter: Tensor | int, blocks: int) -> list[Tensor]:
    """``2 * blocks`` random int32 words: Threefry-2x32-20 at counters ``(counter, j)``.

    Args:
      key: [..., 2] int64.
      counter: [...] integer tensor or int, the first counter word.
      blocks: how many blocks (``j = 0 .. blocks - 1``).
    Returns:
      int32 tensors [...] (uint32 bits), block ``j`` giving words ``2j`` and ``2j + 1``.
    """
    k0, k1 = key[..., 0].to(torch.int32), key[..., 1].to(torch.int32)
    hi = torch.as_tensor(counter, device=key.device).to(torch.int32) + torch.zeros_like(k0)
    out: list[Tensor] = []
    for j in range(blocks):
        out.extend(random.threefry2x32_int32(k0, k1, hi, torch.full_like(hi, j)))
    return out


def uniform24(word: Tensor) -> Tensor:
    """A float32 uniform in [0, 1) from the top 24 bits of an int32 word (exact in float32)."""
    return ((word >> 8) & 0xFFFFFF).to(torch.float32) * 2.0**-24


def below(word: Tensor, n: Tensor | int, shift: int = 8, width: int = 24) -> Tensor:
    """An int64 in ``[0, n)`` from bits ``shift .. shift + width`` of an int32 word:
    the field times ``n``, >> ``width`` (each value within ``n / 2**width`` of its share)."""
    field = (word >> shift).to(torch.int64) & ((1 << width) - 1)
    return (field * n) >> width


def digits(hi: Tensor, lo: Tensor, base: int, count: int) -> list[Tensor]:
    """``count`` independent uniform digits in ``[0, base)`` from two words: the leading
    base-``base`` digits of the 64-bit binary fraction ``0.hi lo`` (each value's
    probability within ``base**count / 2**64`` of exact), int64 [...] each."""
    mask = 0xFFFFFFFF
    hi, lo = hi.to(torch.int64) & mask, lo.to(torch.int64) & mask
    out = []
    for _ in range(count):
        lo = lo * base
        hi = hi * base + (lo >> 32)
        lo = lo & mask
        out.append(hi >> 32)
        hi = hi & mask
    return out


# ------------------------------------------------------------------------------ the grid


def _axes(device: torch.device) -> tuple[Tensor, Tensor]:
    i = torch.arange(SIZE, device=device)
    return i[:, None], i[None, :]


def cells(y: Tensor, x: Tensor, on: Tensor | None = None) -> Tensor:
    """The one-cell mask of ``(y, x)``: bool [..., 10, 10] (all False where ``on`` is False).

    ``y``, ``x``: [...] int64 row and column; a position off the grid marks no cell.
    """
    rows, cols = _axes(y.device)
    mask = (rows == y[..., None, None]) & (cols == x[..., None, None])
    return mask if on is None else mask & on[..., None, None]


def points(y: Tensor, x: Tensor, on: Tensor | None = None) -> Tensor:
    """The cells of ``K`` objects at ``(y[k], x[k])``: ``y``, ``x``, ``on`` [..., K] ->
    bool [..., 10, 10], a cell set where any object with ``on`` True sits."""
    return cells(y, x, on).any(-3)


def lanes(x: Tensor, on: Tensor | None = None, first: int = 1) -> Tensor:
    """The cells of ``K`` objects, one per row: object ``k`` in row ``first + k`` at
    column ``x[k]`` (Asterix's and Freeway's lanes). ``x``, ``on`` [..., K] -> bool
    [..., 10, 10]; the same map as ``points`` with those rows, from 100 comparisons per
    map instead of ``K`` x 100 (the observation is most of a compiled step's work)."""
    col = x if on is None else torch.where(on, x, -1)  # -1: no cell
    none = torch.full_like(col[..., :1], -1)
    rows = [none] * first + [col] + [none] * (SIZE - first - x.shape[-1])
    _, cols = _axes(x.device)
    return cols == torch.cat(rows, -1)[..., None]


def observation(channels: Sequence[Tensor], dtype: torch.dtype) -> Tensor:
    """Stack bool [..., 10, 10] masks, one per channel in the package's order, into the
    observation [..., 10, 10, C] of ``dtype`` (channels last, as ``Environment.state()``)."""
    return torch.stack([c.to(dtype) for c in channels], dim=-1)


# ------------------------------------------------------------------------------ render


def _cubehelix(x: float) -> tuple[float, float, float]:
    """Green's (2011) cubehelix at lightness ``x``, with matplotlib's defaults (start 0.5,
    rotations -1.5, hue 1, gamma 1): the map seaborn's ``color_palette("cubehelix")`` uses."""
    start, rotations, hue = 0.5, -1.5, 1.0
    phi = 2 * math.pi * (start / 3 + rotations * x)
    amp = hue * x * (1 - x) / 2
    c, s = math.cos(phi), math.sin(phi)
    rgb = (
        x + amp * (-0.14861 * c + 1.78277 * s),
        x + amp * (-0.29227 * c - 0.90649 * s),
        x + amp * (1.97294 * c),
    )
    return tuple(min(1.0, max(0.0, v)) for v in rgb)  # type: ignore[return-value]


def palette(n_channels: int) -> list[tuple[int, int, int]]:
    """The colors of ``Environment.display_state``: black for an empty cell, then
    ``n_channels`` cubehelix colors sampled as seaborn does (``n`` evenly spaced points
    strictly inside [0, 1]); uint8 RGB."""
    xs = [(i + 1) / (n_channels + 1) for i in range(n_channels)]
    return [(0, 0, 0)] + [tuple(round(255 * v) for v in _cubehelix(x)) for x in xs]  # type: ignore[misc]


def render_observation(obs: Tensor, cell: int = CELL) -> Tensor:
    """The package's colored grid of an observation: uint8 [..., 10 * cell, 10 * cell, 3].

    A cell shows the color of its highest set channel (``display_state``'s
    ``amax(state * (channel + 1))``), black where none is set.
    """
    n = obs.shape[-1]
    weights = torch.arange(1, n + 1, device=obs.device, dtype=torch.int64)
    index = ((obs > 0).to(torch.int64) * weights).amax(-1)  # [..., 10, 10]
    colors = torch.tensor(palette(n), dtype=torch.uint8, device=obs.device)
    image = colors[index]  # [..., 10, 10, 3]
    return image.repeat_interleave(cell, dim=-3).repeat_interleave(cell, dim=-2)


# ------------------------------------------------------------------------------ the env


class MinAtarEnv(Env):
    """Shared ``reset``/``step`` of a MinAtar game (see the module docstring).

    Subclasses set ``game`` (the package's module name), ``channels`` (the package's
    channel names in order), ``minimal_actions`` (``minimal_action_set()``),
    ``step_blocks`` (Threefry blocks a step reads; the first word goes to sticky actions)
    and define ``_start``, ``_act`` and ``observe``. Their state is a
    ``tree.dataclass`` with at least ``terminal``, ``last_action``, ``t``, ``key``,
    ``params`` (a ``MinAtarParams``).
    """

    game: str = ""
    channels: tuple[str, ...] = ()
    minimal_actions: tuple[int, ...] = tuple(range(6))
    step_blocks: int = 1
    vectorized = True  # elementwise over leading batch dims: batch() steps it without vmap

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        self.dtype = dtype
        shape = (SIZE, SIZE, len(self.channels))
        self.observation_spec = specs.Box(0.0, 1.0, shape=shape, dtype=dtype)
        self.default_params = MinAtarParams()

    @property
    def action_spec(self) -> specs.Discrete:  # type: ignore[override]
        """Discrete(6), or Discrete(len(minimal_action_set)) when the default params ask."""
        minimal = bool(self.default_params.minimal_action_set)
        return specs.Discrete(len(self.minimal_actions) if minimal else len(ACTIONS))

    def _params(self, params: Any, device: torch.device) -> Any:
        base = self.default_params if params is None else params
        return params_as_tensors(base, torch.float32, device)

    def reset(self, key: Tensor, params: Any = None) -> tuple[Any, TimeStep]:
        """A new game, as the package's ``reset()``; its random draws from ``key``."""
        state = _distinct(self._start(key, self._params(params, key.device)))
        flag = torch.zeros_like(state.terminal)
        reward = torch.zeros(flag.shape, dtype=self.dtype, device=flag.device)
        return state, TimeStep(self.observe(state), reward, flag, flag, {})

    def step(self, state: Any, action: Tensor) -> tuple[Any, TimeStep]:
        """``Environment.act``: sticky action, then the game's ``act``; once terminal, a
        step changes nothing and gives reward 0 (the package's early return)."""
        p = state.params
        action = torch.as_tensor(action, device=state.t.device).to(torch.int64)
        table = torch.tensor(self.minimal_actions, device=action.device)
        small = _index.rows(table, action.clamp(0, len(self.minimal_actions) - 1))
        action = torch.where(p.minimal_action_set, small, action)
        w = words(state.key, state.t + 1, self.step_blocks)
        sticky = uniform24(w[0]) < p.sticky_action_prob
        action = torch.where(sticky, state.last_action, action)
        moved, reward = self._act(state, action, w[1:])
        moved = _keep_where(state.terminal, state, moved)
        moved = moved.replace(t=state.t + 1, last_action=action)
        reward = torch.where(state.terminal, 0, reward).to(self.dtype)
        truncated = torch.zeros_like(moved.terminal)
        return moved, TimeStep(self.observe(moved), reward, moved.terminal, truncated, {})

    def render(self, state: Any) -> Tensor:
        """The package's colored grid (``display_state``), 16x16 pixels a cell:
        uint8 [..., 160, 160, 3]."""
        return render_observation(self.observe(state))

    def _start(self, key: Tensor, params: MinAtarParams) -> Any:
        """A game's first state (each game defines it)."""
        raise NotImplementedError(f"{type(self).__name__} does not define _start(key, params).")

    def _act(self, state: Any, action: Tensor, w: list[Tensor]) -> tuple[Any, Tensor]:
        """A game's step from the action and this step's random words (each game defines it)."""
        raise NotImplementedError(f"{type(self).__name__} does not define _act(state, action, w).")


def select(cond: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """``torch.where(cond, a, b)``, written with ``&``/``|`` when ``a`` and ``b`` are bool:
    ONNX Runtime has no ``Where`` kernel for bool values, so exported programs use this."""
    if a.dtype == torch.bool and b.dtype == torch.bool:
        return (cond & a) | (~cond & b)
    return torch.where(cond, a, b)


def _distinct(state: Any) -> Any:
    """``state`` with no tensor in two leaves: a leaf that is the same tensor as an earlier
    one is copied. A reset written ``t=zero, last_action=zero`` would otherwise hand
    ``fxrl.compile`` (which traces on fake tensors, one per distinct input tensor) a state
    whose traced program reads one input for both, wrong for later states."""
    seen: set[int] = set()

    def once(x: Any) -> Any:
        if not isinstance(x, Tensor):
            return x
        if id(x) in seen:
            return x.clone()
        seen.add(id(x))
        return x

    return tree.map(once, state)


def _keep_where(cond: Tensor, old: Any, new: Any) -> Any:
    """``new`` with its game fields (all but ``t``, ``key``, ``params``) taken from ``old``
    where ``cond`` [...] is True; params may be shared by a batch, so they are left out."""
    kept = {}
    for f in dataclasses.fields(new):
        if f.name in ("t", "key", "params"):
            continue
        a, b = getattr(old, f.name), getattr(new, f.name)
        kept[f.name] = tree.map(  # fields may be pytrees (Seaquest's slot lists)
            lambda x, y: select(cond.reshape(cond.shape + (1,) * (y.ndim - cond.ndim)), x, y),
            a,
            b,
        )
    return new.replace(**kept)


# ------------------------------------------------------------------------------ registry

# fxrl id -> (env class, make's default max_steps or None)
_IDS: dict[str, tuple[type[MinAtarEnv], int | None]] = {}
# package game name ("breakout") -> state builder from a minatar.Environment
_FROM_MINATAR: dict[str, Callable[[Any, Tensor], Any]] = {}


def register(
    id: str, max_steps: int | None, from_env: Callable[[Any, Tensor], Any]
) -> Callable[[type[MinAtarEnv]], type[MinAtarEnv]]:
    """Class decorator: make ``fxrl.envs.make(id)`` build the game with a default time
    limit of ``max_steps`` (None: none), and ``from_minatar`` use ``from_env``."""

    def put(cls: type[MinAtarEnv]) -> type[MinAtarEnv]:
        _IDS[id] = (cls, max_steps)
        _FROM_MINATAR[cls.game] = from_env
        return cls

    return put


def registered() -> dict[str, tuple[type[MinAtarEnv], int | None]]:
    """The MinAtar ids: id -> (env class, default max_steps)."""
    return dict(_IDS)


def params_of(environment: Any) -> MinAtarParams:
    """A ``minatar.Environment``'s params as tensors (ramping where the game keeps it)."""
    ramping = getattr(environment.env, "ramping", True)
    return params_as_tensors(
        MinAtarParams(float(environment.sticky_action_prob), bool(ramping), False),
        torch.float32,
    )


def from_minatar(environment: Any, key: Tensor) -> Any:
    """The state of the bare fxrl game (``fxrl.envs.make(id, max_steps=None,
    auto_reset=False, episode_stats=False)``) equal to a ``minatar.Environment``'s current
    game, so stepping both with the same action gives the same observation, reward and
    terminal wherever the package's step draws no random number.

    Args:
      environment: a ``minatar.Environment`` (any game).
      key: [2] int64, the key of the fxrl state's future random draws.
    Returns:
      The game's state, with ``t = 0`` and the package's last action (for sticky actions).
    """
    name = getattr(environment, "env_name", None)
    if name not in _FROM_MINATAR:
        raise ValueError(
            f"fxrl.envs.minatar.from_minatar: expected a minatar.Environment of one of the games "
            f"{sorted(_FROM_MINATAR)}; got {type(environment).__name__} with game {name!r}."
        )
    random._check_key("from_minatar", key)
    with torch.device(key.device):  # the state is read off the package onto key's device
        return _FROM_MINATAR[name](environment, key)


def common_fields(environment: Any, key: Tensor) -> dict[str, Tensor]:
    """The state fields every game has, read off a ``minatar.Environment``."""
    return {
        "terminal": torch.tensor(bool(environment.env.terminal)),
        "last_action": torch.tensor(int(environment.last_action), dtype=torch.int64),
        "t": torch.tensor(0, dtype=torch.int64),
        "key": key.clone(),
        "params": params_of(environment),
    }
