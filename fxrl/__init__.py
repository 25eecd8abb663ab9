"""fxrl: reinforcement learning on PyTorch written as pure functions over pytrees."""

from fxrl import (
    algorithms,
    buffers,
    distributions,
    envs,
    exploration,
    export,
    nn,
    objectives,
    optim,
    random,
    rollout,
    schedules,
    specs,
    transforms,
    tree,
)

__all__ = [
    "algorithms",
    "buffers",
    "distributions",
    "envs",
    "exploration",
    "export",
    "nn",
    "objectives",
    "optim",
    "random",
    "rollout",
    "schedules",
    "specs",
    "transforms",
    "tree",
]
__version__ = "0.1.0"
