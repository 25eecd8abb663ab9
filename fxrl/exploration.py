"""Policy heads and exploration noise as pure functions of an explicit key and step.

    q = model.apply(params, obs)                                  # [*B, A]
    action, value = exploration.q_value(q)                        # greedy: [*B], [*B]
    eps = exploration.linear_anneal(step, 1.0, 0.05, 10_000)      # a schedule of the step
    action = exploration.egreedy(key, action, env.action_spec, eps)

Nothing here reads a global "exploration type": the caller passes the epsilon or sigma
(a function of the step count) and, for Ornstein-Uhlenbeck noise, the noise state, which
is an ordinary pytree that resets where ``is_init`` marks an episode start.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from fxrl import random, specs, tree
from fxrl.schedules import linear_schedule

__all__ = [
    "OUState",
    "egreedy",
    "gaussian_noise",
    "linear_anneal",
    "ornstein_uhlenbeck",
    "ou_init",
    "q_value",
]

Tensor = torch.Tensor


def linear_anneal(step: Tensor | int, init: float, end: float, num_steps: int) -> Tensor:
    """``init`` at step 0, linearly to ``end`` at ``num_steps``, then ``end`` (float64 [])."""
    return linear_schedule(init, end, num_steps)(step)


def q_value(q: Tensor, one_hot: bool = False, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The greedy action of action values and its value.

    Args:
      q: [*B, A] action values.
      one_hot: return the action one-hot ``[*B, A]`` (q's dtype) instead of an index.
      mask: optional bool [*B, A], True where an action is allowed.
    Returns:
      (action [*B] int64 or [*B, A], value [*B]).
    """
    if q.ndim == 0 or not q.dtype.is_floating_point:
        raise ValueError(
            f"q_value: q must be a float tensor [*B, num_actions], got shape "
            f"{list(q.shape)} {q.dtype}."
        )
    if mask is not None:
        q = torch.where(mask, q, torch.finfo(q.dtype).min)
    index = q.argmax(-1)
    value = q.gather(-1, index.unsqueeze(-1)).squeeze(-1)
    if one_hot:
        return F.one_hot(index, q.shape[-1]).to(q.dtype), value
    return index, value


def _batch_shape(name: str, action: Tensor, event: tuple[int, ...]) -> tuple[int, ...]:
    n = len(event)
    if action.ndim < n or tuple(action.shape[action.ndim - n :]) != event:
        raise ValueError(
            f"{name}: action has shape {list(action.shape)}; expected "
            f"[*B{''.join(f', {s}' for s in event)}] for the action spec."
        )
    return tuple(action.shape[: action.ndim - n])


def egreedy(
    key: Tensor,
    action: Tensor,
    spec: specs.Spec,
    epsilon: float | Tensor,
    *,
    one_hot: bool = False,
    mask: Tensor | None = None,
) -> Tensor:
    """With probability ``epsilon`` per batch element, replace ``action`` by a random one.

    Args:
      key: [2].
      action: [*B, *spec.shape] greedy actions (one-hot ``[*B, n]`` with ``one_hot``).
      spec: the action spec; random actions are ``spec.sample`` draws.
      epsilon: [] or [*B] probability, e.g. ``linear_anneal(step, 1.0, 0.05, 10_000)``.
      one_hot: actions are one-hot rows of a ``Discrete(n)`` spec.
      mask: bool [*B, n] of allowed actions (Discrete only): random actions avoid the rest.
    Returns:
      [*B, ...] actions, dtype of ``action``.
    """
    if one_hot and not isinstance(spec, specs.Discrete):
        raise ValueError(f"egreedy: one_hot needs a Discrete spec, got {spec!r}.")
    event = (spec.n,) if one_hot else tuple(spec.shape)
    batch = _batch_shape("egreedy", action, event)
    k_coin, k_action = random.split(key).unbind(-2)
    if mask is not None:
        if not isinstance(spec, specs.Discrete):
            raise ValueError("egreedy: mask is supported for Discrete specs only.")
        logits = torch.where(mask, 0.0, -math.inf).double()
        rand = random.categorical(k_action, logits, batch).to(spec.dtype)
    else:
        rand = spec.sample(k_action, batch)
    if one_hot:
        rand = F.one_hot(rand.long(), spec.n)
    explore = random.uniform(k_coin, batch, dtype=torch.float64) < torch.as_tensor(
        epsilon, device=key.device
    )
    explore = explore.reshape(batch + (1,) * len(event))
    return torch.where(explore, rand.to(action.dtype), action)


def gaussian_noise(
    key: Tensor, action: Tensor, spec: specs.Box, sigma: float | Tensor, mean: float = 0.0
) -> Tensor:
    """``project(action + mean + sigma * N(0, 1))`` into the Box ``spec`` (TD3/DDPG style).

    Args:
      action: [*B, *spec.shape] deterministic actions.
      sigma: noise scale, e.g. ``linear_anneal(step, 1.0, 0.1, 1_000)``.
    """
    _batch_shape("gaussian_noise", action, tuple(spec.shape))
    noise = random.normal(key, tuple(action.shape), torch.float64)
    return spec.project(
        action + (mean + torch.as_tensor(sigma, device=noise.device) * noise).to(action.dtype)
    )


@tree.dataclass
class OUState:
    """Ornstein-Uhlenbeck noise ``[*B, *action_shape]``, carried between steps."""

    noise: Tensor


def ou_init(
    spec: specs.Box,
    batch_shape: tuple[int, ...] = (),
    x0: float = 0.0,
    device: torch.device | str | None = None,
) -> OUState:
    """The noise state at an episode start (``x0`` everywhere), on ``device`` (default:
    torch's default device)."""
    shape = (*batch_shape, *spec.shape)
    return OUState(torch.full(shape, x0, dtype=spec.dtype, device=device))


def ornstein_uhlenbeck(
    key: Tensor,
    action: Tensor,
    state: OUState,
    spec: specs.Box,
    scale: float | Tensor = 1.0,
    *,
    is_init: Tensor | None = None,
    theta: float = 0.15,
    mu: float = 0.0,
    sigma: float = 0.2,
    dt: float = 1e-2,
    x0: float = 0.0,
) -> tuple[Tensor, OUState]:
    """Temporally correlated noise (Uhlenbeck & Ornstein 1930; DDPG, Lillicrap et al. 2016).

    ``x' = x + theta (mu - x) dt + sigma sqrt(dt) N(0, 1)``, reset to ``x0`` where
    ``is_init [*B]`` is True (before the update, as TorchRL's OU module does); the action is
    ``project(action + scale * x')``. Anneal ``scale`` with ``linear_anneal``.
    Returns:
      (action [*B, *spec.shape], new state).
    """
    batch = _batch_shape("ornstein_uhlenbeck", action, tuple(spec.shape))
    x = state.noise
    if tuple(x.shape) != tuple(action.shape):
        raise ValueError(
            f"ornstein_uhlenbeck: state.noise has shape {list(x.shape)} but action "
            f"{list(action.shape)}; make the state with ou_init(spec, {batch})."
        )
    if is_init is not None:
        reset = is_init.reshape(tuple(is_init.shape) + (1,) * len(spec.shape))
        x = torch.where(reset, torch.full_like(x, x0), x)
    eps = random.normal(key, tuple(x.shape), torch.float64).to(x.dtype)
    x = x + theta * (mu - x) * dt + sigma * math.sqrt(dt) * eps
    noisy = action + torch.as_tensor(scale, device=x.device).to(action.dtype) * x.to(action.dtype)
    return spec.project(noisy), OUState(x)
