"""Pure observation and reward transforms, usable on both sides of the policy.

The same object wraps an env (``fxrl.envs.transform(env, t)``) during training and
preprocesses observations in front of a policy (``t(obs)``), so an exported policy can
read raw uint8 screens::

    pre = compose(to_tensor_image(), resize(84, 84), grayscale())
    env = fxrl.envs.transform(atari_env, pre, frame_stack(4, dim=-3))
    action = policy(params, pre(raw_screen))  # same numbers as inside the env

A transform is a small object with pure methods (all optional but ``__call__``):

- ``t(obs, state=None) -> obs``: the observation map. Works on any leading batch dims.
- ``observation_spec(spec) -> spec``.
- ``init(obs, spec) -> state`` when an episode starts, ``update(state, timestep) ->
  state`` after each step (with the untransformed TimeStep), and ``timestep(state, ts)
  -> ts`` to change reward, flags or info. The state lives in the env state pytree, so
  vmap and compile see it; stateless transforms keep ``()``.
- ``persistent``: the state outlives episodes (running statistics) instead of
  restarting with them (frame stacks, step counts).

A stateful transform called on a bare observation acts as at the start of an episode
(``frame_stack(4)(obs)`` repeats ``obs``); pass ``state`` to act mid-episode, and keep it
with ``init`` and ``push``/``update`` on the policy side.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from fxrl import random, specs, tree
from fxrl.envs.core import TimeStep

__all__ = [
    "Compose",
    "EpisodeStats",
    "Transform",
    "cat",
    "clip",
    "compose",
    "frame_stack",
    "grayscale",
    "noop_reset",
    "observation_norm",
    "resize",
    "reward_scale",
    "select",
    "step_counter",
    "to_tensor_image",
]


class Transform:
    """Base class: the identity with no state. Subclasses override what they change."""

    persistent = False
    vectorized = True  # the same numbers with leading batch dims as under vmap

    def __call__(self, obs: Any, state: Any = None) -> Any:
        return obs

    def observation_spec(self, spec: Any) -> Any:
        return spec

    def init(self, obs: Any, spec: Any) -> Any:
        return ()

    def update(self, state: Any, ts: TimeStep) -> Any:
        return state

    def timestep(self, state: Any, ts: TimeStep) -> TimeStep:
        return ts

    def reset_env(self, env: Any, key: Tensor, params: Any) -> tuple[Any, TimeStep]:
        return env.reset(key, params)

    def needs_episode_reset(self) -> str:
        """Non-empty (the reason) when the transform must see every episode's reset."""
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__.lower()}()"


def _box(name: str, spec: Any) -> specs.Box:
    if not isinstance(spec, specs.Box):
        raise TypeError(f"{name}: expects a Box observation spec, got {spec!r}.")
    return spec


def _bounds(spec: specs.Box) -> tuple[float, float]:
    return float(spec.low.double().min()), float(spec.high.double().max())


def _zeros(obs: Any, spec: Any, dtype: torch.dtype) -> Tensor:
    """Zeros with the leading dims of ``obs`` that are not the spec's own. Made from ``obs``
    (not ``torch.zeros``) so that under vmap they are batched like the rest of the state,
    and a compiled step sees the same strides on every call."""
    leaf = tree.leaves(obs)[0]
    shape = spec.shape if isinstance(spec, specs.Spec) else tree.leaves(spec.shape)[0]
    batch_ndim = leaf.ndim - len(shape)
    return torch.zeros_like(leaf.flatten(batch_ndim)[..., 0], dtype=dtype)


# ----------------------------------------------------------------------------- images


class ToTensorImage(Transform):
    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype

    def __call__(self, obs: Tensor, state: Any = None) -> Tensor:
        x = obs.movedim(-1, -3).to(self.dtype)
        return x / 255.0 if obs.dtype == torch.uint8 else x

    def observation_spec(self, spec: Any) -> specs.Box:
        spec = _box("to_tensor_image", spec)
        if len(spec.shape) < 3:
            raise ValueError(f"to_tensor_image: expects [..., H, W, C] images, got {spec!r}.")
        h, w, c = spec.shape[-3:]
        low, high = (0.0, 1.0) if spec.dtype == torch.uint8 else _bounds(spec)
        return specs.Box(low, high, (*spec.shape[:-3], c, h, w), dtype=self.dtype)

    def __repr__(self) -> str:
        return "to_tensor_image()"


