"""int8 post-training quantization of an exported policy's ONNX file, for
``fxrl.export.to_onnx(exported, path, quantize="int8", calibration=[...])``.

ONNX Runtime's static quantization (``onnxruntime.quantization.quantize_static``): the
weights of the Conv, MatMul and Gemm layers become int8 (per output channel) and their
input activations uint8, with scales set from the ranges (min and max) the activations
take on the calibration inputs, which should be observations the policy really sees
(frames recorded by playing it). Two layers stay float32 by default: the last (the
Q-value or logits head: a few thousand multiply-adds, and the argmax reads it directly)
and, when no input of the policy is uint8, the first (a float observation vector's
features have unequal ranges, which one uint8 scale covers coarsely). Measured on the
CartPole PPO policy of the docs' live page, 4096 held-out frames
(``docs/results/int8_cartpole.jsonl``, ``examples/quantize_cartpole.py``): all layers int8
97.7-98.1% of float32's actions; first and last kept float 99.6-99.7%. Everything else (the
preprocessing of raw screens, argmax) stays float. The result is QDQ-format ONNX
(QuantizeLinear/DequantizeLinear pairs around float ops), which ONNX Runtime's CPU
provider fuses into its int8 kernels when the session loads it; bench/export_bench.py
times it against the QOperator format.

The weights are quantized to 7 bits (``reduce_range``, ONNX Runtime's advice for x86
CPUs without VNNI): such CPUs multiply uint8 activations by int8 weights with an
instruction that adds pairs of products in 16 bits and saturates, so full 8-bit weights
give answers there that a VNNI CPU does not. On a 2-core AMD EPYC without VNNI (family
25, model 1) the CartPole policy above picked float32's action on 99.6% of the held-out
frames with 8-bit weights and 99.7% with 7-bit ones (``weight_bits`` in the same file);
with 7 bits no pair overflows, so every x86 CPU computes the same integers and a file
picks the same actions wherever it is deployed.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fxrl._errors import unknown
from fxrl._optional import require

QUANTIZE = ("int8",)
OP_TYPES = ("Conv", "MatMul", "Gemm")
FORMATS = ("qdq", "qoperator")
FORMAT = "qdq"


def check(quantize: Any, calibration: Any) -> None:
    """Refuse an unknown ``quantize``, quantizing without calibration, and the reverse."""
    if quantize is None:
        if calibration is not None:
            raise ValueError(
                "to_onnx: calibration was given but quantize was not; pass quantize='int8' "
                "to quantize with it, or drop calibration for a float32 file."
            )
        return
    if quantize not in QUANTIZE:
        message = unknown(quantize, QUANTIZE, "quantize", where="to_onnx")
        raise ValueError(f"{message} None (the default) writes float32.")
    if calibration is None or isinstance(calibration, str | bytes) or _empty(calibration):
        raise ValueError(
            "to_onnx(quantize='int8') needs calibration: a list of example inputs the policy "
            "really sees (e.g. a few hundred observations recorded by playing it), whose "
            f"activation ranges set the int8 scales; got {_describe(calibration)}."
        )


def _empty(calibration: Any) -> bool:
    try:
        return len(calibration) == 0
    except TypeError:
        return False  # an iterator: checked when read


def _describe(calibration: Any) -> str:
    if calibration is None:
        return "none"
    try:
        return f"{type(calibration).__name__} of length {len(calibration)}"
    except TypeError:
        return type(calibration).__name__


def feeds(exported: Any, calibration: Any) -> list[dict[str, np.ndarray]]:
    """``{input name: array}`` for each calibration entry, checked like a call.

    With one argument (``policy(params, obs)``) an entry is that argument; with several,
    a tuple of them in order (or a dict by argument or input name).
    """
    arg_names = [a["name"] for a in exported.meta["args"]]
    out = []
    for i, entry in enumerate(calibration):
        if len(arg_names) == 1:
            args, kwargs = (entry,), {}
        elif isinstance(entry, Mapping):
            args, kwargs = (), dict(entry)
        elif isinstance(entry, tuple | list):
            args, kwargs = tuple(entry), {}
        else:
            raise TypeError(
                f"to_onnx: calibration[{i}] is a {type(entry).__name__}; the policy takes "
                f"{len(arg_names)} arguments {arg_names}, so each entry is a tuple of them "
                "(or a dict by name)."
            )
        try:
            flat = exported.flat_inputs(args, kwargs)
        except (TypeError, ValueError) as e:
            raise type(e)(f"to_onnx: calibration[{i}]: {e}") from None
        names = exported.input_names
        out.append({n: x.detach().cpu().numpy() for n, x in zip(names, flat, strict=True)})
    if not out:
        raise ValueError("to_onnx(quantize='int8'): calibration held no inputs.")
    return out


class _Reader:
    """onnxruntime's CalibrationDataReader over a list of feeds."""

    def __init__(self, items: Sequence[dict[str, np.ndarray]]) -> None:
        self.items, self.i = items, 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self.i >= len(self.items):
            return None
        self.i += 1
        return self.items[self.i - 1]

    def rewind(self) -> None:
        self.i = 0


