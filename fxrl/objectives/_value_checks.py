"""Entry checks of the value estimators: shapes, dtypes and discounts, with the fix in the message.

Only static facts (shapes, dtypes, Python numbers) are checked, so the checks hold under
``torch.func.vmap`` (per-sample shapes), ``torch.compile`` and ``torch.export``.
"""

from __future__ import annotations

from numbers import Real

import torch
from torch import Tensor

_FLAGS = ("terminated", "truncated")


def _shape(x: Tensor) -> str:
    return f"[{', '.join(str(s) for s in x.shape)}]"


def _describe(x: Tensor) -> str:
    return f"{_shape(x)} {str(x.dtype).removeprefix('torch.')}"


def check_fields(fn: str, **fields: Tensor) -> None:
    """Every field is a tensor of the first field's shape ``[T, *B]`` with ``T >= 1``.

    ``terminated``/``truncated`` must be bool (``x.bool()`` converts 0/1 flags); the other
    fields must be floating point.
    """
    (ref_name, ref), *_ = fields.items()
    for name, x in fields.items():
        if not isinstance(x, Tensor):
            raise TypeError(
                f"{fn}: {name} is a {type(x).__name__}; expected a tensor of time-major shape "
                f"[T, *B]. Fix: pass torch.as_tensor({name})."
            )
    if ref.dim() == 0:
        raise ValueError(
            f"{fn}: {ref_name} is a scalar; expected time-major [T, *B] with a leading time "
            f"dim. Fix: a single step is {ref_name}.unsqueeze(0) (shape [1])."
        )
    if ref.shape[0] == 0:
        raise ValueError(
            f"{fn}: {ref_name} has shape {_shape(ref)}, an empty trajectory (T=0); "
            "expected at least one step. Fix: collect num_steps >= 1."
        )
    for name, x in fields.items():
        if x.shape != ref.shape:
            raise ValueError(
                f"{fn}: {name} has shape {_shape(x)} but {ref_name} has {_shape(ref)}; every "
                f"field must be time-major [T, *B] with the same shape. Fix: pass trajectory "
                f"fields as the rollout gives them (a value head's [T, *B, 1] output: "
                f"value.squeeze(-1))."
            )
        if name in _FLAGS and x.dtype != torch.bool:
            raise TypeError(
                f"{fn}: {name} has {_describe(x)}; expected a bool tensor. Fix: pass {name}.bool()."
            )
        if name not in _FLAGS and not x.dtype.is_floating_point:
            raise TypeError(
                f"{fn}: {name} has {_describe(x)}; expected a floating-point tensor. "
                f"Fix: pass {name}.float()."
            )


def check_discount(fn: str, ref: Tensor, **discounts: float | Tensor) -> list[float | Tensor]:
    """``gamma``/``lmbda``: a real in [0, 1] or a float tensor broadcastable to ``ref``'s shape.

    Returns them in order, tensors moved to ``ref``'s dtype and device (a float64 gamma does
    not turn a float32 trajectory's targets into float64).
    """
    out: list[float | Tensor] = []
    for name, x in discounts.items():
        if isinstance(x, Tensor):
            if not x.dtype.is_floating_point:
                raise TypeError(
                    f"{fn}: {name} has {_describe(x)}; expected a float or a floating-point "
                    f"tensor. Fix: pass {name}.float()."
                )
            try:
                ok = torch.broadcast_shapes(x.shape, ref.shape) == ref.shape
            except RuntimeError:
                ok = False
            if not ok:
                raise ValueError(
                    f"{fn}: {name} has shape {_shape(x)}, which does not broadcast to the "
                    f"trajectory's {_shape(ref)} ([T, *B]). Fix: a per-env {name} has shape "
                    f"[*B] ({list(ref.shape[1:])}), a per-step one [T, *B]."
                )
            out.append(x.to(dtype=ref.dtype, device=ref.device))
        elif isinstance(x, Real) and not isinstance(x, bool):
            if not 0.0 <= float(x) <= 1.0:
                raise ValueError(f"{fn}: {name}={x!r}; expected a number in [0, 1].")
            out.append(float(x))
        else:
            raise TypeError(
                f"{fn}: {name} is a {type(x).__name__}; expected a float in [0, 1] or a tensor "
                "broadcastable to [T, *B]."
            )
    return out


def check_n(fn: str, n: object) -> None:
    """``n`` is a Python int >= 1 (it sets the number of traced steps)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(
            f"{fn}: n={n!r}; expected a Python int >= 1, the number of steps per return."
        )
