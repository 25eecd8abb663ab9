"""``make(id)``: pure envs by id, fxrl's own and the ones users register.

    fxrl.envs.register("Corridor-v0", Corridor, max_steps=50)   # checked, then known
    env = fxrl.envs.make("Corridor-v0")        # time limit, auto-reset, episode stats
    fxrl.envs.make("my_envs:Corridor-v0")      # imports my_envs first (it registers)

The built-in ids are gymnasium's (with gymnasium's time limits) and gymnax's. A user's
env joins them with ``register`` (which checks it against the env contract first,
``fxrl.testing.check_env``), by naming the module that registers it before the id
(``"module:id"``, gymnasium's convention), or from an installed package through the
``fxrl.envs`` entry-point group:

    [project.entry-points."fxrl.envs"]
    Corridor-v0 = "my_envs:Corridor"          # an env class or a function building the env
    my_envs = "my_envs:register_envs"         # or a function that calls register itself

Entry points are loaded the first time ``registered()`` or ``make`` needs them (and again
when an id is not found, so a package installed since is seen). Every registered env is
then an id like any other: ``fxrl train ppo --env Corridor-v0``, sweeps, task ensembles
(``sample_params``), eval, export and videos.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from fxrl._errors import unknown
from fxrl.envs.acrobot import Acrobot
from fxrl.envs.bsuite import Catch, DeepSea, DiscountingChain, MemoryChain, UmbrellaChain
from fxrl.envs.cartpole import CartPole
from fxrl.envs.continuous_mountain_car import ContinuousMountainCar
from fxrl.envs.core import Env
from fxrl.envs.minatar import registered as _minatar_ids
from fxrl.envs.misc import BernoulliBandit, FourRooms, GaussianBandit, MetaMaze, PointRobot
from fxrl.envs.mountain_car import MountainCar
from fxrl.envs.pendulum import Pendulum
from fxrl.envs.wrappers import auto_reset as _auto_reset
from fxrl.envs.wrappers import episode_stats as _episode_stats
from fxrl.envs.wrappers import time_limit

__all__ = [
    "ENTRY_POINT_GROUP",
    "HOST_PREFIXES",
    "env_module",
    "import_env_module",
    "is_host_id",
    "make",
    "on_register",
    "register",
    "registered",
    "split_id",
]

ENTRY_POINT_GROUP = "fxrl.envs"
# "gymnasium:<id>" and "ale:<Game>" name host envs (fxrl.envs.host), not modules to import
HOST_PREFIXES = ("gymnasium", "ale")

# id -> (env class, gymnasium's max_episode_steps; None: the env ends its episodes itself)
_BUILTIN: dict[str, tuple[type[Env], int | None]] = {
    "CartPole-v1": (CartPole, 500),
    "Pendulum-v1": (Pendulum, 200),
    "MountainCar-v0": (MountainCar, 200),
    "MountainCarContinuous-v0": (ContinuousMountainCar, 999),
    "Acrobot-v1": (Acrobot, 500),
    # MinAtar: gymnax's max_steps_in_episode (the package has none); see fxrl/envs/minatar
    **_minatar_ids(),
    # bsuite and misc tasks: gymnax's ids and max_steps_in_episode
    "Catch-bsuite": (Catch, 1000),
    "DeepSea-bsuite": (DeepSea, 2000),
    "DiscountingChain-bsuite": (DiscountingChain, 100),
    "MemoryChain-bsuite": (MemoryChain, 1000),
    "UmbrellaChain-bsuite": (UmbrellaChain, 100),
    "BernoulliBandit-misc": (BernoulliBandit, 100),
    "GaussianBandit-misc": (GaussianBandit, 100),
    "FourRooms-misc": (FourRooms, 500),
    "MetaMaze-misc": (MetaMaze, 200),
    "PointRobot-misc": (PointRobot, 100),
}


class _Registered(NamedTuple):
    factory: Callable[..., Env]
    max_steps: int | None
    module: str | None  # the importable module that registered it (None: __main__, plugin)


_USER: dict[str, _Registered] = {}
_LISTENERS: list[Callable[[str], None]] = []
_PLUGINS = {"scanned": False, "loaded": set(), "loading": None}
_PLUGIN_ERRORS: dict[str, str] = {}
_DEFAULT: Any = object()
# register's check: few, fixed examples (the same verdict on every run, no database)
_CHECK = {"max_examples": 10, "max_steps": 8, "random_reset": False, "auto_reset_steps": 300}


def registered() -> list[str]:
    """The ids ``make`` knows: fxrl's own, then those registered (``register``, entry
    points of the ``fxrl.envs`` group), in the order they came."""
    _load_plugins()
    return [*_BUILTIN, *_USER]


def on_register(callback: Callable[[str], None]) -> None:
    """Call ``callback(id)`` for every id registered now and from now on (how the
    gymnasium adapter keeps ``gymnasium.make("fxrl/<id>")`` in step)."""
    _LISTENERS.append(callback)
    for env_id in registered():
        callback(env_id)


def is_host_id(env_id: Any) -> bool:
    """Whether ``env_id`` names a host env: ``"gymnasium:<id>"`` or ``"ale:<Game>"``."""
    return isinstance(env_id, str) and env_id.partition(":")[0] in HOST_PREFIXES and ":" in env_id


def split_id(env_id: str) -> tuple[str | None, str]:
    """``("my_envs", "Corridor-v0")`` for ``"my_envs:Corridor-v0"``, ``(None, id)`` for a
    plain id (host ids keep their prefix as the module part)."""
    module, sep, name = env_id.rpartition(":")
    return (module, name) if sep else (None, env_id)


def env_module(env_id: str) -> str | None:
    """The module to import in a new process so that ``env_id`` is registered there: the
    one that called ``register`` (None for fxrl's own ids, ids registered from
    ``__main__`` or by an entry point, and ``"module:id"`` ids, which say it themselves)."""
    entry = _USER.get(env_id)
    return None if entry is None else entry.module


def register(id: str, factory: Callable[..., Env], *, max_steps: int | None = None) -> None:
    """Make ``factory``'s env an id of ``make``, after checking it keeps the env contract.

    ``make(id)`` then builds ``episode_stats(auto_reset(time_limit(factory(), max_steps)))``
    as for fxrl's own envs, so every algorithm, ``fxrl train --env id``, sweeps, task
    ensembles (the env's ``sample_params``, where it has one), eval, export and videos take
    it. Registering the same id again replaces the env (fxrl's own ids cannot be replaced).

    Args:
      id: the new id, e.g. ``"Corridor-v0"`` (no ``":"``: that separates a module or a
        host prefix from an id).
      factory: builds the bare env (no time limit, no auto-reset): an ``fxrl.envs.Env``
        subclass or a function; called with ``dtype=`` where it takes that argument.
      max_steps: the time limit ``make`` adds (``fxrl.envs.time_limit``, which reads the
        state's step count ``t``); ``None`` for none (the env ends its episodes itself).
    Raises:
      ValueError: one line naming the contract property the env breaks (the message of
        ``fxrl.testing.check_env``), or what is wrong with ``id`` or ``max_steps``.
    """
    _check_id(id)
    if max_steps is not None and (
        not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1
    ):
        raise ValueError(
            f"fxrl.envs.register({id!r}): max_steps must be a positive int or None, got "
            f"{max_steps!r}."
        )
    if not callable(factory):
        raise TypeError(
            f"fxrl.envs.register({id!r}): factory must build the env (an Env subclass or a "
            f"function returning one), got {type(factory).__name__}."
        )
    old = _USER.get(id)
    if old is not None and old.factory is factory and old.max_steps == max_steps:
        return  # a module imported again: nothing changed
    _check_contract(id, factory, max_steps)
    caller = sys._getframe(1).f_globals.get("__name__")
    module = None if _PLUGINS["loading"] or caller in (None, "__main__") else caller
    _USER[id] = _Registered(factory, max_steps, module)
    for callback in _LISTENERS:
        callback(id)


def _check_id(env_id: Any) -> None:
    if not isinstance(env_id, str) or not env_id.strip() or env_id != env_id.strip():
        raise ValueError(
            f"fxrl.envs.register: id must be a non-empty string without surrounding spaces, "
            f"got {env_id!r}."
        )
    if ":" in env_id or "/" in env_id:
        raise ValueError(
            f"fxrl.envs.register: id {env_id!r} contains {':' if ':' in env_id else '/'}; ':' "
            "separates a module or host prefix from an id and '/' a gymnasium namespace. "
            "Use an id such as 'Corridor-v0'."
        )
    if env_id in _BUILTIN:
        raise ValueError(
            f"fxrl.envs.register: {env_id!r} is one of fxrl's own envs and cannot be "
            "replaced; register yours under another id (e.g. 'My" + env_id + "')."
        )


def _check_contract(env_id: str, factory: Callable[..., Env], max_steps: int | None) -> None:
    """Build the env as ``make`` would and run ``check_env`` on it; a one-line ValueError
    naming the property that failed."""
    where = f"fxrl.envs.register({env_id!r})"
    try:
        from fxrl.testing.envs import check_env
    except ModuleNotFoundError as e:
        raise ImportError(
            f"{where} checks the env with fxrl.testing.check_env, which needs {e.name}: "
            "pip install 'fxrl[testing]'."
        ) from None
    env = _wrap(_build(where, factory, torch.float32), max_steps, True, True)
    try:
        check_env(env, **_CHECK, derandomize=True, shrink=False)
    except Exception as e:
        text = " ".join(str(e).split())
        text = text if len(text) <= 400 else text[:400] + "..."
        kind = "" if isinstance(e, AssertionError) else f"{type(e).__name__}: "
        raise ValueError(
            f"{where}: the env breaks the env contract (fxrl.testing.check_env): {kind}{text}"
        ) from None


def _build(where: str, factory: Callable[..., Env], dtype: torch.dtype) -> Env:
    """``factory(dtype=dtype)`` where it takes ``dtype``, else ``factory()``; checked."""
    try:
        takes_dtype = "dtype" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes_dtype = False
    if not takes_dtype and dtype != torch.float32:
        raise ValueError(
            f"{where}: dtype={dtype} but the env's factory takes no dtype argument; it "
            "builds float32 envs."
        )
    env = factory(dtype=dtype) if takes_dtype else factory()
    if not isinstance(env, Env):
        raise TypeError(
            f"{where}: the factory returned {type(env).__name__}, not an fxrl.envs.Env."
        )
    if env.batch_shape != () or env.auto_resets:
        raise ValueError(
            f"{where}: the factory must build one bare env (batch shape (), no auto-reset), "
            f"got {env!r}; make adds the time limit, auto-reset and episode statistics."
        )
    return env


def _wrap(env: Env, limit: int | None, auto_reset: bool, episode_stats: bool) -> Env:
    if limit is not None:
        env = time_limit(env, limit)
    if auto_reset:
        env = _auto_reset(env)
    if episode_stats:
        env = _episode_stats(env)
    return env


def import_env_module(module: str, where: str) -> None:
    """Import the module named before an id (``"my_envs:Corridor-v0"``); the current
    directory is searched too, as ``python -m`` does (the ``fxrl`` command does not)."""
    try:
        importlib.import_module(module)
        return
    except ModuleNotFoundError as e:
        if e.name != module.split(".")[0] or os.getcwd() in sys.path or "" in sys.path:
            raise ValueError(
                f"{where}: importing {module!r} (the module before ':', which registers the "
                f"env) failed: {e}. Run from its directory or add it to PYTHONPATH."
            ) from None
    sys.path.append(os.getcwd())
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise ValueError(
            f"{where}: no module {module!r} to import (the part before ':' names the module "
            f"that registers the env; {e}). Run from its directory or add it to PYTHONPATH."
        ) from None


def _load_plugins(rescan: bool = False) -> None:
    """Load the ``fxrl.envs`` entry points not loaded yet (once, or again with ``rescan``)."""
    if _PLUGINS["scanned"] and not rescan:
        return
    _PLUGINS["scanned"] = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if (ep.name, ep.value) in _PLUGINS["loaded"]:
            continue
        _PLUGINS["loaded"].add((ep.name, ep.value))
        _PLUGINS["loading"] = ep.name
        try:
            _load_plugin(ep)
        except Exception as e:
            text = " ".join(f"{type(e).__name__}: {e}".split())
            _PLUGIN_ERRORS[ep.name] = text
            warnings.warn(
                f"fxrl.envs: entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}) failed: "
                f"{text}",
                stacklevel=3,
            )
        finally:
            _PLUGINS["loading"] = None


def _load_plugin(ep: Any) -> None:
    obj = ep.load()
    if isinstance(obj, type):  # an Env class: the entry point's name is its id
        register(ep.name, obj)
        return
    if not callable(obj):
        if inspect.ismodule(obj):
            return  # importing it registered its envs
        raise TypeError(f"expected an env class or a function, got {type(obj).__name__}")
    built = obj()
    if isinstance(built, Env):  # a factory: registered under the entry point's name
        register(ep.name, obj)
    elif built is not None:
        raise TypeError(
            f"{ep.value}() returned {type(built).__name__}; expected an fxrl env (a factory) "
            "or None (a function that calls fxrl.envs.register)"
        )


def _lookup(env_id: str, where: str) -> tuple[str, Callable[..., Env], int | None]:
    """``(id, factory, max_steps)`` of a registered id, importing ``"module:"`` first."""
    if not isinstance(env_id, str):
        raise TypeError(f"{where}: id must be a string, got {type(env_id).__name__}.")
    module, name = split_id(env_id)
    if module in HOST_PREFIXES:
        call = "gym" if module == "gymnasium" else "atari"
        raise ValueError(
            f"{where}: {env_id!r} is a host env, not a pure one; build it with "
            f"fxrl.envs.{call}({name!r}), or give the id to an algorithm's Config."
        )
    if module is not None:
        import_env_module(module, where)
    _load_plugins()
    if name not in _BUILTIN and name not in _USER:
        _load_plugins(rescan=True)  # a package installed since the first scan
    if name in _BUILTIN:
        return name, *_BUILTIN[name]
    if name in _USER:
        entry = _USER[name]
        return name, entry.factory, entry.max_steps
    raise ValueError(unknown_id_message(env_id, where))


def unknown_id_message(env_id: str, where: str) -> str:
    """One line: the closest known id, the known ids, and how to add one."""
    message = unknown(env_id, [*_BUILTIN, *_USER], "env id", where=where, cutoff=0.4)
    failed = "".join(
        f" (The entry point {name} failed: {text}.)" for name, text in _PLUGIN_ERRORS.items()
    )
    return (
        f"{message}{failed} Your own env: fxrl.envs.register(id, factory) in this process, "
        "'module:id' to import the module that registers it, or an 'fxrl.envs' entry point; "
        "host envs: 'gymnasium:<id>', 'ale:<Game>'."
    )


def make(
    id: str,
    *,
    dtype: torch.dtype = torch.float32,
    max_steps: int | None = _DEFAULT,
    auto_reset: bool = True,
    episode_stats: bool = True,
    **params: Any,
) -> Env:
    """A pure env by id, wrapped as gymnasium's ``gym.make`` would (time limit) plus
    fxrl's auto-reset and episode statistics.

    Args:
      id: one of ``registered()``: "CartPole-v1", "Pendulum-v1", "MountainCar-v0",
        "MountainCarContinuous-v0", "Acrobot-v1"..., an id given to ``register``, or
        ``"module:id"`` (the module is imported first; it registers the id).
      dtype: float dtype of states, observations and rewards; ``torch.float64`` matches
        gymnasium to ~1e-10.
      max_steps: truncate episodes after this many steps; defaults to gymnasium's limit
        (500, 200, 200, 999, 500), or the one given to ``register``; ``None`` for no limit.
      auto_reset: start the next episode inside ``step`` (``fxrl.envs.auto_reset``).
      episode_stats: report ``info["episode_return"]`` and ``info["episode_length"]``.
      params: overrides of the env's default params, e.g. ``gravity=9.81``.
    Returns:
      ``episode_stats(auto_reset(time_limit(Env(dtype), max_steps)))`` (parts as asked).
    """
    _, factory, limit = _lookup(id, "fxrl.envs.make")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"fxrl.envs.make: dtype must be a float torch dtype, got {dtype!r}.")
    env = _build(f"fxrl.envs.make({id!r})", factory, dtype)
    if params:
        defaults = env.default_params
        names = [f.name for f in dataclasses.fields(defaults)] if _is_dataclass(defaults) else []
        for param in params:
            if param not in names:
                where = f"fxrl.envs.make({id!r})"
                what = f"{type(env).__name__} param"
                raise TypeError(unknown(param, names, what, where=where))
        env.default_params = dataclasses.replace(defaults, **params)
    limit = limit if max_steps is _DEFAULT else max_steps
    return _wrap(env, limit, auto_reset, episode_stats)


def _is_dataclass(x: Any) -> bool:
    return dataclasses.is_dataclass(x) and not isinstance(x, type)
