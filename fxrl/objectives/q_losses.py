"""Value-based losses: DQN and double DQN over a batch of transitions.

A batch is a dict of tensors with shared leading dims ``[*B]`` (one transition each;
``[T, N]`` works as well as ``[B]``):
``obs [*B, ...]``, ``action [*B]`` int64, ``reward [*B]``, ``next_obs [*B, ...]``,
``terminated [*B]`` bool, and optionally ``truncated [*B]`` (a time limit: it bootstraps,
so it changes nothing here), ``discount [*B]`` (n-step transitions: the bootstrap
discount ``gamma**n`` replacing ``gamma``) and ``weight [*B]`` (prioritized replay's
importance weights).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from fxrl.objectives import _checks
from fxrl.objectives.blocks import bootstrap_discount, huber, q_learning_target, select

__all__ = ["dqn_loss"]

Tensor = torch.Tensor
LOSSES = ("huber", "mse")


def _reduce(x: Tensor, weight: Tensor | None) -> Tensor:
    return (x * weight).mean() if weight is not None else x.mean()


def dqn_loss(
    q_apply: Callable[[Any, Tensor], Tensor],
    params: Any,
    target_params: Any,
    batch: Mapping[str, Tensor],
    *,
    gamma: float = 0.99,
    double: bool = False,
    loss: str = "huber",
    huber_delta: float = 1.0,
) -> tuple[Tensor, dict[str, Tensor]]:
    """One-step Q-learning loss (Mnih et al. 2015; ``double``: van Hasselt et al. 2016).

    ``target = reward + discount * (1 - terminated) * Q_target(next_obs, a*)`` with
    ``a* = argmax Q_target(next_obs)``, or ``argmax Q(next_obs)`` when ``double``. The
    target is computed without gradient; ``discount`` is ``batch["discount"]`` when the
    batch has it (n-step), else ``gamma``.

    Args:
      q_apply: ``q_apply(params, obs [*B, ...]) -> q [*B, A]``.
      params: online params (differentiated).
      target_params: target network params (same structure).
      batch: ``obs, action [*B] int64, reward [*B], next_obs, terminated [*B]`` and
        optionally ``truncated, discount, weight`` (see the module docstring).
      gamma: discount for one-step batches.
      double: select the next action with the online network.
      loss: ``"huber"`` (``F.smooth_l1_loss`` for ``huber_delta=1``, as in the Nature
        paper and SB3) or ``"mse"`` (``F.mse_loss``, as CleanRL).
      huber_delta: where the Huber loss turns linear.
    Returns:
      ``(loss [], metrics)``: metrics holds detached tensors: ``loss``, ``q`` (mean
      Q of the actions taken), ``target`` (mean target) and ``td_error [*B]`` (for
      priorities).
    """
    fn = "dqn_loss"
    if loss not in LOSSES:
        raise ValueError(f"{fn}: loss={loss!r}; expected one of {list(LOSSES)}.")
    _checks.fields(fn, batch, ("obs", "action", "reward", "next_obs", "terminated"))
    dims = _checks.batch_dims(
        fn, batch, ("terminated", "truncated", "discount", "weight"), ("obs", "next_obs")
    )
    _checks.float_field(fn, batch, "reward")
    with torch.no_grad():
        next_q = q_apply(target_params, batch["next_obs"])
        _checks.q_values(fn, "q_apply(target_params, next_obs)", next_q, dims)
        next_q_select = q_apply(params, batch["next_obs"]) if double else None
        discount = batch.get("discount", gamma)
        target = q_learning_target(
            batch["reward"],
            bootstrap_discount(batch["terminated"], discount),
            next_q,
            next_q_select,
        )
    q = _checks.q_values(fn, "q_apply(params, obs)", q_apply(params, batch["obs"]), dims)
    _checks.discrete_action(fn, batch["action"], q)
    q_taken = select(q, batch["action"])
    td = q_taken - target
    per_sample = huber(td, huber_delta) if loss == "huber" else td.square()
    value = _reduce(per_sample, batch.get("weight"))
    metrics = {
        "loss": value.detach(),
        "q": q_taken.detach().mean(),
        "target": target.mean(),
        "td_error": td.detach(),
    }
    return value, metrics
