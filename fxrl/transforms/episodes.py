"""Transforms that follow an episode: frame stacks, step counts and the time limit they
make, episode returns, no-op starts. Their state lives in the env state and restarts
with each episode."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fxrl import random, specs, tree
from fxrl.timestep import TimeStep
from fxrl.transforms.base import Transform, as_box, batch_zeros

__all__ = ["EpisodeStats", "frame_stack", "noop_reset", "step_counter", "truncate_at"]


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
        spec = as_box("frame_stack", spec)
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


def truncate_at(ts: TimeStep, count: Tensor, max_steps: int) -> TimeStep:
    """``ts`` truncated where ``count`` (steps since the episode began) has reached
    ``max_steps``: the time limit's one rule. ``step_counter(max_steps)`` applies it to the
    count it keeps in its own state, for envs that keep none (host envs)."""
    return ts.replace(truncated=ts.truncated | (count >= max_steps))


class StepCounter(Transform):
    def __init__(self, max_steps: int | None) -> None:
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(
                f"step_counter: max_steps must be a positive int or None, got {max_steps!r}."
            )
        self.max_steps = max_steps

    def init(self, obs: Any, spec: Any) -> Tensor:
        return batch_zeros(obs, spec, torch.int64)

    def update(self, state: Tensor, ts: TimeStep) -> Tensor:
        return state + 1

    def timestep(self, state: Tensor, ts: TimeStep) -> TimeStep:
        if self.max_steps is not None:
            ts = truncate_at(ts, state, self.max_steps)
        return ts.replace(info={**ts.info, "step_count": state})

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
    episode at that count (``truncate_at``: the rule of ``fxrl.envs.time_limit``, which reads
    the env's own count instead). For envs that count no steps, such as host envs."""
    return StepCounter(max_steps)


class EpisodeStats(Transform):
    """Running return and length of the current episode in ``info`` (see episode_stats)."""

    def init(self, obs: Any, spec: Any) -> tuple[Tensor, Tensor]:
        return batch_zeros(obs, spec, torch.float64), batch_zeros(obs, spec, torch.int64)

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
        inner = env.unwrapped() if callable(getattr(env, "unwrapped", None)) else env
        # A host env (fxrl.envs.host.HostEnv, AtariVector) is the one that drives a
        # gymnasium env; told by that attribute: transforms sit below fxrl.envs.
        if hasattr(inner, "gymnasium_env"):
            raise TypeError(
                "noop_reset: cannot wrap a host env: its no-op steps would be taken (and "
                "discarded by torch.where) on the one running env at every step. Use the "
                "host env's own option, e.g. fxrl.envs.atari('Pong', noop_reset=30)."
            )
        reset_key, noop_key = random.split(key).unbind(-2)
        state, ts = env.reset(reset_key, params)
        n = random.randint(noop_key, env.batch_shape, 1, self.noops + 1)
        if self.action is None:
            action = env.action_spec.zeros(env.batch_shape, key.device)
        else:
            action = tree.map(lambda a: torch.as_tensor(a, device=key.device), self.action)
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
