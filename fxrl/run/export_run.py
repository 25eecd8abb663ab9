"""Export a run's trained policy (one seed's params) with ``fxrl.export``.

    export_run("runs/cartpole", "onnx")      # -> runs/cartpole/policy.onnx (+ policy.onnx.json)
    export_run("runs/cartpole", "onnx", quantize="int8")   # int8, calibrated on played frames

The exported function is the algorithm's ``policy(params, obs, mode="mode")``, which takes
raw env observations (its preprocessing is inside), with a dynamic batch dim. A recurrent
algorithm's policy (one with ``initial_carry``) also takes ``carry`` and ``is_init`` and
returns ``(action, carry)``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fxrl import envs, random, specs, tree
from fxrl._optional import require
from fxrl.envs.registry import is_host_id
from fxrl.run.checkpoint import atomic_write, written_atomically
from fxrl.run.evaluate import is_recurrent, load_run, seed_params

__all__ = ["FORMATS", "export_run", "raw_screens", "record_inputs"]

FORMATS = {"onnx": ".onnx", "pt2": ".pt2", "aoti": ".aoti.pt2"}
# Calibration of an int8 export: CALIBRATION_ENVS episodes played side by side for
# CALIBRATION_STEPS greedy steps (auto-reset), one calibration batch per CHUNK steps; the
# agreement check plays CHECK_ENVS others as long.
CALIBRATION_ENVS, CALIBRATION_STEPS, CHUNK, CHECK_ENVS = 64, 256, 8, 16


def best_seed(meta: dict[str, Any]) -> int:
    """The seed with the highest latest training return in a checkpoint's header (0 if none)."""
    returns = {int(k): v for k, v in meta.get("returns", {}).items() if v is not None}
    return max(returns, key=lambda s: returns[s]) if returns else 0


@torch.no_grad()
def record_inputs(
    algo: Any, params: Any, key: torch.Tensor, num_envs: int, steps: int
) -> list[tuple[Any, ...]]:
    """The policy's inputs while it plays greedily in ``algo.env``, one tuple per step.

    ``num_envs`` envs side by side from ``key`` for ``steps`` steps: tuples ``(obs,)``
    with obs [num_envs, ...], or ``(obs, carry, is_init)`` for a recurrent policy.
    """
    env = envs.batch(algo.env, num_envs)
    state, ts = env.reset(key)
    recurrent = is_recurrent(algo)
    if recurrent:
        carry, is_init = algo.initial_carry((num_envs,)), torch.ones(num_envs, dtype=torch.bool)
    out: list[tuple[Any, ...]] = []
    for _ in range(steps):
        if recurrent:
            out.append((ts.obs, carry, is_init))
            action, carry = algo.policy(params, ts.obs, carry, is_init, mode="mode")
        else:
            out.append((ts.obs,))
            action = algo.policy(params, ts.obs, mode="mode")
        state, ts = env.step(state, action)
        if recurrent:
            is_init = ts.terminated | ts.truncated
    return out


def _chunks(inputs: list[tuple[Any, ...]], size: int) -> list[tuple[Any, ...]]:
    """Consecutive steps' inputs concatenated along the batch dim, ``size`` steps a chunk."""
    return [
        tuple(
            tree.map(lambda *xs: torch.cat(xs), *parts)
            for parts in zip(*inputs[i : i + size], strict=True)
        )
        for i in range(0, len(inputs), size)
    ]


@torch.no_grad()
def _agreement(
    exported: Any, path: Path, held_out: list[tuple[Any, ...]], discrete: bool
) -> dict[str, Any]:
    """How the int8 file's first output (the action) compares with the float32 program's
    on held-out inputs: the fraction of equal actions, or the largest difference."""
    from fxrl.export import load_onnx

    policy, same, total, worst = load_onnx(path), 0, 0, 0.0
    for inputs in held_out:
        flat = exported.flat_inputs(inputs, {})
        want = exported.module(*flat)[0]
        values = {n: x.numpy() for n, x in zip(exported.input_names, flat, strict=True)}
        got = torch.from_numpy(np.asarray(policy.run_flat(values)[0]))
        total += want.shape[0]
        if discrete:
            same += int((got == want).reshape(want.shape[0], -1).all(-1).sum())
        else:
            worst = max(worst, float((got.float() - want.float()).abs().max()))
    if discrete:
        return {"frames": total, "same_action": round(same / total, 5)}
    return {"frames": total, "max_abs_diff": worst}


def raw_screens(batch: int, frames: int = 4) -> torch.Tensor:
    """Zero raw ALE screens ``[batch, frames, 210, 160, 3]`` uint8 (an example input)."""
    return torch.zeros(batch, frames, 210, 160, 3, dtype=torch.uint8)


def _raw_screen_policy(policy: Any) -> Any:
    """``policy`` of an ``ale:<Game>`` run taking the last 4 raw screens ``[..., 4, 210,
    160, 3]`` uint8: ALE's grey 84x84 frames made inside (``atari_screen``, what the
    training env's C++ preprocessing gives with ``maxpool=False``), then the policy."""
    from fxrl.envs.atari_vector import atari_screen

    screen = atari_screen()

    def from_screens(params: Any, screens: torch.Tensor, key: Any = None, mode: str = "mode"):
        return policy(params, screen(screens).squeeze(-3), key, mode=mode)

    return from_screens


