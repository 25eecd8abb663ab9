"""``rollout``: run a policy in a pure env for a fixed number of steps, as one pure function.

    state, _ = env.reset(key)
    state, traj = rollout(env, policy, params, state, key, num_steps=128)
    traj["reward"]            # [128, *env.batch_shape]

It is plain Python over ``env.step``, so it works on one env and on ``batch(env, N)``,
under ``torch.func.vmap`` (many seeds: vmap over ``state`` and ``key``) and compiled.
The loop over the steps is ``fxrl.scan``: a Python loop in eager code, one rolled loop
under ``fxrl.compile`` (compile time does not grow with ``num_steps``); ``torch.compile``
unrolls it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from fxrl import random, tree
from fxrl.collector import Collector, collector
from fxrl.envs.core import Env
from fxrl.scan import scan

__all__ = ["Collector", "collector", "rollout"]

_KEYS = ("obs", "action", "reward", "terminated", "truncated", "next_obs", "info")

Policy = Callable[[Any, Any, Tensor], Any]


def rollout(
    env: Env, policy: Policy, params: Any, state: Any, key: Tensor, num_steps: int
) -> tuple[Any, dict[str, Any]]:
    """Step ``env`` ``num_steps`` times with actions from ``policy``.

    Args:
      env: a pure env; an auto-resetting one (``make`` builds them so) keeps going across
        episodes.
      policy: ``policy(params, obs, key) -> action`` or ``-> (action, extras)`` with
        ``extras`` a dict of tensors (log-probs, values...) recorded with each step.
      params: passed to ``policy`` unchanged.
      state: where to start (from ``env.reset`` or an earlier rollout).
      key: [2]; step ``t`` gives the policy ``random.split(key, num_steps)[t]``.
      num_steps: a Python int.
    Returns:
      ``(state, trajectory)``: the state after the last step and a dict whose leaves have a
      leading time dim [num_steps, ...]: ``obs`` (what the policy saw), ``action``,
      ``reward``, ``terminated``, ``truncated``, ``next_obs`` (the observation the step
      reached, also where the episode ended: bootstrap from it when truncated), ``info``
      (the TimeStep's), and the policy's extras.
    """
    if not isinstance(num_steps, int) or num_steps < 1:
        raise ValueError(f"rollout: num_steps must be a positive int, got {num_steps!r}.")
    keys = random.split(key, num_steps).movedim(-2, 0)  # [num_steps, ..., 2]

    def step(carry: tuple, k: Tensor) -> tuple[tuple, dict[str, Any]]:
        state, obs = carry
        action, extras = _action_and_extras(policy(params, obs, k))
        state, ts = env.step(state, action)
        record = {
            "obs": obs,
            "action": action,
            "reward": ts.reward,
            "terminated": ts.terminated,
            "truncated": ts.truncated,
            "next_obs": ts.obs,
            "info": ts.info,
            **extras,
        }
        # after an automatic reset the policy acts on the new episode's first observation
        return (state, ts.info.get("next_obs", ts.obs)), record

    # torch.compile (dynamo) unrolls a Python loop: inductor cannot lower every rolled
    # loop it traces (an env's auto-reset in the body fails in its scan lowering, torch
    # 2.13); fxrl.compile rolls fxrl.scan's
    loop = _unrolled if torch.compiler.is_compiling() else scan
    (state, _), traj = loop(step, (state, env.observe(state)), keys)
    return state, traj


def _unrolled(body: Callable, carry: Any, xs: Tensor) -> tuple[Any, dict[str, Any]]:
    """``fxrl.scan``'s eager loop (the same numbers), for torch.compile to unroll."""
    ys = []
    for x in xs.unbind(0):
        carry, y = body(carry, x)
        ys.append(y)
    return carry, tree.stack(ys)


def _action_and_extras(out: Any) -> tuple[Any, dict[str, Any]]:
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
        action, extras = out
        clash = sorted(set(extras) & set(_KEYS))
        if clash:
            raise ValueError(
                f"rollout: the policy's extras use the reserved names {clash}; the trajectory "
                f"already has {list(_KEYS)}. Rename them (e.g. 'policy_{clash[0]}')."
            )
        return action, extras
    return out, {}
