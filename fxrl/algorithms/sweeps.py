"""Sweeps: every combination of some hyperparameters' values, trained as one vmapped run.

A sweep is ``{field: [values]}`` over an algorithm's hyperparameters (``algo.hyperparams``,
the numbers its update takes as an argument). ``check_sweep`` checks it,
``combinations`` lists its combinations (the last field varying fastest) and
``combination_names`` names them; ``values`` gives the per-agent tensors that
``core.batched(algo, num_seeds, sweep=...)`` passes to ``vmap(algo.update)``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from fxrl._errors import closest

__all__ = ["check_sweep", "combination_names", "combinations", "config_name", "values"]


def config_name(config: Any) -> str:
    """``"ppo.Config"``: a Config's module and class, as messages name it."""
    return f"{type(config).__module__.rsplit('.', 1)[-1]}.{type(config).__name__}"


def check_sweep(algo: Any, sweep: Mapping[str, Sequence[float]]) -> dict[str, tuple[float, ...]]:
    """``sweep`` checked against ``algo``'s hyperparameters, values as floats.

    Args:
      algo: the ``Algorithm`` (``make(config)``); its ``hyperparams`` are the fields a sweep may
        vary (the Config's own values of them are not used).
      sweep: ``{field: [value, ...]}``, e.g. ``{"lr": [1e-4, 3e-4], "ent_coef": [0, 0.01]}``.
    Returns:
      ``{field: (float, ...)}`` in the order given.
    Raises:
      ValueError: one line: a field that cannot be swept (with the closest sweepable name
        and the list of those that can), a value that is not a number, a repeated value, or
        a combination that ``Config`` itself refuses (its own message).
    """
    config = algo.config
    name, allowed = config_name(config), tuple(algo.hyperparams)
    if not allowed:
        raise ValueError(
            f"{name} has no sweepable fields: its algorithm's update takes no hyperparameters "
            "(algo.hyperparams is empty). Train one run per setting instead."
        )
    if not isinstance(sweep, Mapping) or not sweep:
        raise ValueError(f"sweep: expected {{field: [values]}} for {name}, got {sweep!r}.")
    fields = {f.name for f in dataclasses.fields(config)}
    out: dict[str, tuple[float, ...]] = {}
    for field, values in sweep.items():
        if field not in allowed:
            close = closest(field, allowed, cutoff=0.5)
            guess = f" Did you mean {close!r}?" if close else ""
            why = (
                "structural (it sets shapes, loop counts or code paths, or init reads it)"
                if field in fields
                else f"not a field of {name}"
            )
            raise ValueError(
                f"cannot sweep {field!r}: it is {why}.{guess} Fields of {name} that can be "
                f"swept: {', '.join(allowed)}."
            )
        values = (
            list(values)
            if isinstance(values, Sequence) and not isinstance(values, str)
            else [values]
        )
        ok = len(values) > 0 and all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in values
        )
        if not ok:
            raise ValueError(
                f"sweep {field}: expected a non-empty list of finite numbers, got {values!r}."
            )
        floats = tuple(float(v) for v in values)
        if len(set(floats)) != len(floats):
            raise ValueError(
                f"sweep {field}: the values {list(floats)} repeat one; list each once."
            )
        out[field] = floats
    for combo in combinations(out):
        dataclasses.replace(config, **combo)  # each combination passes the Config's checks
    return out


def combinations(sweep: Mapping[str, Sequence[float]]) -> list[dict[str, float]]:
    """Every combination of a sweep's values: ``itertools.product`` over the fields in the
    order given (the last field varies fastest)."""
    fields = list(sweep)
    return [dict(zip(fields, values, strict=True)) for values in itertools.product(*sweep.values())]


def _number(value: float) -> str:
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def combination_names(sweep: Mapping[str, Sequence[float]]) -> list[str]:
    """``["lr=0.0001,ent_coef=0", ...]``: one name per combination, in ``combinations`` order."""
    return [",".join(f"{k}={_number(v)}" for k, v in c.items()) for c in combinations(sweep)]


def values(combos: Sequence[Mapping[str, float]], num_seeds: int) -> dict[str, Tensor]:
    """``{field: [C * num_seeds] float64}`` on the CPU: agent ``c * num_seeds + s`` holds
    combination ``c``'s value (seed ``s`` of it). Float64, which each update casts to the
    dtype its Config's float is computed in (``core.hyperparams``), so every agent
    computes what a run of its own Config computes."""
    return {
        f: torch.tensor(
            [c[f] for c in combos for _ in range(num_seeds)], dtype=torch.float64, device="cpu"
        )
        for f in combos[0]
    }
