"""gymnax's meta-RL and exploration tasks as pure torch envs.

    env = fxrl.envs.make("MetaMaze-misc")        # or "BernoulliBandit-misc",
    # "GaussianBandit-misc", "FourRooms-misc", "PointRobot-misc"
    tasks = torch.func.vmap(env.sample_params)(fxrl.random.split(key, 8))
    states, _ = fxrl.envs.batch(env, 8).reset(key, tasks)   # one task per env

One module per task, each reproducing gymnax's ``environments/misc/<task>.py``. Each has
its task distribution as a pure ``sample_params(key, params=None)``: the params of one
task (goal, arm probabilities...), fixed across that task's episodes.
"""

from fxrl.envs.misc.bernoulli_bandit import (
    BernoulliBandit,
    BernoulliBanditParams,
    BernoulliBanditState,
)
from fxrl.envs.misc.four_rooms import FourRooms, FourRoomsParams, FourRoomsState
from fxrl.envs.misc.gaussian_bandit import GaussianBandit, GaussianBanditParams, GaussianBanditState
from fxrl.envs.misc.meta_maze import MetaMaze, MetaMazeParams, MetaMazeState
from fxrl.envs.misc.point_robot import PointRobot, PointRobotParams, PointRobotState

__all__ = [
    "BernoulliBandit",
    "BernoulliBanditParams",
    "BernoulliBanditState",
    "FourRooms",
    "FourRoomsParams",
    "FourRoomsState",
    "GaussianBandit",
    "GaussianBanditParams",
    "GaussianBanditState",
    "MetaMaze",
    "MetaMazeParams",
    "MetaMazeState",
    "PointRobot",
    "PointRobotParams",
    "PointRobotState",
]
