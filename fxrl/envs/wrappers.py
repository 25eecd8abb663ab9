"""Env wrappers: auto_reset, time_limit, batch, transform, episode_stats, checked.

Each wrapper is an env whose state is a ``tree.dataclass`` holding the inner state
(``state.inner``) and the wrapper's own leaves. Order matters the way it does in
gymnasium: ``make`` builds ``episode_stats(auto_reset(time_limit(env, T)))``; anything
that must restart with each episode (a time limit, ``noop_reset``) goes inside
``auto_reset``, anything that must outlive episodes (running statistics) may go outside.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import random, specs, tree
from fxrl.envs.core import Env, TimeStep, Wrapper, WrapperState
from fxrl.transforms import Compose, EpisodeStats
from fxrl.transforms.episodes import truncate_at  # time_limit's rule is step_counter's

__all__ = [
    "AutoReset",
    "Batch",
    "Checked",
    "TimeLimit",
    "TransformEnv",
    "auto_reset",
    "batch",
    "checked",
    "episode_stats",
    "time_limit",
    "transform",
]


# ------------------------------------------------------------------------------ auto_reset


@tree.dataclass
class AutoResetState(WrapperState):
    inner: Any
    key_hi: Tensor  # [] int64: the two words of the key of episode 0, kept apart so that
    key_lo: Tensor  # [] compiled code reads them contiguously across a batch of envs
    episode: Tensor  # [] int64, episodes finished so far

    @property
    def key(self) -> Tensor:
        return torch.stack([self.key_hi, self.key_lo], dim=-1)


def episode_key(key_hi: Tensor, key_lo: Tensor, episode: Tensor) -> Tensor:
    """The reset key of episode ``episode``: the episode-0 key with the episode index
    xored into its second word. Threefry is keyed by it, so each episode gets its own
    stream (Random123 builds keys from (seed, thread id) the same way) for one xor, where
    hashing a new key would cost a Threefry block per env per step."""
    # torch.where over a word index rather than torch.stack: compiled CPU code realises a
    # stack in memory, and the reset's Threefry would then read the two words strided,
    # which keeps it from vectorising over the envs.
    first = torch.arange(2, device=key_hi.device) == 0
    return torch.where(first, key_hi[..., None], (key_lo ^ (episode & 0xFFFFFFFF))[..., None])


class AutoReset(Wrapper):
    """When an episode ends, ``step`` returns a fresh state of the next episode.

    The returned TimeStep is still the one of the finished episode: its ``obs`` is the
    final observation (bootstrap from it when ``truncated``), its reward and flags are the
    final ones. ``info["next_obs"]`` is the observation the policy acts on next: the new
    episode's first observation where the episode ended, else ``obs``. All with
    ``torch.where``: the reset is computed every step, so it vmaps and compiles.
    """

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        if env.auto_resets:
            raise ValueError(f"auto_reset: {env!r} already resets itself.")

    def _repr_name(self) -> str:
        return "auto_reset"

    def reset(self, key: Tensor, params: Any = None) -> tuple[AutoResetState, TimeStep]:
        inner, ts = self.env.reset(key, params)
        episode = torch.zeros_like(key[..., 0])
        # `| 0` copies each word out of the [..., 2] key into its own contiguous tensor
        state = AutoResetState(inner, key[..., 0] | 0, key[..., 1] | 0, episode)
        return state, _with_info(ts, next_obs=ts.obs)

    def step(self, state: AutoResetState, action: Any) -> tuple[AutoResetState, TimeStep]:
        inner, ts = self.env.step(state.inner, action)
        done = ts.terminated | ts.truncated
        next_episode = state.episode + 1
        key = episode_key(state.key_hi, state.key_lo, next_episode)
        fresh, fresh_ts = self.env.reset(key, state.params)
        episode = torch.where(done, next_episode, state.episode)
        new = AutoResetState(_where(done, fresh, inner), state.key_hi, state.key_lo, episode)
        return new, _with_info(ts, next_obs=tree.where(done, fresh_ts.obs, ts.obs))

    @property
    def auto_resets(self) -> bool:  # type: ignore[override]
        return True


def _where(done: Tensor, fresh: Any, old: Any) -> Any:
    """``tree.where(done, fresh, old)``, passing through leaves that are the same tensor
    in both (the params), so they are not copied on every step."""

    def pick(a: Tensor, b: Tensor) -> Tensor:
        if a is b:
            return a
        cond = done.reshape(done.shape + (1,) * (b.ndim - done.ndim))
        if a.dtype == torch.bool and b.dtype == torch.bool:
            # ONNX Runtime has no Where kernel for bool values (grid envs keep bool maps):
            # the same select with & and |, so make(id)'s step exports to ONNX
            return (cond & a) | (~cond & b)
        return torch.where(cond, a, b)

    return tree.map(pick, fresh, old)


def _with_info(ts: TimeStep, **items: Any) -> TimeStep:
    return ts.replace(info={**ts.info, **items})


def auto_reset(env: Env) -> AutoReset:
    """Wrap ``env`` so that ``step`` starts the next episode when one ends (see AutoReset)."""
    return AutoReset(env)


# ------------------------------------------------------------------------------ transform


@tree.dataclass
class TransformState(WrapperState):
    inner: Any
    transform: Any  # the transform's own state pytree (() when it has none)


class TransformEnv(Wrapper):
    """An env seen through one ``fxrl.transforms`` transform (see ``transform``)."""

    def __init__(self, env: Env, t: Any) -> None:
        super().__init__(env)
        self.transform = t
        self.observation_spec = t.observation_spec(env.observation_spec)
        if env.auto_resets:
            problem = t.needs_episode_reset()
            if problem:
                raise ValueError(
                    f"transform: {t!r} {problem}, but {env!r} resets itself when an episode "
                    "ends, so it would never see that reset. Apply it inside auto_reset: "
                    f"auto_reset(transform(env, {t!r})), e.g. with fxrl.envs.make(id, "
                    "auto_reset=False)."
                )

    @property
    def vectorized(self) -> bool:  # type: ignore[override]
        return self.env.vectorized and self.transform.vectorized

    def _repr_name(self) -> str:
        return getattr(self.transform, "wrapper_name", "transform")

    def _repr_args(self) -> str:
        return getattr(self.transform, "wrapper_args", repr(self.transform))

    def reset(self, key: Tensor, params: Any = None) -> tuple[TransformState, TimeStep]:
        inner, ts = self.transform.reset_env(self.env, key, params)
        tstate = self.transform.init(ts.obs, self.env.observation_spec)
        ts = self.transform.timestep(tstate, ts.replace(obs=self.transform(ts.obs, tstate)))
        if self.env.auto_resets:
            ts = _with_info(ts, next_obs=ts.obs)
        return TransformState(inner, tstate), ts

    def step(self, state: TransformState, action: Any) -> tuple[TransformState, TimeStep]:
        t = self.transform
        inner, raw = self.env.step(state.inner, action)
        tstate = t.update(state.transform, raw)
        ts = t.timestep(tstate, raw.replace(obs=t(raw.obs, tstate)))
        if self.env.auto_resets:
            # The inner env already began the next episode: the transform's state follows
            # it (unless it outlives episodes) and info["next_obs"] is transformed too.
            next_raw = raw.info["next_obs"]
            if not t.persistent:
                fresh = t.init(next_raw, self.env.observation_spec)
                tstate = tree.where(raw.terminated | raw.truncated, fresh, tstate)
            ts = _with_info(ts, next_obs=t(next_raw, tstate))
        return TransformState(inner, tstate), ts

    def observe(self, state: TransformState) -> Any:
        return self.transform(self.env.observe(state.inner), state.transform)


def transform(env: Env, *transforms: Any) -> Env:
    """``env`` seen through ``transforms`` (``fxrl.transforms``), applied first to last.

    ``transform(env, a, b)`` is ``transform(transform(env, a), b)``; a ``compose`` is
    unpacked the same way. The same transform objects preprocess observations in front of
    a policy: ``compose(a, b)(obs)``.
    """
    for t in transforms:
        parts = t.transforms if isinstance(t, Compose) else (t,)
        for part in parts:
            env = TransformEnv(env, part)
    return env


class TimeLimit(Wrapper):
    """Truncate an episode once the env's step count reaches ``max_steps``. Keeps no state
    of its own: the count is the env's (``env.step_count(state)``, its ``t``)."""

    def __init__(self, env: Env, max_steps: int) -> None:
        super().__init__(env)
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"time_limit: max_steps must be a positive int, got {max_steps!r}.")
        if env.auto_resets:
            raise ValueError(
                f"time_limit: {env!r} resets itself when an episode ends, so a truncation "
                "added outside would never start a new episode. Put the limit inside: "
                f"auto_reset(time_limit(env, {max_steps})), or fxrl.envs.make(id, "
                f"max_steps={max_steps})."
            )
        self.max_steps = max_steps

    def _repr_name(self) -> str:
        return "time_limit"

    def _repr_args(self) -> str:
        return str(self.max_steps)

    def reset(self, key: Tensor, params: Any = None) -> tuple[Any, TimeStep]:
        return self.env.reset(key, params)

    def step(self, state: Any, action: Any) -> tuple[Any, TimeStep]:
        state, ts = self.env.step(state, action)
        return state, truncate_at(ts, self.env.step_count(state), self.max_steps)

    def observe(self, state: Any) -> Any:
        return self.env.observe(state)

    def step_count(self, state: Any) -> Tensor:
        return self.env.step_count(state)

    def render(self, state: Any) -> Tensor:
        return self.env.render(state)


