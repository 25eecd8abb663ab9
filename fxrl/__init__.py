"""fxrl: reinforcement learning on PyTorch written as pure functions over pytrees."""

from fxrl import (
    algorithms,
    buffers,
    compile,  # the module fxrl/compile.py, callable: fxrl.compile(fn) compiles fn
    distributions,
    envs,
    exploration,
    export,
    nn,
    objectives,
    optim,
    random,
    rollout,
    scan,  # the module fxrl/scan.py, callable: fxrl.scan(body, carry, xs) runs the loop
    schedules,
    specs,
    transforms,
    tree,
)
from fxrl.compile import trace

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
    "scan",
    "schedules",
    "specs",
    "trace",
    "transforms",
    "tree",
]
# The one place the version is written: pyproject.toml reads it (setuptools' dynamic
# version), run directories and checkpoints record it, `fxrl --version` prints it.
__version__ = "0.1.0"