def to_tensor_image(dtype: torch.dtype = torch.float32) -> Transform:
    """HWC images to CHW: ``[..., H, W, C]`` uint8 -> ``[..., C, H, W]`` float in [0, 1]."""
    return ToTensorImage(dtype)


class Resize(Transform):
    def __init__(self, height: int, width: int, mode: str) -> None:
        modes = ("nearest", "nearest-exact", "bilinear")
        if mode not in modes:
            raise ValueError(f"resize: mode {mode!r} is not one of {modes}.")
        self.size, self.mode = (height, width), mode

    def __call__(self, obs: Tensor, state: Any = None) -> Tensor:
        if obs.ndim < 3:
            raise ValueError(f"resize: expects [..., C, H, W] images, got shape {list(obs.shape)}.")
        flat = obs.reshape(-1, *obs.shape[-3:])
        extra = {"align_corners": False} if self.mode == "bilinear" else {}
        out = F.interpolate(flat, size=self.size, mode=self.mode, **extra)
        return out.reshape(*obs.shape[:-2], *self.size)

    def observation_spec(self, spec: Any) -> specs.Box:
        spec = _box("resize", spec)
        low, high = _bounds(spec)
        return specs.Box(low, high, (*spec.shape[:-2], *self.size), dtype=spec.dtype)

    def __repr__(self) -> str:
        return f"resize({self.size[0]}, {self.size[1]}, {self.mode!r})"


def resize(height: int, width: int | str | None = None, mode: str = "nearest") -> Transform:
    """Resize ``[..., C, H, W]`` images to ``[..., C, height, width]``.

    ``resize(84)`` and ``resize(84, "bilinear")`` make square images; ``resize(84, 110,
    "nearest")`` any size. ``mode``: "nearest" (torch's and OpenCV's INTER_NEAREST: source
    index floor(i * scale)), "nearest-exact" (pixel centres) or "bilinear"
    (align_corners=False, no antialias).
    """
    if isinstance(width, str):  # resize(84, "nearest"): a square of side 84
        width, mode = None, width
    return Resize(height, height if width is None else width, mode)


class Grayscale(Transform):
    def __call__(self, obs: Tensor, state: Any = None) -> Tensor:
        if obs.ndim < 3 or obs.shape[-3] != 3:
            raise ValueError(
                f"grayscale: expects [..., 3, H, W] RGB images, got shape "
                f"{list(obs.shape)}. Apply to_tensor_image() first for HWC pixels."
            )
        x = obs if obs.dtype.is_floating_point else obs.float()
        r, g, b = x.unbind(-3)
        return (0.2989 * r + 0.587 * g + 0.114 * b).unsqueeze(-3).to(obs.dtype)

    def observation_spec(self, spec: Any) -> specs.Box:
        spec = _box("grayscale", spec)
        low, high = _bounds(spec)
        return specs.Box(low, high, (*spec.shape[:-3], 1, *spec.shape[-2:]), dtype=spec.dtype)


def grayscale() -> Transform:
    """RGB ``[..., 3, H, W]`` to luma ``[..., 1, H, W]`` with ITU-R 601-2 weights
    (0.2989, 0.587, 0.114) as torchvision; integer images are truncated like torchvision's."""
    return Grayscale()


# ----------------------------------------------------------------------------- normalisation


class ObservationNorm(Transform):
    def __init__(self, loc: Any, scale: Any) -> None:
        self.loc = torch.as_tensor(loc, dtype=torch.float64)
        self.scale = torch.as_tensor(scale, dtype=torch.float64)
        if bool((self.scale == 0).any()):
            raise ValueError("observation_norm: scale has zeros; it divides the observation.")

    def __call__(self, obs: Tensor, state: Any = None) -> Tensor:
        loc, scale = self.loc.to(obs.device, obs.dtype), self.scale.to(obs.device, obs.dtype)
        return (obs - loc) / scale

    def observation_spec(self, spec: Any) -> specs.Box:
        spec = _box("observation_norm", spec)
        a = (spec.low.double() - self.loc) / self.scale
        b = (spec.high.double() - self.loc) / self.scale
        return specs.Box(torch.minimum(a, b), torch.maximum(a, b), spec.shape, dtype=spec.dtype)

    def __repr__(self) -> str:
        return f"observation_norm(loc={self.loc.tolist()}, scale={self.scale.tolist()})"


