"""fxrl: reinforcement learning on PyTorch written as pure functions over pytrees."""

from fxrl import (
    distributions,
    envs,
    exploration,
    export,
    nn,
    optim,
    random,
    rollout,
    schedules,
    specs,
    transforms,
    tree,
)

__all__ = [
    "distributions",
    "envs",
    "exploration",
    "export",
    "nn",
    "optim",
    "random",
    "rollout",
    "schedules",
    "specs",
    "transforms",
    "tree",
]
__version__ = "0.1.0"