@contextlib.contextmanager
def _quiet_root() -> Iterator[None]:
    """Hide the quantizer's root-logger notices ("consider pre-processing..."). A handler
    is attached meanwhile so that ``logging.warning`` does not call ``basicConfig()``."""
    root, handler = logging.getLogger(), logging.NullHandler()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)
        root.removeHandler(handler)


def quantize_file(
    source: Path,
    dest: Path,
    items: Sequence[dict[str, np.ndarray]],
    meta: dict[str, Any],
    metadata_key: str,
    fmt: str = FORMAT,
    *,
    float_head: bool = True,
    float_first: bool | None = None,
    symmetric: bool = False,
    per_channel: bool = True,
    reduce_range: bool = True,
    extra_options: Mapping[str, Any] | None = None,
) -> None:
    """Write ``source`` (float32 ONNX) quantized to ``dest``, with ``meta`` as its fxrl
    metadata (``"quantize": "int8"`` added).

    ``float_head`` keeps the last Conv/MatMul/Gemm (the Q-value or logits head) in
    float32; ``float_first`` the first, by default (``None``) when no input of the policy
    is uint8 (a float observation vector, whose features have unequal ranges that one
    uint8 scale covers coarsely; screens of uint8 pixels lose nothing there);
    ``symmetric`` makes activation ranges symmetric about 0; ``per_channel`` gives each
    output channel its own weight scale; ``reduce_range`` quantizes the weights to 7 bits
    (see the module's docstring); ``extra_options`` go to ``quantize_static``.
    """
    onnx = require("onnx", "int8 quantization")
    q = require("onnxruntime.quantization", "int8 quantization")
    CalibrationMethod, QuantFormat, QuantType = q.CalibrationMethod, q.QuantFormat, q.QuantType
    quantize_static = q.quantize_static

    if fmt not in FORMATS:
        raise ValueError(unknown(fmt, FORMATS, "format", where="quantize"))
    graph = onnx.load(str(source)).graph
    layers = [n.name for n in graph.node if n.op_type in OP_TYPES]
    if float_first is None:
        uint8 = onnx.TensorProto.UINT8
        float_first = all(i.type.tensor_type.elem_type != uint8 for i in graph.input)
    exclude = ([layers[-1]] if float_head and layers else []) + (
        [layers[0]] if float_first and layers else []
    )
    # Every quantized layer's result is requantized to uint8 too. Leaving MatMul/Gemm
    # results float ("OpTypesToExcludeOutputQuantization") raised CartPole's agreement a
    # little but made the QDQ Pong network many times slower (an unrecorded check):
    # ONNX Runtime then no longer fuses the dense layer into an int8 kernel.
    extra: dict[str, Any] = {"ActivationSymmetric": symmetric}
    extra.update(extra_options or {})
    with _quiet_root():
        quantize_static(
            str(source),
            str(dest),
            _Reader(items),
            quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator,
            op_types_to_quantize=list(OP_TYPES),
            per_channel=per_channel,
            reduce_range=reduce_range,
            activation_type=QuantType.QUInt8,  # x86: u8 activations x s8 weights (VNNI)
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
            nodes_to_exclude=exclude,
            extra_options=extra,
        )
    model = onnx.load(str(dest))
    props = {p.key: p.value for p in model.metadata_props}
    props[metadata_key] = json.dumps({**meta, "quantize": "int8", "quantize_format": fmt})
    del model.metadata_props[:]
    for key, value in props.items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, str(dest))
