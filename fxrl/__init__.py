"""fxrl: reinforcement learning on PyTorch written as pure functions over pytrees."""

from fxrl import random, specs, tree

__all__ = ["random", "specs", "tree"]
__version__ = "0.1.0"
