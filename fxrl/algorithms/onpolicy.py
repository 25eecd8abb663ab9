"""The pieces PPO and recurrent PPO share: advantages, minibatch epochs, the clipped step.

An on-policy update is three stages, each a pure function of tensors:

    carry, traj = scan(env_step, carry, num_steps)        # collect [T, num_envs, ...]
    advantage, target = advantages(traj, next_value, config)    # GAE over the trajectory
    key, index = shuffled_minibatches(key, epochs, batch, num_minibatches)
    (params, opt_state), losses = scan(step, (params, opt_state), index)

The rollout step and the network are the algorithm's own (a feed-forward policy in
``ppo``, a recurrent core with its carry in ``recurrent_ppo``); what is the same in both
lives here: GAE over a time-major trajectory, the epochs of shuffled minibatch indices,
the gradient step on the clipped objective, the linearly annealed learning rate with the
optimizer it drives, the record of one env step, and the metrics one update reports.
The numbers (``lr``, ``gamma``, ``gae_lambda``, ``clip_eps``...) come as ``hp``, the
update's hyperparameters (``HYPERPARAMS``: a sweep's tensors or the Config's floats);
the switches (``anneal_lr``, ``clip_value``...) from the Config.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from fxrl import objectives, optim, random
from fxrl.algorithms import core
from fxrl.envs.core import TimeStep
from fxrl.scan import scan

__all__ = [
    "HYPERPARAMS",
    "advantages",
    "annealed_lr",
    "check_config",
    "clipped_loss",
    "episode_report",
    "gradient_step",
    "make_optimizer",
    "num_updates",
    "shuffled_minibatches",
    "step_record",
    "update_metrics",
]


# What PPO's and recurrent PPO's updates read of their Config only as numbers
# (``core.hyperparams``), with the dtype each is computed in: the annealed lr meets float64
# math (the schedule), the others float32 tensors.
HYPERPARAMS = {
    "lr": torch.float64,
    "gamma": torch.float32,
    "gae_lambda": torch.float32,
    "clip_eps": torch.float32,
    "ent_coef": torch.float32,
    "vf_coef": torch.float32,
    "max_grad_norm": torch.float32,
}


def check_config(config: Any) -> None:
    """The checks every PPO Config needs on its numbers: ``lr``, ``clip_eps`` and
    ``max_grad_norm`` positive, ``gamma`` and ``gae_lambda`` in [0, 1]."""
    for f in ("lr", "clip_eps", "max_grad_norm"):
        core.check_config(config, f, float(getattr(config, f)) > 0, "a positive number")
    for f in ("gamma", "gae_lambda"):
        ok = 0.0 <= float(getattr(config, f)) <= 1.0
        core.check_config(config, f, ok, "a number in [0, 1]")


# ------------------------------------------------------------------------------ learning rate


def num_updates(config: Any, steps_per_update: int) -> int:
    """Updates in ``config.total_steps`` env steps (at least one)."""
    return max(1, config.total_steps // steps_per_update)


def annealed_lr(lr: float | Tensor, grad_steps: int, updates: int) -> Callable[[Tensor], Tensor]:
    """PureJaxRL's linear decay: ``schedule(count)`` is ``lr * (1 - u / updates)`` (floored
    at 0) during update ``u = count // grad_steps``, ``count`` counting gradient steps.
    Float64, as the optimizer's step count meets it."""

    def schedule(count: Tensor) -> Tensor:
        done = torch.div(count, grad_steps, rounding_mode="floor").double()
        return lr * (1.0 - done / updates).clamp(min=0.0)

    return schedule


def make_optimizer(
    config: Any, hp: dict, grad_steps: int, updates: int
) -> tuple[optim.GradientTransformation, Callable[[Tensor], Tensor]]:
    """PPO's optimizer: global-norm clipping (``hp["max_grad_norm"]``), then Adam (eps
    1e-5) at ``hp["lr"]``, annealed linearly to 0 over ``updates`` updates when
    ``config.anneal_lr``.

    Returns:
      ``(opt, lr_at)``: ``lr_at(updates_done [] int64) -> [] float32``, the learning rate
      the update after ``updates_done`` updates uses (the reported ``lr`` metric).
    """
    lr = hp["lr"]
    schedule = annealed_lr(lr, grad_steps, updates)
    opt = optim.chain(
        optim.clip_by_global_norm(hp["max_grad_norm"]),
        optim.adam(schedule if config.anneal_lr else lr, eps=1e-5),
    )

    def lr_at(updates_done: Tensor) -> Tensor:
        if config.anneal_lr:
            return schedule(updates_done * grad_steps).float()
        return torch.as_tensor(lr, dtype=torch.float32, device=updates_done.device)

    return opt, lr_at


