"""A run's ``config.json``: the algorithm's Config, the seeds, the key, the versions.

write_run_config(run_dir, "ppo", config, num_seeds=8, seed=0, total_steps=500_000)
info = read_run_config(run_dir)        # dict; info["config"] is the Config dataclass
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import json
import platform
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

import fxrl
from fxrl import algorithms, random
from fxrl.algorithms.sweeps import combinations
from fxrl.envs import registry as envs_registry
from fxrl.run.checkpoint import atomic_write

__all__ = [
    "algorithm_module",
    "config_from_json",
    "config_to_json",
    "exactness",
    "exactness_differences",
    "read_run_config",
    "write_run_config",
]


def algorithm_module(name: str) -> ModuleType:
    """The module of algorithm ``name``: ``"ppo"``, ``"dqn"``..., or an importable module path
    (``"mypkg.my_algo"``) exposing ``Config`` and ``make`` like the built-in ones."""
    if name not in algorithms.NAMES and _importable(name):
        module = importlib.import_module(name)
        if not (hasattr(module, "Config") and hasattr(module, "make")):
            raise ValueError(f"algorithm module {name!r} has no Config and make(config).")
        return module
    return algorithms.get(name)


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def config_to_json(config: Any) -> dict[str, Any]:
    """A Config dataclass as plain JSON values (tuples become lists, dtypes strings)."""
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))


# Config fields renamed since runs were first saved, old name -> new name: a config.json
# with an old name loads it as the new one, for a Config that has the new field (issue 29:
# DQN's warm-up and the off-policy steps per env per update took PPO's and SB3's names).
RENAMED_FIELDS = {"init_random_frames": "learning_starts", "rollout_steps": "num_steps"}


def config_from_json(cls: type, data: dict[str, Any]) -> Any:
    """Rebuild ``cls(**data)`` from ``config_to_json``'s output (lists back into tuples;
    fields renamed since, ``RENAMED_FIELDS``, under their new names)."""
    defaults = cls()
    names = {f.name for f in dataclasses.fields(cls)}
    data = {
        RENAMED_FIELDS[k] if k in RENAMED_FIELDS and RENAMED_FIELDS[k] in names else k: v
        for k, v in data.items()
    }
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(
            f"config.json has fields {unknown} that {cls.__module__}.{cls.__name__} does not "
            "know: it was written by another fxrl version. Train a new run, or use that version."
        )
    kwargs = {}
    for k, v in data.items():
        default = getattr(defaults, k)
        if isinstance(default, tuple) and isinstance(v, list):
            v = tuple(v)
        elif isinstance(default, torch.dtype) and isinstance(v, str):
            v = getattr(torch, v.removeprefix("torch."))
        kwargs[k] = v
    return cls(**kwargs)


def write_run_config(
    run_dir: str | Path,
    algorithm: str,
    config: Any,
    *,
    num_seeds: int,
    seed: int,
    total_steps: int,
    compile: bool,
    checkpoint_every: float | None = None,
    sweep: dict[str, Any] | None = None,
    tasks: dict[str, Any] | None = None,
    device: str = "cpu",
) -> Path:
    """Write ``run_dir/config.json``: everything needed to rebuild and continue the run
    (``checkpoint_every``: the seconds between checkpoints, kept by ``resume``; ``sweep``:
    ``{field: [values]}`` of a sweep run, ``num_seeds`` then counts seeds per combination;
    ``tasks``: a task run's drawn tasks, ``fxrl.run.tasks.draw``, ``num_seeds`` then counts
    seeds per task; ``device``: where it trains)."""
    env_id = getattr(config, "env", None)
    module = envs_registry.env_module(env_id) if isinstance(env_id, str) else None
    info = {
        "algorithm": algorithm,
        "config": config_to_json(config),
        # the module that registers a user's env, imported again to read the run back
        **({"env_module": module} if module else {}),
        "sweep": {k: [float(v) for v in vs] for k, vs in sweep.items()} if sweep else None,
        **({"tasks": tasks} if tasks else {}),
        "num_seeds": num_seeds,
        "seed": seed,
        "key": random.key(seed).tolist(),
        "total_steps": total_steps,
        "compile": compile,
        "device": device,
        "checkpoint_every": checkpoint_every,
        **exactness(),
        "python_version": sys.version.split()[0],
        "platform": platform.platform(),
    }
    return atomic_write(Path(run_dir) / "config.json", (json.dumps(info, indent=2) + "\n").encode())


def exactness() -> dict[str, Any]:
    """What, besides the TrainState, decides a run's float results bit for bit: the torch
    threads (they split reductions), the fxrl and torch versions, the CPU's vector unit
    (which kernels run). Recorded in ``config.json``; a resume that differs in one is not
    bit-identical to the uninterrupted run."""
    return {
        "fxrl_version": fxrl.__version__,
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu": f"{platform.machine()} {torch.backends.cpu.get_cpu_capability()}",
    }


_LABELS = {"threads": "threads", "fxrl_version": "fxrl", "torch_version": "torch", "cpu": "CPU"}


def exactness_differences(recorded: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``[(label, recorded value, value now)]`` for each of ``exactness()``'s entries that
    ``recorded`` (a run's config.json or a checkpoint's header) holds with another value;
    entries it does not hold (runs written by an older fxrl) are not compared."""
    now = exactness()
    return [
        (_LABELS[k], recorded[k], v)
        for k, v in now.items()
        if recorded.get(k) is not None and recorded[k] != v
    ]


