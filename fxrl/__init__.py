"""fxrl: reinforcement learning on PyTorch written as pure functions over pytrees."""

from fxrl import distributions, exploration, nn, optim, random, schedules, specs, tree

__all__ = [
    "distributions",
    "exploration",
    "nn",
    "optim",
    "random",
    "schedules",
    "specs",
    "tree",
]
__version__ = "0.1.0"
