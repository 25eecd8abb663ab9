"""A batch of fxrl envs as a Stable-Baselines3 ``VecEnv``: one batched step per SB3 step.

    from stable_baselines3 import PPO
    venv = fxrl.envs.to_sb3(fxrl.envs.batch(fxrl.envs.make("CartPole-v1"), 8))
    PPO("MlpPolicy", venv).learn(50_000)

SB3 can also wrap ``to_gymnasium(make(id))`` in its ``DummyVecEnv``, which steps N
single envs one after the other; this adapter steps all N in one call of the batched
(vmapped, optionally compiled) ``env.step``: see bench/interop_bench.py for the rates.
Semantics are SB3's: auto-reset inside ``step``, the finished episode's last observation
in ``infos[i]["terminal_observation"]``, ``infos[i]["TimeLimit.truncated"]``, and
``infos[i]["episode"] = {"r", "l", "t"}`` (what SB3's ``Monitor`` reports) for envs
that keep episode statistics (``make`` adds them). Stable-Baselines3 is not a dependency
of fxrl: it is imported when ``to_sb3`` is called.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np
import torch

from fxrl import random, specs
from fxrl._optional import require
from fxrl.envs._adapters import as_action, cast_action, step_function, to_numpy
from fxrl.envs.core import Env

__all__ = ["to_sb3"]


@functools.cache
def _vec_env_class() -> type:
    VecEnv = require("stable_baselines3.common.vec_env", "fxrl.envs.to_sb3").VecEnv

    class FxrlVecEnv(VecEnv):
        """``to_sb3``'s VecEnv (a class made on first use: SB3 is imported then)."""

        def __init__(self, env: Env, params: Any, compile: Any) -> None:
            self.env, self.params, self.render_mode = env, params, None
            self._step = step_function(env, compile)
            self._state: Any = None
            self._actions: Any = None
            self._np_random = np.random.default_rng()
            self._start = time.perf_counter()
            super().__init__(
                env.batch_shape[0],
                specs.to_gymnasium(env.observation_spec),
                specs.to_gymnasium(env.action_spec),
            )

        def reset(self) -> Any:
            seed = self._seeds[0]  # VecEnv.seed(s) asks for s + i in env i: fxrl splits key(s)
            if seed is None:
                seed = int(self._np_random.integers(0, 2**63 - 1))
            else:
                self._np_random = np.random.default_rng(seed)
            params = self._options[0].get("params", self.params)
            self._state, ts = self.env.reset(random.key(int(seed)), params)
            self._reset_seeds()
            self._reset_options()
            return to_numpy(ts.info.get("next_obs", ts.obs))

        def step_async(self, actions: np.ndarray) -> None:
            self._actions = actions

        def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
            if self._state is None:
                raise RuntimeError(f"{self!r}.step: call reset() first.")
            spec, name = self.env.action_spec, f"{self!r}.step"
            act = cast_action(spec, as_action(name, spec, self._actions), (self.num_envs,), name)
            self._state, ts = self._step(self._state, act)
            done = ts.terminated | ts.truncated
            infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
            if bool(done.any()):
                self._finish(infos, ts, done)
            obs = to_numpy(ts.info["next_obs"])
            return obs, ts.reward.numpy(), done.numpy(), infos

        def _finish(self, infos: list[dict[str, Any]], ts: Any, done: torch.Tensor) -> None:
            ended = torch.nonzero(done).flatten().tolist()
            final = to_numpy(ts.obs)
            cut = (ts.truncated & ~ts.terminated).tolist()
            stats = "episode_return" in ts.info and "episode_length" in ts.info
            elapsed = round(time.perf_counter() - self._start, 6)
            for i in ended:
                infos[i]["terminal_observation"] = _numpy_index(final, i)
                infos[i]["TimeLimit.truncated"] = cut[i]
                if stats:
                    r, n = ts.info["episode_return"][i], ts.info["episode_length"][i]
                    infos[i]["episode"] = {"r": float(r), "l": int(n), "t": elapsed}

        def set_params(self, params: Any) -> None:
            """Env params (shared, or per env with a leading [N] dim) from the next reset."""
            self.params = params

        def close(self) -> None:
            self._state = None

        def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
            return [getattr(self, attr_name) for _ in self._get_indices(indices)]

        def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
            setattr(self, attr_name, value)

        def env_method(self, method_name: str, *args: Any, indices: Any = None, **kw: Any) -> Any:
            return [getattr(self, method_name)(*args, **kw) for _ in self._get_indices(indices)]

        def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
            return [False for _ in self._get_indices(indices)]

        def __repr__(self) -> str:
            return f"to_sb3({self.env!r})"

    return FxrlVecEnv


def _numpy_index(obs: Any, i: int) -> Any:
    if isinstance(obs, np.ndarray):
        return obs[i].copy()
    if isinstance(obs, dict):
        return {k: _numpy_index(v, i) for k, v in obs.items()}
    return tuple(_numpy_index(v, i) for v in obs)


def to_sb3(env: Env, *, params: Any = None, compile: bool | dict[str, Any] = False) -> Any:
    """A batch of fxrl envs (``fxrl.envs.batch(env, N)``) as a Stable-Baselines3 VecEnv.

    Args:
      env: an auto-resetting fxrl env with batch shape ``(N,)``:
        ``fxrl.envs.batch(fxrl.envs.make(id), N)`` or any env written to the contract.
      params: env params from the next ``reset`` (per env with a leading [N] dim); change
        them with ``set_params``, or for one reset with ``venv.set_options({"params": p})``.
      compile: ``True`` steps with ``fxrl.compile(env.step)``; a dict with
        ``torch.compile(env.step, **compile)``.
    Returns:
      A ``stable_baselines3.common.vec_env.VecEnv``. ``venv.seed(s)`` makes the next reset
      use ``fxrl.random.key(s)``, split into one key per env.
    """
    if not isinstance(env, Env):
        raise TypeError(
            f"to_sb3: expected an fxrl env (fxrl.envs.Env), got {type(env).__name__}. "
            "Build one with fxrl.envs.batch(fxrl.envs.make(id), N)."
        )
    if len(env.batch_shape) != 1:
        raise ValueError(
            f"to_sb3: {env!r} has batch shape {list(env.batch_shape)}; expected one batch dim "
            "[N]. Batch it: to_sb3(fxrl.envs.batch(env, 8)), or give SB3 "
            "to_gymnasium(env) and let it build a DummyVecEnv."
        )
    if not env.auto_resets:
        raise ValueError(
            f"to_sb3: {env!r} does not start new episodes by itself, and SB3's VecEnvs must. "
            "Use fxrl.envs.make(id) (auto-resets) or wrap it: fxrl.envs.auto_reset(env)."
        )
    return _vec_env_class()(env, params, compile)
