"""What every algorithm returns, and what its ``update`` reports.

An algorithm is optax's ``(init, update)`` shape applied to a whole agent:

    algo = ppo.make(ppo.Config(env="CartPole-v1"))
    state = algo.init(key)                     # a TrainState pytree (fxrl.tree.dataclass)
    state, metrics = algo.update(state)        # one iteration: collect, then learn; pure
    action = algo.policy(state.params, obs, key, mode="mode")

``init`` and ``update`` are pure, so ``torch.func.vmap`` over a leading seed/task dim of
keys and TrainStates trains many agents in one call, and saving the TrainState is all a
checkpoint needs.

The metrics contract (every algorithm, one value per seed; the run loop in ``fxrl.run``
logs exactly these without looking inside the state):
  ``steps``           [] int64   env steps taken so far by this seed, this iteration included
  ``episodes``        [] int64   episodes that ended during this iteration
  ``episode_return``  [] float32 mean return of those episodes; NaN when none ended
  ``episode_length``  [] float32 mean length of those episodes; NaN when none ended
  ``*loss*``          [] float32 the iteration's losses (names contain "loss")
  anything else       [] tensors (entropy, KL, learning rate, epsilon, q...)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from fxrl.envs.core import Env

__all__ = ["Algorithm"]


class Algorithm(NamedTuple):
    """``make(config)``'s result.

    Attributes:
      init: ``init(key [2]) -> TrainState``.
      update: ``update(state) -> (state, metrics)``; pure; metrics per the module docstring.
      policy: ``policy(params, obs, key=None, mode="mode") -> action``; exportable with
        ``fxrl.export`` (preprocessing included: it takes raw env observations).
      config: the Config the algorithm was made from.
      env: the pure env (one, unbatched, as ``fxrl.envs.make`` builds it) the agent acts
        in; evaluation and export take observation and action specs from it.
      steps_per_update: env steps one ``update`` takes per seed.
    """

    init: Callable[..., Any]
    update: Callable[..., tuple[Any, dict[str, Any]]]
    policy: Callable[..., Any]
    config: Any
    env: Env
    steps_per_update: int
