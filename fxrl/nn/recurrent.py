"""LSTM and GRU as pure functions, with episode resets inside a sequence.

``lstm(...)`` and ``gru(...)`` return a ``Recurrent(init, apply, step, initial_carry,
project, cell)``:

    ys, carry = model.apply(params, xs, carry, is_init)   # xs [T, *B, in] -> ys [T, *B, H]
    y, carry = model.step(params, x, carry, is_init)      # x [*B, in]     -> y [*B, H]

A one-layer model also splits a step in two, for a loop written by hand (such as
backpropagation through time with ``fxrl.scan.scan_vjp``): ``gx = model.project(params, xs)``
computes the input projections of every step at once, and ``y, carry =
model.cell(params, gx[t], carry, is_init[t])`` is the rest of step ``t``.

``is_init[t]`` is True where observation ``t`` starts an episode: the carry is reset to
zeros there (``torch.where``, no Python branching), so one call runs over several episodes
and equals running each episode from a zero carry. The cells are written in tensor ops
(no cuDNN kernel), so they vmap, compile and export. Gate layouts, params names
(``w_ih, w_hh, b_ih, b_hh`` per layer) and default inits are torch.nn.LSTM/GRU's, so
weights copy across and outputs match. The carry puts batch dims first,
``[*B, num_layers, H]`` (torch's is ``[num_layers, *B, H]``), so that ``vmap`` and
``tree.where`` over envs see it like any other per-env state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from fxrl import random
from fxrl.nn import initializers as inits
from fxrl.nn.core import LayerError, Params, check_params, shape_str

__all__ = ["LSTMCarry", "Recurrent", "gru", "lstm"]

Carry = Any


class LSTMCarry(NamedTuple):
    """The LSTM state: hidden ``h`` and cell ``c``, each ``[*B, num_layers, hidden]``."""

    h: torch.Tensor
    c: torch.Tensor


class Recurrent(NamedTuple):
    """A recurrent network as pure functions (see the module docstring).

    Attributes:
      init: ``init(key) -> params``.
      apply: ``apply(params, xs [T, *B, in], carry=None, is_init=None [T, *B]) ->
        (ys [T, *B, hidden], carry)``; ``carry=None`` starts from zeros.
      step: ``step(params, x [*B, in], carry=None, is_init=None [*B]) -> (y [*B, hidden], carry)``.
      initial_carry: ``initial_carry(batch_shape=(), device=None) -> carry`` of zeros on
        ``device`` (default: torch's default device).
      project: ``project(params, xs [..., in]) -> gx [..., gates * hidden]``: the input
        projections (``x @ w_ih.T + b_ih``) of a one-layer model, all steps at once.
      cell: ``cell(params, gx [*B, gates * hidden], carry, is_init=None [*B]) -> (y [*B,
        hidden], carry)``: the rest of one step of a one-layer model; ``step(params, x,
        carry, is_init)`` equals ``cell(params, project(params, x), carry, is_init)``.
    """

    init: Callable[[torch.Tensor], Params]
    apply: Callable[..., tuple[torch.Tensor, Carry]]
    step: Callable[..., tuple[torch.Tensor, Carry]]
    initial_carry: Callable[..., Carry]
    project: Callable[..., torch.Tensor]
    cell: Callable[..., tuple[torch.Tensor, Carry]]


def _lstm_cell(
    gx: torch.Tensor, h: torch.Tensor, c: torch.Tensor, p: Params
) -> tuple[torch.Tensor, torch.Tensor]:
    gates = gx + F.linear(h, p["w_hh"], p["b_hh"])
    i, f, g, o = gates.chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def _gru_cell(gx: torch.Tensor, h: torch.Tensor, p: Params) -> torch.Tensor:
    gh = F.linear(h, p["w_hh"], p["b_hh"])
    x_r, x_z, x_n = gx.chunk(3, dim=-1)
    h_r, h_z, h_n = gh.chunk(3, dim=-1)
    r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)
    return n + z * (h - n)


def _make(
    kind: str, input_size: int, hidden_size: int, num_layers: int, dtype: torch.dtype
) -> Recurrent:
    if num_layers < 1 or hidden_size < 1 or input_size < 1:
        raise ValueError(
            f"{kind}: sizes must be positive, got input_size={input_size}, "
            f"hidden_size={hidden_size}, num_layers={num_layers}."
        )
    gates = 4 if kind == "lstm" else 3
    bound = hidden_size**-0.5  # torch.nn.LSTM/GRU: every weight and bias U(-1/sqrt(H), 1/sqrt(H))
    draw = inits.uniform(-bound, bound)
    names = ("w_ih", "w_hh", "b_ih", "b_hh")

    def init(key: torch.Tensor) -> Params:
        layers = []
        for layer_key in random.split(key, num_layers).unbind(-2):
            n_in = input_size if not layers else hidden_size
            shapes = (
                (gates * hidden_size, n_in),
                (gates * hidden_size, hidden_size),
                (gates * hidden_size,),
                (gates * hidden_size,),
            )
            ks = random.split(layer_key, 4).unbind(-2)
            layers.append({n: draw(k, s, dtype) for n, k, s in zip(names, ks, shapes, strict=True)})
        return {"layers": layers}

    def initial_carry(
        batch_shape: tuple[int, ...] = (), device: torch.device | str | None = None
    ) -> Carry:
        shape = (*batch_shape, num_layers, hidden_size)
        zeros = torch.zeros(shape, dtype=dtype, device=device)
        if kind == "lstm":
            return LSTMCarry(zeros, torch.zeros(shape, dtype=dtype, device=device))
        return zeros

    def apply(
        params: Params, xs: torch.Tensor, carry: Carry = None, is_init: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, Carry]:
        layers = _check(kind, params, xs, num_layers)
        batch = tuple(xs.shape[1:-1])
        carry = initial_carry(batch, xs.device) if carry is None else carry
        hs = carry.h if kind == "lstm" else carry
        cs = carry.c if kind == "lstm" else None
        _check_carry(kind, hs, batch, num_layers, hidden_size)
        if is_init is not None:
            _check_is_init(kind, is_init, xs.shape[:-1])
        new_h, new_c, inputs = [], [], xs
        for i, p in enumerate(layers):
            if inputs.shape[-1] != p["w_ih"].shape[-1]:
                raise LayerError(
                    kind,
                    f"layers_{i}",
                    f"input has shape {shape_str(inputs)} but "
                    f"w_ih has shape {shape_str(p['w_ih'])}.",
                )
            gx = F.linear(inputs, p["w_ih"], p["b_ih"])  # input projections for all steps
            h = hs[..., i, :]
            c = cs[..., i, :] if cs is not None else None
            outs = []
            for t in range(xs.shape[0]):
                if is_init is not None:
                    reset = is_init[t].unsqueeze(-1)
                    h = torch.where(reset, torch.zeros_like(h), h)
                    c = torch.where(reset, torch.zeros_like(c), c) if c is not None else None
                if c is not None:
                    h, c = _lstm_cell(gx[t], h, c, p)
                else:
                    h = _gru_cell(gx[t], h, p)
                outs.append(h)
            inputs = torch.stack(outs)
            new_h.append(h)
            new_c.append(c)
        h_out = torch.stack(new_h, dim=-2)
        out = LSTMCarry(h_out, torch.stack(new_c, dim=-2)) if kind == "lstm" else h_out
        return inputs, out

    def step(
        params: Params, x: torch.Tensor, carry: Carry = None, is_init: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, Carry]:
        ys, carry = apply(
            params, x.unsqueeze(0), carry, None if is_init is None else is_init.unsqueeze(0)
        )
        return ys[0], carry

    def one_layer(params: Params, what: str) -> Params:
        if num_layers != 1:
            raise ValueError(
                f"{kind}.{what}: only a one-layer model splits a step into project and "
                f"cell; this one has num_layers={num_layers}. Use step or apply."
            )
        check_params(kind, params, ("layers",))
        return params["layers"][0]

    def project(params: Params, xs: torch.Tensor) -> torch.Tensor:
        p = one_layer(params, "project")
        return F.linear(xs, p["w_ih"], p["b_ih"])

    def cell(
        params: Params, gx: torch.Tensor, carry: Carry, is_init: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, Carry]:
        p = one_layer(params, "cell")
        h = carry.h[..., 0, :] if kind == "lstm" else carry[..., 0, :]
        c = carry.c[..., 0, :] if kind == "lstm" else None
        if is_init is not None:
            reset = is_init.unsqueeze(-1)
            h = torch.where(reset, torch.zeros_like(h), h)
            c = torch.where(reset, torch.zeros_like(c), c) if c is not None else None
        if c is not None:
            h, c = _lstm_cell(gx, h, c, p)
            return h, LSTMCarry(h.unsqueeze(-2), c.unsqueeze(-2))
        h = _gru_cell(gx, h, p)
        return h, h.unsqueeze(-2)

    return Recurrent(init, apply, step, initial_carry, project, cell)


def _check(kind: str, params: Params, xs: torch.Tensor, num_layers: int) -> list[Params]:
    check_params(kind, params, ("layers",))
    layers = params["layers"]
    if not isinstance(layers, list | tuple) or len(layers) != num_layers:
        raise LayerError(kind, "layers", f"expected a list of {num_layers} layer params.")
    for i, p in enumerate(layers):
        try:
            check_params(kind, p, ("w_ih", "w_hh", "b_ih", "b_hh"))
        except LayerError as e:
            raise e.within(kind, f"layers_{i}") from None
    if xs.ndim < 2:
        raise LayerError(
            kind,
            "",
            f"input has shape {shape_str(xs)}; expected a sequence "
            "[T, *B, features] (use step() for a single time step).",
        )
    return list(layers)


def _check_carry(
    kind: str, h: torch.Tensor, batch: tuple[int, ...], num_layers: int, hidden: int
) -> None:
    expected = (*batch, num_layers, hidden)
    if tuple(h.shape) != expected:
        raise LayerError(
            kind,
            "",
            f"carry has shape {shape_str(h)}; expected "
            f"[{', '.join(map(str, expected))}] = [*B, num_layers, hidden] "
            "(batch dims first). Make one with initial_carry(batch_shape).",
        )


def _check_is_init(kind: str, is_init: torch.Tensor, expected: torch.Size) -> None:
    if is_init.dtype != torch.bool or is_init.shape != expected:
        raise LayerError(
            kind,
            "",
            f"is_init has shape {shape_str(is_init)} "
            f"{str(is_init.dtype).removeprefix('torch.')}; expected bool "
            f"[{', '.join(map(str, expected))}], one flag per time step and "
            "batch element.",
        )


def lstm(
    input_size: int, hidden_size: int, num_layers: int = 1, dtype: torch.dtype = torch.float32
) -> Recurrent:
    """A multi-layer LSTM (Hochreiter & Schmidhuber 1997; torch.nn.LSTM's equations).

    Params ``{"layers": [{"w_ih": [4H, in], "w_hh": [4H, H], "b_ih": [4H], "b_hh": [4H]}]}``
    with gates in torch's order (input, forget, cell, output). Carry: ``LSTMCarry(h, c)``.
    """
    return _make("lstm", input_size, hidden_size, num_layers, dtype)


def gru(
    input_size: int, hidden_size: int, num_layers: int = 1, dtype: torch.dtype = torch.float32
) -> Recurrent:
    """A multi-layer GRU (Cho et al. 2014; torch.nn.GRU's equations, gates reset, update, new).

    Params as ``lstm``'s with ``3H`` rows; the carry is a tensor ``h [*B, num_layers, H]``.
    """
    return _make("gru", input_size, hidden_size, num_layers, dtype)
