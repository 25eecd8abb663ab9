"""fxrl envs out, as gymnasium envs: ``to_gymnasium(env)`` for Stable-Baselines3, CleanRL...

    env = fxrl.envs.to_gymnasium(fxrl.envs.make("CartPole-v1"))          # gymnasium.Env
    env = gymnasium.make("fxrl/CartPole-v1")      # every fxrl id, once this module is imported
    envs = fxrl.envs.to_gymnasium(fxrl.envs.batch(make("CartPole-v1"), 8))  # VectorEnv
    obs, info = envs.reset(seed=0)                 # numpy in and out (numpy=False: torch)
    obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())

Spaces come from the specs (``specs.to_gymnasium``); ``reset(seed=s)`` resets with
``fxrl.random.key(s)``, so a gymnasium user and an fxrl user with the same seed see the
same episodes; ``reset()`` without a seed draws the key from the env's ``np_random``.
A batch of auto-resetting envs (what ``make`` builds) is a vector env in gymnasium's
``SAME_STEP`` autoreset mode: ``obs`` is the next episode's first observation where one
ended, ``info["final_obs"]`` and ``info["final_info"]`` (with their ``_`` masks) hold
the finished episode's last ones, as gymnasium 1.x's vector envs report them.
``NEXT_STEP`` (gymnasium's default) is emulated on request; envs that do not reset
themselves are ``DISABLED`` (reset them with ``options={"reset_mask": mask}``).

Importing this module registers every fxrl env id with gymnasium as ``"fxrl/<id>"``
(those registered later too, ``fxrl.envs.register``'s included), so a CleanRL or SB3
script names them like any gymnasium env: ``gymnasium.make("fxrl/CartPole-v1")``, or
without importing fxrl first ``gymnasium.make("fxrl.envs.to_gym:fxrl/CartPole-v1")``
(gymnasium's ``"module:id"``). ``gymnasium.make`` gives one env without fxrl's time limit
or auto-reset: gymnasium adds its own ``TimeLimit`` (``max_episode_steps``: the fxrl
id's limit), keyword arguments are env params (``length=1.0``) and
``render_mode="rgb_array"`` draws with the env's pure ``render``. The same function is
gymnasium's plugin entry point (``gymnasium.envs`` in pyproject.toml), which gymnasium
0.26-0.29 loads by itself; gymnasium 1.x dropped plugin loading, hence the import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from fxrl import random, specs, tree
from fxrl._optional import require
from fxrl.envs import _adapters
from fxrl.envs.core import Env

__all__ = ["GymnasiumEnv", "GymnasiumVectorEnv", "register_gymnasium_envs", "to_gymnasium"]

if TYPE_CHECKING:
    import gymnasium
    from gymnasium.vector import AutoresetMode
else:
    gymnasium = require("gymnasium", "fxrl.envs.to_gymnasium")
    AutoresetMode = require("gymnasium.vector", "fxrl.envs.to_gymnasium").AutoresetMode


def _info(info: dict[str, Any], numpy: bool) -> dict[str, Any]:
    """The env's info without fxrl's own ``next_obs`` (gymnasium reports it otherwise)."""
    out = {k: v for k, v in info.items() if k != "next_obs"}
    return _adapters.to_numpy(out) if numpy else out


def _key_from(seed: int | None, np_random: np.random.Generator) -> Tensor:
    if seed is not None:
        return random.key(int(seed))
    return random.key(int(np_random.integers(0, 2**63 - 1)))


class GymnasiumEnv(gymnasium.Env):
    """One fxrl env (batch shape ``()``) as a ``gymnasium.Env``; see ``to_gymnasium``.

    ``params`` (the env params of the next reset) may be replaced with ``set_params`` or
    ``reset(options={"params": ...})``. After an episode ends, call ``reset()`` as with
    any gymnasium env.
    """

    def __init__(
        self,
        env: Env,
        params: Any = None,
        numpy: bool = True,
        compile: Any = False,
        render_mode: str | None = None,
    ):
        self.env, self.params, self.numpy = env, params, numpy
        self.metadata = {"render_modes": ["rgb_array"], "render_fps": 50}
        if render_mode not in (None, "rgb_array"):
            raise ValueError(
                f"to_gymnasium({env!r}): render_mode={render_mode!r}; fxrl envs draw "
                "render_mode='rgb_array' frames (their pure render) or none (None)."
            )
        self.render_mode = render_mode
        self.observation_space = specs.to_gymnasium(env.observation_spec)
        self.action_space = specs.to_gymnasium(env.action_spec)
        self._step = _adapters.step_function(env, compile)
        self._state: Any = None

    def set_params(self, params: Any) -> None:
        """Env params for the episodes that begin at the next ``reset``."""
        self.params = params

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        params = (options or {}).get("params", self.params)
        self._state, ts = self.env.reset(_key_from(seed, self.np_random), params)
        return self._out(ts.obs), _info(ts.info, self.numpy)

    def step(self, action: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        if self._state is None:
            raise RuntimeError(f"to_gymnasium({self.env!r}).step: call reset() first.")
        name = f"to_gymnasium({self.env!r}).step"
        act = _adapters.cast_action(
            self.env.action_spec, _adapters.as_action(name, self.env.action_spec, action), (), name
        )
        self._state, ts = self._step(self._state, act)
        if not self.numpy:
            return ts.obs, ts.reward, ts.terminated, ts.truncated, _info(ts.info, False)
        info = _info(ts.info, True)
        return self._out(ts.obs), float(ts.reward), bool(ts.terminated), bool(ts.truncated), info

    def render(self) -> Any:
        """The env's picture of its state, uint8 [H, W, 3] (``render_mode="rgb_array"``)."""
        if self.render_mode is None:
            return None
        if self._state is None:
            raise RuntimeError(f"to_gymnasium({self.env!r}).render: call reset() first.")
        with torch.no_grad():
            return self.env.render(self._state).numpy()

    def _out(self, obs: Any) -> Any:
        return _adapters.to_numpy(obs) if self.numpy else obs

    def __repr__(self) -> str:
        return f"to_gymnasium({self.env!r})"


