"""``TimeStep``: what an env reports after ``reset`` or ``step``.

Its own module, below both ``fxrl.envs`` (whose envs return it) and ``fxrl.transforms``
(whose transforms read and rewrite it, as env wrappers): a transform knows the record a
step reports, never the envs it is applied to. ``fxrl.envs.TimeStep`` is this class.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from fxrl import tree

__all__ = ["TimeStep"]


@tree.dataclass
class TimeStep:
    """What an env reports after ``reset`` or ``step``.

    Attributes:
      obs: the observation [*obs_shape] (a pytree for dict observation specs).
      reward: [] float, the reward of the transition (0 after a reset).
      terminated: [] bool, the episode ended in a terminal state (no bootstrapping).
      truncated: [] bool, the episode was cut short (time limit): bootstrap from ``obs``.
      info: dict of tensors; reset and step of one env always report the same keys.
    """

    obs: Any
    reward: Tensor
    terminated: Tensor
    truncated: Tensor
    info: dict[str, Any]

    @property
    def done(self) -> Tensor:
        """``terminated | truncated``: the episode is over."""
        return self.terminated | self.truncated
