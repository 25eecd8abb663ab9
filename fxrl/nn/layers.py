"""Feed-forward layers and models: linear, layer_norm, mlp, conv2d, convnet, atari_dqn,
sequential, flatten.

Params are nested dicts whose paths name exported inputs: an mlp's are
``{"layers": [{"w": [out, in], "b": [out]}, ...]}`` (``layers_0_w``...), the layout of
torch.nn.Linear's ``weight``/``bias``. Inputs carry any leading batch dims. Default inits
are torch.nn's, so a model initialised here is distributed as its torch.nn counterpart.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from fxrl import random
from fxrl.nn import initializers as inits
from fxrl.nn.core import (
    LayerError,
    Model,
    Params,
    activation_fn,
    call_layer,
    check_params,
    shape_str,
)

__all__ = ["atari_dqn", "conv2d", "convnet", "flatten", "layer_norm", "linear", "mlp", "sequential"]

Activation = str | Callable[[torch.Tensor], torch.Tensor] | None
IntPair = int | tuple[int, int]


def _bias_init(fan_in: int) -> inits.Initializer:
    # torch.nn.Linear and Conv2d draw the bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    bound = fan_in**-0.5
    return inits.uniform(-bound, bound)


def _dtype_check(model: str, x: torch.Tensor, w: torch.Tensor) -> None:
    if x.dtype != w.dtype:
        raise LayerError(
            model,
            "",
            f"input has dtype {str(x.dtype).removeprefix('torch.')} but "
            f"w has {str(w.dtype).removeprefix('torch.')}; cast the input, e.g. "
            "x.float() for integer observations.",
        )


def _check_last_dim(layer: str, x: torch.Tensor, w: torch.Tensor) -> None:
    """The input's last dim must match ``w``'s (linear's in_features, layer_norm's size)."""
    if x.ndim == 0 or x.shape[-1] != w.shape[-1]:
        raise LayerError(
            layer,
            "",
            f"input has shape {shape_str(x)} but w has shape "
            f"{shape_str(w)}; the input's last dim must be {w.shape[-1]}.",
        )


def _linear_apply(params: Params, x: torch.Tensor) -> torch.Tensor:
    check_params("linear", params, ("w", "b"))
    w = params["w"]
    _check_last_dim("linear", x, w)
    _dtype_check("linear", x, w)
    return F.linear(x, w, params["b"])


def linear(
    in_features: int,
    out_features: int,
    *,
    bias: bool = True,
    w_init: inits.Initializer | None = None,
    b_init: inits.Initializer | None = None,
    dtype: torch.dtype = torch.float32,
) -> Model:
    """``y = x @ w.T + b``: params ``{"w": [out, in], "b": [out]}``; ``[..., in] -> [..., out]``.

    ``bias=False`` keeps ``b`` as zeros, so every linear has the same params structure.
    """
    w_init = inits.torch_default() if w_init is None else w_init
    b_init = (_bias_init(in_features) if bias else inits.zeros) if b_init is None else b_init

    def init(key: torch.Tensor) -> Params:
        w_key, b_key = random.split(key).unbind(-2)
        return {
            "w": w_init(w_key, (out_features, in_features), dtype),
            "b": b_init(b_key, (out_features,), dtype),
        }

    return Model(init, _linear_apply)


def _layer_norm_apply(params: Params, x: torch.Tensor) -> torch.Tensor:
    check_params("layer_norm", params, ("w", "b"))
    w = params["w"]
    _check_last_dim("layer_norm", x, w)
    return F.layer_norm(x, (w.shape[-1],), w, params["b"], eps=1e-5)


def layer_norm(features: int, dtype: torch.dtype = torch.float32) -> Model:
    """Layer normalisation over the last dim (torch.nn.LayerNorm, eps 1e-5): ``{"w", "b"}``."""

    def init(key: torch.Tensor) -> Params:
        return {"w": inits.ones(key, (features,), dtype), "b": inits.zeros(key, (features,), dtype)}

    return Model(init, _layer_norm_apply)


def mlp(
    in_features: int,
    out_features: int,
    hidden: Sequence[int] = (64, 64),
    activation: Activation = "tanh",
    *,
    layer_norm: bool = False,
    output_activation: Activation = None,
    w_init: inits.Initializer | None = None,
    b_init: inits.Initializer | None = None,
    output_w_init: inits.Initializer | None = None,
    output_b_init: inits.Initializer | None = None,
    dtype: torch.dtype = torch.float32,
) -> Model:
    """A multi-layer perceptron ``[..., in] -> [..., out]``.

    Each hidden layer is linear, then layer norm (if ``layer_norm``), then ``activation``;
    the last layer is linear then ``output_activation``. Params:
    ``{"layers": [{"w", "b"[, "norm": {"w", "b"}]}, ...]}``, one entry per linear layer.
    ``output_w_init`` lets the last layer differ (PPO: ``initializers.orthogonal(0.01)``).
    """
    act, out_act = activation_fn(activation), activation_fn(output_activation)
    sizes = [in_features, *hidden, out_features]
    layers = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        last = i == len(sizes) - 2
        w_i = (output_w_init or w_init) if last else w_init
        b_i = (output_b_init or b_init) if last else b_init
        layers.append(linear(n_in, n_out, w_init=w_i, b_init=b_i, dtype=dtype))
    norms = [_norm(n, dtype) if layer_norm else None for n in sizes[1:-1]]

    def init(key: torch.Tensor) -> Params:
        keys = random.split(key, len(layers)).unbind(-2)
        out = [layer.init(k) for layer, k in zip(layers, keys, strict=True)]
        for p, norm in zip(out, norms, strict=False):
            if norm is not None:
                p["norm"] = norm.init(key)
        return {"layers": out}

    def apply(params: Params, x: torch.Tensor) -> torch.Tensor:
        ps = _layers("mlp", params, len(layers))
        for i, p in enumerate(ps):
            x = call_layer("mlp", f"layers_{i}", _linear_apply, p, x)
            if i < len(norms) and norms[i] is not None:
                x = call_layer("mlp", f"layers_{i}_norm", _layer_norm_apply, p["norm"], x)
            x = act(x) if i < len(ps) - 1 else out_act(x)
        return x

    return Model(init, apply)


_norm = layer_norm  # inside mlp, the `layer_norm` flag shadows the function


def _layers(model: str, params: Params, n: int) -> list[Params]:
    check_params(model, params, ("layers",))
    ps = params["layers"]
    if not isinstance(ps, list | tuple) or len(ps) != n:
        got = len(ps) if isinstance(ps, list | tuple) else type(ps).__name__
        raise LayerError(model, "layers", f"expected a list of {n} layer params, got {got}.")
    return list(ps)


def _pair(v: IntPair) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def conv2d(
    in_channels: int,
    out_channels: int,
    kernel_size: IntPair,
    stride: IntPair = 1,
    padding: IntPair | str = 0,
    *,
    w_init: inits.Initializer | None = None,
    b_init: inits.Initializer | None = None,
    dtype: torch.dtype = torch.float32,
) -> Model:
    """2-d convolution ``[..., C_in, H, W] -> [..., C_out, H', W']`` (torch.nn.Conv2d).

    Params ``{"w": [C_out, C_in, kh, kw], "b": [C_out]}``; any number of leading dims.
    """
    kh, kw = _pair(kernel_size)
    stride = _pair(stride)
    padding = padding if isinstance(padding, str) else _pair(padding)
    w_init = inits.torch_default() if w_init is None else w_init
    b_init = _bias_init(in_channels * kh * kw) if b_init is None else b_init

    def init(key: torch.Tensor) -> Params:
        w_key, b_key = random.split(key).unbind(-2)
        return {
            "w": w_init(w_key, (out_channels, in_channels, kh, kw), dtype),
            "b": b_init(b_key, (out_channels,), dtype),
        }

    def apply(params: Params, x: torch.Tensor) -> torch.Tensor:
        check_params("conv2d", params, ("w", "b"))
        w = params["w"]
        if x.ndim < 3 or x.shape[-3] != w.shape[1]:
            raise LayerError(
                "conv2d",
                "",
                f"input has shape {shape_str(x)} but w has shape "
                f"{shape_str(w)}; expected [..., {w.shape[1]}, H, W] (channels "
                "first).",
            )
        _dtype_check("conv2d", x, w)
        batch = x.shape[:-3]
        y = F.conv2d(x.reshape(-1, *x.shape[-3:]), w, params["b"], stride, padding)
        return y.reshape(*batch, *y.shape[-3:])

    return Model(init, apply)


def conv_output_size(
    size: IntPair,
    kernels: Sequence[IntPair],
    strides: Sequence[IntPair],
    paddings: Sequence[IntPair] | None = None,
) -> tuple[int, int]:
    """Height and width after a stack of convolutions (84x84 through Nature DQN: 7x7)."""
    h, w = _pair(size)
    for i, (k, s) in enumerate(zip(kernels, strides, strict=True)):
        (kh, kw), (sh, sw) = _pair(k), _pair(s)
        ph, pw = _pair(paddings[i]) if paddings is not None else (0, 0)
        h, w = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    return h, w


def convnet(
    in_channels: int,
    channels: Sequence[int] = (32, 64, 64),
    kernels: Sequence[IntPair] = (8, 4, 3),
    strides: Sequence[IntPair] = (4, 2, 1),
    activation: Activation = "relu",
    *,
    flatten: bool = True,
    w_init: inits.Initializer | None = None,
    b_init: inits.Initializer | None = None,
    dtype: torch.dtype = torch.float32,
) -> Model:
    """Convolutions each followed by ``activation``; ``[..., C, H, W] -> [..., F]``.

    With ``flatten`` the trailing ``[C', H', W']`` are flattened into one feature dim.
    Params ``{"layers": [{"w", "b"}, ...]}``. Defaults are the Nature DQN torso.
    """
    if not len(channels) == len(kernels) == len(strides):
        raise ValueError(
            f"convnet: channels {list(channels)}, kernels {list(kernels)} and strides "
            f"{list(strides)} must have the same length."
        )
    act = activation_fn(activation)
    sizes = [in_channels, *channels]
    convs = [
        conv2d(c_in, c_out, k, s, w_init=w_init, b_init=b_init, dtype=dtype)
        for c_in, c_out, k, s in zip(sizes[:-1], sizes[1:], kernels, strides, strict=True)
    ]

    def init(key: torch.Tensor) -> Params:
        keys = random.split(key, len(convs)).unbind(-2)
        return {"layers": [c.init(k) for c, k in zip(convs, keys, strict=True)]}

    def apply(params: Params, x: torch.Tensor) -> torch.Tensor:
        for i, (c, p) in enumerate(zip(convs, _layers("convnet", params, len(convs)), strict=True)):
            x = act(call_layer("convnet", f"layers_{i}", c.apply, p, x))
        return x.flatten(-3) if flatten else x

    return Model(init, apply)


def atari_dqn(num_actions: int, in_channels: int = 4, dtype: torch.dtype = torch.float32) -> Model:
    """The Nature DQN network (Mnih et al. 2015): ``[..., C, 84, 84] -> [..., num_actions]``.

    Conv 32x8x8 stride 4, conv 64x4x4 stride 2, conv 64x3x3 stride 1 (ReLU after each),
    dense 512 (ReLU), dense ``num_actions``. uint8 frames are scaled by 1/255; float frames
    are used as given. Params ``{"conv": {"layers": [...]}, "head": {"layers": [...]}}``.
    """
    torso = convnet(in_channels, dtype=dtype)
    h, w = conv_output_size(84, (8, 4, 3), (4, 2, 1))
    head = mlp(64 * h * w, num_actions, hidden=(512,), activation="relu", dtype=dtype)

    def init(key: torch.Tensor) -> Params:
        k_conv, k_head = random.split(key).unbind(-2)
        return {"conv": torso.init(k_conv), "head": head.init(k_head)}

    def apply(params: Params, x: torch.Tensor) -> torch.Tensor:
        check_params("atari_dqn", params, ("conv", "head"))
        if x.ndim < 3 or tuple(x.shape[-2:]) != (84, 84):
            raise LayerError(
                "atari_dqn",
                "",
                f"input has shape {shape_str(x)}; expected frames "
                f"[..., {in_channels}, 84, 84] (stacked, channels first).",
            )
        if x.dtype == torch.uint8:
            x = x.to(dtype) / 255.0
        features = call_layer("atari_dqn", "conv", torso.apply, params["conv"], x)
        return call_layer("atari_dqn", "head", head.apply, params["head"], features)

    return Model(init, apply)


def flatten(num_dims: int = 3) -> Callable[[torch.Tensor], torch.Tensor]:
    """A parameter-free layer flattening the trailing ``num_dims`` dims (for ``sequential``)."""
    return lambda x: x.flatten(-num_dims) if num_dims > 1 else x


def sequential(*layers: Model | Callable[[torch.Tensor], torch.Tensor]) -> Model:
    """Chain models and parameter-free functions: ``x -> f_n(...f_1(x))``.

    Params ``{"layers": [p_1, ..., p_n]}`` with ``{}`` for parameter-free entries, so
    indices match torch.nn.Sequential's (``layers_2_w`` <-> ``2.weight``).
    """
    if not layers:
        raise ValueError("sequential: give at least one layer.")
    models = [layer if isinstance(layer, Model) else _stateless(layer) for layer in layers]

    def init(key: torch.Tensor) -> Params:
        keys = random.split(key, len(models)).unbind(-2)
        return {"layers": [m.init(k) for m, k in zip(models, keys, strict=True)]}

    def apply(params: Params, x: Any) -> Any:
        for i, (m, p) in enumerate(
            zip(models, _layers("sequential", params, len(models)), strict=True)
        ):
            x = call_layer("sequential", f"layers_{i}", m.apply, p, x)
        return x

    return Model(init, apply)


def _stateless(fn: Callable[[torch.Tensor], torch.Tensor]) -> Model:
    if not callable(fn):
        raise TypeError(f"sequential: layer {fn!r} is neither a Model nor a callable.")
    return Model(lambda key: {}, lambda params, x: fn(x))
