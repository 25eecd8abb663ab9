"""``check_export``: the eager function and its exported, ONNX and AOTInductor versions agree.

check = check_export(policy, params, obs, spec=env.observation_spec)
check.onnx(obs.numpy())          # the artifacts stay usable (and testable) afterwards
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fxrl import specs, tree
from fxrl.export import (
    AotiPolicy,
    ExportedPolicy,
    OnnxPolicy,
    export,
    load_aoti,
    load_onnx,
    to_aoti,
    to_onnx,
)
from fxrl.testing.checks import assert_trees_close
from fxrl.testing.strategies import from_spec, keys

__all__ = ["ExportCheck", "check_export"]

TARGETS = ("exported", "onnx", "aoti")


class ExportCheck(NamedTuple):
    """What ``check_export`` built: the exported policy and the loaded deployments."""

    exported: ExportedPolicy
    onnx: OnnxPolicy | None
    aoti: AotiPolicy | None
    onnx_path: Path | None
    aoti_path: Path | None


def _first_leaf_spec(spec: Any) -> Any:
    if isinstance(spec, specs.Composite):
        sub = spec.specs
        return _first_leaf_spec(next(iter(sub.values())) if isinstance(sub, dict) else sub[0])
    return spec


def _like(example: torch.Tensor, batch: int | None) -> st.SearchStrategy[torch.Tensor]:
    """Tensors shaped like ``example`` (leading dim ``batch`` if given), values in its range.

    Values come from a numpy generator seeded by hypothesis: cheap for screens of 100k
    pixels, and a failure still replays from its seed.
    """
    shape = tuple(example.shape) if batch is None else (batch, *example.shape[1:])
    x = example.detach().double()
    lo = float(x.min()) if x.numel() else 0.0
    hi = float(x.max()) if x.numel() else 0.0

    def build(seed: int) -> torch.Tensor:
        g = np.random.default_rng(seed)
        if example.dtype == torch.bool:
            values = g.random(shape) < 0.5
        elif example.dtype.is_floating_point:
            values = g.uniform(*((lo - 1.0, hi + 1.0) if lo == hi else (lo, hi)), shape)
        else:
            values = g.integers(int(lo), int(hi) + 1, shape)
        return torch.from_numpy(np.asarray(values)).to(example.dtype)

    return st.integers(0, 2**32 - 1).map(build)


def _argument(example: Any, spec: Any, batch: int | None, is_key: bool) -> st.SearchStrategy[Any]:
    if is_key:
        return keys()
    if spec is not None:
        lead = tree.leaves(example)[0]
        extra = lead.ndim - len(_first_leaf_spec(spec).shape)
        batch_shape = tuple(lead.shape[:extra])
        if batch is not None and batch_shape:
            batch_shape = (batch, *batch_shape[1:])
        return from_spec(spec, batch_shape)
    spec_tree = tree.structure(example)
    parts = [st.none() if leaf is None else _like(leaf, batch) for leaf in tree.leaves(example)]
    return st.tuples(*parts).map(lambda vs: tree.unflatten(spec_tree, list(vs)))


def _inputs(
    exported: ExportedPolicy, examples: Sequence[Any], spec: Any
) -> st.SearchStrategy[list[Any]]:
    arg_names = [a["name"] for a in exported.meta["args"]]
    per_arg = list(spec or ()) if spec is None or isinstance(spec, list | tuple) else [spec]
    per_arg += [None] * (len(arg_names) - len(per_arg))
    values = list(examples)
    if len(values) < len(arg_names):  # the key added by mode="random"
        values.append(torch.zeros(2, dtype=torch.int64))
    added_key = len(examples) < len(arg_names)

    def draw(batch: int | None) -> st.SearchStrategy[list[Any]]:
        return st.tuples(
            *(
                _argument(v, s, batch, is_key=(n == "key" and (added_key or s is None)))
                for n, v, s in zip(arg_names, values, per_arg, strict=True)
            )
        ).map(list)

    if exported.meta["dynamic_batch"]:
        return st.integers(1, 8).flatmap(draw)
    return draw(None)


def _numpy(x: Any) -> Any:
    return tree.map(lambda v: v if v is None else v.numpy(), x)


def check_export(
    fn: Callable[..., Any],
    params: Any,
    *example_inputs: Any,
    spec: Any = None,
    mode: str = "mode",
    dynamic_batch: bool = False,
    targets: Sequence[str] = TARGETS,
    max_examples: int = 10,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    directory: str | Path | None = None,
    aoti_options: Mapping[str, Any] | None = None,
) -> ExportCheck:
    """Export ``fn`` and check eager, exported, ONNX Runtime and AOTInductor outputs agree.

    Inputs are drawn by hypothesis: from ``spec`` when given (one spec for the first
    input, or a list with one spec or None per input), else shaped like the examples
    with values in their range; the ``key`` of ``mode="random"`` is drawn too, so the
    deployed policy must draw what the eager one draws. Integer and bool outputs must
    be equal, float outputs close (``rtol``, ``atol``).

    Args:
      targets: any of ``"exported"``, ``"onnx"``, ``"aoti"`` (AOTI compiles C++: slow).
      directory: where the ``.onnx`` and ``.pt2`` files go (a temporary directory if None).
      aoti_options: inductor settings for the AOTI target, passed to ``to_aoti``.
    Returns:
      ``ExportCheck(exported, onnx, aoti, onnx_path, aoti_path)`` for further checks.
    """
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown:
        raise ValueError(f"check_export: unknown targets {unknown}; choose from {list(TARGETS)}.")
    exported = export(fn, params, *example_inputs, dynamic_batch=dynamic_batch, mode=mode)
    folder = Path(directory or tempfile.mkdtemp(prefix="fxrl_export_"))
    folder.mkdir(parents=True, exist_ok=True)
    stem = exported.meta["function"]
    onnx_path = aoti_path = None
    onnx = aoti = None
    if "onnx" in targets:
        onnx_path = to_onnx(exported, folder / f"{stem}.onnx")
        onnx = load_onnx(str(onnx_path), threads=1)
    if "aoti" in targets:
        aoti_path = to_aoti(exported, folder / f"{stem}.pt2", options=aoti_options)
        aoti = load_aoti(aoti_path)

    def outputs(args: list[Any]) -> dict[str, Any]:
        got = {}
        if "exported" in targets:
            got["exported"] = tree.leaves(exported(*args))
        if onnx is not None:
            flat = tree.leaves(onnx(*[_numpy(a) for a in args]))
            got["onnx"] = [torch.from_numpy(np.asarray(v)) for v in flat]
        if aoti is not None:
            got["aoti"] = tree.leaves(aoti(*args))
        return got

    health = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]

    @settings(max_examples=max_examples, deadline=None, suppress_health_check=health)
    @given(args=_inputs(exported, example_inputs, spec))
    def agree(args: list[Any]) -> None:
        assert exported.eager is not None
        expected = dict(zip(exported.output_names, tree.leaves(exported.eager(*args)), strict=True))
        for target, flat in outputs(args).items():
            got = dict(zip(exported.output_names, flat, strict=True))
            try:
                assert_trees_close(got, expected, rtol=rtol, atol=atol)
            except AssertionError as e:
                raise AssertionError(f"check_export: {target} disagrees with eager: {e}") from None

    agree()
    return ExportCheck(exported, onnx, aoti, onnx_path, aoti_path)
