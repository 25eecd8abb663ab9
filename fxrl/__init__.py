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
from fxrl.compile import compile, trace  # functions; the module fxrl.compile is shadowed

__all__ = [
    "algorithms",
    "buffers",
    "compile",
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
    "trace",
    "transforms",
    "tree",
]
# The one place the version is written: pyproject.toml reads it (setuptools' dynamic
# version), run directories and checkpoints record it, `fxrl --version` prints it.
__version__ = "0.1.0"
