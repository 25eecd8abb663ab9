"""Entry checks for losses: fields, shapes and dtypes, with messages that name the fix.

Checks read only shapes and dtypes (never values), so they hold under ``vmap``,
``grad``, ``torch.compile`` and ``torch.export``. Every message gives the function, the
field, what it got, what was expected and a fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

Tensor = torch.Tensor

FIELD_HELP = {
    "obs": "[*B, ...] observations",
    "action": "[*B] int64 (discrete) or [*B, A] float (continuous) actions taken",
    "reward": "[*B] float rewards",
    "next_obs": "[*B, ...] observations the steps reached (the final one where an episode ended)",
    "terminated": "[*B] bool, True where the MDP ended (no bootstrap)",
    "truncated": "[*B] bool, True where a time limit cut the episode (still bootstraps)",
    "discount": "[*B] float bootstrap discount of n-step transitions (gamma**n, 0 if ended)",
    "weight": "[*B] float importance weights (prioritized replay)",
    "log_prob": "[*B] float log-probability of the action under the collecting policy",
    "advantage": "[*B] float advantages (e.g. fxrl.objectives.gae's first output)",
    "value_target": "[*B] float value targets (e.g. fxrl.objectives.gae's second output)",
    "value": "[*B] float values predicted when the data was collected",
}


class MissingFieldError(KeyError):
    """A batch lacks a field (a ``KeyError`` whose message prints without quoting)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def shape_str(x: Tensor | Sequence[int]) -> str:
    shape = x.shape if isinstance(x, Tensor) else x
    return f"[{', '.join(str(s) for s in shape)}]"


def _dtype_str(x: Tensor) -> str:
    return str(x.dtype).removeprefix("torch.")


def fields(fn: str, batch: Any, names: Sequence[str]) -> None:
    """``batch`` is a mapping holding tensors under every name in ``names``."""
    if not isinstance(batch, Mapping):
        raise TypeError(
            f"{fn}: batch must be a dict of tensors with fields {list(names)}, got "
            f"{type(batch).__name__}."
        )
    for name in names:
        if name not in batch:
            help_ = FIELD_HELP.get(name, "a tensor")
            raise MissingFieldError(
                f"{fn}: batch is missing field {name!r}; it has {sorted(batch)}. Add "
                f'batch["{name}"]: {help_}.'
            )
        if not isinstance(batch[name], Tensor):
            raise TypeError(
                f'{fn}: batch["{name}"] must be a tensor, got {type(batch[name]).__name__}.'
            )


def _mismatch(fn: str, name: str, x: Tensor, expected: str, ref: str, ref_shape: Any) -> str:
    got, ref_s = tuple(x.shape), tuple(ref_shape)
    if got == (*ref_s, 1):
        fix = f'Squeeze the trailing dim: batch["{name}"].squeeze(-1).'
    elif len(got) >= 2 and len(ref_s) >= 2 and got[:2] == ref_s[:2][::-1]:
        fix = "Time and batch dims swapped? Every field must lead with the same [T, B] dims."
    else:
        fix = f'Every field must lead with the dims of batch["{ref}"]; were they sampled together?'
    return (
        f'{fn}: batch["{name}"] has shape {shape_str(x)}; expected {expected}, matching '
        f'batch["{ref}"] {shape_str(ref_s)}. {fix}'
    )


def batch_dims(
    fn: str,
    batch: Mapping[str, Tensor],
    per_step: Sequence[str],
    leading: Sequence[str] = (),
    ref: str = "reward",
) -> torch.Size:
    """The batch dims ``B`` (the shape of ``batch[ref]``), checked against other fields.

    ``per_step`` fields must have shape exactly ``B``; ``leading`` fields (observations,
    continuous actions) must start with ``B``. Absent optional fields are skipped.
    """
    dims = batch[ref].shape
    for name in per_step:
        x = batch.get(name)
        if x is not None and x.shape != dims:
            raise ValueError(_mismatch(fn, name, x, shape_str(dims), ref, dims))
    for name in leading:
        x = batch.get(name)
        if x is not None and x.shape[: len(dims)] != dims:
            raise ValueError(_mismatch(fn, name, x, f"{shape_str(dims)[:-1]}, ...]", ref, dims))
    return dims


def float_field(fn: str, batch: Mapping[str, Tensor], name: str) -> None:
    x = batch[name]
    if not x.dtype.is_floating_point:
        raise TypeError(
            f'{fn}: batch["{name}"] has dtype {_dtype_str(x)}; expected a float tensor '
            f'({FIELD_HELP.get(name, "")}). Pass batch["{name}"].float().'
        )


def discrete_action(fn: str, action: Tensor, values: Tensor, what: str = "q") -> None:
    """``action [*B]`` int64 indices, one per row of ``values [*B, A]``."""
    want = shape_str(values.shape[:-1])
    if action.dtype.is_floating_point or action.dtype == torch.bool or action.is_complex():
        hint = (
            'One-hot actions? Pass batch["action"].argmax(-1).'
            if action.shape == values.shape
            else 'Pass integer indices: batch["action"].long().'
        )
    elif action.shape != values.shape[:-1]:
        hint = (
            'Squeeze the trailing dim: batch["action"].squeeze(-1).'
            if action.shape == (*values.shape[:-1], 1)
            else "Were the actions sampled with the observations?"
        )
    else:
        return
    raise ValueError(
        f'{fn}: batch["action"] has shape {shape_str(action)} {_dtype_str(action)}; '
        f"expected {want} int64 indices, one per row of {what} {shape_str(values)}. {hint}"
    )


def continuous_action(fn: str, action: Tensor, dims: torch.Size) -> None:
    """``action [*B, A]`` float."""
    if action.dtype.is_floating_point and action.ndim == len(dims) + 1:
        return
    if not action.dtype.is_floating_point:
        hint = 'Continuous losses take float actions: batch["action"].float().'
    elif action.shape == dims:
        hint = 'A 1-d action space keeps its action dim: batch["action"].unsqueeze(-1).'
    else:
        hint = 'Every field must lead with the dims of batch["reward"].'
    raise ValueError(
        f'{fn}: batch["action"] has shape {shape_str(action)} {_dtype_str(action)}; '
        f'expected {shape_str(dims)[:-1]}, A] float actions, matching batch["reward"] '
        f"{shape_str(dims)}. {hint}"
    )


def output(fn: str, apply: str, out: Any, expected: Sequence[int], what: str) -> Tensor:
    """An apply function's output must have shape ``expected`` (a trailing 1 is dropped)."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{fn}: {apply} returned {type(out).__name__}; expected a tensor {what}.")
    if tuple(out.shape) == tuple(expected):
        return out
    if tuple(out.shape) == (*expected, 1):
        return out.squeeze(-1)
    raise ValueError(
        f"{fn}: {apply} returned shape {shape_str(out)}; expected {shape_str(expected)} "
        f"({what}). Check the network's output size and the batch dims of the inputs."
    )


def q_values(fn: str, apply: str, q: Any, dims: torch.Size) -> Tensor:
    """``q [*B, A]``: one value per action for each observation."""
    if not isinstance(q, Tensor) or q.ndim != len(dims) + 1 or q.shape[:-1] != dims:
        got = shape_str(q) if isinstance(q, Tensor) else type(q).__name__
        raise ValueError(
            f"{fn}: {apply} returned {got}; expected {shape_str(dims)[:-1]}, A], one value "
            f"per action for each of the {shape_str(dims)} observations."
        )
    return q
