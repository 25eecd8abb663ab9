"""Task-ensemble runs: ``--tasks N``, ``--task-param``, rows tagged by task.

    fxrl train ppo --env CartPole-v1 --tasks 8 --task-param length=0.25:1.0
    fxrl train ppo --env MetaMaze-misc --tasks 8            # the env's own sample_params

trains one agent per env variant (``fxrl.algorithms.tasks``: PPO whose env states carry
each task's params) x ``--seeds`` seeds as one vmapped update. The run's batched
TrainState holds ``N * seeds`` agents: agent ``t * seeds + s`` is seed ``s`` of task ``t``
(the task outer, the seed inner, as a sweep's combinations), and seed ``s`` starts from the
key seed ``s`` of a run without tasks has. The tasks are drawn once, when the run starts,
from ``fold_in(key(seed), TASK_STREAM)``: each ranged param uniform in ``[low, high]``
(``fxrl.algorithms.tasks.sample_params``), or, without ``--task-param``, one
``env.sample_params(key)`` per task where the env has a task distribution. ``config.json``
keeps the drawn values (``"tasks": {"count", "ranges", "params"}``), so eval, export and
resume rebuild the same tasks without drawing again; each ``metrics.jsonl`` row carries
``task`` and ``seed`` (within the task).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import torch

from fxrl import random, tree
from fxrl._errors import unknown

__all__ = [
    "TASK_STREAM",
    "agent_of",
    "draw",
    "env_params",
    "names",
    "parse_flag",
    "tag_rows",
]

TASK_STREAM = 0x7A5C  # fold_in(run key, TASK_STREAM) draws the tasks; agents keep their keys

_FORM = "expected --task-param NAME=LOW:HIGH (e.g. --task-param length=0.25:1.0)"


def parse_flag(values: Sequence[str]) -> dict[str, tuple[float, float]]:
    """``["length=0.25:1.0", "masspole=0.05:0.5"]`` (the ``--task-param`` flags) as
    ``{"length": (0.25, 1.0), "masspole": (0.05, 0.5)}``; dashes in names become underscores.

    Raises:
      ValueError: one line naming the flag that does not parse and the form expected.
    """
    out: dict[str, tuple[float, float]] = {}
    for text in values:
        name, sep, rest = text.partition("=")
        name = name.strip().replace("-", "_")
        low_text, colon, high_text = rest.partition(":")
        if not sep or not name or not colon:
            raise ValueError(f"--task-param {text!r}: {_FORM}.")
        try:
            low, high = float(low_text), float(high_text)
        except ValueError:
            raise ValueError(
                f"--task-param {text!r}: LOW and HIGH must be numbers; {_FORM}."
            ) from None
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise ValueError(f"--task-param {text!r}: expected finite LOW <= HIGH; {_FORM}.")
        if name in out:
            raise ValueError(f"--task-param {name} is given twice; give each param once.")
        out[name] = (low, high)
    return out


def _fields(env: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(env.default_params)]


def check_ranges(env: Any, ranges: dict[str, Any]) -> None:
    """A one-line ``ValueError`` for a name that is not a param of ``env`` (the closest
    valid one first, then all of them)."""
    valid = _fields(env)
    for name in ranges:
        if name not in valid:
            raise ValueError(unknown(name, valid, f"{type(env.default_params).__name__} param",
                                     where="--task-param"))  # fmt: skip


def draw(env: Any, env_id: str, count: int, ranges: dict[str, Any] | None, seed: int) -> dict:
    """The ``"tasks"`` entry of a task run's ``config.json``: ``count`` tasks drawn from
    ``fold_in(key(seed), TASK_STREAM)`` (``ranges``: ``{name: (low, high)}``, or None for
    the env's own ``sample_params``), each param's per-task values with their dtype."""
    from fxrl.algorithms import tasks

    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"--tasks must be a positive int, got {count!r}.")
    if not (
        dataclasses.is_dataclass(env.default_params) and dataclasses.fields(env.default_params)
    ):
        raise ValueError(
            f"--tasks {count}: {env_id} has no env params to vary (a host env's settings are "
            "gymnasium's or ALE's); task ensembles train on pure envs."
        )
    key = random.fold_in(random.key(seed), TASK_STREAM)
    if ranges:
        check_ranges(env, ranges)
        params = tasks.sample_params(env, key, count, {k: tuple(v) for k, v in ranges.items()})
    elif hasattr(env, "sample_params"):
        drawn = [env.sample_params(k) for k in random.split(key, count).unbind(0)]
        params = tree.map(lambda *xs: torch.stack([torch.as_tensor(x) for x in xs]), *drawn)
    else:
        raise ValueError(
            f"--tasks {count}: {env_id} has no task distribution (sample_params); give the "
            f"ranges, e.g. --task-param {_fields(env)[0]}=LOW:HIGH (params: "
            f"{', '.join(_fields(env))})."
        )
    columns = {
        f.name: {"dtype": str(getattr(params, f.name).dtype).removeprefix("torch."),
                 "values": getattr(params, f.name).tolist()}
        for f in dataclasses.fields(params)
    }  # fmt: skip
    ranges_json = {k: [float(v[0]), float(v[1])] for k, v in ranges.items()} if ranges else None
    return {"count": count, "ranges": ranges_json, "params": columns}


def env_params(env: Any, entry: dict) -> Any:
    """The env's params dataclass with every leaf [count, ...], from ``draw``'s entry."""
    columns = {
        name: torch.tensor(col["values"], dtype=getattr(torch, col["dtype"]))
        for name, col in entry["params"].items()
    }
    return type(env.default_params)(**columns)


def agent_params(env: Any, info: dict[str, Any]) -> Any:
    """Each agent's task params: leaves [count * seeds, ...] (task ``t`` repeated for its
    ``seeds`` agents)."""
    params = env_params(env, info["tasks"])
    return tree.map(lambda x: x.repeat_interleave(info["seeds"], dim=0), params)


def names(info: dict[str, Any]) -> list[str]:
    """One name per task: ``task 3 (length=0.412)``, the ranged params' values (a run on
    the env's ``sample_params``: the params that differ between tasks)."""
    entry = info["tasks"]
    cols = entry["params"]
    shown = list(entry["ranges"] or [k for k, c in cols.items() if _differs(c["values"])])
    out = []
    for t in range(entry["count"]):
        parts = [f"{k}={_short(cols[k]['values'][t])}" for k in shown]
        out.append(f"task {t} ({', '.join(parts)})" if parts else f"task {t}")
    return out


def _differs(values: list[Any]) -> bool:
    return any(v != values[0] for v in values)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, list):
        return "[" + ",".join(_short(v) for v in value) + "]"
    return str(value)


def tag_rows(rows: list[dict[str, Any]], info: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows whose ``seed`` is the agent index (as ``rows_from_metrics`` makes them) as a
    task run writes them: ``task`` and the seed within it."""
    seeds, out = info["seeds"], []
    for r in rows:
        agent = r["seed"]
        row = {"iteration": r["iteration"], "task": agent // seeds, "seed": agent % seeds}
        row.update((k, v) for k, v in r.items() if k not in row)
        out.append(row)
    return out


def agent_of(row: dict[str, Any], info: dict[str, Any]) -> int:
    """The agent index of a task run's written metrics row."""
    return int(row["task"]) * info["seeds"] + int(row["seed"])
