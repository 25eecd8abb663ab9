"""Collectors: iterate over batches of transitions from any fxrl env, pure or host.

    c = collector(env, policy, params, key, frames_per_batch=256, total_frames=10_000)
    for batch, stats in c:
        params, opt_state = learn(params, opt_state, batch)
        c.update(params)             # the next batch acts with the new params

A collector is an iterator holding the env state, the step count and the trajectory
ids; the policy and its params are arguments, never captured modules: ``update(params)``
(or ``send(params)``, which also returns the next batch) replaces the params, or pass a
zero-argument callable as ``params`` to fetch them before every batch. Pure envs
(``fxrl.envs.make``/``batch``) and host envs (``fxrl.envs.gym``/``atari``, with
``asynchronous=True`` for processes) are stepped the same way, one ``env.step`` per step.

A policy with a state (a recurrent carry, Ornstein-Uhlenbeck noise) gets it as an argument,
as everywhere in fxrl: give ``policy_state`` (one state per env) and the policy is called
``policy(params, obs, policy_state, is_init, key) -> (action, policy_state)``, ``is_init``
[*batch_shape] bool marking the observations that begin an episode. The collector keeps
the state between steps and batches and sets ``is_init`` where the previous step ended an
episode, as the algorithms' pure updates do; the policy resets its state there
(``torch.where``: ``nn.gru``'s ``is_init``, ``exploration.ornstein_uhlenbeck``'s).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

from fxrl import random, tree
from fxrl.envs.core import Env

__all__ = ["Collector", "collector"]

Policy = Callable[..., Any]


class Collector:
    """Iterator over ``(batch, stats)``; see ``collector``."""

    def __init__(
        self,
        env: Env,
        policy: Policy,
        params: Any,
        key: Tensor,
        frames_per_batch: int,
        total_frames: int | None = None,
        learning_starts: int = 0,
        flat: bool = True,
        policy_state: Any = None,
    ) -> None:
        if not isinstance(env, Env):
            raise TypeError(
                f"collector: env must be an fxrl env (fxrl.envs.make, gym, atari), "
                f"got {type(env).__name__}."
            )
        if not env.auto_resets:
            raise ValueError(
                f"collector: {env!r} does not start new episodes by itself; wrap "
                "it: fxrl.envs.auto_reset(env) (fxrl.envs.make does by default)."
            )
        self.num_envs = 1
        for n in env.batch_shape:
            self.num_envs *= n
        if not isinstance(frames_per_batch, int) or frames_per_batch < 1:
            raise ValueError(
                f"collector: frames_per_batch must be a positive int, got {frames_per_batch!r}."
            )
        if frames_per_batch % self.num_envs:
            raise ValueError(
                f"collector: frames_per_batch={frames_per_batch} is not a multiple of the "
                f"{self.num_envs} envs of {env!r}; each step collects one frame per env. Use "
                f"frames_per_batch={-(-frames_per_batch // self.num_envs) * self.num_envs}."
            )
        self.env, self.policy, self.params = env, policy, params
        self.frames_per_batch, self.total_frames = frames_per_batch, total_frames
        self.learning_starts, self.flat = learning_starts, flat
        self.stateful = policy_state is not None
        if self.stateful:
            check_policy_state(policy_state, tuple(env.batch_shape), repr(env))
        self._initial_state = policy_state
        self.policy_state: Any = policy_state  # what the policy gets at the next step
        self.is_init: Tensor | None = None  # [*batch_shape] bool: the next obs begins an episode
        self.steps_per_batch = frames_per_batch // self.num_envs
        self._reset_key, self._step_key = random.split(key).unbind(0)
        self.frames = 0  # frames collected so far
        self.batches = 0
        self.state: Any = None
        self._obs: Any = None
        self._next_traj = 0

    def update(self, params: Any) -> None:
        """Act with ``params`` from the next batch on."""
        self.params = params

    def send(self, params: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """``update(params)``, then the next batch (generator-style)."""
        self.update(params)
        return next(self)

    def __iter__(self) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        return self

    def __next__(self) -> tuple[dict[str, Any], dict[str, Any]]:
        if self.total_frames is not None and self.frames >= self.total_frames:
            raise StopIteration
        if self.state is None:
            self.reset()
        params = self.params() if callable(self.params) else self.params
        use_random = self.frames < self.learning_starts
        # One key per step from one split per batch: eager Threefry costs a few hundred
        # microseconds a call, as much as an Atari step.
        T = self.steps_per_batch
        keys = random.split(random.fold_in(self._step_key, self.batches), T)
        actions, policy_keys = None, keys
        if use_random:
            actions = self.env.action_spec.sample(keys[0], (T, *self.env.batch_shape))
            if self.stateful:  # the policy still runs, on keys apart from the actions'
                policy_keys = random.split(random.fold_in(keys[0], 1), T)
        steps, returns, lengths = [], [], []
        with torch.no_grad():
            for t in range(T):
                action = None if actions is None else tree.map(lambda x, t=t: x[t], actions)
                steps.append(self._step(params, policy_keys[t], action, returns, lengths))
        batch = tree.stack(steps)
        if self.flat and self.env.batch_shape:
            event = 1 + len(self.env.batch_shape)  # leaves are [T, *batch_shape, ...]
            batch = tree.map(lambda x: x.reshape(self.frames_per_batch, *x.shape[event:]), batch)
        self.frames += self.frames_per_batch
        self.batches += 1
        device = self._return.device
        none = torch.zeros(0, device=device)
        stats = {
            "episode_return": torch.cat(returns) if returns else none,
            "episode_length": torch.cat(lengths) if lengths else none.long(),
            "frames": self.frames,
            "random": use_random,
        }
        return batch, stats

    def reset(self) -> None:
        """Reset the env from the collector's key; new trajectory ids follow the old ones.
        The first batch does this by itself."""
        self.state, ts = self.env.reset(self._reset_key)
        self._obs = ts.info.get("next_obs", ts.obs)
        shape = self.env.batch_shape
        first = self._next_traj
        device = ts.reward.device  # the env's (a pure env's: the key's; a host env's: CPU)
        ids = torch.arange(self.num_envs, dtype=torch.int64, device=device)
        self._traj = (first + ids).reshape(shape)
        self._next_traj = first + self.num_envs
        self._return = torch.zeros(shape, dtype=torch.float64, device=device)
        self._length = torch.zeros(shape, dtype=torch.int64, device=device)
        if self.stateful:
            self.policy_state = self._initial_state
            self.is_init = torch.ones(shape, dtype=torch.bool, device=device)

    def _act(self, params: Any, key: Tensor, action: Any) -> tuple[Any, Any, dict[str, Any]]:
        """``(action, extras, record)``: the policy's action (or ``action`` where given: a
        random frame) and extras; ``record`` holds the policy state's entries."""
        if not self.stateful:
            if action is not None:
                return action, None, {}
            return (*_split_extras(self.policy(params, self._obs, key)), {})
        before, is_init = self.policy_state, self.is_init
        out = self.policy(params, self._obs, before, is_init, key)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError(
                "collector: with policy_state, the policy must return (action, policy_state) "
                f"or ((action, extras), policy_state), got {type(out).__name__}."
            )
        out, self.policy_state = out
        record = {"is_init": is_init, "policy_state": before,
                  "next_policy_state": self.policy_state}  # fmt: skip
        if action is not None:  # a random frame: the state moves on, the action is unused
            return action, None, record
        return (*_split_extras(out), record)

    def _step(
        self, params: Any, key: Tensor, action: Any, returns: list[Tensor], lengths: list[Tensor]
    ) -> dict[str, Any]:
        action, extras, record = self._act(params, key, action)
        self.state, ts = self.env.step(self.state, action)
        done = ts.terminated | ts.truncated
        record = {
            **record,
            "obs": self._obs,
            "action": action,
            "reward": ts.reward,
            "next_obs": ts.obs,
            "terminated": ts.terminated,
            "truncated": ts.truncated,
            "traj_id": self._traj,
        }
        if extras is not None:
            record["extras"] = extras
        self._return = self._return + ts.reward.double()
        self._length = self._length + 1
        if bool(done.any()):
            returns.append(self._return[done].float().reshape(-1))
            lengths.append(self._length[done].reshape(-1))
            self._return = torch.where(done, 0.0, self._return)
            self._length = torch.where(done, 0, self._length)
            new_ids = self._next_traj + done.reshape(-1).long().cumsum(0).reshape(done.shape) - 1
            self._traj = torch.where(done, new_ids, self._traj)
            self._next_traj += int(done.sum())
        self._obs = ts.info["next_obs"]
        if self.stateful:  # the next observation begins an episode where this step ended one
            self.is_init = done
        return record