def time_limit(env: Env, max_steps: int) -> TimeLimit:
    """Truncate episodes after ``max_steps`` steps of ``env``; must sit inside
    ``auto_reset`` (as ``make`` puts it) so the truncation starts a new episode."""
    return TimeLimit(env, max_steps)


def episode_stats(env: Env) -> Env:
    """Report ``info["episode_return"]`` and ``info["episode_length"]``: the running sums
    of the current episode, so where ``terminated | truncated`` they are the finished
    episode's return and length. Works inside or outside ``auto_reset``."""
    return transform(env, EpisodeStats())


# ------------------------------------------------------------------------------ batch


class Batch(Wrapper):
    """``num_envs`` copies of an env under ``torch.func.vmap``: states and TimeSteps gain a
    leading [num_envs] dim, ``reset(key)`` splits ``key`` into one key per env.

    ``params`` leaves may be shared (the env's own shapes) or per env (a leading
    [num_envs] dim), so a batch can hold envs with different gravities.
    """

    vectorized = False  # a batch of batches goes through vmap

    def __init__(self, env: Env, num_envs: int) -> None:
        super().__init__(env)
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"batch: num_envs must be a positive int, got {num_envs!r}.")
        self.num_envs = num_envs
        self.batch_shape = (num_envs, *env.batch_shape)
        # Elementwise envs step a batch as they are: the same numbers, without vmap's
        # per-op cost in eager code and its per-call checks in compiled code. Reset (and
        # everything else) goes through vmap, which fixes the state's layout.
        self._step = env.step if env.vectorized else torch.func.vmap(env.step)
        self._observe = env.observe if env.vectorized else torch.func.vmap(env.observe)

    def _repr_args(self) -> str:
        return str(self.num_envs)

    def reset(self, key: Tensor, params: Any = None) -> tuple[Any, TimeStep]:
        if key.shape != (2,):
            raise ValueError(
                f"batch(..., {self.num_envs}).reset: key has shape {list(key.shape)}; "
                "expected one key [2], split into one key per env (vmap over the batch env "
                "for many seeds)."
            )
        keys = random.split(key, self.num_envs)
        if params is None:
            params = self.default_params
        dims = tree.map(self._param_dim, params, self.default_params)
        return torch.func.vmap(self.env.reset, in_dims=(0, dims))(keys, params)

    def _param_dim(self, leaf: Any, default: Any) -> int | None:
        if not isinstance(leaf, Tensor):
            return None
        ndim = default.ndim if isinstance(default, Tensor) else 0  # defaults are numbers
        if leaf.ndim == ndim + 1:
            if leaf.shape[0] != self.num_envs:
                raise ValueError(
                    f"batch(..., {self.num_envs}).reset: a params leaf has shape "
                    f"{list(leaf.shape)}; per-env params need a leading dim {self.num_envs}."
                )
            return 0
        return None

    @property
    def sample_params(self) -> Any:
        """One task per env: ``sample_params(key, params=None)`` splits ``key`` as
        ``reset`` does and draws the inner env's task for each, params leaves
        [num_envs, ...] that ``reset(key, tasks)`` takes. Only where the inner env has a
        task distribution (AttributeError otherwise, so ``hasattr`` tells)."""
        one = self.env.sample_params
        num_envs = self.num_envs

        def sample(key: Tensor, params: Any = None) -> Any:
            if key.shape != (2,):
                raise ValueError(
                    f"batch(..., {num_envs}).sample_params: key has shape {list(key.shape)}; "
                    "expected one key [2], split into one task per env."
                )
            return torch.func.vmap(one, in_dims=(0, None))(random.split(key, num_envs), params)

        return sample

    def step(self, state: Any, action: Any) -> tuple[Any, TimeStep]:
        return self._step(state, action)

    def observe(self, state: Any) -> Any:
        return self._observe(state)

    def render(self, state: Any) -> Tensor:
        """One picture per env: uint8 [num_envs, H, W, 3] (the env's render under vmap)."""
        return torch.func.vmap(self.env.render)(state)

    def step_count(self, state: Any) -> Tensor:
        return self.env.step_count(state)


