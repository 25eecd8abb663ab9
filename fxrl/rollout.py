"""``rollout``: run a policy in a pure env for a fixed number of steps, as one pure function.

    state, _ = env.reset(key)
    state, traj = rollout(env, policy, params, state, key, num_steps=128)
    traj["reward"]            # [128, *env.batch_shape]

It is plain Python over ``env.step``, so it works on one env and on ``batch(env, N)``,
under ``torch.func.vmap`` (many seeds: vmap over ``state`` and ``key``) and under
``torch.compile`` (which unrolls the ``num_steps`` loop: compile time grows with it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor

from fxrl import random, tree
from fxrl.collector import Collector, collector
from fxrl.envs.core import Env

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
    obs = env.observe(state)
    keys = random.split(key, num_steps)
    steps = []
    for t in range(num_steps):
        action, extras = _action_and_extras(policy(params, obs, keys[..., t, :]))
        state, ts = env.step(state, action)
        steps.append(
            {
                "obs": obs,
                "action": action,
                "reward": ts.reward,
                "terminated": ts.terminated,
                "truncated": ts.truncated,
                "next_obs": ts.obs,
                "info": ts.info,
                **extras,
            }
        )
        # after an automatic reset the policy acts on the new episode's first observation
        obs = ts.info.get("next_obs", ts.obs)
    return state, tree.stack(steps)


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
