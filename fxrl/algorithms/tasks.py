"""Task ensembles: one agent per env variant, all trained in one vmapped call.

A pure env's state carries its params (pole length, masses, gravity...), so a batch of
tasks is a batch of TrainStates whose env states hold different params, and
``torch.func.vmap(algo.update)`` trains them all at once:

    env = envs.make("CartPole-v1")
    env_params = tasks.sample_params(env, key, 8, {"length": (0.25, 1.0), "masspole": (0.05, 0.5)})
    algo = ppo.make(ppo.Config(env="CartPole-v1"))
    state = tasks.init_tasks(algo, key, env_params)       # TrainState with a leading [8] dim
    update = tasks.update_tasks(algo, 8)                  # vmap(algo.update), compiled
    state, metrics = update(state)                        # metrics [8] per task
    returns = tasks.evaluate_tasks(algo, state.params, env_params)   # [8, episodes], pure env

``gymnasium_env(env_id, params)`` builds gymnasium's own env with one task's params
(CartPole-v1 and Pendulum-v1), the judge for one task at a time.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from fxrl import envs, random, tree
from fxrl._errors import unknown
from fxrl._optional import require
from fxrl.algorithms.core import Algorithm, batched, compiled_update
from fxrl.algorithms.evaluation import params_device
from fxrl.envs.core import Env, params_as_tensors

__all__ = [
    "evaluate_gymnasium",
    "evaluate_tasks",
    "gymnasium_env",
    "init_tasks",
    "num_tasks",
    "sample_params",
    "task_params",
    "update_tasks",
]


# ------------------------------------------------------------------------------ task params


def _fields(env: Env) -> list[str]:
    return [f.name for f in dataclasses.fields(env.default_params)]


def _check_name(fn: str, env: Env, name: str) -> None:
    names = _fields(env)
    if name not in names:
        raise ValueError(
            unknown(name, names, f"{type(env.default_params).__name__} param", where=fn)
        )


def task_params(env: Env, **values: Any) -> Any:
    """Env params for a batch of tasks from explicit per-task values.

    Args:
      env: a pure env (``fxrl.envs.make(id)``).
      values: param name -> a sequence or 1-d tensor of per-task values [num_tasks];
        params not named keep the env's default, repeated per task.
    Returns:
      the env's params dataclass with every leaf a tensor [num_tasks], on the device of
      the first tensor among ``values`` (none: torch's default device).
    """
    if not values:
        raise ValueError(f"task_params: name at least one param of {_fields(env)}.")
    device = next((v.device for v in values.values() if isinstance(v, Tensor)), None)
    columns = {}
    for name, v in values.items():
        _check_name("task_params", env, name)
        col = torch.as_tensor(v, dtype=env.dtype, device=device)
        if col.ndim != 1 or col.shape[0] == 0 or not torch.isfinite(col).all():
            raise ValueError(
                f"task_params: {name} has {list(col.shape)} values {col.tolist()}; expected a "
                "non-empty 1-d list of finite numbers, one per task."
            )
        columns[name] = col
    sizes = {k: c.shape[0] for k, c in columns.items()}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"task_params: every param needs one value per task; got sizes {sizes}.")
    n = next(iter(sizes.values()))
    defaults = params_as_tensors(env.default_params, env.dtype, device)
    return tree.map(lambda d: d.expand(n).clone(), defaults).replace(**columns)


def sample_params(
    env: Env, key: Tensor, num_tasks: int, ranges: Mapping[str, tuple[float, float]]
) -> Any:
    """Draw ``num_tasks`` env variants, each named param uniform in its ``(low, high)``.

    Args:
      env: a pure env; ``ranges`` names fields of ``env.default_params``.
      key: [2].
      num_tasks: a positive int.
      ranges: e.g. ``{"length": (0.25, 1.0), "masspole": (0.05, 0.5)}``.
    Returns:
      the env's params dataclass with every leaf a tensor [num_tasks] (others: defaults).
    """
    if not isinstance(num_tasks, int) or isinstance(num_tasks, bool) or num_tasks < 1:
        raise ValueError(f"sample_params: num_tasks must be a positive int, got {num_tasks!r}.")
    if not ranges:
        raise ValueError(f"sample_params: ranges names no param; expected some of {_fields(env)}.")
    keys = random.split(key, len(ranges))
    columns = {}
    for i, (name, bounds) in enumerate(ranges.items()):
        _check_name("sample_params", env, name)
        ok = isinstance(bounds, (tuple, list)) and len(bounds) == 2
        low, high = (float(b) for b in bounds) if ok else (math.nan, math.nan)
        if not (ok and math.isfinite(low) and math.isfinite(high) and low <= high):
            raise ValueError(
                f"sample_params: ranges[{name!r}] = {bounds!r}; expected (low, high) with "
                f"finite low <= high, e.g. (0.25, 1.0)."
            )
        columns[name] = random.uniform(keys[i], (num_tasks,), low, high, dtype=env.dtype)
    return task_params(env, **columns)


def num_tasks(env_params: Any) -> int:
    """The task count of batched env params: every leaf a tensor [num_tasks]."""
    leaves = tree.leaves(env_params)
    shapes = [tuple(x.shape) if isinstance(x, Tensor) else None for x in leaves]
    ok = leaves and all(s is not None and len(s) == 1 and s == shapes[0] for s in shapes)
    if not ok:
        raise ValueError(
            f"tasks: env_params leaves have shapes {shapes}; expected tensors [num_tasks], the "
            "same for every leaf. Build them with tasks.sample_params or tasks.task_params."
        )
    return shapes[0][0]


def _check_params_type(fn: str, env: Env, env_params: Any) -> None:
    want = type(env.default_params)
    if type(env_params) is not want:
        raise TypeError(
            f"{fn}: env_params is a {type(env_params).__name__}; expected {want.__name__} "
            f"(the params of {env!r}) with leaves [num_tasks], from tasks.sample_params."
        )


# ------------------------------------------------------------------------------ train


def init_tasks(algo: Algorithm, key: Tensor, env_params: Any) -> Any:
    """One fresh agent per task: ``vmap(algo.init)`` over per-task keys and env params.

    Args:
      algo: an algorithm whose ``init(key, env_params=None)`` takes env params (PPO's).
      key: [2], split into one key per task.
      env_params: the env's params dataclass with leaves [num_tasks].
    Returns:
      the TrainState with a leading [num_tasks] dim; its env states carry each task's params.
    """
    _check_params_type("init_tasks", algo.env, env_params)
    n = num_tasks(env_params)
    if "env_params" not in inspect.signature(algo.init).parameters:
        raise TypeError(
            "init_tasks: this algorithm's init(key) takes no env_params; use one whose "
            "init(key, env_params=None) sets the task (fxrl.algorithms.ppo)."
        )
    init = torch.func.vmap(lambda k, p: algo.init(k, env_params=p))
    # dense leaves (a vmapped init makes stride-0 ones), as core.batched's init gives: the
    # compiled update then sees the strides it returns and does not recompile
    dense = torch.contiguous_format
    return tree.map(lambda x: x.clone(memory_format=dense), init(random.split(key, n), env_params))


def update_tasks(
    algo: Algorithm, num_tasks: int, compile: bool | str = True
) -> Callable[[Any], tuple[Any, dict]]:
    """``update(state) -> (state, metrics)`` for TrainStates [num_tasks]: ``vmap(algo.update)``
    compiled as ``core.batched`` compiles seeds (``compile=True``, the default: the same
    numbers, to float rounding), a ``torch.compile`` backend name, or ``compile=False``
    for the eager vmap (debugging; a few updates, where compiling would cost more)."""
    if not isinstance(num_tasks, int) or isinstance(num_tasks, bool) or num_tasks < 1:
        raise ValueError(f"update_tasks: num_tasks must be a positive int, got {num_tasks!r}.")
    if num_tasks > 1:
        return batched(algo, num_tasks, compile)[1]
    # one task keeps its leading [1] dim, which core.batched drops for one seed
    if compile is True:  # the Config's hyperparameters inputs of the program, as there
        return compiled_update(algo, vmapped=True)
    update = torch.func.vmap(algo.update)
    if compile:
        return torch.compile(update, backend=compile, fullgraph=True, dynamic=False)
    return update


# ------------------------------------------------------------------------------ evaluate


def _max_steps(env: Env) -> int:
    while True:
        if isinstance(getattr(env, "max_steps", None), int):
            return env.max_steps
        if not hasattr(env, "env"):
            raise ValueError(f"evaluate_tasks: {env!r} has no time limit; episodes never end.")
        env = env.env


def evaluate_tasks(
    algo: Algorithm,
    params: Any,
    env_params: Any,
    episodes: int = 10,
    *,
    seed: int = 0,
    mode: str = "mode",
) -> Tensor:
    """Each task's agent played in fxrl's pure env with that task's params.

    Args:
      params: the agents' params, leaves [num_tasks, ...] (``state.params``).
      env_params: the env's params dataclass with leaves [num_tasks].
      episodes: episodes per task, played side by side (one batch env per task).
      seed: reset keys come from ``random.key(seed)``; ``mode``: the policy's mode.
    Returns:
      float64 [num_tasks, episodes]: undiscounted returns of each task's first episodes.
    """
    _check_params_type("evaluate_tasks", algo.env, env_params)
    n, limit = num_tasks(env_params), _max_steps(algo.env)
    benv, flat = envs.batch(algo.env, episodes), envs.batch(algo.env, n * episodes)

    def start(task: Any, key: Tensor) -> tuple[Any, Tensor, Tensor]:
        k_reset, k_act = random.split(key).unbind(-2)
        state, ts = benv.reset(k_reset, task)
        return state, ts.obs, k_act

    def act(p: Any, obs: Tensor, key: Tensor | None) -> Tensor:
        return algo.policy(p, obs, key, mode=mode)

    device = params_device(params)
    keys = random.split(random.key(seed, device=device), n)
    with torch.no_grad():
        state, obs, k_act = torch.func.vmap(start)(env_params, keys)
        # the episodes of all tasks step as one flat batch env (each env state carries its
        # task's params): a nested vmap of the batch env costs about 2.5x more per step
        state = tree.map(lambda x: x.reshape(n * episodes, *x.shape[2:]), state)
        total = torch.zeros(n, episodes, dtype=torch.float64, device=device)
        alive = torch.ones(n, episodes, dtype=torch.bool, device=device)
        for t in range(limit):
            if mode == "mode":
                action = torch.func.vmap(lambda p, o: act(p, o, None))(params, obs)
            else:
                keys = torch.func.vmap(lambda k, t=t: random.fold_in(k, t))(k_act)
                action = torch.func.vmap(act, randomness="error")(params, obs, keys)
            state, ts = flat.step(state, action.reshape(n * episodes, *action.shape[2:]))
            total = total + torch.where(alive, ts.reward.double().view(n, episodes), 0.0)
            alive = alive & ~ts.done.view(n, episodes)
            next_obs = ts.info.get("next_obs", ts.obs)
            obs = next_obs.reshape(n, episodes, *next_obs.shape[1:])
        return total


def gymnasium_env(env_id: str, params: Any) -> Any:
    """gymnasium's own env of ``env_id`` with one task's params (scalars or [] tensors).

    CartPole-v1 and Pendulum-v1 take every param (set as gymnasium's attributes: ``length``,
    ``masspole``..., Pendulum's ``g``, ``m``, ``l``); other ids raise.
    """
    gym = require("gymnasium", "fxrl.algorithms.tasks.gymnasium_env")
    p = {k: float(v) for k, v in dataclasses.asdict(params).items()}
    if env_id == "CartPole-v1":
        env = gym.make(env_id)
        u = env.unwrapped
        for name in ("gravity", "masscart", "masspole", "length", "force_mag", "tau"):
            setattr(u, name, p[name])
        u.x_threshold, u.theta_threshold_radians = p["x_threshold"], p["theta_threshold"]
        # gymnasium derives these in __init__; keep them in step with the new params
        u.total_mass, u.polemass_length = u.masspole + u.masscart, u.masspole * u.length
        return env
    if env_id == "Pendulum-v1":
        env = gym.make(env_id, g=p["gravity"])
        u = env.unwrapped
        u.m, u.l, u.dt = p["mass"], p["length"], p["dt"]
        u.max_speed, u.max_torque = p["max_speed"], p["max_torque"]
        return env
    raise ValueError(
        f"gymnasium_env: {env_id!r} has no task params mapping; supported: CartPole-v1, "
        "Pendulum-v1. Evaluate in the pure env with tasks.evaluate_tasks."
    )


def evaluate_gymnasium(
    algo: Algorithm, params: Any, env_params: Any, episodes: int = 10, *, seed: int = 0
) -> Tensor:
    """One task's greedy returns in gymnasium's own env with that task's params.

    Args:
      params: one agent's params (``tree.index(state.params, i)``).
      env_params: that task's params (``tree.index(env_params, i)``).
    Returns:
      float64 [episodes], gymnasium reset with seeds ``seed, seed+1, ...``.
    """
    import numpy as np

    returns = []
    device = params_device(params)  # observations go there, actions come back
    with torch.no_grad():
        for e in range(episodes):
            env = gymnasium_env(algo.config.env, env_params)
            obs, _ = env.reset(seed=seed + e)
            total, done = 0.0, False
            while not done:
                x = torch.as_tensor(np.asarray(obs), dtype=algo.env.dtype, device=device)
                action = algo.policy(params, x, None, mode="mode").cpu().numpy()
                obs, reward, terminated, truncated, _ = env.step(
                    action.item() if action.ndim == 0 else action
                )
                total, done = total + float(reward), terminated or truncated
            env.close()
            returns.append(total)
    return torch.tensor(returns, dtype=torch.float64, device=device)
