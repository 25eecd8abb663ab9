"""Training algorithms as pure ``(init, update)`` pairs over a TrainState pytree.

Each algorithm is one module read top to bottom (``ppo``, ``dqn``...) exposing ``Config``
(a dataclass), ``make(config) -> Algorithm`` and ``train(config, key, num_seeds=1)``.
Modules load lazily, so ``import fxrl`` stays cheap.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from fxrl._errors import unknown
from fxrl.algorithms.core import Algorithm

__all__ = ["NAMES", "Algorithm", "get"]

# Algorithms the CLI can name: ``fxrl train ppo ...``.
NAMES = ("ppo", "dqn", "sac", "td3", "recurrent_ppo")


def get(name: str) -> ModuleType:
    """The algorithm module called ``name`` (``"ppo"``, ``"dqn"``...)."""
    if name not in NAMES:
        raise ValueError(unknown(name, NAMES, "algorithm", where="fxrl.algorithms.get"))
    return importlib.import_module(f"fxrl.algorithms.{name}")


def __getattr__(name: str) -> Any:
    if name in NAMES:
        return get(name)
    raise AttributeError(f"module 'fxrl.algorithms' has no attribute {name!r}")