def export_run(
    run_dir: str | Path,
    format: str = "onnx",
    *,
    out: str | Path | None = None,
    checkpoint_name: str = "best",
    seed: int | None = None,
    quantize: str | None = None,
) -> Path:
    """Write the policy of one seed of a run as ONNX, a ``torch.export`` ``.pt2`` or AOTI.

    Args:
      run_dir: the run directory.
      format: ``"onnx"`` (ONNX Runtime), ``"pt2"`` (``fxrl.export.load``) or ``"aoti"``
        (AOTInductor, needs a C++ compiler).
      out: the file to write; default ``run_dir/policy.<ext>``.
      checkpoint_name: which checkpoint (``best``, falling back to ``latest``).
      seed: which agent; default the one with the best latest training return.
      quantize: ``"int8"`` (ONNX only): calibrated on 16384 observations of the policy
        playing greedily in the run's env (64 envs, 256 steps); the record then also says
        how often the int8 file's actions equal the float32 policy's on 4096 others (16
        envs, 256 steps).
    Returns:
      The written path (``<path>.json`` next to it records seed, checkpoint and steps).
    """
    from fxrl.export import QUANTIZE, export, to_aoti, to_onnx

    if format not in FORMATS:
        raise ValueError(f"export: unknown --format {format!r}; expected one of {list(FORMATS)}.")
    if quantize is not None and quantize not in QUANTIZE:
        raise ValueError(
            f"export: unknown --quantize {quantize!r}; expected one of {list(QUANTIZE)}."
        )
    if quantize is not None and format != "onnx":
        raise ValueError(
            f"export: --quantize {quantize} needs --format onnx (ONNX Runtime's int8 kernels); "
            f"--format {format} cannot be quantized."
        )
    if format == "onnx":  # the ONNX packages, before the policy is exported
        for module in ("onnx", "onnxscript", *(("onnxruntime",) if quantize else ())):
            require(module, "fxrl export --format onnx")
    run_dir = Path(run_dir)
    if not (run_dir / "checkpoints" / f"{checkpoint_name}.safetensors").exists():
        checkpoint_name = "latest"
    info, algo, state, meta = load_run(run_dir, checkpoint_name)
    seed = best_seed(meta) if seed is None else seed
    if not 0 <= seed < info["num_seeds"]:
        raise ValueError(f"export: --seed {seed} out of range; the run has {info['num_seeds']}.")
    env_id = info["config"].env
    if quantize is not None and is_host_id(env_id):
        raise ValueError(
            f"export: --quantize calibrates on frames played in the run's pure env; {env_id} "
            "is a host env. Export it without --quantize."
        )
    params = seed_params(state, seed)
    policy = algo.policy
    inputs: tuple[Any, ...] = (algo.env.observation_spec.zeros((2,)),)
    if env_id.startswith("ale:"):  # raw screens in: ALE's preprocessing inside the program
        policy, inputs = _raw_screen_policy(algo.policy), (raw_screens(2),)
    if is_recurrent(algo):  # the carry and is_init go in, the next carry comes out
        inputs += (algo.initial_carry((2,)), torch.ones(2, dtype=torch.bool))
    exported = export(policy, params, *inputs, dynamic_batch=True)
    path = Path(out) if out is not None else run_dir / f"policy{FORMATS[format]}"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"seed": seed, "checkpoint": checkpoint_name, "steps": meta["steps"], "format": format}
    if env_id.startswith("ale:"):
        record["input"] = (
            "the last 4 raw screens [B, 4, 210, 160, 3] uint8, oldest first; at a game's "
            "start (and after a lost life, as in training) its first screen repeated"
        )
        record["game"] = (
            "as in training (CleanRL's wrappers): 4 frames a step, no sticky actions; a "
            "game starts with 1 to 30 NOOP frames, a lost life is followed by a NOOP step, "
            "and both by a FIRE step and an action-2 step for games that need FIRE, before "
            "the policy acts: the policy was never taught to press FIRE there itself"
        )
    # written beside `path` and renamed over it: a failed write (a full disk) leaves the
    # file there was as it was and raises WriteError
    with written_atomically(path) as tmp:
        if format == "onnx" and quantize is not None:
            key_cal, key_check = random.split(random.fold_in(random.key(seed), 8)).unbind(0)
            played = record_inputs(algo, params, key_cal, CALIBRATION_ENVS, CALIBRATION_STEPS)
            # One input per entry for policy(params, obs), a tuple of inputs for more.
            calibration = [c[0] if len(c) == 1 else c for c in _chunks(played, CHUNK)]
            to_onnx(exported, tmp, quantize=quantize, calibration=calibration)
            held_out = record_inputs(algo, params, key_check, CHECK_ENVS, CALIBRATION_STEPS)
            discrete = isinstance(algo.env.action_spec, specs.Discrete)
            record["quantize"] = quantize
            record["calibration_frames"] = CALIBRATION_ENVS * CALIBRATION_STEPS
            record["check"] = _agreement(exported, tmp, _chunks(held_out, CHUNK), discrete)
        elif format == "onnx":
            to_onnx(exported, tmp)
        elif format == "pt2":
            exported.save(tmp)
        else:
            to_aoti(exported, tmp)
    atomic_write(path.with_name(path.name + ".json"), (json.dumps(record) + "\n").encode())
    return path
