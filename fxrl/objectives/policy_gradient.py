"""On-policy actor-critic losses: PPO's clipped surrogate and A2C.

How the networks are passed (separate or shared actor-critic, one call shape):

* separate nets: ``policy_apply(params, obs) -> dist`` and
  ``value_apply(params, obs) -> value [*B]`` (or ``[*B, 1]``). Both get the whole
  ``params`` tree and pick their part, e.g. ``params = {"actor": ..., "critic": ...}`` and
  ``policy_apply = lambda p, o: distributions.categorical(actor.apply(p["actor"], o))``.
* one shared net: ``value_apply=None`` and ``policy_apply(params, obs) -> (dist, value)``,
  one forward pass for both heads.

``dist`` is an ``fxrl.distributions`` object (``categorical``, ``normal``,
``tanh_normal``...). A batch holds ``obs [*B, ...]``, ``action`` (``[*B]`` int64 or
``[*B, A]`` float), ``log_prob [*B]`` (of the action under the policy that collected it;
TorchRL's ``sample_log_prob``), ``advantage [*B]`` and ``value_target [*B]`` (both from
``fxrl.objectives.gae``), and ``value [*B]`` (the collected values) for value clipping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from fxrl import distributions
from fxrl.objectives import _checks
from fxrl.objectives.blocks import clipped_surrogate, clipped_value_loss, l2, normalize

__all__ = ["a2c_loss", "ppo_loss"]

Tensor = torch.Tensor


def _forward(
    fn: str,
    policy_apply: Callable[..., Any],
    value_apply: Callable[..., Any] | None,
    params: Any,
    batch: Mapping[str, Tensor],
    dims: torch.Size,
) -> tuple[Any, Tensor, Tensor]:
    """``(dist, value [*B], log_prob [*B])`` of the batch's observations and actions."""
    if value_apply is None:
        out = policy_apply(params, batch["obs"])
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError(
                f"{fn}: with value_apply=None, policy_apply(params, obs) must return "
                f"(dist, value) from a shared net; got {type(out).__name__}. Separate nets? "
                "Pass value_apply(params, obs) -> value."
            )
        dist, value = out
    else:
        dist, value = policy_apply(params, batch["obs"]), value_apply(params, batch["obs"])
    value = _checks.output(fn, "the value function", value, dims, "one value per observation")
    action = batch["action"]
    if isinstance(dist, distributions.Categorical):
        _checks.discrete_action(fn, action, dist.logits, "logits")
    elif isinstance(dist, distributions.Normal | distributions.TanhNormal):
        _checks.continuous_action(fn, action, dims)
    log_prob = _checks.output(
        fn, "dist.log_prob(batch['action'])", dist.log_prob(action), dims, "one per action"
    )
    return dist, value, log_prob


def _entropy(dist: Any, log_prob: Tensor, key: Tensor | None) -> Tensor:
    # A tanh-normal has no closed form: without a key, -log_prob of the batch actions
    # (drawn from a policy close to this one) is the sampled estimate, as TorchRL uses.
    if isinstance(dist, distributions.TanhNormal) and key is None:
        return -log_prob.mean()
    return dist.entropy(key).mean()


def _value_loss(value: Tensor, batch: Mapping[str, Tensor], clip_value: float | None) -> Tensor:
    if clip_value is None:
        return l2(value - batch["value_target"]).mean()
    return clipped_value_loss(value, batch["value"], batch["value_target"], clip_value).mean()


