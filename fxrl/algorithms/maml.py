"""Model-agnostic meta-learning (Finn et al. 2017) for policy gradients, as pure functions.

MAML looks for params ``theta`` from which a few gradient steps on a task's own rollouts
give a good policy for that task. The rollouts are data (nothing is differentiated
through sampling), so the work splits in two. Per task, gather the data first:

    batches = collect_adaptation(loss_fn, collect, params, task, key, lr=0.1, num_steps=1)

``batches[i]`` holds rollouts of the policy after ``i`` inner steps (stacked
[num_steps + 1]). The meta-objective then replays the inner steps on that fixed data and
scores the adapted params on the last batch, differentiably:

    per_task = lambda b: maml_loss(loss_fn, params, b, lr=0.1)
    grads = torch.func.grad(lambda p: torch.func.vmap(per_task)(batches).mean())(params)

``torch.func.grad`` differentiates through the inner SGD steps (second order: a
Hessian-vector product per step); ``first_order=True`` treats the inner gradients as
constants (FOMAML). As in the original MAML, the dependence of the rollouts on the params
that produced them is not differentiated (DiCE and ProMP add that term).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from fxrl import objectives, random, tree

__all__ = ["adapt", "collect_adaptation", "maml_loss", "reinforce_advantage", "reinforce_loss"]

LossFn = Callable[[Any, dict], Tensor]


def _detach(params: Any) -> Any:
    return tree.map(lambda x: x.detach(), params)


def _check(fn: str, lr: float | Tensor, num_steps: int | None = None) -> None:
    # a [] tensor is a swept value (one per member under vmap): checked where it is made
    tensor = isinstance(lr, Tensor) and lr.ndim == 0 and lr.is_floating_point()
    if not tensor and (isinstance(lr, bool) or not isinstance(lr, int | float) or not lr > 0):
        raise ValueError(f"{fn}: lr must be a positive number (the inner SGD step), got {lr!r}.")
    bad = not isinstance(num_steps, int) or isinstance(num_steps, bool) or num_steps < 0
    if num_steps is not None and bad:
        raise ValueError(f"{fn}: num_steps must be an int >= 0, got {num_steps!r}.")


def adapt(
    loss_fn: LossFn, params: Any, batches: Any, *, lr: float | Tensor, first_order: bool = False
) -> Any:
    """Inner loop: one SGD step ``params - lr * grad(loss_fn)(params, batch)`` per batch.

    Args:
      loss_fn: ``loss_fn(params, batch) -> loss []``, differentiable in ``params``.
      batches: a pytree with a leading [num_steps] dim; step ``i`` uses ``batches[i]``.
      lr: the inner step size: a positive number, or a [] float tensor (a hyperparameter
        as data: ``vmap`` over a tensor of step sizes sweeps them).
      first_order: treat each inner gradient as a constant (no second-order term).
    Returns:
      the adapted params; differentiable in ``params`` through the inner steps.
    """
    _check("adapt", lr)
    for i in range(tree.leaves(batches)[0].shape[0]):
        grads = torch.func.grad(loss_fn)(params, tree.map(lambda x, i=i: x[i], batches))
        if first_order:
            grads = _detach(grads)
        params = tree.map(lambda p, g: p - lr * g, params, grads)
    return params


def collect_adaptation(
    loss_fn: LossFn,
    collect: Callable[[Any, Any, Tensor], dict],
    params: Any,
    task: Any,
    key: Tensor,
    *,
    lr: float,
    num_steps: int,
) -> dict:
    """Rollouts of one task along its inner loop, without gradients.

    Args:
      collect: ``collect(params, task, key) -> batch``: a dict of tensors holding rollouts
        of the policy ``params`` in the env with ``task``'s params and what ``loss_fn`` needs.
      key: [2]; batch ``i`` uses ``random.fold_in(key, i)``.
    Returns:
      the batches stacked [num_steps + 1]: ``batches[i]`` was collected after ``i`` inner
      steps (``batches[0]`` by ``params`` itself).
    """
    _check("collect_adaptation", lr, num_steps)
    params, out = _detach(params), []
    for i in range(num_steps + 1):
        with torch.no_grad():
            out.append(collect(params, task, random.fold_in(key, i)))
        if i < num_steps:
            params = _detach(adapt(loss_fn, params, tree.map(lambda x: x[None], out[-1]), lr=lr))
    return tree.stack(out)


def maml_loss(
    loss_fn: LossFn,
    params: Any,
    batches: Any,
    *,
    lr: float | Tensor,
    first_order: bool = False,
) -> Tensor:
    """One task's meta-objective: ``loss_fn`` of the adapted params on the last batch.

    Args:
      batches: [num_steps + 1, ...] from ``collect_adaptation``; the inner steps use
        ``batches[:-1]``, the loss ``batches[-1]`` (rollouts of the adapted policy).
    Returns:
      loss []: differentiable in ``params`` through the inner steps (second order unless
      ``first_order``).
    """
    sizes = {x.shape[0] if x.ndim else None for x in tree.leaves(batches)}
    if len(sizes) != 1 or not next(iter(sizes)):
        raise ValueError(
            f"maml_loss: batches' leaves have leading dims {sorted(sizes, key=str)}; expected "
            "one shared leading dim [num_steps + 1] >= 1, as collect_adaptation stacks them."
        )
    inner = tree.map(lambda x: x[:-1], batches)
    adapted = adapt(loss_fn, params, inner, lr=lr, first_order=first_order)
    return loss_fn(adapted, tree.map(lambda x: x[-1], batches))


# ------------------------------------------------------------------------------ REINFORCE


def reinforce_advantage(traj: dict, *, gamma: float) -> Tensor:
    """Returns-to-go minus a per-time-step baseline (the mean over the batch of episodes),
    normalised: REINFORCE's weights for episodes that start together.

    Args:
      traj: ``reward``, ``terminated``, ``truncated`` [T, B] (from ``fxrl.rollout``).
    Returns:
      advantage [T, B] (no gradient).
    """
    reward = traj["reward"]
    if reward.ndim != 2 or reward.shape[1] < 2:
        raise ValueError(
            f"reinforce_advantage: reward has shape {list(reward.shape)}; expected [T, B] with "
            "B >= 2 episodes run side by side (the baseline is their mean)."
        )
    ret = objectives.td_lambda(
        reward,
        torch.zeros_like(reward),
        traj["terminated"],
        traj["truncated"],
        gamma=gamma,
        lmbda=1.0,
    )
    adv = ret - ret.mean(dim=1, keepdim=True)
    return (adv / (adv.std() + 1e-8)).detach()


def reinforce_loss(
    log_prob: Callable[[Any, Tensor, Tensor], Tensor], params: Any, batch: dict
) -> Tensor:
    """``-mean(log_prob(params, obs, action) * advantage)`` (Williams 1992).

    Args:
      log_prob: ``log_prob(params, obs [..., obs_dim], action [..., A]) -> [...]``.
      batch: ``obs`` [T, B, obs_dim], ``action`` [T, B, ...], ``advantage`` [T, B].
    Returns:
      loss [].
    """
    logp = log_prob(params, batch["obs"], batch["action"])
    if logp.shape != batch["advantage"].shape:
        want = list(batch["advantage"].shape)
        raise ValueError(
            f"reinforce_loss: log_prob gave shape {list(logp.shape)}; expected advantage's "
            f"{want}, one per step."
        )
    return -(logp * batch["advantage"].detach()).mean()
