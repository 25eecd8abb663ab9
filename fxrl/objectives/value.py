"""Value estimators over time-major trajectory fields ``[T, *B]``, as an auto-reset rollout gives.

Conventions shared by every estimator here:

- ``value[t]`` is V(obs[t]); ``next_value[t]`` is V(next_obs[t]), the observation step ``t``
  reached: the final observation where an episode ended, not the next episode's first.
- ``terminated[t]`` (bool) stops bootstrapping: nothing after step ``t`` counts.
- ``truncated[t]`` (bool) bootstraps from ``next_value[t]`` but cuts the trace there, so no
  return leaks across the episode boundary that auto-reset puts inside a trajectory.
- The end of the trajectory is treated as a truncation: the last step bootstraps from
  ``next_value[-1]``.
- ``gamma`` and ``lmbda`` are floats in [0, 1] or tensors broadcastable to ``[T, *B]`` (a
  discount per env, or per step). A per-step ``gamma[t]`` discounts what follows step ``t``.

Every estimator is a few elementwise ops around one reverse linear scan
``y[t] = b[t] + c[t] * y[t + 1]`` (``fxrl.objectives._value_scan``: chunked, about 65 tensor ops
at T=2048): no Python loop over T, no branch on tensor values, so each works under
``torch.func.vmap``, ``torch.compile(fullgraph=True)`` and ``torch.export`` (static T,
dynamic batch dims).
Outputs are targets: call them on detached inputs (or under ``torch.no_grad()``).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from fxrl.objectives._value_checks import check_discount, check_fields, check_n
from fxrl.objectives._value_scan import reverse_scan

__all__ = ["NStepTransitions", "gae", "n_step", "n_step_transitions", "td0", "td_lambda", "vtrace"]

Discount = float | Tensor


def _discounted(x: Tensor, gamma: Discount, stop: Tensor) -> Tensor:
    """``gamma * x``, zero where ``stop``: the bootstrap term, nothing past a termination."""
    return torch.where(stop, 0.0, gamma * x)


def _trace(scale: Discount, cut: Tensor, like: Tensor) -> Tensor:
    """The trace factor ``scale`` (a float or a tensor), zero where ``cut``, shaped [T, *B]."""
    if not isinstance(scale, Tensor):
        scale = torch.tensor(scale, dtype=like.dtype, device=like.device)
    return torch.where(cut, 0.0, scale).expand_as(like)


def _cut_at_end(done: Tensor) -> Tensor:
    """``done`` with the last step also marked: the trace stops where the trajectory does."""
    return torch.cat([done[:-1], torch.ones_like(done[-1:])])


def td0(reward: Tensor, next_value: Tensor, terminated: Tensor, *, gamma: Discount) -> Tensor:
    """One-step TD target ``r[t] + gamma * (1 - terminated[t]) * next_value[t]``.

    Args:
      reward, next_value: [T, *B] floats.
      terminated: [T, *B] bool.
      gamma: float or tensor broadcastable to [T, *B].
    Returns:
      value_target: [T, *B].
    """
    check_fields("td0", reward=reward, next_value=next_value, terminated=terminated)
    (gamma,) = check_discount("td0", reward, gamma=gamma)
    return reward + _discounted(next_value, gamma, terminated)


def td_lambda(
    reward: Tensor,
    next_value: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    *,
    gamma: Discount,
    lmbda: Discount,
) -> Tensor:
    """TD(lambda) return: ``G[t] = r[t] + gamma (1 - term[t]) ((1 - lmbda) V' + lmbda G[t+1])``.

    ``V' = next_value[t]``; where the episode or the trajectory ends at ``t`` the trace is cut
    and ``G[t+1]`` is replaced by ``next_value[t]`` (Sutton and Barto 2018, sec. 12.1).
    ``lmbda=0`` is ``td0``; ``lmbda=1`` is the discounted return bootstrapped at the cut.

    Args:
      reward, next_value: [T, *B] floats.
      terminated, truncated: [T, *B] bool.
      gamma, lmbda: floats or tensors broadcastable to [T, *B].
    Returns:
      value_target: [T, *B].
    """
    check_fields(
        "td_lambda",
        reward=reward,
        next_value=next_value,
        terminated=terminated,
        truncated=truncated,
    )
    gamma, lmbda = check_discount("td_lambda", reward, gamma=gamma, lmbda=lmbda)
    trace = _trace(gamma * lmbda, _cut_at_end(terminated | truncated), reward)
    one_step = reward + _discounted(next_value, gamma, terminated)
    return reverse_scan(torch.addcmul(one_step, trace, next_value, value=-1.0), trace)


def gae(
    reward: Tensor,
    value: Tensor,
    next_value: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    *,
    gamma: Discount,
    lmbda: Discount,
) -> tuple[Tensor, Tensor]:
    """Generalized advantage estimation (Schulman et al. 2016, arXiv:1506.02438).

    ``delta[t] = r[t] + gamma (1 - term[t]) next_value[t] - value[t]`` and
    ``A[t] = delta[t] + gamma lmbda (1 - term[t] - trunc[t]) A[t+1]``, ``A[T] = 0``.

    Args:
      reward, value, next_value: [T, *B] floats.
      terminated, truncated: [T, *B] bool.
      gamma, lmbda: floats or tensors broadcastable to [T, *B].
    Returns:
      (advantage [T, *B], value_target [T, *B]): ``value_target = advantage + value``.
    """
    check_fields(
        "gae",
        reward=reward,
        value=value,
        next_value=next_value,
        terminated=terminated,
        truncated=truncated,
    )
    gamma, lmbda = check_discount("gae", reward, gamma=gamma, lmbda=lmbda)
    delta = reward + _discounted(next_value, gamma, terminated) - value
    advantage = reverse_scan(delta, _trace(gamma * lmbda, terminated | truncated, reward))
    return advantage, advantage + value


class NStepTransitions(NamedTuple):
    """What an n-step replay stores per step ``t`` (see ``n_step_transitions``).

    ``reward``: [T, *B] discounted sum of the ``m <= n`` rewards from ``t``.
    ``discount``: [T, *B] the product of the ``m`` gammas (``gamma**m`` for a float gamma).
    ``terminated``: [T, *B] bool, the episode terminated within those ``m`` steps.
    ``next_index``: [T, *B] int64, ``t + m - 1``: bootstrap from ``next_obs[next_index]``.
    """

    reward: Tensor
    discount: Tensor
    terminated: Tensor
    next_index: Tensor


def _ahead(x: Tensor, k: int, fill: float | bool) -> Tensor:
    """``x[t + k]`` at ``t``, ``fill`` past the end."""
    k = min(k, x.shape[0])
    return torch.cat([x[k:], torch.full_like(x[:k], fill)])


def n_step_transitions(
    reward: Tensor, terminated: Tensor, truncated: Tensor, *, gamma: Discount, n: int
) -> NStepTransitions:
    """n-step transitions for replay (DQN's n-step return, Sutton and Barto 2018, sec. 7.1).

    From each step ``t`` take ``m = min(n, steps to the episode's end, steps to the
    trajectory's end)`` steps. The target is then
    ``reward + discount * (1 - terminated) * V(next_obs[next_index])``: a batch with
    ``discount`` in place of ``gamma`` feeds one-step losses (``dqn_loss``'s ``discount``).

    Args:
      reward: [T, *B] floats.
      terminated, truncated: [T, *B] bool.
      gamma: float or tensor broadcastable to [T, *B].
      n: Python int >= 1.
    Returns:
      ``NStepTransitions(reward, discount, terminated, next_index)``, each [T, *B].
    """
    check_fields("n_step_transitions", reward=reward, terminated=terminated, truncated=truncated)
    (gamma,) = check_discount("n_step_transitions", reward, gamma=gamma)
    check_n("n_step_transitions", n)
    gamma_t = torch.as_tensor(gamma, dtype=reward.dtype, device=reward.device).expand_as(reward)
    cut = _cut_at_end(terminated | truncated)
    total = torch.zeros_like(reward)
    discount = torch.ones_like(reward)
    ended = torch.zeros_like(terminated)
    steps = torch.zeros_like(reward, dtype=torch.int64)
    alive = torch.ones_like(terminated)
    for k in range(min(n, reward.shape[0])):  # no return runs past the trajectory's end
        total = total + torch.where(alive, discount * _ahead(reward, k, 0.0), 0.0)
        ended = torch.where(alive, _ahead(terminated, k, False), ended)
        discount = torch.where(alive, discount * _ahead(gamma_t, k, 1.0), discount)
        steps = steps + alive.to(torch.int64)
        alive = alive & ~_ahead(cut, k, True)
    index = torch.arange(reward.shape[0], device=reward.device)
    index = index.view(-1, *[1] * (reward.dim() - 1))
    return NStepTransitions(total, discount, ended, index + steps - 1)


def n_step(
    reward: Tensor,
    next_value: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    *,
    gamma: Discount,
    n: int,
) -> Tensor:
    """n-step return, cut at episode ends and at the end of the trajectory.

    ``G[t] = sum_{k<m} gamma^k r[t+k] + gamma^m (1 - term[t+m-1]) next_value[t+m-1]`` with
    ``m`` as in ``n_step_transitions``. ``n=1`` is ``td0``; ``n >= T`` is ``td_lambda`` with
    ``lmbda=1``.

    Args:
      reward, next_value: [T, *B] floats.
      terminated, truncated: [T, *B] bool.
      gamma: float or tensor broadcastable to [T, *B].
      n: Python int >= 1.
    Returns:
      value_target: [T, *B].
    """
    check_fields(
        "n_step", reward=reward, next_value=next_value, terminated=terminated, truncated=truncated
    )
    (gamma,) = check_discount("n_step", reward, gamma=gamma)
    check_n("n_step", n)
    tr = n_step_transitions(reward, terminated, truncated, gamma=gamma, n=n)
    bootstrap = next_value.gather(0, tr.next_index.expand_as(next_value))
    return tr.reward + _discounted(bootstrap, tr.discount, tr.terminated)


def vtrace(
    reward: Tensor,
    value: Tensor,
    next_value: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    log_rho: Tensor,
    *,
    gamma: Discount,
    lmbda: Discount = 1.0,
    clip_rho: float = 1.0,
    clip_c: float = 1.0,
    clip_pg_rho: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """V-trace targets and policy-gradient advantages (IMPALA, Espeholt et al. 2018, sec. 4).

    With ``rho = exp(log_rho)``, ``delta[t] = min(clip_rho, rho) (r + gamma (1 - term)
    next_value - value)`` and ``c = lmbda min(clip_c, rho)``:
    ``vs[t] - value[t] = delta[t] + gamma (1 - term - trunc) c[t] (vs[t+1] - value[t+1])``;
    ``pg_advantage[t] = min(clip_pg_rho, rho) (r + gamma (1 - term) vs' - value[t])`` where
    ``vs' = vs[t+1]``, or ``next_value[t]`` where the episode or the trajectory ends at ``t``.

    Args:
      reward, value, next_value: [T, *B] floats.
      terminated, truncated: [T, *B] bool.
      log_rho: [T, *B] target-policy log-prob minus behaviour-policy log-prob of the action.
      gamma, lmbda: floats or tensors broadcastable to [T, *B].
      clip_rho, clip_c, clip_pg_rho: the clipping thresholds rho-bar, c-bar and the one
        for the policy-gradient weights (the paper uses rho-bar for both).
    Returns:
      (vs [T, *B], pg_advantage [T, *B]).
    """
    check_fields(
        "vtrace",
        reward=reward,
        value=value,
        next_value=next_value,
        terminated=terminated,
        truncated=truncated,
        log_rho=log_rho,
    )
    gamma, lmbda = check_discount("vtrace", reward, gamma=gamma, lmbda=lmbda)
    rho = log_rho.exp()
    delta = rho.clamp(max=clip_rho) * (reward + _discounted(next_value, gamma, terminated) - value)
    trace = _trace(gamma * lmbda, terminated | truncated, reward) * rho.clamp(max=clip_c)
    vs = value + reverse_scan(delta, trace)
    cut = _cut_at_end(terminated | truncated)
    vs_next = torch.where(cut, next_value, torch.cat([vs[1:], vs[-1:]]))
    target = reward + _discounted(vs_next, gamma, terminated)
    return vs, rho.clamp(max=clip_pg_rho) * (target - value)