def ppo_loss(
    policy_apply: Callable[..., Any],
    value_apply: Callable[..., Any] | None,
    params: Any,
    batch: Mapping[str, Tensor],
    *,
    clip_eps: float = 0.2,
    vf_coef: float = 0.5,
    ent_coef: float = 0.01,
    clip_value: float | None = None,
    normalize_advantage: bool = True,
    key: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO-clip loss (Schulman et al. 2017) as CleanRL and PureJaxRL compute it.

    ``loss = -mean(clipped_surrogate) + vf_coef * value_loss - ent_coef * mean(entropy)``
    with ``value_loss = mean((v - value_target)^2) / 2``, or PPO2's clipped variant when
    ``clip_value`` is a float (needs ``batch["value"]``).

    Args:
      policy_apply, value_apply: see the module docstring (``value_apply=None``: shared net).
      params: the params both get (differentiated).
      batch: ``obs, action, log_prob, advantage, value_target`` [, ``value``], all ``[*B]``
        leading dims (a minibatch, or a whole ``[T, N]`` rollout).
      clip_eps: the surrogate's clip range.
      vf_coef, ent_coef: weights of the value loss and the entropy bonus.
      clip_value: clip range of the value around ``batch["value"]``; None: no clipping.
      normalize_advantage: standardise advantages over the batch (mean 0, std 1).
      key: for a ``tanh_normal``'s sampled entropy; without it ``-log_prob`` is used.
    Returns:
      ``(loss [], metrics)`` with detached ``loss, policy_loss, value_loss, entropy,
      approx_kl`` (``mean(ratio - 1 - log ratio)``) and ``clip_fraction``.
    """
    fn = "ppo_loss"
    names = ("obs", "action", "log_prob", "advantage", "value_target")
    _checks.fields(fn, batch, (*names, "value") if clip_value is not None else names)
    dims = _checks.batch_dims(
        fn, batch, ("advantage", "value_target", "value"), ("obs",), "log_prob"
    )
    dist, value, log_prob = _forward(fn, policy_apply, value_apply, params, batch, dims)
    log_ratio = log_prob - batch["log_prob"]
    ratio = log_ratio.exp()
    advantage = batch["advantage"]
    if normalize_advantage:
        advantage = normalize(advantage)
    policy_loss = -clipped_surrogate(ratio, advantage, clip_eps).mean()
    value_loss = _value_loss(value, batch, clip_value)
    entropy = _entropy(dist, log_prob, key)
    loss = policy_loss + vf_coef * value_loss - ent_coef * entropy
    with torch.no_grad():
        metrics = {
            "loss": loss.detach(),
            "policy_loss": policy_loss.detach(),
            "value_loss": value_loss.detach(),
            "entropy": entropy.detach(),
            "approx_kl": ((ratio - 1) - log_ratio).mean(),
            "clip_fraction": ((ratio - 1).abs() > clip_eps).to(ratio.dtype).mean(),
        }
    return loss, metrics


def a2c_loss(
    policy_apply: Callable[..., Any],
    value_apply: Callable[..., Any] | None,
    params: Any,
    batch: Mapping[str, Tensor],
    *,
    vf_coef: float = 0.5,
    ent_coef: float = 0.01,
    normalize_advantage: bool = False,
    key: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Advantage actor-critic loss (Mnih et al. 2016), nets passed as for ``ppo_loss``.

    ``loss = -mean(log_prob * advantage) + vf_coef * mean((v - value_target)^2) / 2
    - ent_coef * mean(entropy)``; the advantage is a constant (no gradient). The other
    arguments are as in ``ppo_loss``.

    Args:
      batch: ``obs, action, advantage, value_target`` with leading dims ``[*B]``.
    Returns:
      ``(loss [], metrics)`` with detached ``loss, policy_loss, value_loss, entropy``.
    """
    fn = "a2c_loss"
    _checks.fields(fn, batch, ("obs", "action", "advantage", "value_target"))
    dims = _checks.batch_dims(fn, batch, ("value_target",), ("obs",), "advantage")
    dist, value, log_prob = _forward(fn, policy_apply, value_apply, params, batch, dims)
    advantage = batch["advantage"].detach()
    if normalize_advantage:
        advantage = normalize(advantage)
    policy_loss = -(log_prob * advantage).mean()
    value_loss = l2(value - batch["value_target"]).mean()
    entropy = _entropy(dist, log_prob, key)
    loss = policy_loss + vf_coef * value_loss - ent_coef * entropy
    metrics = {
        "loss": loss.detach(),
        "policy_loss": policy_loss.detach(),
        "value_loss": value_loss.detach(),
        "entropy": entropy.detach(),
    }
    return loss, metrics
