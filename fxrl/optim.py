"""Optimizers as pure ``(init, update)`` pairs over params pytrees (optax's shape).

    opt = optim.adam(1e-3)
    opt_state = opt.init(params)
    updates, opt_state = opt.update(grads, opt_state, params)
    params = optim.apply_updates(params, updates)

Update rules and defaults are torch.optim's (SGD, Adam, AdamW, RMSprop and
``clip_grad_norm_``), so a parameter trajectory equals torch's on the same gradients.
Every state is a NamedTuple of tensors, the step count included, so ``torch.func.vmap``
over stacked params and states updates an ensemble in one call, and a learning rate may
be a schedule ``count -> lr`` (see ``fxrl.schedules``) evaluated inside the update.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from fxrl import tree
from fxrl.schedules import (
    Schedule,
    constant_schedule,
    cosine_decay_schedule,
    join_schedules,
    linear_schedule,
    warmup_cosine_decay_schedule,
)

__all__ = [
    "EmptyState",
    "GradientTransformation",
    "ScaleByAdamState",
    "ScaleByRmsState",
    "ScaleByScheduleState",
    "TraceState",
    "adam",
    "adamw",
    "add_decayed_weights",
    "apply_updates",
    "chain",
    "clip_by_global_norm",
    "constant_schedule",
    "cosine_decay_schedule",
    "global_norm",
    "join_schedules",
    "linear_schedule",
    "rmsprop",
    "scale",
    "scale_by_adam",
    "scale_by_learning_rate",
    "scale_by_rms",
    "sgd",
    "trace",
    "warmup_cosine_decay_schedule",
]

Params = Any
Updates = Any
ScalarOrSchedule = float | torch.Tensor | Schedule


class GradientTransformation(NamedTuple):
    """``init(params) -> state``; ``update(grads, state, params=None) -> (updates, state)``."""

    init: Callable[[Params], Any]
    update: Callable[..., tuple[Updates, Any]]


class EmptyState(NamedTuple):
    """The state of a stateless transformation."""


def _count(params: Params) -> torch.Tensor:
    """A zero step count [] int64, made from a params leaf so that ``vmap(opt.init)`` gives
    a real [n] tensor rather than a stride-0 expansion, whose stride would make a compiled
    update recompile when it meets the [n] count its first call returned."""
    leaves = [x for x in tree.leaves(params) if isinstance(x, torch.Tensor)]
    if not leaves:
        return torch.zeros((), dtype=torch.int64)
    return torch.zeros_like(leaves[0].flatten()[0], dtype=torch.int64)


def _zeros(params: Params) -> Params:
    return tree.map(torch.zeros_like, params)


def _needs_params(name: str, params: Params) -> None:
    if params is None:
        raise ValueError(
            f"{name}: this transformation reads the params; call update(grads, state, params)."
        )


def apply_updates(params: Params, updates: Updates) -> Params:
    """``params + updates`` leafwise (a new tree; nothing is written in place)."""
    return tree.map(lambda p, u: p + u.to(p.dtype), params, updates)


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Apply transformations in order; the state is the tuple of their states."""

    def init(params: Params) -> tuple[Any, ...]:
        return tuple(t.init(params) for t in transforms)

    def update(
        grads: Updates, state: tuple[Any, ...], params: Params = None
    ) -> tuple[Updates, tuple[Any, ...]]:
        if len(state) != len(transforms):
            raise ValueError(
                f"chain: state has {len(state)} entries for {len(transforms)} "
                "transformations; was it made by this optimizer's init?"
            )
        new_state = []
        for t, s in zip(transforms, state, strict=True):
            grads, s = t.update(grads, s, params)
            new_state.append(s)
        return grads, tuple(new_state)

    return GradientTransformation(init, update)


def scale(factor: float | torch.Tensor) -> GradientTransformation:
    """Multiply updates by a constant."""
    return GradientTransformation(
        lambda params: EmptyState(), lambda g, s, p=None: (tree.map(lambda x: factor * x, g), s)
    )


class ScaleByScheduleState(NamedTuple):
    count: torch.Tensor  # [] int64, updates done so far


def scale_by_learning_rate(learning_rate: ScalarOrSchedule) -> GradientTransformation:
    """Multiply by ``-learning_rate``; a schedule is evaluated at the update count (0 first).
    A tensor learning rate (a [] tensor: one swept value, batched under vmap) multiplies
    as a number would: it meets the float updates, which keep their dtype."""
    if isinstance(learning_rate, torch.Tensor):
        return scale(-learning_rate)
    if not callable(learning_rate):
        return scale(-float(learning_rate))

    def update(
        grads: Updates, state: ScaleByScheduleState, params: Params = None
    ) -> tuple[Updates, ScaleByScheduleState]:
        lr = learning_rate(state.count)
        return tree.map(lambda g: -lr.to(g.dtype) * g, grads), ScaleByScheduleState(state.count + 1)

    return GradientTransformation(lambda params: ScaleByScheduleState(_count(params)), update)


