"""MinAtar (Young & Tian 2019) in pure torch: the ``minatar`` package's five games.

    env = fxrl.envs.make("Breakout-MinAtar")            # sticky actions, 1000-step limit
    state, ts = env.reset(fxrl.random.key(0))           # ts.obs: float32 [10, 10, 4]
    frame = env.render(state)                           # uint8 [160, 160, 3]

Observations are the package's ``Environment.state()`` as float32 [10, 10, C], channels
last in the package's order; actions are its 6 (``ACTIONS``: no-op, left, up, right,
down, fire). ``from_minatar(environment, key)`` turns a ``minatar.Environment``'s game
into the state of the bare fxrl env, for parity checks against the package.
"""

from fxrl.envs.minatar._common import (
    ACTIONS,
    MinAtarEnv,
    MinAtarParams,
    from_minatar,
    palette,
    registered,
    render_observation,
)
from fxrl.envs.minatar.asterix import Asterix, AsterixState
from fxrl.envs.minatar.breakout import Breakout, BreakoutState
from fxrl.envs.minatar.freeway import Freeway, FreewayState
from fxrl.envs.minatar.seaquest import Seaquest, SeaquestParams, SeaquestState
from fxrl.envs.minatar.space_invaders import SpaceInvaders, SpaceInvadersParams, SpaceInvadersState

__all__ = [
    "ACTIONS",
    "Asterix",
    "AsterixState",
    "Breakout",
    "BreakoutState",
    "Freeway",
    "FreewayState",
    "MinAtarEnv",
    "MinAtarParams",
    "Seaquest",
    "SeaquestParams",
    "SeaquestState",
    "SpaceInvaders",
    "SpaceInvadersParams",
    "SpaceInvadersState",
    "from_minatar",
    "palette",
    "registered",
    "render_observation",
]