@tree.dataclass
class RunningStats:
    mean: Tensor  # [*obs_shape] float64
    var: Tensor  # [*obs_shape] float64
    count: Tensor  # [] float64


class RunningObservationNorm(Transform):
    persistent = True
    vectorized = False  # over leading dims it pools statistics; under vmap each env has its own

    def __init__(self, eps: float, initial_count: float) -> None:
        self.eps, self.initial_count = eps, initial_count

    def init(self, obs: Tensor, spec: Any) -> RunningStats:
        shape = _box("observation_norm", spec).shape
        prior = RunningStats(
            torch.zeros(shape, dtype=torch.float64),
            torch.ones(shape, dtype=torch.float64),
            torch.tensor(self.initial_count, dtype=torch.float64),
        )
        return self._absorb(prior, obs, len(shape))

    def update(self, state: RunningStats, ts: TimeStep) -> RunningStats:
        return self._absorb(state, ts.obs, state.mean.ndim)

    @staticmethod
    def _absorb(s: RunningStats, obs: Tensor, event_ndim: int) -> RunningStats:
        """Chan et al.'s parallel update with all leading dims of ``obs`` as the batch
        (gymnasium's ``RunningMeanStd``), so a batch env shares one set of statistics."""
        x = obs.double().reshape(-1, *obs.shape[obs.ndim - event_ndim :])
        n = x.shape[0]
        batch_mean, batch_var = x.mean(0), x.var(0, correction=0)
        delta = batch_mean - s.mean
        total = s.count + n
        m2 = s.var * s.count + batch_var * n + delta.square() * s.count * n / total
        return RunningStats(s.mean + delta * n / total, m2 / total, total)

    def __call__(self, obs: Tensor, state: RunningStats | None = None) -> Tensor:
        if state is None:
            raise ValueError(
                "observation_norm(running=True) needs its statistics: call it as t(obs, stats) "
                "with the stats kept in the env state, or freeze them: t.freeze(stats)(obs)."
            )
        return ((obs - state.mean) / torch.sqrt(state.var + self.eps)).to(obs.dtype)

    def observation_spec(self, spec: Any) -> specs.Box:
        spec = _box("observation_norm", spec)
        return specs.Box(-torch.inf, torch.inf, spec.shape, dtype=spec.dtype)

    def freeze(self, state: RunningStats) -> Transform:
        """A fixed ``observation_norm`` with these statistics (for a deployed policy)."""
        return ObservationNorm(state.mean, torch.sqrt(state.var + self.eps))

    def __repr__(self) -> str:
        return f"observation_norm(running=True, eps={self.eps:g})"


def observation_norm(
    loc: Any = None,
    scale: Any = None,
    *,
    running: bool = False,
    eps: float = 1e-8,
    initial_count: float = 1e-4,
) -> Transform:
    """``(obs - loc) / scale``, with fixed ``loc``/``scale`` or running statistics.

    ``running=True`` keeps mean, variance and count in the env state (float64, persistent
    across episodes) and normalises by ``sqrt(var + eps)`` after absorbing each new
    observation, as gymnasium's ``NormalizeObservation`` (prior mean 0, var 1, count
    ``initial_count``). Outside ``batch`` the statistics are shared by the whole batch;
    inside (``batch(transform(env, t), N)``) each env keeps its own.
    """
    if running:
        if loc is not None or scale is not None:
            raise ValueError("observation_norm: give loc/scale or running=True, not both.")
        return RunningObservationNorm(eps, initial_count)
    if loc is None or scale is None:
        raise ValueError("observation_norm: give loc and scale, or running=True.")
    return ObservationNorm(loc, scale)


class Clip(Transform):
    def __init__(self, low: float, high: float, of: str) -> None:
        if of not in ("obs", "reward"):
            raise ValueError(f"clip: of must be 'obs' or 'reward', got {of!r}.")
        if low > high:
            raise ValueError(f"clip: low {low} > high {high}.")
        self.low, self.high, self.of = low, high, of

    def __call__(self, obs: Tensor, state: Any = None) -> Tensor:
        return torch.clamp(obs, self.low, self.high) if self.of == "obs" else obs

    def timestep(self, state: Any, ts: TimeStep) -> TimeStep:
        if self.of == "reward":
            return ts.replace(reward=torch.clamp(ts.reward, self.low, self.high))
        return ts

    def observation_spec(self, spec: Any) -> Any:
        if self.of == "reward":
            return spec
        spec = _box("clip", spec)
        return specs.Box(
            spec.low.double().clamp(self.low, self.high),
            spec.high.double().clamp(self.low, self.high),
            spec.shape,
            spec.dtype,
        )

    def __repr__(self) -> str:
        return f"clip({self.low}, {self.high}, of={self.of!r})"


