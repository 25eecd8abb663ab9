"""Host envs: gymnasium envs behind fxrl's env call shape. They are NOT pure.

    env = fxrl.envs.gym("CartPole-v1")                  # or num_envs=8, asynchronous=True
    state, ts = env.reset(fxrl.random.key(0))           # seeds gymnasium from the key
    state, ts = env.step(state, torch.tensor(1))

Gymnasium (and ALE, see ``fxrl.envs.atari``) run outside torch and keep their state in
the host process, so ``state`` here is a *handle*: stepping it advances the one running
env, and only the latest handle may be stepped again (an older one raises). Everything
else follows the pure-env contract: specs (``specs.from_gymnasium``), ``TimeStep``s of
tensors, auto-reset with ``info["next_obs"]``, reproducible runs from a key. Batching is
gymnasium's vector envs (``num_envs``; processes with ``asynchronous=True``), not
``torch.func.vmap``; vmapping, differentiating or exporting a host env raises an error
that says what to use instead.
"""

from __future__ import annotations

import functools
import pickle
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch._C._functorch import peek_interpreter_stack
from torch._subclasses.fake_tensor import FakeTensor

from fxrl import random, specs, tree
from fxrl._optional import require
from fxrl.envs.core import Env, TimeStep

__all__ = ["HostEnv", "HostEnvError", "HostState", "gym", "seeds_from_key"]


class HostEnvError(RuntimeError):
    """A host env (gymnasium, ALE) raised inside ``reset`` or ``step``: the message names
    the env, what it raised and what to do; the env's own exception is the ``__cause__``."""


def _failure(env: HostEnv, method: str, e: BaseException) -> HostEnvError:
    cause = " ".join(str(e).split())
    cause = f"{type(e).__name__}: {cause[:300]}" if cause else type(e).__name__
    if getattr(e, "fxrl_fix", None):  # an fxrl env's own worker failed: it says the fix
        fix = e.fxrl_fix  # type: ignore[attr-defined]
    elif isinstance(e, EOFError | BrokenPipeError | ConnectionResetError):
        fix = (
            "A worker process of its vector env died (killed, or out of memory); build it "
            "with asynchronous=False to see the env's own error"
        )
    else:
        fix = (
            "The env's own code failed, not fxrl's: run the env alone to see where "
            "(FXRL_TRACEBACK=1 shows the traceback here), then fix or reinstall it"
        )
    return HostEnvError(f"host env {env!r} raised in {method}: {cause}. {fix}.")


class HostState:
    """A handle on a running host env: the last observation and which step it is.

    A pytree with no leaves (so wrappers' states may hold it), not a snapshot: the env
    behind it has moved on once it is stepped.
    """

    __slots__ = ("env", "obs", "serial")

    def __init__(self, env: HostEnv, obs: Any, serial: int) -> None:
        self.env, self.obs, self.serial = env, obs, serial

    def __repr__(self) -> str:
        return f"HostState({self.env!r}, step {self.serial})"

    @property
    def params(self) -> Any:
        # Only fxrl.envs.auto_reset asks a state for its params, to reset it on every step
        # and select with torch.where: fine for pure envs, wrong for a running one.
        raise TypeError(
            f"{self.env!r} is a host env: its state has no params, and fxrl.envs.auto_reset "
            "cannot wrap it (it would reset the running env on every step). Host envs reset "
            f"themselves: build it with auto_reset=True (the default), {self.env.call})."
        )


def _register_leafless(cls: type) -> None:
    import optree
    import torch.utils._pytree as torch_pytree

    optree.register_pytree_node(
        cls, lambda s: ((), s, ()), lambda s, _: s, namespace=tree.NAMESPACE
    )
    torch_pytree.register_pytree_node(
        cls,
        lambda s: ([], s),
        lambda _, s: s,
        serialized_type_name=f"{cls.__module__}.{cls.__qualname__}",
    )


_register_leafless(HostState)


def seeds_from_key(key: Tensor, num_envs: int | None = None) -> int | list[int]:
    """The gymnasium seed(s) ``reset(key)`` uses: one uint32 word of the key's bits, or
    one per sub-env from ``random.split(key, num_envs)`` (or from a batch of keys)."""
    if num_envs is None:
        return int(random.bits(key))
    keys = key if key.ndim == 2 else random.split(key, num_envs)
    return [int(s) for s in random.bits(keys).tolist()]