def _import_env_module(info: dict[str, Any]) -> None:
    """Register the run's env in this process where config.json names the module that
    registered it (a run trained on ``fxrl.envs.register``'s env from Python); if it cannot
    be imported, the Config's own check says how to register the env."""
    module = info.get("env_module")
    env_id = (info.get("config") or {}).get("env")
    if not module or not isinstance(env_id, str) or env_id in envs_registry.registered():
        return
    with contextlib.suppress(ValueError):
        envs_registry.import_env_module(module, "config.json")


def _check_env_registered(run_dir: str | Path, info: dict[str, Any]) -> None:
    env_id = (info.get("config") or {}).get("env")
    if not isinstance(env_id, str) or envs_registry.is_host_id(env_id) or ":" in env_id:
        return  # host ids and "module:id" ids are the Config's to check
    if env_id in envs_registry.registered():
        return
    where = f" (config.json's env_module {info['env_module']!r} did not register it)" if (
        info.get("env_module")) else ""  # fmt: skip
    raise ValueError(
        f"{run_dir} was trained on env {env_id!r}, which is not registered in this process"
        f"{where}: import the module that calls fxrl.envs.register({env_id!r}, ...) first, "
        f"or install it with an 'fxrl.envs' entry point (a run trained with --env "
        f"module:{env_id} imports its module by itself)."
    )


def read_run_config(run_dir: str | Path) -> dict[str, Any]:
    """``config.json`` of a run directory, with ``"config"`` rebuilt as the Config dataclass.

    ``info["num_seeds"]`` is the number of agents trained together (the leading dim of the
    run's TrainState and checkpoints): seeds x combinations in a sweep run, whose
    ``info["seeds"]`` is the seeds per combination (config.json's ``num_seeds``) and
    ``info["sweep"]`` the sweep (None for a run without one); in a task run
    (``info["tasks"]``, else None) seeds x tasks.
    """
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{run_dir} has no config.json: not a run directory. fxrl train ALGO --out DIR "
            "makes one."
        )
    try:
        info = json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(
            f"{path} is not valid JSON ({e}); restore it or start a new run."
        ) from None
    info["config_json"] = info["config"]
    _import_env_module(info)
    _check_env_registered(run_dir, info)
    info["config"] = config_from_json(algorithm_module(info["algorithm"]).Config, info["config"])
    info["sweep"] = info.get("sweep") or None
    info["seeds"] = info["num_seeds"]
    info["tasks"] = info.get("tasks") or None
    info["device"] = info.get("device") or "cpu"  # runs written before devices were recorded
    if info["sweep"]:
        info["num_seeds"] = info["seeds"] * len(combinations(info["sweep"]))
    elif info["tasks"]:
        info["num_seeds"] = info["seeds"] * info["tasks"]["count"]
    return info