def clip(low: float, high: float, of: str = "obs") -> Transform:
    """Clamp the observation (``of="obs"``) or the reward (``of="reward"``) to [low, high]."""
    return Clip(low, high, of)


class RewardScale(Transform):
    def __init__(self, scale: float, loc: float) -> None:
        self.scale, self.loc = scale, loc

    def timestep(self, state: Any, ts: TimeStep) -> TimeStep:
        return ts.replace(reward=ts.reward * self.scale + self.loc)

    def __repr__(self) -> str:
        return f"reward_scale({self.scale}, loc={self.loc})"


def reward_scale(scale: float, loc: float = 0.0) -> Transform:
    """``reward * scale + loc``; observations pass through."""
    return RewardScale(scale, loc)


# ----------------------------------------------------------------------------- with state


class FrameStack(Transform):
    def __init__(self, num_frames: int, dim: int) -> None:
        if not isinstance(num_frames, int) or num_frames < 1:
            raise ValueError(f"frame_stack: num_frames must be a positive int, got {num_frames!r}.")
        if not isinstance(dim, int) or dim >= 0:
            raise ValueError(
                f"frame_stack: dim must be negative (counted from the last "
                f"observation dim, so batch dims may lead), got {dim!r}."
            )
        self.num_frames, self.dim = num_frames, dim

    def init(self, obs: Tensor, spec: Any = None) -> Tensor:
        """The stack at the start of an episode: ``obs`` repeated (gymnasium's padding)."""
        return torch.cat([obs] * self.num_frames, dim=self.dim)

    def push(self, stack: Tensor, obs: Tensor) -> Tensor:
        """Drop the oldest frame, append ``obs``."""
        size = obs.shape[self.dim]
        return torch.cat(
            [stack.narrow(self.dim, size, stack.shape[self.dim] - size), obs], dim=self.dim
        )

    def update(self, state: Tensor, ts: TimeStep) -> Tensor:
        return self.push(state, ts.obs)

    def __call__(self, obs: Tensor, state: Tensor | None = None) -> Tensor:
        return self.init(obs) if state is None else state

    def observation_spec(self, spec: Any) -> specs.Box:
        spec = _box("frame_stack", spec)
        if -self.dim > len(spec.shape):
            raise ValueError(f"frame_stack: dim {self.dim} is out of range for {spec!r}.")
        reps = [1] * len(spec.shape)
        reps[self.dim] = self.num_frames
        return specs.Box(spec.low.repeat(reps), spec.high.repeat(reps), dtype=spec.dtype)

    def __repr__(self) -> str:
        return f"frame_stack({self.num_frames}, dim={self.dim})"


def frame_stack(num_frames: int, dim: int = -1) -> Transform:
    """The last ``num_frames`` observations concatenated along ``dim`` (negative), oldest
    first; an episode starts with its first observation repeated. For [1, 84, 84] frames,
    ``frame_stack(4, dim=-3)`` gives [4, 84, 84]. The stack lives in the env state."""
    return FrameStack(num_frames, dim)


class StepCounter(Transform):
    def __init__(self, max_steps: int | None) -> None:
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(
                f"step_counter: max_steps must be a positive int or None, got {max_steps!r}."
            )
        self.max_steps = max_steps

    def init(self, obs: Any, spec: Any) -> Tensor:
        return _zeros(obs, spec, torch.int64)

    def update(self, state: Tensor, ts: TimeStep) -> Tensor:
        return state + 1

    def timestep(self, state: Tensor, ts: TimeStep) -> TimeStep:
        truncated = (
            ts.truncated if self.max_steps is None else ts.truncated | (state >= self.max_steps)
        )
        return ts.replace(truncated=truncated, info={**ts.info, "step_count": state})

    def needs_episode_reset(self) -> str:
        return "" if self.max_steps is None else "truncates episodes"

    @property
    def wrapper_name(self) -> str:  # how transform(env, self) prints
        return "transform" if self.max_steps is None else "time_limit"

    @property
    def wrapper_args(self) -> str:
        return repr(self) if self.max_steps is None else str(self.max_steps)

    def __repr__(self) -> str:
        return f"step_counter({self.max_steps})"