def batch(env: Env, num_envs: int) -> Batch:
    """``num_envs`` independent copies of ``env``, vectorised with ``torch.func.vmap``.

    The fast way to run them: ``fxrl.compile(step)`` around a function that calls
    ``batch(env, n).step`` (or ``fxrl.compile(torch.func.vmap(env.step))``). Plain
    ``torch.compile`` of the same function compiles about 7x longer and pays dynamo's
    guards on every call (see ``fxrl.compile``).
    """
    return Batch(env, num_envs)


# ------------------------------------------------------------------------------ checked


def _desc(x: Any) -> str:
    if isinstance(x, Tensor):
        return f"shape {list(x.shape)} {str(x.dtype).removeprefix('torch.')}"
    return f"{type(x).__name__} {x!r}"


def _is_traced(x: Tensor) -> bool:
    """Values cannot be read: compiling, vmapped, or fake (``fxrl.compile`` traces on fake
    tensors)."""
    from torch._subclasses.fake_tensor import is_fake

    return torch.compiler.is_compiling() or torch._C._functorch.is_batchedtensor(x) or is_fake(x)


class Checked(Wrapper):
    """Validate every action against ``action_spec`` and raise a clear error.

    Shape and dtype are checked always (also under vmap and compile); values only in
    eager code, where they can be read (wrap the outermost env: ``checked(batch(env, N))``).
    """

    vectorized = False  # its shape checks are for one env

    def reset(self, key: Tensor, params: Any = None) -> tuple[WrapperState, TimeStep]:
        if not isinstance(key, Tensor) or key.dtype != torch.int64 or key.shape[-1:] != (2,):
            raise ValueError(
                f"{self.env!r}.reset: key has {_desc(key)}; expected int64 [2] from "
                "fxrl.random.key(seed)."
            )
        inner, ts = self.env.reset(key, params)
        return CheckedState(inner), ts

    def step(self, state: Any, action: Any) -> tuple[WrapperState, TimeStep]:
        if not isinstance(state, CheckedState):
            raise TypeError(
                f"checked({self.env!r}).step: state is a {type(state).__name__}; pass the "
                "state returned by this env's reset or step."
            )
        _check_action(self.env, self.action_spec, self.batch_shape, action)
        inner, ts = self.env.step(state.inner, action)
        return CheckedState(inner), ts


