"""bsuite's core tasks as pure torch envs (Osband et al. 2019; the ``bsuite`` package 0.3.6).

    env = fxrl.envs.make("Catch-bsuite")      # or "DeepSea-bsuite", "DiscountingChain-bsuite",
                                              # "MemoryChain-bsuite", "UmbrellaChain-bsuite"

One module per task, each reproducing the package's ``bsuite/environments/<task>.py``;
ids and time limits are gymnax's. Board and chain sizes are constructor arguments
(they fix tensor shapes): ``fxrl.envs.time_limit(DeepSea(size=20), 2000)``.
"""

from fxrl.envs.bsuite.catch import Catch, CatchParams, CatchState
from fxrl.envs.bsuite.deep_sea import DeepSea, DeepSeaParams, DeepSeaState
from fxrl.envs.bsuite.discounting_chain import (
    DiscountingChain,
    DiscountingChainParams,
    DiscountingChainState,
)
from fxrl.envs.bsuite.memory_chain import MemoryChain, MemoryChainParams, MemoryChainState
from fxrl.envs.bsuite.umbrella_chain import UmbrellaChain, UmbrellaChainParams, UmbrellaChainState

__all__ = [
    "Catch",
    "CatchParams",
    "CatchState",
    "DeepSea",
    "DeepSeaParams",
    "DeepSeaState",
    "DiscountingChain",
    "DiscountingChainParams",
    "DiscountingChainState",
    "MemoryChain",
    "MemoryChainParams",
    "MemoryChainState",
    "UmbrellaChain",
    "UmbrellaChainParams",
    "UmbrellaChainState",
]