def step_counter(max_steps: int | None = None) -> Transform:
    """Count steps since reset into ``info["step_count"]``; with ``max_steps``, truncate the
    episode at that count (what ``time_limit`` is made of)."""
    return StepCounter(max_steps)


class EpisodeStats(Transform):
    """Running return and length of the current episode in ``info`` (see episode_stats)."""

    def init(self, obs: Any, spec: Any) -> tuple[Tensor, Tensor]:
        return _zeros(obs, spec, torch.float64), _zeros(obs, spec, torch.int64)

    def update(self, state: tuple[Tensor, Tensor], ts: TimeStep) -> tuple[Tensor, Tensor]:
        ret, length = state
        return ret + ts.reward.double(), length + 1

    def timestep(self, state: tuple[Tensor, Tensor], ts: TimeStep) -> TimeStep:
        return ts.replace(info={**ts.info, "episode_return": state[0], "episode_length": state[1]})

    wrapper_name, wrapper_args = "episode_stats", ""

    def __repr__(self) -> str:
        return "episode_stats()"


class NoopReset(Transform):
    def __init__(self, noops: int, action: Any) -> None:
        if not isinstance(noops, int) or noops < 1:
            raise ValueError(f"noop_reset: noops must be a positive int, got {noops!r}.")
        self.noops, self.action = noops, action

    def reset_env(self, env: Any, key: Tensor, params: Any) -> tuple[Any, TimeStep]:
        """Reset, then take ``n ~ U{1..noops}`` no-op steps (fewer if the episode ends)."""
        from fxrl.envs.host import HostEnv  # here: fxrl.envs imports this module

        inner = env.unwrapped() if callable(getattr(env, "unwrapped", None)) else env
        if isinstance(inner, HostEnv):
            raise TypeError(
                "noop_reset: cannot wrap a host env: its no-op steps would be taken (and "
                "discarded by torch.where) on the one running env at every step. Use the "
                "host env's own option, e.g. fxrl.envs.atari('Pong', noop_reset=30)."
            )
        reset_key, noop_key = random.split(key).unbind(-2)
        state, ts = env.reset(reset_key, params)
        n = random.randint(noop_key, env.batch_shape, 1, self.noops + 1)
        action = env.action_spec.zeros(env.batch_shape) if self.action is None else self.action
        for i in range(self.noops):
            go = (i < n) & ~ts.done
            moved, moved_ts = env.step(state, action)
            state, ts = tree.where(go, moved, state), tree.where(go, moved_ts, ts)
        return state, ts.replace(reward=torch.zeros_like(ts.reward))

    def needs_episode_reset(self) -> str:
        return "acts when an episode starts"

    def __repr__(self) -> str:
        return f"noop_reset({self.noops})"


def noop_reset(noops: int = 30, action: Any = None) -> Transform:
    """Start each episode with a random number (1..noops) of no-op steps (Mnih et al. 2015).

    ``action`` defaults to ``action_spec.zeros()`` (NOOP in Atari). Costs ``noops`` inner
    steps per reset, and under ``auto_reset`` the reset is computed on every step.
    """
    return NoopReset(noops, action)


# ----------------------------------------------------------------------------- structure