class GymnasiumVectorEnv(gymnasium.vector.VectorEnv):
    """A batch of fxrl envs (batch shape ``(N,)``) as a gymnasium ``VectorEnv``; see
    ``to_gymnasium``. Stepping is one call of the batched (vmapped) ``env.step``."""

    def __init__(
        self,
        env: Env,
        params: Any = None,
        numpy: bool = True,
        compile: Any = False,
        autoreset_mode: AutoresetMode | str | None = None,
    ):
        self.env, self.params, self.numpy = env, params, numpy
        self.num_envs = env.batch_shape[0]
        self.autoreset_mode = _mode(env, autoreset_mode)
        self.metadata = {
            "render_modes": [],
            "autoreset_mode": self.autoreset_mode,
        }
        self.single_observation_space = specs.to_gymnasium(env.observation_spec)
        self.single_action_space = specs.to_gymnasium(env.action_spec)
        batch_space = gymnasium.vector.utils.batch_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._step = _adapters.step_function(env, compile)
        self._state: Any = None
        self._obs: Any = None  # what step or reset returned last
        self._next_obs: Any = None  # where an episode ended, the next one's first obs
        self._pending = torch.zeros(self.num_envs, dtype=torch.bool)  # NEXT_STEP resets due

    def set_params(self, params: Any) -> None:
        """Env params (shared, or per env with a leading [N] dim) from the next reset."""
        self.params = params

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env with ``fxrl.random.key(seed)`` split into one key per env, or
        only those in ``options["reset_mask"]`` (a bool array [N])."""
        if seed is not None and not isinstance(seed, int | np.integer):
            raise TypeError(
                f"{self!r}.reset: seed must be one int (split into a key per env), got {seed!r}."
            )
        super().reset(seed=None if seed is None else int(seed))
        options = dict(options or {})
        params = options.pop("params", self.params)
        mask = options.pop("reset_mask", None)
        state, ts = self.env.reset(_key_from(seed, self.np_random), params)
        obs = ts.info.get("next_obs", ts.obs)
        if mask is not None:
            if self._state is None:
                raise RuntimeError(f"{self!r}.reset: reset_mask needs a full reset() first.")
            mask = torch.as_tensor(_reset_mask(self, mask))
            state = tree.where(mask, state, self._state)
            next_obs = tree.where(mask, obs, self._next_obs)
            obs = tree.where(mask, obs, self._obs)
            # NEXT_STEP: an env reset here has nothing pending; others keep their episodes
            self._pending = self._pending & ~mask
        else:
            self._pending = torch.zeros(self.num_envs, dtype=torch.bool)
            next_obs = obs
        self._state, self._obs, self._next_obs = state, obs, next_obs
        info = _masked(_info(ts.info, False), torch.ones(self.num_envs, dtype=torch.bool))
        return self._out(obs), _adapters.to_numpy(info) if self.numpy else info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        if self._state is None:
            raise RuntimeError(f"{self!r}.step: call reset() first.")
        spec, name = self.env.action_spec, f"{self!r}.step"
        act = _adapters.cast_action(
            spec, _adapters.as_action(name, spec, actions), (self.num_envs,), name
        )
        state, ts = self._step(self._state, act)
        done = ts.terminated | ts.truncated
        info = _masked(_info(ts.info, False), torch.ones(self.num_envs, dtype=torch.bool))
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            obs, final = ts.info["next_obs"], ts.obs
        elif self.autoreset_mode == AutoresetMode.NEXT_STEP:
            ts, state, done = _next_step(self._pending, self._state, self._next_obs, state, ts)
            self._pending, obs, final = done, ts.obs, None
        else:
            obs, final = ts.obs, None
        self._state, self._obs = state, obs
        self._next_obs = ts.info.get("next_obs", obs)
        if final is not None and bool(done.any()):
            info = {**info, **_finals(final, info, done, self.numpy)}
        reward, terminated, truncated = ts.reward, ts.terminated, ts.truncated
        if self.numpy:
            reward = reward.numpy().astype(np.float64)  # what gymnasium's vector envs give
            terminated, truncated, info = (
                terminated.numpy(),
                truncated.numpy(),
                _adapters.to_numpy(info),
            )
        return self._out(obs), reward, terminated, truncated, info

    def _out(self, obs: Any) -> Any:
        return _adapters.to_numpy(obs) if self.numpy else obs

    def __repr__(self) -> str:
        return f"to_gymnasium({self.env!r})"


def _mode(env: Env, mode: AutoresetMode | str | None) -> AutoresetMode:
    if mode is None:
        return AutoresetMode.SAME_STEP if env.auto_resets else AutoresetMode.DISABLED
    mode = AutoresetMode(mode)
    if mode != AutoresetMode.DISABLED and not env.auto_resets:
        raise ValueError(
            f"to_gymnasium: autoreset_mode={mode.name} needs an env that starts new episodes "
            f"by itself, but {env!r} does not. Use fxrl.envs.make(id) (auto-resets) or "
            "autoreset_mode=DISABLED with reset(options={'reset_mask': done})."
        )
    return mode


def _reset_mask(venv: GymnasiumVectorEnv, mask: Any) -> np.ndarray:
    mask = np.asarray(mask)
    if mask.dtype != np.bool_ or mask.shape != (venv.num_envs,):
        raise ValueError(
            f"{venv!r}.reset: options['reset_mask'] has shape {list(mask.shape)} {mask.dtype}; "
            f"expected a bool array [{venv.num_envs}], True for the envs to reset."
        )
    return mask


def _next_step(pending: Tensor, old_state: Any, first_obs: Any, state: Any, ts: Any) -> Any:
    """gymnasium's NEXT_STEP from fxrl's in-step auto-reset: an env whose episode ended at
    the previous step ignores this action and reports its new episode's first observation
    (``first_obs``, of the state it already holds), reward 0 and no flags."""
    ts = ts.replace(
        obs=tree.where(pending, first_obs, ts.obs),
        info={**ts.info, "next_obs": tree.where(pending, first_obs, ts.info["next_obs"])},
        reward=torch.where(pending, torch.zeros_like(ts.reward), ts.reward),
        terminated=ts.terminated & ~pending,
        truncated=ts.truncated & ~pending,
    )
    state = tree.where(pending, old_state, state)
    return ts, state, ts.terminated | ts.truncated


def _masked(info: dict[str, Any], mask: Tensor) -> dict[str, Any]:
    """``info`` with gymnasium's vector layout: each key ``k`` paired with a bool mask
    ``_k`` [N] saying which envs report it."""
    out: dict[str, Any] = {}
    for k, v in info.items():
        out[k], out[f"_{k}"] = v, mask.clone()
    return out


def _finals(final_obs: Any, info: dict[str, Any], done: Tensor, numpy: bool) -> dict[str, Any]:
    """``final_obs`` (an object array, one entry per env, ``None`` where no episode
    ended) and ``final_info``, each with its mask, as gymnasium's SAME_STEP reports them."""
    objects = np.full(done.shape[0], None, dtype=object)
    for i in torch.nonzero(done).flatten().tolist():
        obs = tree.map(lambda x, i=i: x[i].clone(), final_obs)
        objects[i] = _adapters.to_numpy(obs) if numpy else obs
    final_info = _masked({k: v for k, v in info.items() if not k.startswith("_")}, done)
    return {"final_obs": objects, "_final_obs": done, "final_info": final_info,
            "_final_info": done.clone()}  # fmt: skip


