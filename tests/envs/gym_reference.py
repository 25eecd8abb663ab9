"""Helpers for checking fxrl's classic-control envs against gymnasium's own classes."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from scipy import stats

from fxrl import random
from fxrl.envs import Env

F64 = {"rtol": 1e-10, "atol": 1e-10}  # float64: the same arithmetic as gymnasium's


def fx_state(env: Env, dtype: torch.dtype, **fields: float) -> Any:
    """A state of ``env`` (default params) with the given physical fields."""
    state, _ = env.reset(random.key(0))
    return state.replace(**{k: torch.tensor(v, dtype=dtype) for k, v in fields.items()})


def as_f32(x: float) -> float:
    """The float32 nearest ``x``, as a Python float (what a float32 env holds)."""
    return float(np.float32(x))


def gym_step(gym_env: Any, state: Any, action: Any) -> tuple[np.ndarray, float, bool]:
    """Put ``state`` into the (unwrapped) gymnasium env, step it; (new state, reward, term)."""
    gym_env.reset(seed=0)
    gym_env.state = state
    _, reward, terminated, truncated, _ = gym_env.step(action)
    assert not truncated
    return np.asarray(gym_env.state, dtype=np.float64), float(reward), bool(terminated)


def near(value: float, thresholds: list[float], tol: float) -> bool:
    """Whether float32 rounding could put ``value`` on either side of a threshold."""
    return any(abs(value - t) <= tol for t in thresholds)


def assert_uniform(samples: torch.Tensor, low: float, high: float) -> None:
    """All samples in [low, high) and a Kolmogorov-Smirnov test against U(low, high) passes
    (fixed seeds, so the test is deterministic; p > 1e-3)."""
    x = samples.double().flatten().numpy()
    assert x.min() >= low and x.max() < high, (x.min(), x.max())
    p = stats.kstest(x, stats.uniform(loc=low, scale=high - low).cdf).pvalue
    assert p > 1e-3, p


def assert_same_distribution(samples: torch.Tensor, gym_samples: np.ndarray) -> None:
    """A two-sample Kolmogorov-Smirnov test between fxrl's and gymnasium's draws passes
    (fixed seeds on both sides, so deterministic; p > 1e-3)."""
    p = stats.ks_2samp(samples.double().flatten().numpy(), np.asarray(gym_samples).ravel()).pvalue
    assert p > 1e-3, p