# ------------------------------------------------------------------------------ collect


def step_record(ts: TimeStep) -> dict[str, Tensor]:
    """What a rollout keeps of each env step besides the policy's outputs: ``reward``,
    ``terminated``, ``truncated`` and the running ``episode_return`` / ``episode_length``
    (from the auto-reset wrapper's info, final where the episode ended)."""
    return {
        "reward": ts.reward,
        "terminated": ts.terminated,
        "truncated": ts.truncated,
        "episode_return": ts.info["episode_return"],
        "episode_length": ts.info["episode_length"],
    }


# ------------------------------------------------------------------------------ learn


def advantages(traj: dict, next_value: Tensor, hp: dict) -> tuple[Tensor, Tensor]:
    """GAE (``hp["gamma"]``, ``hp["gae_lambda"]``) over a time-major trajectory.

    Args:
      traj: ``reward``, ``value``, ``terminated``, ``truncated`` [T, *B].
      next_value: [T, *B] the value of the observation each step reached (the final one
        where an episode ended).
    Returns:
      ``(advantage [T, *B], value_target [T, *B])``.
    """
    return objectives.gae(
        traj["reward"],
        traj["value"],
        next_value,
        traj["terminated"],
        traj["truncated"],
        gamma=hp["gamma"],
        lmbda=hp["gae_lambda"],
    )


def shuffled_minibatches(
    key: Tensor, epochs: int, batch_size: int, num_minibatches: int
) -> tuple[Tensor, Tensor]:
    """Minibatch indices for ``epochs`` passes over ``batch_size`` samples, each pass a
    fresh permutation cut into ``num_minibatches`` (which divides ``batch_size``).

    Returns:
      ``(key, index [epochs * num_minibatches, batch_size // num_minibatches] int64)``:
      one row per gradient step, so the steps of all epochs are one loop.
    """

    def permutation(k: Tensor, _: Any) -> tuple[Tensor, Tensor]:
        k, k_perm = random.split(k).unbind(-2)
        return k, random.permutation(k_perm, batch_size)

    key, perms = scan(permutation, key, epochs)
    return key, perms.reshape(epochs * num_minibatches, batch_size // num_minibatches)


def clipped_loss(
    forward: Callable[[Any, Tensor], tuple[Any, Tensor]],
    params: Any,
    minibatch: dict,
    config: Any,
    hp: dict,
) -> tuple[Tensor, dict]:
    """``objectives.ppo_loss`` with ``hp``'s ``clip_eps``, ``vf_coef``, ``ent_coef`` and the
    Config's ``clip_value`` (clipped around the rollout's values by ``clip_eps``) and
    ``normalize_advantages``; ``forward(params, obs) -> (distribution, value)``."""
    return objectives.ppo_loss(
        forward,
        None,
        params,
        minibatch,
        clip_eps=hp["clip_eps"],
        vf_coef=hp["vf_coef"],
        ent_coef=hp["ent_coef"],
        clip_value=hp["clip_eps"] if config.clip_value else None,
        normalize_advantage=config.normalize_advantages,
    )


def gradient_step(
    loss_fn: Callable[[Any, Any], tuple[Tensor, dict]],
    opt: optim.GradientTransformation,
    params: Any,
    opt_state: Any,
    minibatch: Any,
) -> tuple[Any, Any, dict]:
    """One optimizer step on ``loss_fn(params, minibatch) -> (loss, metrics)``.

    Returns:
      ``(params, opt_state, metrics)``: the stepped params and optimizer state, and the
      loss's metrics at the params before the step.
    """
    grads, metrics = torch.func.grad(loss_fn, has_aux=True)(params, minibatch)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optim.apply_updates(params, updates), opt_state, metrics


# ------------------------------------------------------------------------------ report


def episode_report(traj: dict) -> dict[str, Tensor]:
    """``core.episode_metrics`` of the episodes that ended in a trajectory (``terminated``,
    ``truncated``, ``episode_return``, ``episode_length`` [T, *B])."""
    done = traj["terminated"] | traj["truncated"]
    return core.episode_metrics(done, traj["episode_return"], traj["episode_length"])


def update_metrics(
    episodes: dict[str, Tensor], losses: dict, lr: Tensor, steps: Tensor
) -> dict[str, Tensor]:
    """One update's metrics (``core``'s contract): ``episodes`` (``episode_report``), each
    loss metric's mean over the update's gradient steps, the learning rate and the env
    steps so far."""
    out = dict(episodes)
    out.update({k: v.mean() for k, v in losses.items()})
    out["lr"] = lr
    out["steps"] = steps
    return out
