"""Sweep runs: the ``--sweep`` flag, metrics rows tagged by combination, picking one.

    fxrl train ppo --env CartPole-v1 --seeds 4 --sweep lr=1e-4,3e-4,1e-3 --sweep ent_coef=0,0.01

trains the 6 combinations x 4 seeds as one vmapped update (``core.batched(...,
sweep=)``). The run's batched TrainState holds ``C * seeds`` agents: agent ``c * seeds +
s`` is seed ``s`` of combination ``c`` (``sweeps.combinations`` order: the last field varies
fastest), and seed ``s`` starts from the key seed ``s`` of a run without the sweep has.
``config.json`` keeps the sweep (``"sweep": {"lr": [...], ...}``) and ``num_seeds`` per
combination; each ``metrics.jsonl`` row carries ``combination`` (its name, e.g.
``lr=0.0003,ent_coef=0.01``) and ``seed`` (within the combination). Checkpoints hold
every agent; ``fxrl eval``/``fxrl export`` choose with ``--pick NAME`` or ``--pick best``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from fxrl.algorithms.sweeps import combination_names, combinations

__all__ = ["agents", "best_agent", "parse_flag", "pick", "tag_rows"]


def parse_flag(values: Sequence[str]) -> dict[str, list[float]]:
    """``["lr=1e-4,3e-4", "ent_coef=0,0.01"]`` (the ``--sweep`` flags) as
    ``{"lr": [1e-4, 3e-4], "ent_coef": [0.0, 0.01]}``; dashes in names become underscores.

    Raises:
      ValueError: one line naming the flag that does not parse and the form expected.
    """
    form = "expected --sweep FIELD=V1,V2,... (e.g. --sweep lr=1e-4,3e-4)"
    out: dict[str, list[float]] = {}
    for text in values:
        field, sep, rest = text.partition("=")
        field = field.strip().replace("-", "_")
        if not sep or not field or not rest.strip():
            raise ValueError(f"--sweep {text!r}: {form}.")
        try:
            numbers = [float(v) for v in rest.split(",")]
        except ValueError:
            raise ValueError(f"--sweep {text!r}: the values are not all numbers; {form}.") from None
        if field in out:
            raise ValueError(f"--sweep {field} is given twice; list all its values in one flag.")
        out[field] = numbers
    return out


def _names(info: dict[str, Any]) -> list[str]:
    return combination_names(info["sweep"])


def tag_rows(rows: list[dict[str, Any]], info: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows whose ``seed`` is the agent index (as ``rows_from_metrics`` makes them) as a
    sweep run writes them: ``combination`` and the seed within it; unchanged otherwise."""
    if not info.get("sweep"):
        return rows
    names, seeds = _names(info), info["seeds"]
    out = []
    for r in rows:
        agent = r["seed"]
        row = {"iteration": r["iteration"], "combination": names[agent // seeds],
               "seed": agent % seeds}  # fmt: skip
        row.update((k, v) for k, v in r.items() if k not in row)
        out.append(row)
    return out


def agent_of(row: dict[str, Any], info: dict[str, Any]) -> int:
    """The agent index (leading dim of the run's TrainState) of a written metrics row."""
    if not info.get("sweep"):
        return int(row["seed"])
    return _names(info).index(row["combination"]) * info["seeds"] + int(row["seed"])


def agents(info: dict[str, Any], combination: int) -> list[int]:
    """The agent indices of combination ``combination``'s seeds."""
    seeds = info["seeds"]
    return list(range(combination * seeds, (combination + 1) * seeds))


def _mean(values: list[float]) -> float:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else -math.inf


def pick(info: dict[str, Any], meta: dict[str, Any], name: str) -> int:
    """The combination index that ``name`` picks in a sweep run.

    Args:
      info: the run's ``read_run_config``.
      meta: the checkpoint's header (its ``returns``: each agent's latest finished-episode
        return, for ``"best"``).
      name: ``"best"`` (the highest mean over its seeds of those returns), or field values
        such as ``"lr=3e-4,ent_coef=0.01"`` (numbers compared as numbers; fields left out
        may be, if one combination matches).
    Raises:
      ValueError: one line: not a sweep run, or no (or more than one) combination matches;
        it lists the run's combinations.
    """
    if not info.get("sweep"):
        raise ValueError(
            f"--pick {name!r}: this run is not a sweep (trained without --sweep); it has "
            f"{info['num_seeds']} seed(s) and nothing to pick from."
        )
    names, combos = _names(info), combinations(info["sweep"])
    listing = f"the run's combinations: {'; '.join(names)} (or best)"
    if name == "best":
        returns = {int(k): v for k, v in (meta.get("returns") or {}).items()}
        means = [_mean([returns.get(a) for a in agents(info, c)]) for c in range(len(names))]
        if not any(math.isfinite(m) for m in means):
            raise ValueError(
                f"--pick best: no episode has ended yet in any combination; {listing}."
            )
        return max(range(len(names)), key=lambda c: means[c])
    wanted = _parse_pick(name, info["sweep"], listing)
    matches = [c for c, combo in enumerate(combos) if all(combo[k] == v for k, v in wanted.items())]
    if len(matches) != 1:
        why = "matches no combination" if not matches else f"matches {len(matches)} combinations"
        raise ValueError(f"--pick {name!r} {why}; {listing}.")
    return matches[0]


def _parse_pick(name: str, sweep: dict[str, Any], listing: str) -> dict[str, float]:
    wanted: dict[str, float] = {}
    for part in name.split(","):
        field, sep, value = part.partition("=")
        field = field.strip().replace("-", "_")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or field not in sweep or math.isnan(number):
            raise ValueError(
                f"--pick {name!r}: expected FIELD=VALUE,... over the swept fields "
                f"({', '.join(sweep)}) or best; {listing}."
            )
        wanted[field] = number
    return wanted


def best_agent(info: dict[str, Any], meta: dict[str, Any], combination: int) -> int:
    """The agent of ``combination`` with the highest latest training return (its first
    seed where none has finished an episode)."""
    returns = {int(k): v for k, v in (meta.get("returns") or {}).items()}
    members = agents(info, combination)
    return max(members, key=lambda a: _mean([returns.get(a)]))