@tree.dataclass
class CheckedState(WrapperState):
    inner: Any


def _check_action(env: Env, spec: Any, batch_shape: tuple[int, ...], action: Any) -> None:
    where = f"{env!r}.step"
    if isinstance(spec, specs.Composite):
        traced = any(_is_traced(x) for x in tree.leaves(action) if isinstance(x, Tensor))
        if not traced and not bool(spec.contains(action)):
            raise ValueError(f"{where}: action {action!r} is not inside {spec!r}.")
        return
    expected = f"[{', '.join(map(str, batch_shape + spec.shape))}] " + str(spec.dtype).removeprefix(
        "torch."
    )
    if not isinstance(action, Tensor):
        raise TypeError(
            f"{where}: action is {_desc(action)}; expected a tensor {expected} inside {spec!r}. "
            f"Wrap numbers with torch.tensor(..., dtype={spec.dtype})."
        )
    if tuple(action.shape) != batch_shape + spec.shape or action.dtype != spec.dtype:
        hint = ""
        if isinstance(spec, specs.Discrete) and action.shape == (*batch_shape, spec.n):
            hint = " One-hot or logits? Pass action.argmax(-1)."
        elif action.dtype != spec.dtype and tuple(action.shape) == batch_shape + spec.shape:
            hint = f" Cast it: action.to({spec.dtype})."
        raise ValueError(
            f"{where}: action has {_desc(action)}; expected {expected} inside {spec!r}.{hint}"
        )
    if _is_traced(action):
        return
    inside = spec._in_set(action)
    if not bool(inside.all()):
        bad = action[~inside] if action.ndim else action
        raise ValueError(
            f"{where}: action {bad.flatten()[:4].tolist()} is outside {spec!r}. Unchecked envs "
            "clip continuous actions and clamp discrete ones; sample with "
            "env.action_spec.sample(key) or project with env.action_spec.project(action)."
        )


def checked(env: Env) -> Checked:
    """``env`` that raises a clear error for an action outside its spec (or of the wrong
    shape or dtype) and for a state that is not its own."""
    return Checked(env)