def add_decayed_weights(weight_decay: float) -> GradientTransformation:
    """``g + weight_decay * params`` (L2 in SGD/Adam; decoupled when placed after Adam)."""

    def update(
        grads: Updates, state: EmptyState, params: Params = None
    ) -> tuple[Updates, EmptyState]:
        _needs_params("add_decayed_weights", params)
        return tree.map(lambda g, p: g + weight_decay * p, grads, params), state

    return GradientTransformation(lambda params: EmptyState(), update)


def global_norm(tree_: Params) -> torch.Tensor:
    """The 2-norm of all leaves together (torch's norm of per-leaf norms)."""
    norms = [torch.linalg.vector_norm(g) for g in tree.leaves(tree_)]
    return torch.linalg.vector_norm(torch.stack(norms))


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Scale all grads by ``min(1, max_norm / (norm + 1e-6))``, as ``clip_grad_norm_`` does."""

    def update(
        grads: Updates, state: EmptyState, params: Params = None
    ) -> tuple[Updates, EmptyState]:
        coef = (max_norm / (global_norm(grads) + 1e-6)).clamp(max=1.0)
        return tree.map(lambda g: g * coef.to(g.dtype), grads), state

    return GradientTransformation(lambda params: EmptyState(), update)


class TraceState(NamedTuple):
    count: torch.Tensor
    momentum: Params


def trace(decay: float, dampening: float = 0.0, nesterov: bool = False) -> GradientTransformation:
    """Heavy-ball momentum as torch.optim.SGD: ``buf = decay * buf + (1 - dampening) * g``.

    The first buffer is ``g`` itself (torch's rule); ``nesterov`` returns
    ``g + decay * buf`` instead of ``buf``.
    """

    def init(params: Params) -> TraceState:
        return TraceState(_count(params), _zeros(params))

    def update(
        grads: Updates, state: TraceState, params: Params = None
    ) -> tuple[Updates, TraceState]:
        first = state.count == 0

        def step(g: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
            return torch.where(first, g, decay * buf + (1 - dampening) * g)

        buf = tree.map(step, grads, state.momentum)
        out = tree.map(lambda g, b: g + decay * b, grads, buf) if nesterov else buf
        return out, TraceState(state.count + 1, buf)

    return GradientTransformation(init, update)


def _power(base: float, count: torch.Tensor) -> torch.Tensor:
    """``base ** count`` in float64, written as ``exp(count * log(base))`` (0 for base 0).

    The two agree to a few float64 ulps (torch.optim's float32 and float64 steps are
    matched to 1e-12 in tests/test_optim.py). The form matters compiled: inductor inlines
    a cheap 0-d value into every kernel that reads it, so a ``pow`` here was recomputed for
    each vector of each parameter tensor (7% of a steady DQN update on CPU), while a value
    made with ``exp`` counts as heavy and is computed once per update and read back.
    """
    if not isinstance(base, (int, float)):  # a tensor (a swept value): as written
        return base ** count.double()
    if base == 0:
        return torch.zeros_like(count, dtype=torch.float64)
    return torch.exp(count.double() * math.log(base))


class ScaleByAdamState(NamedTuple):
    count: torch.Tensor
    mu: Params
    nu: Params
    nu_max: Params  # running max of nu (amsgrad); zeros otherwise


def scale_by_adam(
    b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, amsgrad: bool = False
) -> GradientTransformation:
    """Adam's direction ``m_hat / (sqrt(v_hat) + eps)`` with torch's rounding order."""
    for name, beta in (("b1", b1), ("b2", b2)):
        if isinstance(beta, (int, float)) and not 0.0 <= beta < 1.0:
            raise ValueError(f"adam: {name} must be in [0, 1), got {beta!r}.")

    def init(params: Params) -> ScaleByAdamState:
        return ScaleByAdamState(_count(params), _zeros(params), _zeros(params), _zeros(params))

    def update(
        grads: Updates, state: ScaleByAdamState, params: Params = None
    ) -> tuple[Updates, ScaleByAdamState]:
        count = state.count + 1
        # Fused kernels (lerp, addcmul) as torch.optim uses: fewer passes over memory.
        mu = tree.map(lambda m, g: torch.lerp(m, g, 1 - b1), state.mu, grads)
        nu = tree.map(lambda v, g: torch.addcmul(b2 * v, g, g, value=1 - b2), state.nu, grads)
        nu_max = tree.map(torch.maximum, state.nu_max, nu) if amsgrad else state.nu_max
        # Bias corrections in float64 (torch computes them with Python floats), folded
        # into one scalar pair: m_hat / (sqrt(v_hat) + eps) = m / (sqrt(v) * r + eps * bc1)
        # with r = bc1 / sqrt(bc2), so each leaf costs one sqrt, one addcmul and one div.
        bc1 = 1 - _power(b1, count)
        ratio = bc1 / (1 - _power(b2, count)).sqrt()
        scalars: dict[torch.dtype, tuple[torch.Tensor, torch.Tensor]] = {}

        def direction(m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            if m.dtype not in scalars:
                scalars[m.dtype] = ((eps * bc1).to(m.dtype), ratio.to(m.dtype))
            eps_bc1, r = scalars[m.dtype]
            return m / torch.addcmul(eps_bc1, v.sqrt(), r)

        out = tree.map(direction, mu, nu_max if amsgrad else nu)
        return out, ScaleByAdamState(count, mu, nu, nu_max)

    return GradientTransformation(init, update)


class ScaleByRmsState(NamedTuple):
    square_avg: Params
    grad_avg: Params  # centered only; zeros otherwise
    momentum: Params


def scale_by_rms(
    alpha: float = 0.99, eps: float = 1e-8, centered: bool = False, momentum: float = 0.0
) -> GradientTransformation:
    """RMSprop's direction as torch.optim.RMSprop (eps added after the square root)."""

    def init(params: Params) -> ScaleByRmsState:
        return ScaleByRmsState(_zeros(params), _zeros(params), _zeros(params))

    def update(
        grads: Updates, state: ScaleByRmsState, params: Params = None
    ) -> tuple[Updates, ScaleByRmsState]:
        sq = tree.map(
            lambda s, g: torch.addcmul(alpha * s, g, g, value=1 - alpha), state.square_avg, grads
        )
        if centered:
            ga = tree.map(lambda a, g: torch.lerp(a, g, 1 - alpha), state.grad_avg, grads)
            avg = tree.map(lambda s, a: torch.addcmul(s, a, a, value=-1).sqrt_().add_(eps), sq, ga)
        else:
            ga = state.grad_avg
            avg = tree.map(lambda s: s.sqrt().add_(eps), sq)
        out = tree.map(torch.div, grads, avg)
        buf = state.momentum
        if momentum > 0:
            buf = tree.map(lambda b, d: momentum * b + d, buf, out)
            out = buf
        return out, ScaleByRmsState(sq, ga, buf)

    return GradientTransformation(init, update)


def _check_lr(name: str, lr: ScalarOrSchedule) -> None:
    if isinstance(lr, torch.Tensor):  # a swept value: its sweep checked it as a number
        return
    if not callable(lr) and not float(lr) >= 0:
        raise ValueError(f"{name}: learning_rate must be >= 0 or a schedule, got {lr!r}.")


def sgd(
    learning_rate: ScalarOrSchedule = 1e-3,
    momentum: float = 0.0,
    dampening: float = 0.0,
    weight_decay: float = 0.0,
    nesterov: bool = False,
) -> GradientTransformation:
    """torch.optim.SGD (same defaults and update)."""
    _check_lr("sgd", learning_rate)
    if nesterov and (momentum <= 0 or dampening != 0):
        raise ValueError("sgd: nesterov needs momentum > 0 and dampening 0 (as torch).")
    parts = [add_decayed_weights(weight_decay)] if weight_decay else []
    if momentum:
        parts.append(trace(momentum, dampening, nesterov))
    return chain(*parts, scale_by_learning_rate(learning_rate))


def adam(
    learning_rate: ScalarOrSchedule = 1e-3,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    amsgrad: bool = False,
) -> GradientTransformation:
    """torch.optim.Adam (Kingma & Ba 2015), L2 ``weight_decay`` added to the gradient."""
    _check_lr("adam", learning_rate)
    parts = [add_decayed_weights(weight_decay)] if weight_decay else []
    return chain(*parts, scale_by_adam(b1, b2, eps, amsgrad), scale_by_learning_rate(learning_rate))


def adamw(
    learning_rate: ScalarOrSchedule = 1e-3,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 1e-2,
    amsgrad: bool = False,
) -> GradientTransformation:
    """torch.optim.AdamW (Loshchilov & Hutter 2019): decay decoupled from Adam's scaling."""
    _check_lr("adamw", learning_rate)
    return chain(
        scale_by_adam(b1, b2, eps, amsgrad),
        add_decayed_weights(weight_decay),
        scale_by_learning_rate(learning_rate),
    )


def rmsprop(
    learning_rate: ScalarOrSchedule = 1e-2,
    alpha: float = 0.99,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    momentum: float = 0.0,
    centered: bool = False,
) -> GradientTransformation:
    """torch.optim.RMSprop (Hinton's lecture 6e; torch's defaults and eps placement)."""
    _check_lr("rmsprop", learning_rate)
    parts = [add_decayed_weights(weight_decay)] if weight_decay else []
    return chain(
        *parts, scale_by_rms(alpha, eps, centered, momentum), scale_by_learning_rate(learning_rate)
    )
