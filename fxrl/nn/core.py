"""The model type, activations by name, and errors that name the failing layer.

A model is a pair of pure functions, ``Model(init, apply)``: ``params = init(key)`` builds
a nested dict of tensors from a key, ``apply(params, *inputs)`` computes the output. No
model holds state; ensembles are ``torch.func.vmap(init)(random.split(key, n))``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from fxrl._errors import unknown

__all__ = [
    "ACTIVATIONS",
    "LayerError",
    "Model",
    "Params",
    "activation_fn",
    "call_layer",
    "check_params",
    "shape_str",
]

Params = Any  # a nested dict of tensors


class Model(NamedTuple):
    """A network as two pure functions.

    Attributes:
      init: ``init(key [2]) -> params`` (a nested dict of tensors).
      apply: ``apply(params, *inputs) -> output``.
    """

    init: Callable[[torch.Tensor], Params]
    apply: Callable[..., Any]


class LayerError(ValueError):
    """Params and inputs of a layer do not fit; the message starts with the layer's path.

    ``path`` is the params path of the failing layer (``"layers_1"``), ``detail`` the
    rest of the message. Composite models prefix their own path as the error rises.
    """

    def __init__(self, model: str, path: str, detail: str) -> None:
        self.model, self.path, self.detail = model, path, detail
        where = f" at params path '{path}'" if path else ""
        super().__init__(f"{model}{where}: {detail}")

    def within(self, model: str, prefix: str) -> LayerError:
        path = f"{prefix}_{self.path}" if self.path else prefix
        return LayerError(model, path, self.detail)


def call_layer(
    model: str, path: str, apply: Callable[..., Any], params: Params, *inputs: Any
) -> Any:
    """``apply(params, *inputs)``, re-raising a ``LayerError`` with ``path`` prefixed."""
    try:
        return apply(params, *inputs)
    except LayerError as e:
        raise e.within(model, path) from None


def shape_str(x: torch.Tensor) -> str:
    return f"[{', '.join(str(s) for s in x.shape)}]"


def check_params(model: str, params: Any, names: tuple[str, ...]) -> None:
    """Check ``params`` is a dict holding tensors under ``names`` (a clear error if not)."""
    if not isinstance(params, Mapping):
        raise LayerError(
            model,
            "",
            f"params must be a dict with keys {list(names)}, got {type(params).__name__}.",
        )
    missing = [n for n in names if n not in params]
    if missing:
        raise LayerError(
            model,
            "",
            f"params has keys {list(params)}; missing {missing}. "
            "Did you pass the params of another model?",
        )


def _leaky_relu(x: torch.Tensor) -> torch.Tensor:
    return F.leaky_relu(x, 0.01)


ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "identity": lambda x: x,
    "relu": torch.relu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "elu": F.elu,
    "gelu": F.gelu,
    "silu": F.silu,
    "mish": F.mish,
    "softplus": F.softplus,
    "leaky_relu": _leaky_relu,
    "selu": F.selu,
}


def activation_fn(
    activation: str | Callable[[torch.Tensor], torch.Tensor] | None,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The function for an activation name (or the callable itself; ``None`` is identity)."""
    if activation is None:
        return ACTIVATIONS["identity"]
    if callable(activation):
        return activation
    if isinstance(activation, str) and activation in ACTIVATIONS:
        return ACTIVATIONS[activation]
    message = unknown(activation, sorted(ACTIVATIONS), "activation")
    raise ValueError(f"{message} Or pass a callable tensor -> tensor.")
