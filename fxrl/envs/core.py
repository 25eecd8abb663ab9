"""The pure env contract: ``reset(key, params) -> (state, TimeStep)``, ``step(state, action)``.

An env object holds no mutable state: it is a namespace of pure functions plus specs.
Everything that changes lives in the returned ``state`` pytree, which carries its own key,
the env params (tensors, so they may differ per batch element) and the step count. Batch
envs with ``torch.func.vmap`` (``fxrl.envs.batch``); branch with ``torch.where``, never
with a Python ``if`` on a tensor.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import specs, tree
from fxrl.timestep import TimeStep

__all__ = ["Env", "TimeStep", "Wrapper", "WrapperState", "params_as_tensors"]

State = Any


def params_as_tensors(
    params: Any, dtype: torch.dtype, device: torch.device | str | None = None
) -> Any:
    """Env params with every leaf a tensor: floats in ``dtype``, ints int64, bools bool.

    Tensors already of a float dtype are cast to ``dtype``; batched (vmapped) tensors
    stay batched, so ``reset`` under ``vmap`` keeps per-env params. Every leaf is put on
    ``device`` (``reset`` passes its key's; ``None``: numbers on torch's default device,
    tensors where they are).
    """

    def conv(v: Any) -> Tensor:
        if isinstance(v, Tensor):
            return v.to(device, dtype) if v.dtype.is_floating_point else v.to(device)
        if isinstance(v, bool):
            return torch.tensor(v, device=device)
        if isinstance(v, int):
            return torch.tensor(v, dtype=torch.int64, device=device)
        return torch.tensor(float(v), dtype=dtype, device=device)

    return tree.map(conv, params)


class Env:
    """Base class of pure envs: specs, default params and the two pure functions.

    Subclasses set ``observation_spec``, ``action_spec`` and ``default_params`` and define
    ``reset``, ``step`` and ``observe`` (the observation of a state, so a rollout can start
    from any state). ``batch_shape`` is ``()`` for one env, ``(N,)`` for ``batch(env, N)``;
    ``auto_resets`` says whether ``step`` starts a new episode by itself when one ends;
    ``vectorized`` that ``step`` and ``observe`` also take states and actions with leading
    batch dims (elementwise code), so ``batch`` may skip ``vmap`` for them.
    """

    observation_spec: specs.Spec | specs.Composite
    action_spec: specs.Spec | specs.Composite
    default_params: Any = None
    batch_shape: tuple[int, ...] = ()
    auto_resets: bool = False
    vectorized: bool = False
    dtype: torch.dtype = torch.float32

    def reset(self, key: Tensor, params: Any = None) -> tuple[State, TimeStep]:
        """Start an episode: ``key`` [*batch_shape, 2] -> (state, first TimeStep)."""
        raise NotImplementedError(f"{type(self).__name__} does not define reset(key, params).")

    def step(self, state: State, action: Any) -> tuple[State, TimeStep]:
        """Advance one step; ``state`` and ``action`` are not modified."""
        raise NotImplementedError(f"{type(self).__name__} does not define step(state, action).")

    def observe(self, state: State) -> Any:
        """The observation of ``state`` (what the last TimeStep told the policy to act on)."""
        raise NotImplementedError(f"{type(self).__name__} does not define observe(state).")

    def render(self, state: State) -> Tensor:
        """A picture of ``state``: uint8 RGB ``[*batch_shape, H, W, 3]``.

        A pure torch function of the state (no host drawing library), so it vmaps,
        compiles with ``fxrl.compile`` and exports; wrappers forward it to the env inside.
        """
        raise NotImplementedError(
            f"{self!r} does not define render(state): {type(self).__name__} needs a "
            "render(self, state) method, a pure torch function returning uint8 [H, W, 3] "
            "(see fxrl.envs.draw). Host envs render through gymnasium instead "
            "(render_mode='rgb_array')."
        )

    def step_count(self, state: State) -> Tensor:
        """Steps since the episode began: ``state.t`` unless the env says otherwise."""
        if not hasattr(state, "t"):
            raise TypeError(
                f"{self!r}: its state {type(state).__name__} has no step count `t`; define "
                "step_count(state) on the env (time_limit needs it)."
            )
        return state.t

    def _repr_args(self) -> str:
        return "" if self.dtype == torch.float32 else f"dtype={self.dtype}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._repr_args()})"


class WrapperState:
    """Base of wrapper states (``tree.dataclass``es with an ``inner`` field): the params
    of a wrapped state are those of the env state inside it."""

    inner: Any

    @property
    def params(self) -> Any:
        return self.inner.params


# Optional env methods a wrapper forwards to the env inside when that env has them.
_FORWARDED = frozenset({"sample_params"})


class Wrapper(Env):
    """An env around another env; specs, params and flags pass through unless overridden
    (also ``sample_params``, where the env inside has a task distribution)."""

    def __init__(self, env: Env) -> None:
        if not isinstance(env, Env):
            raise TypeError(
                f"{type(self).__name__}: expected an fxrl env (fxrl.envs.Env), got "
                f"{type(env).__name__}. Build one with fxrl.envs.make(id)."
            )
        self.env = env
        self.observation_spec = env.observation_spec
        self.action_spec = env.action_spec
        self.default_params = env.default_params
        self.batch_shape = env.batch_shape
        self.dtype = env.dtype

    @property
    def auto_resets(self) -> bool:  # type: ignore[override]
        return self.env.auto_resets

    @property
    def vectorized(self) -> bool:  # type: ignore[override]
        return self.env.vectorized

    def observe(self, state: State) -> Any:
        return self.env.observe(state.inner)

    def step_count(self, state: State) -> Tensor:
        return self.env.step_count(state.inner)

    def render(self, state: State) -> Tensor:
        """The inner env's picture of the inner state (``state.inner``)."""
        return self.env.render(state.inner)

    def __getattr__(self, name: str) -> Any:
        # Only what an env may or may not have is forwarded: a task distribution
        # (``sample_params(key, params=None)``, meta-RL tasks). Looked up on the inner env,
        # so hasattr(wrapper, "sample_params") is hasattr(inner, "sample_params").
        inner = self.__dict__.get("env")
        if name in _FORWARDED and inner is not None:
            return getattr(inner, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def unwrapped(self) -> Env:
        """The innermost env."""
        env: Env = self
        while isinstance(env, Wrapper):
            env = env.env
        return env

    def __repr__(self) -> str:
        """The call that builds the wrapper: ``auto_reset(time_limit(CartPole(), 500))``."""
        extra = self._repr_args()
        return f"{self._repr_name()}({self.env!r}{', ' + extra if extra else ''})"

    def _repr_name(self) -> str:
        return type(self).__name__.lower()

    def _repr_args(self) -> str:
        return ""
