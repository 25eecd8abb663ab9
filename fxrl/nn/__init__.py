"""Networks as pure functions: ``Model(init, apply)`` with params in nested dicts.

    model = nn.mlp(4, 2, hidden=(64, 64))
    params = model.init(random.key(0))               # {"layers": [{"w", "b"}, ...]}
    q = model.apply(params, obs)                     # [..., 4] -> [..., 2]
    ensemble = torch.func.vmap(model.init)(random.split(key, 32))
    qs = torch.func.vmap(model.apply, in_dims=(0, None))(ensemble, obs)

Layers live in ``layers``, recurrent cells in ``recurrent``, torch.nn bridges in ``interop``.
"""

from fxrl.nn import initializers
from fxrl.nn.core import ACTIVATIONS, LayerError, Model, Params, activation_fn
from fxrl.nn.interop import from_module, to_module
from fxrl.nn.layers import (
    atari_dqn,
    conv2d,
    conv_output_size,
    convnet,
    flatten,
    layer_norm,
    linear,
    mlp,
    sequential,
)
from fxrl.nn.recurrent import LSTMCarry, Recurrent, gru, lstm

__all__ = [
    "ACTIVATIONS",
    "LSTMCarry",
    "LayerError",
    "Model",
    "Params",
    "Recurrent",
    "activation_fn",
    "atari_dqn",
    "conv2d",
    "conv_output_size",
    "convnet",
    "flatten",
    "from_module",
    "gru",
    "initializers",
    "layer_norm",
    "linear",
    "lstm",
    "mlp",
    "sequential",
    "to_module",
]
