"""bsuite's core tasks as pure torch envs (Osband et al. 2019; the ``bsuite`` package 0.3.6).

    env = fxrl.envs.make("Catch-bsuite")      # or "DeepSea-bsuite", "DiscountingChain-bsuite",
                                              # "MemoryChain-bsuite", "UmbrellaChain-bsuite"

One module per task, each reproducing the package's ``bsuite/environments/<task>.py``;
ids and time limits are gymnax's. Board and chain sizes are constructor arguments
(they fix tensor shapes): ``fxrl.envs.time_limit(DeepSea(size=20), 2000)``.
"""

from fxrl.envs.bsuite.catch import Catch, CatchParams, CatchState
from fxrl.envs.bsuite.deep_sea import DeepSea, DeepSeaParams, DeepSeaState

__all__ = [
    "Catch",
    "CatchParams",
    "CatchState",
    "DeepSea",
    "DeepSeaParams",
    "DeepSeaState",
]