def _tensor(x: Any) -> Any:
    """numpy -> torch, sharing memory where numpy allows it."""
    if isinstance(x, np.ndarray):
        if x.flags.writeable:
            try:
                return torch.from_numpy(x)
            except ValueError:  # negative strides
                pass
        return torch.from_numpy(np.array(x))
    if isinstance(x, dict):
        return {k: _tensor(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_tensor(v) for v in x)
    return torch.as_tensor(x)


def _numpy(action: Any, discrete_scalar: bool) -> Any:
    """torch -> what gymnasium's ``step`` takes: a Python int for one discrete action."""
    if isinstance(action, Tensor):
        if discrete_scalar:
            return int(action)
        return action.detach().cpu().numpy()
    if isinstance(action, dict):
        return {k: _numpy(v, False) for k, v in action.items()}
    if isinstance(action, tuple):
        return tuple(_numpy(v, False) for v in action)
    return action


def _cast_spec(spec: Any, dtype: torch.dtype) -> Any:
    if isinstance(spec, specs.Composite):
        return specs.Composite(tree.map(lambda s: _cast_spec(s, dtype), spec.specs))
    if isinstance(spec, specs.Box) and spec.dtype.is_floating_point and spec.dtype != dtype:
        return specs.Box(spec.low.double(), spec.high.double(), spec.shape, dtype=dtype)
    return spec


_NOT_COMPILED = (
    "host envs run outside torch: torch.compile runs their reset and step eagerly, and "
    "fullgraph=True or torch.export cannot include them. Compile or export the policy alone, "
    "or use a pure env from fxrl.envs.make."
)


def _not_compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compiler.disable(fn)``, made at the first call once torch._dynamo is loaded.

    Disabling at import time would import torch._dynamo (about a second) for every
    ``import fxrl``; without it loaded nothing can be compiling, so ``fn`` runs as it is.
    """
    disabled: list[Callable[..., Any]] = []

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if "torch._dynamo" not in sys.modules:
            return fn(*args, **kwargs)
        if not disabled:
            disabled.append(torch.compiler.disable(fn, reason=_NOT_COMPILED))
        return disabled[0](*args, **kwargs)

    return call


class HostEnv(Env):
    """A gymnasium env (or vector env) with fxrl's ``reset``/``step`` call shape.

    Not pure: ``state`` is a ``HostState`` handle. Build with ``fxrl.envs.gym`` or
    ``fxrl.envs.atari`` rather than directly.

    Args:
      make_env: builds one gymnasium env (called ``num_envs`` times for a vector env).
      num_envs: ``None`` for one env (batch shape ``()``), else a gymnasium vector env of
        that many (batch shape ``(num_envs,)``).
      asynchronous: ``AsyncVectorEnv`` (one process per sub-env) instead of
        ``SyncVectorEnv``.
      auto_reset: start the next episode inside ``step`` when one ends, reporting its
        first observation in ``info["next_obs"]`` (fxrl's ``auto_reset`` contract).
      dtype: dtype of rewards and of float observations.
      info_keys: entries of gymnasium's ``info`` reported as int64 tensors (``"lives"``).
      call: the call that builds one such env, without its closing parenthesis, e.g.
        ``fxrl.envs.gym("CartPole-v1"`` (error messages complete it).
      alternative: what to use instead under vmap (a pure env), or ``""``.
    """

    default_params: Any = ()

    def __init__(
        self,
        make_env: Callable[[], Any],
        *,
        num_envs: int | None = None,
        asynchronous: bool = False,
        auto_reset: bool = True,
        dtype: torch.dtype = torch.float32,
        info_keys: tuple[str, ...] = (),
        call: str = "host_env(",
        alternative: str = "",
    ) -> None:
        gymnasium = require("gymnasium", call.split("(")[0])
        self.call, self.alternative = call, alternative
        name = self.name
        if num_envs is not None and (not isinstance(num_envs, int) or num_envs < 1):
            raise ValueError(f"{name}: num_envs must be a positive int or None, got {num_envs!r}.")
        if asynchronous and num_envs is None:
            raise ValueError(
                f"{name}: asynchronous=True runs sub-envs in processes; give "
                "num_envs too, e.g. num_envs=2."
            )
        self.num_envs, self.asynchronous, self.dtype = num_envs, asynchronous, dtype
        self._auto_reset, self.info_keys = auto_reset, tuple(info_keys)
        if num_envs is None:
            self.gymnasium_env = make_env()
            obs_space, act_space = (
                self.gymnasium_env.observation_space,
                self.gymnasium_env.action_space,
            )
            self.batch_shape: tuple[int, ...] = ()
        else:
            vector = gymnasium.vector
            cls = vector.AsyncVectorEnv if asynchronous else vector.SyncVectorEnv
            mode = vector.AutoresetMode.SAME_STEP if auto_reset else vector.AutoresetMode.DISABLED
            self.gymnasium_env = cls([make_env] * num_envs, autoreset_mode=mode)
            obs_space = self.gymnasium_env.single_observation_space
            act_space = self.gymnasium_env.single_action_space
            self.batch_shape = (num_envs,)
        self.observation_spec = _cast_spec(specs.from_gymnasium(obs_space), dtype)
        self.action_spec = specs.from_gymnasium(act_space)
        self._discrete = isinstance(self.action_spec, specs.Discrete) and num_envs is None
        self._latest: HostState | None = None

    # ------------------------------------------------------------------ the contract

    @property
    def auto_resets(self) -> bool:  # type: ignore[override]
        return self._auto_reset

    @_not_compiled
    def reset(self, key: Tensor, params: Any = None) -> tuple[HostState, TimeStep]:
        """Start an episode (every sub-env of a vector env), seeding gymnasium from ``key``
        (``seeds_from_key``), so the same key gives the same run."""
        self._check_eager("reset", key)
        if params is not None and params != ():
            raise TypeError(
                f"{self!r}.reset: host envs take no params; give their settings "
                f"when building the env ({self.call}, ...))."
            )
        if not isinstance(key, Tensor) or key.dtype != torch.int64 or key.shape[-1:] != (2,):
            raise ValueError(
                f"{self!r}.reset: key must be an int64 [2] tensor from "
                f"fxrl.random.key(seed), got {key!r}."
            )
        try:
            obs, info = self.gymnasium_env.reset(seed=seeds_from_key(key, self.num_envs))
        except Exception as e:
            raise _failure(self, "reset", e) from e
        obs = self._obs(obs)
        shape = self.batch_shape
        ts = TimeStep(
            obs,
            torch.zeros(shape, dtype=self.dtype),
            torch.zeros(shape, dtype=torch.bool),
            torch.zeros(shape, dtype=torch.bool),
            self._info(info, obs),
        )
        self._latest = HostState(self, obs, 0)
        return self._latest, ts

    @_not_compiled
    def step(self, state: HostState, action: Any) -> tuple[HostState, TimeStep]:
        """Advance the env by one step. ``state`` must be the latest handle of this env."""
        self._check_eager("step", *(action,) if isinstance(action, Tensor) else tree.leaves(action))
        if state is not self._latest or state is None:
            self._stale(state)
        raw = _numpy(action, self._discrete)
        if self.num_envs is None:
            return self._step_one(state, raw)
        return self._step_vector(state, raw)

    def observe(self, state: HostState) -> Any:
        return state.obs

    def step_count(self, state: Any) -> Tensor:
        raise TypeError(
            f"{self!r} counts no steps in its state; use gymnasium's time limit "
            "(gym(id, max_episode_steps=...)) or fxrl.transforms.step_counter()."
        )

    def close(self) -> None:
        """Close the gymnasium env (and its worker processes)."""
        self.gymnasium_env.close()

    def __enter__(self) -> HostEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def name(self) -> str:
        """The call that builds one such env: ``fxrl.envs.gym("CartPole-v1")``."""
        return self.call + ")"

    def __repr__(self) -> str:
        extra = "" if self.num_envs is None else f", num_envs={self.num_envs}"
        extra += ", asynchronous=True" if self.asynchronous else ""
        return self.call.removeprefix("fxrl.envs.") + extra + ")"

    # ------------------------------------------------------------------ internals

    def _step_one(self, state: HostState, raw: Any) -> tuple[HostState, TimeStep]:
        env = self.gymnasium_env
        try:
            obs, reward, terminated, truncated, info = env.step(raw)
        except Exception as e:  # the env's own failure, said in one line naming the env
            raise _failure(self, "step", e) from e
        obs = self._obs(obs)
        # scalar_tensor: a third of torch.tensor's cost, which shows next to CartPole
        ts = TimeStep(
            obs,
            torch.scalar_tensor(float(reward), dtype=self.dtype),
            torch.scalar_tensor(bool(terminated), dtype=torch.bool),
            torch.scalar_tensor(bool(truncated), dtype=torch.bool),
            {},
        )
        next_obs = obs
        if self._auto_reset and (terminated or truncated):
            try:
                next_obs, _ = env.reset()  # no seed: gymnasium's stream goes on
            except Exception as e:
                raise _failure(self, "reset", e) from e
            next_obs = self._obs(next_obs)
        ts.info.update(self._info(info, next_obs))
        self._latest = HostState(self, next_obs, state.serial + 1)
        return self._latest, ts

    def _step_vector(self, state: HostState, raw: Any) -> tuple[HostState, TimeStep]:
        try:
            obs, reward, terminated, truncated, info = self.gymnasium_env.step(raw)
        except Exception as e:
            raise _failure(self, "step", e) from e
        next_obs = self._obs(obs)
        obs = next_obs
        if self._auto_reset and "_final_obs" in info and info["_final_obs"].any():
            # gymnasium's SAME_STEP reset put the new episodes' first observations in
            # `obs`; the TimeStep reports the finished episodes' last ones.
            obs = tree.map(torch.clone, next_obs)
            for i in np.flatnonzero(info["_final_obs"]):
                final = self._obs(info["final_obs"][i])
                for dst, src in zip(tree.leaves(obs), tree.leaves(final), strict=True):
                    dst[i] = src
        ts = TimeStep(
            obs,
            torch.from_numpy(np.asarray(reward)).to(self.dtype),
            torch.from_numpy(np.asarray(terminated, dtype=bool)),
            torch.from_numpy(np.asarray(truncated, dtype=bool)),
            self._info(info, next_obs),
        )
        self._latest = HostState(self, next_obs, state.serial + 1)
        return self._latest, ts

    def _obs(self, obs: Any) -> Any:
        obs = _tensor(obs)
        if isinstance(obs, Tensor):
            return self._cast(obs)
        return tree.map(self._cast, obs)

    def _cast(self, x: Tensor) -> Tensor:
        return x.to(self.dtype) if x.dtype.is_floating_point and x.dtype != self.dtype else x

    def _info(self, info: dict[str, Any], next_obs: Any) -> dict[str, Any]:
        """``next_obs`` and the ``info_keys`` of the step itself (of the finished episode,
        where one ended: gymnasium's vector envs keep those in ``final_info``)."""
        out: dict[str, Any] = {"next_obs": next_obs} if self._auto_reset else {}
        final = info.get("final_info", {})
        for k in self.info_keys:
            value = info.get(k, 0)
            if self.num_envs is None:
                out[k] = torch.scalar_tensor(int(value), dtype=torch.int64)
                continue
            value = np.asarray(value, dtype=np.int64)
            if f"_{k}" in final:
                value = np.where(final[f"_{k}"], final[k], value)
            out[k] = torch.from_numpy(np.ascontiguousarray(value, dtype=np.int64))
        return out

    def _stale(self, state: Any) -> None:
        if not isinstance(state, HostState):
            raise TypeError(
                f"{self!r}.step: state is a {type(state).__name__}; pass the "
                "HostState returned by this env's reset or step."
            )
        if state.env is not self:
            raise ValueError(f"{self!r}.step: this state belongs to {state.env!r}.")
        if self._latest is None:
            raise ValueError(f"{self!r}.step: call reset(key) first.")
        raise ValueError(
            f"{self!r}.step: state is step {state.serial} but the env is at step "
            f"{self._latest.serial}. Host envs are not pure: the gymnasium env behind the "
            "state has moved on, so only the latest state can be stepped. Reset with a key "
            "to replay a run, or use a pure env (fxrl.envs.make) to branch from old states."
        )

    def _check_eager(self, method: str, *tensors: Any) -> None:
        interpreter = peek_interpreter_stack()
        if interpreter is not None:
            self._raise_transform(interpreter, tensors)
        if torch.compiler.is_exporting() or any(isinstance(x, FakeTensor) for x in tensors):
            alt = self.alternative and f"; to export env steps, use a pure env: {self.alternative}"
            raise TypeError(
                f"cannot export {self.name}.{method}: host envs run outside torch, so "
                "torch.export cannot trace them. Export the policy alone "
                "(fxrl.export.export(policy, params, obs)) and step the host env around it in "
                f"Python{alt}."
            )

    def _raise_transform(self, interpreter: Any, tensors: tuple[Any, ...]) -> None:
        from torch._C._functorch import TransformType

        kind = interpreter.key()
        if kind == TransformType.Vmap:
            n = _vmap_size(tensors)
            alt = self.alternative and f", or a pure env from {self.alternative}"
            raise TypeError(
                f"cannot vmap {self.name}: host envs run outside torch. Use "
                f"{self.call}, num_envs={n}){alt}."
            )
        raise TypeError(
            f"cannot run {self.name} under torch.func ({kind.name.lower()}): host envs run "
            "outside torch and are not differentiable. Step them outside the transformed "
            "function."
        )


def _vmap_size(tensors: tuple[Any, ...]) -> int | str:
    from torch._C._functorch import _unwrap_batched, is_batchedtensor, maybe_get_level

    for x in tensors:
        if isinstance(x, Tensor) and is_batchedtensor(x):
            inner, dim = _unwrap_batched(x, maybe_get_level(x))
            if dim is not None:
                return int(inner.shape[dim])
    return "N"


def gym(
    id: str | Callable[[], Any],
    num_envs: int | None = None,
    asynchronous: bool = False,
    *,
    auto_reset: bool = True,
    dtype: torch.dtype = torch.float32,
    **kwargs: Any,
) -> HostEnv:
    """Any gymnasium env behind fxrl's ``reset(key)`` / ``step(state, action)`` call shape.

    Not pure: the state is a handle on the running env (see ``HostState``). Observations
    share memory with gymnasium's numpy arrays (float64 ones become ``dtype``), rewards
    are ``dtype``, flags bool; discrete actions go to gymnasium as Python ints.

    Args:
      id: a gymnasium id ("CartPole-v1", "ALE/Pong-v5"...) or a function returning a
        gymnasium env.
      num_envs: ``None`` for one env; else a gymnasium vector env of ``num_envs``.
      asynchronous: with ``num_envs``, run sub-envs in processes (``AsyncVectorEnv``).
      auto_reset: begin the next episode inside ``step`` (``info["next_obs"]``).
      dtype: float dtype of rewards and float observations.
      kwargs: passed to ``gymnasium.make(id, **kwargs)``.
    Returns:
      A ``HostEnv`` with batch shape ``()`` or ``(num_envs,)``.
    """
    if isinstance(id, str):
        make_env: Callable[[], Any] = _Maker(id, kwargs)
        shown = f'"{id}"'
    elif callable(id):
        if kwargs:
            raise TypeError(
                f"gym: keyword arguments {sorted(kwargs)} go to gymnasium.make; "
                "with a function building the env, pass them to it yourself."
            )
        make_env, shown = id, getattr(id, "__name__", "make_env")
    else:
        raise TypeError(
            f"gym: id must be a gymnasium id or a function returning a gymnasium env, got {id!r}."
        )
    from fxrl.envs.registry import registered

    alt = f'fxrl.envs.make("{id}")' if isinstance(id, str) and id in registered() else ""
    return HostEnv(
        make_env,
        num_envs=num_envs,
        asynchronous=asynchronous,
        auto_reset=auto_reset,
        dtype=dtype,
        call=f"fxrl.envs.gym({shown}",
        alternative=alt,
    )


class _Maker:
    """A picklable ``lambda: gymnasium.make(id, **kwargs)`` for worker processes.

    It carries the id's ``EnvSpec`` where that pickles: a worker started by ``spawn`` or
    ``forkserver`` (macOS's default; what importing TorchRL sets) is a fresh interpreter
    whose gymnasium registry lacks the ids the user registered at run time."""

    def __init__(self, id: str, kwargs: dict[str, Any]) -> None:
        self.id, self.kwargs = id, kwargs
        gymnasium = require("gymnasium", "fxrl.envs.gym")
        try:
            spec = gymnasium.spec(id)
            pickle.dumps(spec)
        except Exception:  # an unknown id fails in make, as before; an unpicklable entry
            spec = None  # point is looked up by id (forked workers still find it)
        self.spec = spec

    def __call__(self) -> Any:
        gymnasium = require("gymnasium", "fxrl.envs.gym")
        return gymnasium.make(self.id if self.spec is None else self.spec, **self.kwargs)
