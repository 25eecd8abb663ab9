"""What the two adapters that hand fxrl envs to other libraries share (``to_gymnasium``
in ``fxrl.envs.to_gym`` and ``to_sb3`` in ``fxrl.envs.sb3``): the step function they call,
numpy out, and the check that turns a caller's action into the tensor the env takes."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from fxrl import specs, tree
from fxrl.envs.core import Env


def step_function(env: Env, compile: bool | dict[str, Any]) -> Any:
    """``env.step``; with ``compile=True`` compiled by ``fxrl.compile`` (inductor with
    fxrl's scoped options: 18 s and 2.3x ``torch.compile``'s steady rate for 8 CartPoles,
    measured), with a dict by ``torch.compile(**compile)``."""
    if not isinstance(compile, bool | dict):
        raise TypeError(
            f"to_gymnasium / to_sb3: compile must be a bool (True: fxrl.compile) or a dict of "
            f"torch.compile arguments, got {compile!r}."
        )
    if compile is False:
        return env.step
    if compile is True:
        from fxrl.compile import compile as fxrl_compile

        return fxrl_compile(env.step)
    return torch.compile(env.step, **compile)


def to_numpy(x: Any) -> Any:
    return tree.map(lambda t: t.detach().cpu().numpy() if isinstance(t, Tensor) else t, x)


def as_action(fn: str, spec: Any, action: Any) -> Any:
    """A gymnasium action (numpy, Python number or tensor) as a tensor of the spec's dtype."""
    if isinstance(spec, specs.Composite):
        return spec._map(lambda s, a: as_action(fn, s, a), action)
    try:
        return torch.as_tensor(np.asarray(action) if not isinstance(action, Tensor) else action)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{fn}: action {action!r} is not a number or array; expected an action of "
            f"{spec!r} (a numpy array, e.g. action_space.sample())."
        ) from e


def cast_action(spec: Any, action: Tensor, batch_shape: tuple[int, ...], fn: str) -> Any:
    if isinstance(spec, specs.Composite):
        return spec._map(lambda s, a: cast_action(s, a, batch_shape, fn), action)
    expected = (*batch_shape, *spec.shape)
    if tuple(action.shape) != expected:
        raise ValueError(
            f"{fn}: action has shape {list(action.shape)}; expected {list(expected)} "
            f"for {spec!r}" + (f" and {batch_shape[0]} envs." if batch_shape else ".")
        )
    return action.to(spec.dtype)