class Cat(Transform):
    def __init__(self, keys: Sequence[str], out: str, dim: int) -> None:
        if dim >= 0:
            raise ValueError(f"cat: dim must be negative (batch dims may lead), got {dim}.")
        self.keys, self.out, self.dim = tuple(keys), out, dim

    def __call__(self, obs: dict[str, Any], state: Any = None) -> dict[str, Any]:
        if not isinstance(obs, dict) or any(k not in obs for k in self.keys):
            got = list(obs) if isinstance(obs, dict) else type(obs).__name__
            raise ValueError(
                f"cat: expects a dict observation with keys {list(self.keys)}, got {got}."
            )
        rest = {k: v for k, v in obs.items() if k not in self.keys}
        return {**rest, self.out: torch.cat([obs[k] for k in self.keys], dim=self.dim)}

    def observation_spec(self, spec: Any) -> specs.Composite:
        if not isinstance(spec, specs.Composite) or not isinstance(spec.specs, dict):
            raise TypeError(f"cat: expects a dict (Composite) observation spec, got {spec!r}.")
        parts = [_box("cat", spec[k]) for k in self.keys]
        low = torch.cat([p.low.double() for p in parts], dim=self.dim)
        high = torch.cat([p.high.double() for p in parts], dim=self.dim)
        rest = {k: v for k, v in spec.specs.items() if k not in self.keys}
        return specs.Composite({**rest, self.out: specs.Box(low, high, dtype=parts[0].dtype)})

    def __repr__(self) -> str:
        return f"cat({list(self.keys)}, out={self.out!r}, dim={self.dim})"


def cat(keys: Sequence[str], out: str = "obs", dim: int = -1) -> Transform:
    """Concatenate the entries ``keys`` of a dict observation into one entry ``out``."""
    return Cat(keys, out, dim)


class Select(Transform):
    def __init__(self, indices: Sequence[int]) -> None:
        idx = tuple(indices)
        if not idx or not all(isinstance(i, int) and not isinstance(i, bool) for i in idx):
            raise ValueError(
                f"select: indices must be a non-empty sequence of ints, got {indices!r}."
            )
        if len(set(idx)) != len(idx):
            raise ValueError(f"select: indices {list(idx)} repeat an entry; give each once.")
        self.indices = idx

    def _index(self, size: int) -> Tensor:
        bad = [i for i in self.indices if not -size <= i < size]
        if bad:
            raise ValueError(
                f"select: indices {bad} are out of range for an observation of {size} "
                f"entries; expected indices in [-{size}, {size})."
            )
        return torch.tensor([i % size for i in self.indices], dtype=torch.int64)

    def __call__(self, obs: Tensor, state: Any = None) -> Tensor:
        if not isinstance(obs, Tensor) or obs.ndim < 1:
            got = list(obs.shape) if isinstance(obs, Tensor) else type(obs).__name__
            raise ValueError(f"select: expects a [..., features] observation, got {got}.")
        # index_select with a constant index: no data-dependent shapes, so it vmaps,
        # compiles and exports (as a Gather in ONNX).
        return obs.index_select(-1, self._index(obs.shape[-1]))

    def observation_spec(self, spec: Any) -> specs.Box:
        spec = _box("select", spec)
        if len(spec.shape) < 1:
            raise ValueError(f"select: expects a [..., features] Box, got {spec!r}.")
        low = spec.low.expand(spec.shape).double()
        high = spec.high.expand(spec.shape).double()
        index = self._index(spec.shape[-1])
        return specs.Box(low.index_select(-1, index), high.index_select(-1, index),
                         dtype=spec.dtype)  # fmt: skip

    def __repr__(self) -> str:
        return f"select({list(self.indices)})"


def select(indices: Sequence[int]) -> Transform:
    """Keep the observation entries ``indices`` (last dim), in that order:
    ``[..., n] -> [..., len(indices)]``.

    Makes a partially observable task from a full one: ``select([0, 2])`` keeps
    CartPole-v1's cart position and pole angle and drops both velocities.
    """
    return Select(indices)


class Compose(Transform):
    def __init__(self, transforms: Sequence[Transform]) -> None:
        flat: list[Transform] = []
        for t in transforms:
            flat.extend(t.transforms if isinstance(t, Compose) else [t])
        self.transforms = tuple(flat)

    def __call__(self, obs: Any, state: Sequence[Any] | None = None) -> Any:
        states = [None] * len(self.transforms) if state is None else list(state)
        for t, s in zip(self.transforms, states, strict=True):
            obs = t(obs, s)
        return obs

    def observation_spec(self, spec: Any) -> Any:
        for t in self.transforms:
            spec = t.observation_spec(spec)
        return spec

    def __repr__(self) -> str:
        return f"compose({', '.join(map(repr, self.transforms))})"


def compose(*transforms: Transform) -> Compose:
    """Apply ``transforms`` first to last: ``compose(a, b)(obs) == b(a(obs))``.

    As an env wrapper it is the same as listing them: ``transform(env, compose(a, b))``.
    ``state``, when given, is one state per transform.
    """
    return Compose(transforms)
