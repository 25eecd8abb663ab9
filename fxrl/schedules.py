"""Schedules: pure functions ``count -> value`` (learning rates, epsilons, noise scales).

A schedule takes an int tensor (or int) step count and returns a float64 tensor of the
same shape, computed with ``torch.where``/``clamp`` only, so it runs inside vmapped,
compiled and exported code. Optimizers evaluate a learning-rate schedule at their own
update count (0 for the first update).

    lr = schedules.warmup_cosine_decay_schedule(0.0, 3e-4, warmup_steps=1_000,
                                                decay_steps=100_000)
    opt = optim.adam(lr)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

__all__ = [
    "Schedule",
    "constant_schedule",
    "cosine_decay_schedule",
    "join_schedules",
    "linear_schedule",
    "warmup_cosine_decay_schedule",
]

Schedule = Callable[[torch.Tensor | int], torch.Tensor]


def _step(count: torch.Tensor | int) -> torch.Tensor:
    # a tensor count stays on its device (as_tensor would move it to the default one)
    if isinstance(count, torch.Tensor):
        return count.to(torch.float64)
    return torch.tensor(count, dtype=torch.float64)


def _positive(name: str, steps: int) -> None:
    if not isinstance(steps, int) or steps <= 0:
        raise ValueError(f"{name}: the number of steps must be a positive int, got {steps!r}.")


def constant_schedule(value: float) -> Schedule:
    """Always ``value``."""
    return lambda count: torch.full_like(_step(count), value)


def linear_schedule(
    init_value: float, end_value: float, transition_steps: int, transition_begin: int = 0
) -> Schedule:
    """``init_value`` until ``transition_begin``, then linearly to ``end_value`` over
    ``transition_steps`` steps, then ``end_value`` (epsilon-greedy's annealing)."""
    _positive("linear_schedule", transition_steps)

    def schedule(count: torch.Tensor | int) -> torch.Tensor:
        frac = ((_step(count) - transition_begin) / transition_steps).clamp(0.0, 1.0)
        return init_value * (1 - frac) + end_value * frac  # exact at both ends

    return schedule


def cosine_decay_schedule(init_value: float, decay_steps: int, alpha: float = 0.0) -> Schedule:
    """Cosine decay from ``init_value`` to ``alpha * init_value`` over ``decay_steps``
    (Loshchilov & Hutter 2017; torch's CosineAnnealingLR closed form with
    ``eta_min = alpha * init_value``)."""
    _positive("cosine_decay_schedule", decay_steps)

    def schedule(count: torch.Tensor | int) -> torch.Tensor:
        frac = (_step(count) / decay_steps).clamp(0.0, 1.0)
        cosine = 0.5 * (1 + torch.cos(math.pi * frac))
        return init_value * ((1 - alpha) * cosine + alpha)

    return schedule


def join_schedules(schedules: Sequence[Schedule], boundaries: Sequence[int]) -> Schedule:
    """Schedule ``i`` runs from ``boundaries[i-1]`` on, seeing the count minus that boundary."""
    if len(schedules) != len(boundaries) + 1:
        raise ValueError(
            f"join_schedules: {len(schedules)} schedules need "
            f"{len(schedules) - 1} boundaries, got {len(boundaries)}."
        )

    def schedule(count: torch.Tensor | int) -> torch.Tensor:
        step = _step(count)
        out = schedules[0](step)
        for b, s in zip(boundaries, schedules[1:], strict=True):
            out = torch.where(step >= b, s(step - b), out)
        return out

    return schedule


def warmup_cosine_decay_schedule(
    init_value: float,
    peak_value: float,
    warmup_steps: int,
    decay_steps: int,
    end_value: float = 0.0,
) -> Schedule:
    """Linear warmup ``init_value -> peak_value`` over ``warmup_steps``, then cosine decay
    to ``end_value`` until step ``decay_steps`` (the total, warmup included)."""
    _positive("warmup_cosine_decay_schedule", warmup_steps)
    if decay_steps <= warmup_steps:
        raise ValueError(
            f"warmup_cosine_decay_schedule: decay_steps ({decay_steps}) is the total "
            f"length and must exceed warmup_steps ({warmup_steps})."
        )
    alpha = end_value / peak_value if peak_value else 0.0
    return join_schedules(
        [
            linear_schedule(init_value, peak_value, warmup_steps),
            cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha),
        ],
        [warmup_steps],
    )
