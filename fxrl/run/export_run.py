"""Export a run's trained policy (one seed's params) with ``fxrl.export``.

    export_run("runs/cartpole", "onnx")      # -> runs/cartpole/policy.onnx (+ policy.onnx.json)

The exported function is the algorithm's ``policy(params, obs, mode="mode")``, which takes
raw env observations (its preprocessing is inside), with a dynamic batch dim. A recurrent
algorithm's policy (one with ``initial_carry``) also takes ``carry`` and ``is_init`` and
returns ``(action, carry)``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from fxrl.run.evaluate import is_recurrent, load_run, seed_params

__all__ = ["FORMATS", "export_run"]

FORMATS = {"onnx": ".onnx", "pt2": ".pt2", "aoti": ".aoti.pt2"}


def best_seed(meta: dict[str, Any]) -> int:
    """The seed with the highest latest training return in a checkpoint's header (0 if none)."""
    returns = {int(k): v for k, v in meta.get("returns", {}).items() if v is not None}
    return max(returns, key=lambda s: returns[s]) if returns else 0


def export_run(
    run_dir: str | Path,
    format: str = "onnx",
    *,
    out: str | Path | None = None,
    checkpoint_name: str = "best",
    seed: int | None = None,
) -> Path:
    """Write the policy of one seed of a run as ONNX, a ``torch.export`` ``.pt2`` or AOTI.

    Args:
      run_dir: the run directory.
      format: ``"onnx"`` (ONNX Runtime), ``"pt2"`` (``fxrl.export.load``) or ``"aoti"``
        (AOTInductor, needs a C++ compiler).
      out: the file to write; default ``run_dir/policy.<ext>``.
      checkpoint_name: which checkpoint (``best``, falling back to ``latest``).
      seed: which agent; default the one with the best latest training return.
    Returns:
      The written path (``<path>.json`` next to it records seed, checkpoint and steps).
    """
    from fxrl.export import export, to_aoti, to_onnx

    if format not in FORMATS:
        raise ValueError(f"export: unknown --format {format!r}; expected one of {list(FORMATS)}.")
    run_dir = Path(run_dir)
    if not (run_dir / "checkpoints" / f"{checkpoint_name}.safetensors").exists():
        checkpoint_name = "latest"
    info, algo, state, meta = load_run(run_dir, checkpoint_name)
    seed = best_seed(meta) if seed is None else seed
    if not 0 <= seed < info["num_seeds"]:
        raise ValueError(f"export: --seed {seed} out of range; the run has {info['num_seeds']}.")
    inputs: tuple[Any, ...] = (algo.env.observation_spec.zeros((2,)),)
    if is_recurrent(algo):  # the carry and is_init go in, the next carry comes out
        inputs += (algo.initial_carry((2,)), torch.ones(2, dtype=torch.bool))
    exported = export(algo.policy, seed_params(state, seed), *inputs, dynamic_batch=True)
    path = Path(out) if out is not None else run_dir / f"policy{FORMATS[format]}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if format == "onnx":
        to_onnx(exported, path)
    elif format == "pt2":
        exported.save(path)
    else:
        to_aoti(exported, path)
    record = {"seed": seed, "checkpoint": checkpoint_name, "steps": meta["steps"], "format": format}
    path.with_name(path.name + ".json").write_text(json.dumps(record) + "\n")
    return path
