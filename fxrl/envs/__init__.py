"""Pure environments: ``env.reset(key) -> (state, timestep)``, ``env.step(state, action)``.

    env = fxrl.envs.make("CartPole-v1")          # time limit, auto-reset, episode stats
    state, ts = env.reset(fxrl.random.key(0))
    state, ts = env.step(state, torch.tensor(1))
    envs = fxrl.envs.batch(env, 4096)            # torch.func.vmap over envs

Built in: CartPole-v1, Pendulum-v1, MountainCar-v0, MountainCarContinuous-v0, Acrobot-v1,
each checked against gymnasium; the MinAtar games (``fxrl.envs.minatar``: Breakout-,
Freeway-, Asterix-MinAtar...), checked against the minatar package; bsuite's tasks
(``fxrl.envs.bsuite``: Catch-, DeepSea-, DiscountingChain-, MemoryChain-,
UmbrellaChain-bsuite), checked against the bsuite package; gymnax's meta-RL tasks
(``fxrl.envs.misc``: BernoulliBandit-, GaussianBandit-, FourRooms-, MetaMaze-,
PointRobot-misc, each with ``sample_params(key)``). Wrappers:
auto_reset, time_limit, batch, transform, episode_stats, checked. Atari: atari (ale-py,
one game or its vector env), atari_screen (ale-py's own frame preprocessing as a
transform, for exported policies).
Your own: ``register(id, factory, max_steps=...)`` (checked against the env contract), or
an ``fxrl.envs`` entry point of an installed package; ``registered()`` lists every id.
Out, as gymnasium / Stable-Baselines3 envs: to_gymnasium, to_sb3, and
``gymnasium.make("fxrl/<id>")`` once ``fxrl.envs.to_gym`` is imported.
"""

from fxrl.envs import minatar
from fxrl.envs.acrobot import Acrobot
from fxrl.envs.atari import atari
from fxrl.envs.atari_vector import atari_screen
from fxrl.envs.cartpole import CartPole
from fxrl.envs.continuous_mountain_car import ContinuousMountainCar
from fxrl.envs.core import Env, TimeStep, Wrapper, WrapperState, params_as_tensors
from fxrl.envs.host import HostEnv, HostState, gym
from fxrl.envs.mountain_car import MountainCar
from fxrl.envs.pendulum import Pendulum
from fxrl.envs.registry import make, register, registered
from fxrl.envs.wrappers import (
    AutoReset,
    Batch,
    Checked,
    TimeLimit,
    TransformEnv,
    auto_reset,
    batch,
    checked,
    episode_stats,
    time_limit,
    transform,
)

__all__ = [
    "Acrobot",
    "AutoReset",
    "Batch",
    "CartPole",
    "Checked",
    "ContinuousMountainCar",
    "Env",
    "HostEnv",
    "HostState",
    "MountainCar",
    "Pendulum",
    "TimeLimit",
    "TimeStep",
    "TransformEnv",
    "Wrapper",
    "WrapperState",
    "atari",
    "atari_screen",
    "auto_reset",
    "batch",
    "checked",
    "episode_stats",
    "gym",
    "make",
    "minatar",
    "params_as_tensors",
    "register",
    "registered",
    "time_limit",
    "to_gymnasium",
    "to_sb3",
    "transform",
]


def __getattr__(name: str) -> object:
    # gymnasium and Stable-Baselines3 are optional: import the adapters on first use
    if name == "to_gymnasium":
        from fxrl.envs.to_gym import to_gymnasium

        return to_gymnasium
    if name == "to_sb3":
        from fxrl.envs.sb3 import to_sb3

        return to_sb3
    raise AttributeError(f"module 'fxrl.envs' has no attribute {name!r}")
