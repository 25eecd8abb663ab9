"""Small quantities that losses are made of, one pure function each (rlax's shape).

Every block is elementwise over leading batch dims ``[*B]`` and returns an unreduced
tensor, so a new loss is a few lines: pick the blocks, reduce with ``.mean()``, place the
stop-gradients. The losses in ``fxrl.objectives.losses`` are written exactly that way:

    td = select(q, action) - q_learning_target(reward, discount, next_q).detach()
    loss = huber(td).mean()

Parameter trees are updated towards an online copy with ``soft_update`` (Polyak
averaging) and ``hard_update`` (a copy); both return a new tree.
"""

from __future__ import annotations

from typing import Any

import torch

from fxrl import random, tree

__all__ = [
    "bootstrap_discount",
    "categorical_entropy",
    "clipped_surrogate",
    "clipped_value_loss",
    "entropy",
    "hard_update",
    "huber",
    "l2",
    "normalize",
    "q_learning_target",
    "select",
    "smoothed_target_action",
    "soft_update",
]

Tensor = torch.Tensor


def huber(x: Tensor, delta: float = 1.0) -> Tensor:
    """Huber loss of errors ``x [*B]``: ``x^2 / 2`` inside ``|x| <= delta``, linear outside.

    Equals ``F.huber_loss(x, 0, reduction="none", delta=delta)``; with ``delta=1`` it is
    DQN's error clipping (Mnih et al. 2015) and ``F.smooth_l1_loss``.
    """
    ax = x.abs()
    quad = ax.clamp(max=delta)
    return 0.5 * quad.square() + delta * (ax - quad)


def l2(x: Tensor) -> Tensor:
    """``x^2 / 2`` elementwise (its gradient is ``x``)."""
    return 0.5 * x.square()


def select(values: Tensor, index: Tensor) -> Tensor:
    """``values[..., index]`` per row: ``q [*B, A]`` and ``action [*B]`` int -> ``[*B]``.

    ``index`` broadcasts against the leading dims (``q [N, *B, A]`` of an ensemble).
    """
    index = index.unsqueeze(-1).expand(*values.shape[:-1], 1)
    return values.gather(-1, index).squeeze(-1)


def bootstrap_discount(terminated: Tensor, gamma: float | Tensor) -> Tensor:
    """``gamma * (1 - terminated)``: no bootstrap past a terminal state.

    Truncation is not an argument on purpose: a time limit is not part of the MDP, so a
    truncated transition bootstraps from its next observation like any other.
    """
    return gamma * (1.0 - terminated.to(torch.get_default_dtype()))


def q_learning_target(
    reward: Tensor,
    discount: Tensor,
    next_q: Tensor,
    next_q_select: Tensor | None = None,
) -> Tensor:
    """One-step Q-learning target ``reward + discount * max_a next_q[a]`` (``[*B]``).

    Args:
      reward: [*B].
      discount: [*B], e.g. ``bootstrap_discount(terminated, gamma)``.
      next_q: [*B, A] values of the next observation (the target network's).
      next_q_select: [*B, A] or None. Given, the action is its argmax and is evaluated by
        ``next_q`` (double Q-learning, van Hasselt et al. 2016).
    """
    v = next_q.amax(-1) if next_q_select is None else select(next_q, next_q_select.argmax(-1))
    return reward + discount * v


def clipped_surrogate(ratio: Tensor, advantage: Tensor, clip_eps: float | Tensor) -> Tensor:
    """PPO's clipped surrogate objective ``[*B]`` (Schulman et al. 2017, eq. 7), to maximise.

    ``min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)``; the loss is ``-mean`` of it.
    """
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps)
    return torch.minimum(ratio * advantage, clipped * advantage)


def clipped_value_loss(
    value: Tensor, old_value: Tensor, target: Tensor, clip_eps: float | Tensor
) -> Tensor:
    """PPO2's value loss ``[*B]``: ``max((v - R)^2, (v_clip - R)^2) / 2``.

    ``v_clip = old_value + clip(value - old_value, -eps, eps)`` keeps the value within
    ``eps`` of the value that was collected with the data (as baselines' PPO2 and CleanRL).
    """
    v_clip = old_value + (value - old_value).clamp(-clip_eps, clip_eps)
    return 0.5 * torch.maximum((value - target).square(), (v_clip - target).square())


def categorical_entropy(logits: Tensor) -> Tensor:
    """Entropy ``-sum_a p log p`` of a categorical given ``logits [*B, A]`` -> ``[*B]``."""
    logp = logits.log_softmax(-1)
    return -(logp.exp() * logp).sum(-1)


def entropy(dist: Any, key: Tensor | None = None) -> Tensor:
    """The entropy ``[*B]`` of an ``fxrl.distributions`` object.

    Closed form for ``normal`` and ``categorical``; a ``tanh_normal`` has none and needs a
    ``key`` for its sampled estimate.
    """
    return dist.entropy(key)


def normalize(x: Tensor, eps: float = 1e-8) -> Tensor:
    """``(x - mean) / (std + eps)`` over all elements (PPO's advantage normalisation).

    ``std`` is torch's default (unbiased), as in CleanRL and baselines.
    """
    return (x - x.mean()) / (x.std() + eps)


def smoothed_target_action(
    action: Tensor,
    key: Tensor,
    noise_std: float,
    noise_clip: float,
    low: float | Tensor = -1.0,
    high: float | Tensor = 1.0,
) -> Tensor:
    """TD3's target policy smoothing (Fujimoto et al. 2018, eq. 14): ``[*B, A]``.

    ``clip(action + clip(noise_std * N(0, 1), -noise_clip, noise_clip), low, high)``.
    The noise comes from ``key [2]`` alone (``fxrl.random.normal``).
    """
    noise = random.normal(key, tuple(action.shape), action.dtype) * noise_std
    noise = noise.clamp(-noise_clip, noise_clip)
    low_t = torch.as_tensor(low, dtype=action.dtype, device=action.device)
    high_t = torch.as_tensor(high, dtype=action.dtype, device=action.device)
    return torch.maximum(torch.minimum(action + noise, high_t), low_t)


def soft_update(target: Any, online: Any, tau: float | Tensor) -> Any:
    """Polyak averaging ``target + tau * (online - target)`` leafwise: a new tree.

    ``tau=1`` copies ``online``; ``tau`` may be a tensor (a schedule, or one per seed under
    vmap). Non-float leaves (counters) are taken from ``online``. Nothing is written in
    place, and the result carries no autograd history.
    """
    if not isinstance(tau, Tensor) and not 0.0 <= float(tau) <= 1.0:
        raise ValueError(f"soft_update: tau must be in [0, 1], got {tau!r}.")

    def step(t: Tensor, o: Tensor) -> Tensor:
        if not t.dtype.is_floating_point:
            return o.detach().clone()
        return torch.lerp(t.detach(), o.detach().to(t.dtype), tau)

    return tree.map(step, target, online)


def hard_update(target: Any, online: Any) -> Any:
    """A copy of ``online`` with the structure of ``target`` checked (a new tree)."""
    return tree.map(lambda t, o: o.detach().clone().to(t.dtype), target, online)