def to_gymnasium(
    env: Env,
    *,
    params: Any = None,
    numpy: bool = True,
    compile: bool | dict[str, Any] = False,
    autoreset_mode: AutoresetMode | str | None = None,
) -> GymnasiumEnv | GymnasiumVectorEnv:
    """An fxrl env as a gymnasium env: ``gymnasium.Env`` for one env, a gymnasium
    ``VectorEnv`` for ``fxrl.envs.batch(env, N)``.

    Args:
      env: an fxrl env (``make(id)``, ``batch(make(id), N)``, anything written to the
        fxrl contract, with batch shape ``()`` or ``(N,)``).
      params: env params for the episodes that begin at ``reset`` (per env with a leading
        [N] dim for a batch); change them with ``set_params`` or
        ``reset(options={"params": ...})``. ``None``: the env's defaults.
      numpy: numpy arrays in and out (gymnasium's convention); ``False``: torch tensors.
      compile: ``True`` steps with ``fxrl.compile(env.step)`` (the first step compiles);
        a dict steps with ``torch.compile(env.step, **compile)``
        (``{"backend": "aot_eager"}``).
      autoreset_mode: vector envs only: ``SAME_STEP`` (default for envs that reset
        themselves, as ``make``'s do), ``NEXT_STEP`` or ``DISABLED`` (default otherwise).
    Returns:
      A ``GymnasiumEnv`` or ``GymnasiumVectorEnv``.
    """
    if not isinstance(env, Env):
        raise TypeError(
            f"to_gymnasium: expected an fxrl env (fxrl.envs.Env), got {type(env).__name__}. "
            "Build one with fxrl.envs.make(id) or fxrl.envs.batch(make(id), N)."
        )
    if env.batch_shape == ():
        if autoreset_mode is not None:
            raise ValueError(
                "to_gymnasium: autoreset_mode is for vector envs; a single gymnasium env "
                "is reset by its user. Batch it: to_gymnasium(fxrl.envs.batch(env, N), ...)."
            )
        return GymnasiumEnv(env, params, numpy, compile)
    if len(env.batch_shape) == 1:
        return GymnasiumVectorEnv(env, params, numpy, compile, autoreset_mode)
    raise ValueError(
        f"to_gymnasium: {env!r} has batch shape {list(env.batch_shape)}; gymnasium takes one "
        "env or one batch dim [N]. Flatten the batch: fxrl.envs.batch(env, N) of a single env."
    )