def _split_extras(out: Any) -> tuple[Any, Any]:
    if isinstance(out, tuple) and len(out) == 2:
        return out
    return out, None


def check_policy_state(policy_state: Any, shape: tuple[int, ...], env: str) -> None:
    """A one-line ``ValueError`` unless every leaf of ``policy_state`` is a tensor
    ``[*shape, ...]`` (one state per env of the env named ``env``)."""
    for leaf in tree.leaves(policy_state):
        if not isinstance(leaf, Tensor) or tuple(leaf.shape[: len(shape)]) != shape:
            got = list(leaf.shape) if isinstance(leaf, Tensor) else type(leaf).__name__
            dims = "".join(f"{n}, " for n in shape)
            raise ValueError(
                f"collector: policy_state has a leaf {got}; expected tensors [{dims}...], "
                f"one state per env of {env}: e.g. exploration.ou_init(spec, {shape}) or "
                f"a recurrent net's initial_carry({shape})."
            )


def collector(
    env: Env,
    policy: Policy,
    params: Any,
    key: Tensor,
    frames_per_batch: int,
    total_frames: int | None = None,
    learning_starts: int = 0,
    *,
    flat: bool = True,
    policy_state: Any = None,
) -> Collector:
    """Batches of transitions from ``env`` acted on by ``policy``, for pure and host envs.

    Args:
      env: an auto-resetting fxrl env: ``fxrl.envs.make(id)``, ``batch(make(id), N)``,
        ``gym(id, num_envs=N, asynchronous=True)``, ``atari(game)``, transformed or not.
      policy: ``policy(params, obs, key) -> action`` or ``-> (action, extras)`` with
        ``extras`` a pytree of per-step tensors (log-probs, values); ``obs`` has the env's
        batch shape; run under ``torch.no_grad()``; a fresh ``key`` each step. With
        ``policy_state``: ``policy(params, obs, policy_state, is_init, key) ->
        (action, policy_state)`` or ``((action, extras), policy_state)``.
      params: the policy's params, or a zero-argument callable returning them (called
        before each batch); replace them with ``update``/``send``.
      key: seeds the env's reset and the policy's per-step keys: same key, same batches
        (host envs: given the same gymnasium version).
      frames_per_batch: frames (env steps times envs) per batch.
      total_frames: stop after this many frames (rounded up to whole batches); ``None``
        iterates forever.
      learning_starts: batches that begin before this many frames act with
        actions sampled from ``env.action_spec`` instead of the policy (no extras). A
        stateful policy is still called on them, its action unused, so that its state
        follows the episode as in the algorithms' pure updates.
      flat: leaves are ``[frames_per_batch, ...]`` (time-major: frame ``t * N + i`` is
        step ``t`` of env ``i``); ``False`` keeps ``[T, *batch_shape, ...]``.
      policy_state: the policy's state at the start (after ``reset``): a pytree of
        tensors ``[*env.batch_shape, ...]``, one state per env, such as
        ``exploration.ou_init(spec, (N,))`` or a recurrent net's ``initial_carry((N,))``.
        ``is_init`` is True on the first step and wherever the step before ended an
        episode; the policy resets its state there.
    Returns:
      A ``Collector``, iterating over ``(batch, stats)``: ``batch`` is a dict of ``obs``,
      ``action``, ``reward``, ``next_obs`` (the step's observation: an episode's last one
      where it ended), ``terminated``, ``truncated``, ``traj_id`` (int64, unique per
      episode over the collector's life) and ``extras``; with ``policy_state`` also
      ``is_init``, ``policy_state`` (what the policy was given at the step) and
      ``next_policy_state`` (what it returned). ``stats`` holds the ``episode_return``
      [E] and ``episode_length`` [E] of the episodes that ended in the batch, ``frames``
      so far and whether the batch was ``random``. The collector's ``policy_state`` and
      ``is_init`` are what the next step will pass.
    """
    return Collector(
        env, policy, params, key, frames_per_batch, total_frames, learning_starts, flat,
        policy_state,
    )  # fmt: skip
