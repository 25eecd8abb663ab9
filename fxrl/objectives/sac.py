"""Soft actor-critic losses: continuous (Haarnoja et al. 2018) and discrete (Christodoulou 2019).

Params as for TD3 (see ``fxrl.objectives.actor_critic``): ``params = {"actor": ...,
"critic": ..., "log_alpha": []}`` with ``critic`` an ensemble (every leaf with a leading
dim N, 2 for the twin critics: ``torch.func.vmap(critic.init)(random.split(key, 2))``);
``target_params`` needs ``"critic"`` only. ``log_alpha`` is the learned temperature;
pass ``alpha=0.2`` (a float) instead to keep it fixed.

One scalar ``critic_loss + actor_loss + alpha_loss`` with the stop-gradients placed so
that one ``torch.func.grad`` updates all three parts correctly: the critics only from the
critic loss (the target and the actor's Q use no critic gradient), the actor only from
the actor loss (alpha is a constant there), ``log_alpha`` only from the alpha loss.
Give each part its own optimizer for different learning rates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from fxrl import random
from fxrl.objectives import _checks
from fxrl.objectives.actor_critic import (
    _reduce,
    _td_target,
    detach,
    ensemble_q,
    part,
    transition_dims,
)
from fxrl.objectives.blocks import select

__all__ = ["discrete_sac_loss", "sac_loss"]

Tensor = torch.Tensor


def _log_alpha(fn: str, params: Mapping[str, Any], alpha: float | None, like: Tensor) -> Tensor:
    if alpha is not None:
        return torch.full((), math.log(alpha), dtype=like.dtype, device=like.device)
    if "log_alpha" not in params:
        raise _checks.MissingFieldError(
            f'{fn}: params has no "log_alpha" (the learned temperature); got {sorted(params)}. '
            'Add params["log_alpha"] = torch.zeros(()) to learn it, or pass alpha=0.2 to fix it.'
        )
    return params["log_alpha"]


def _metrics(
    loss: Tensor,
    critic: Tensor,
    actor: Tensor,
    alpha_loss: Tensor,
    log_alpha: Tensor,
    entropy: Tensor,
    q: Tensor,
    td: Tensor,
) -> dict[str, Tensor]:
    return {
        "loss": loss.detach(),
        "critic_loss": critic.detach(),
        "actor_loss": actor.detach(),
        "alpha_loss": alpha_loss.detach(),
        "alpha": log_alpha.detach().exp(),
        "entropy": entropy.detach(),
        "q": q.detach().mean(),
        "td_error": td.detach(),
    }


def sac_loss(
    actor_apply: Callable[[Any, Tensor], Any],
    critic_apply: Callable[[Any, Tensor, Tensor], Tensor],
    params: Mapping[str, Any],
    target_params: Mapping[str, Any],
    batch: Mapping[str, Tensor],
    key: Tensor,
    *,
    gamma: float = 0.99,
    alpha: float | None = None,
    target_entropy: float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """SAC with twin critics and a learned temperature (Haarnoja et al. 2018, "SAC v2").

    ``y = r + gamma (1 - d) (min_i Q'_i(s', a') - alpha log pi(a'|s'))``, ``a' ~ pi(s')``;
    ``critic_loss = 1/2 sum_i mean((Q_i(s, a) - y)^2)``;
    ``actor_loss = mean(alpha log pi(a~|s) - min_i Q_i(s, a~))``, ``a~ ~ pi(s)``
    reparameterised; ``alpha_loss = -mean(log_alpha (log pi(a~|s) + target_entropy))``.

    Args:
      actor_apply: ``actor_apply(params["actor"], obs) -> dist`` with
        ``sample_and_log_prob(key)`` (``fxrl.distributions.tanh_normal``).
      critic_apply: ``critic_apply(critic_params, obs, action [*B, A]) -> q [*B]`` for one
        critic; ``params["critic"]`` stacks N of them.
      batch: ``obs, action [*B, A], reward, next_obs, terminated`` [, ``truncated,
        discount, weight``].
      key: ``[2]``, split here for the next and the current action draws.
      alpha: a fixed temperature; None learns ``params["log_alpha"]``.
      target_entropy: default ``-A`` (minus the action dim).
    Returns:
      ``(loss [], metrics)``: detached ``loss, critic_loss, actor_loss, alpha_loss`` (0 for
      a fixed ``alpha``), ``alpha,
      entropy`` (``-mean log pi``), ``q`` (mean first-critic Q), ``td_error [*B]``.
    """
    fn = "sac_loss"
    dims = transition_dims(fn, batch, continuous=True)
    actor, critic = part(fn, params, "actor", "params"), part(fn, params, "critic", "params")
    t_critic = part(fn, target_params, "critic", "target_params")
    log_alpha = _log_alpha(fn, params, alpha, batch["reward"])
    if target_entropy is None:
        target_entropy = -float(batch["action"].shape[-1])
    coef = log_alpha.detach().exp()
    k_next, k_now = random.split(key).unbind(-2)
    shape = tuple(dims)
    with torch.no_grad():
        next_action, next_logp = actor_apply(actor, batch["next_obs"]).sample_and_log_prob(k_next)
        next_q = ensemble_q(fn, critic_apply, t_critic, (batch["next_obs"], next_action), shape)
        target = _td_target(batch, next_q.amin(0) - coef * next_logp, gamma)
    q = ensemble_q(fn, critic_apply, critic, (batch["obs"], batch["action"]), shape)
    td = q - target
    critic_loss = 0.5 * _reduce(td.square(), batch.get("weight")) * q.shape[0]
    action, logp = actor_apply(actor, batch["obs"]).sample_and_log_prob(k_now)
    q_pi = ensemble_q(fn, critic_apply, detach(critic), (batch["obs"], action), shape)
    actor_loss = (coef * logp - q_pi.amin(0)).mean()
    alpha_loss = -(log_alpha * (logp.detach() + target_entropy)).mean()
    if alpha is not None:  # a fixed temperature learns nothing
        alpha_loss = torch.zeros_like(alpha_loss)
    loss = critic_loss + actor_loss + alpha_loss
    metrics = _metrics(
        loss, critic_loss, actor_loss, alpha_loss, log_alpha, -logp.mean(), q[0], td[0]
    )
    return loss, metrics


def discrete_sac_loss(
    actor_apply: Callable[[Any, Tensor], Any],
    critic_apply: Callable[[Any, Tensor], Tensor],
    params: Mapping[str, Any],
    target_params: Mapping[str, Any],
    batch: Mapping[str, Tensor],
    *,
    gamma: float = 0.99,
    alpha: float | None = None,
    target_entropy: float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """SAC for discrete actions (Christodoulou 2019): expectations over actions, no key.

    ``y = r + gamma (1 - d) sum_a pi(a|s') (min_i Q'_i(s', a) - alpha log pi(a|s'))``;
    ``critic_loss = 1/2 sum_i mean((Q_i(s, a) - y)^2)``;
    ``actor_loss = mean(sum_a pi(a|s) (alpha log pi(a|s) - min_i Q_i(s, a)))`` with the
    critics' values as constants; ``alpha_loss = mean(log_alpha (H(pi(s)) - target_entropy))``.

    Args:
      actor_apply: ``actor_apply(params["actor"], obs) -> fxrl.distributions.categorical``.
      critic_apply: ``critic_apply(critic_params, obs) -> q [*B, A]`` for one critic;
        ``params["critic"]`` stacks N of them.
      batch: ``obs, action [*B] int64, reward, next_obs, terminated`` [, ...].
      alpha: a fixed temperature; None learns ``params["log_alpha"]``.
      target_entropy: default ``0.98 log A`` (as TorchRL's DiscreteSACLoss).
    Returns:
      ``(loss [], metrics)`` as ``sac_loss`` (``entropy`` is the policy's exact entropy).
    """
    fn = "discrete_sac_loss"
    dims = transition_dims(fn, batch, continuous=False)
    actor, critic = part(fn, params, "actor", "params"), part(fn, params, "critic", "params")
    t_critic = part(fn, target_params, "critic", "target_params")
    log_alpha = _log_alpha(fn, params, alpha, batch["reward"])
    coef = log_alpha.detach().exp()
    dist = actor_apply(actor, batch["obs"])
    num_actions = dist.logits.shape[-1]
    if target_entropy is None:
        target_entropy = 0.98 * math.log(num_actions)
    shape = (*dims, num_actions)
    with torch.no_grad():
        next_dist = actor_apply(actor, batch["next_obs"])
        next_q = ensemble_q(fn, critic_apply, t_critic, (batch["next_obs"],), shape).amin(0)
        next_logp = next_dist.logits.clamp(min=torch.finfo(next_q.dtype).min)
        next_v = (next_dist.probs * (next_q - coef * next_logp)).sum(-1)
        target = _td_target(batch, next_v, gamma)
    q_all = ensemble_q(fn, critic_apply, critic, (batch["obs"],), shape)
    _checks.discrete_action(fn, batch["action"], q_all[0])
    q = select(q_all, batch["action"])
    td = q - target
    critic_loss = 0.5 * _reduce(td.square(), batch.get("weight")) * q.shape[0]
    logp = dist.logits.clamp(min=torch.finfo(q.dtype).min)
    probs = logp.exp()
    actor_loss = (probs * (coef * logp - q_all.detach().amin(0))).sum(-1).mean()
    entropy = -(probs * logp).sum(-1)
    alpha_loss = (log_alpha * (entropy.detach() - target_entropy)).mean()
    if alpha is not None:  # a fixed temperature learns nothing
        alpha_loss = torch.zeros_like(alpha_loss)
    loss = critic_loss + actor_loss + alpha_loss
    metrics = _metrics(
        loss, critic_loss, actor_loss, alpha_loss, log_alpha, entropy.mean(), q[0], td[0]
    )
    return loss, metrics