# ------------------------------------------------------------------------------ gymnasium.make


GYMNASIUM_NAMESPACE = "fxrl"


class _FxrlCreator:
    """gymnasium's ``entry_point`` for ``"fxrl/<id>"``: one fxrl env without fxrl's time
    limit and auto-reset (gymnasium's ``TimeLimit`` and the user's ``reset`` do those);
    keyword arguments are env params. A class, so worker processes can pickle it."""

    def __init__(self, env_id: str) -> None:
        self.env_id = env_id

    def __call__(self, render_mode: str | None = None, **params: Any) -> GymnasiumEnv:
        from fxrl.envs.registry import make

        env = make(self.env_id, max_steps=None, auto_reset=False, episode_stats=False, **params)
        return GymnasiumEnv(env, render_mode=render_mode)


def _register_one(env_id: str) -> None:
    from fxrl.envs.registry import _lookup

    _, _, limit = _lookup(env_id, "gymnasium.make")
    gym_id = f"{GYMNASIUM_NAMESPACE}/{env_id}"
    gymnasium.registry.pop(gym_id, None)  # registered again (fxrl.envs.register replaced it)
    gymnasium.register(gym_id, entry_point=_FxrlCreator(env_id), max_episode_steps=limit)


def register_gymnasium_envs() -> None:
    """Register every fxrl env with gymnasium as ``"fxrl/<id>"`` (done on importing this
    module; also gymnasium's plugin entry point). Ids registered with fxrl later follow."""
    from fxrl.envs import registry

    registry.on_register(_register_one)


register_gymnasium_envs()
