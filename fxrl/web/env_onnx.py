"""A pure env's ``reset``, ``step`` (and ``render`` where it has one) as ONNX models.

    manifest = export_env(envs.make("CartPole-v1", auto_reset=False, episode_stats=False), d)

writes ``d/reset.onnx``, ``d/step.onnx`` (and ``d/render.onnx``) and returns their JSON
manifest. The state pytree is flattened into a list of tensors named ``state_<path>``
(``state_x``, ``state_params_gravity``...): ``reset`` takes ``key`` int64 [2] and returns
``next_state_<path>`` tensors plus ``obs``, ``reward``, ``terminated`` and ``truncated``;
``step`` takes the ``state_<path>`` tensors and ``action`` and returns the same outputs, so
a caller feeds each ``next_state_<path>`` output back as input ``state_<path>`` without
looking inside. ``render`` takes the state tensors and returns ``frame`` uint8 [H, W, 3].
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from fxrl import random, tree
from fxrl._optional import require
from fxrl.envs.core import Env
from fxrl.export import export, to_onnx

__all__ = ["export_env", "has_render"]

_STEP_OUTPUTS = ("obs", "reward", "terminated", "truncated")


def _dtype(x: torch.Tensor) -> str:
    return str(x.dtype).removeprefix("torch.")


def _entry(name: str, x: torch.Tensor) -> dict[str, Any]:
    return {"name": name, "shape": list(x.shape), "dtype": _dtype(x)}


def has_render(env: Env, state: Any) -> bool:
    """Whether ``env.render(state)`` is defined (the env-suite's pure render)."""
    try:
        env.render(state)
    except NotImplementedError:
        return False
    return True


def export_env(env: Env, out_dir: str | Path, *, render: bool = True) -> dict[str, Any]:
    """Write ``env``'s reset and step (and render) as ONNX models into ``out_dir``.

    Args:
      env: an unbatched pure env that does not reset itself (``fxrl.envs.make(id,
        auto_reset=False, episode_stats=False)``: the episode a player sees ends).
      out_dir: the folder to write ``reset.onnx``, ``step.onnx`` and ``render.onnx`` to.
      render: also export ``env.render`` when the env defines it.
    Returns:
      The manifest: ``state`` (name, shape, dtype of each state tensor, in order), ``obs``
      and ``action`` (shape, dtype), ``models`` (file of ``reset``, ``step``, ``render`` or
      None) and ``frame`` (the render's shape, or None).
    """
    if not isinstance(env, Env) or env.batch_shape != () or env.auto_resets:
        raise ValueError(
            f"export_env: expected one unbatched pure env that does not reset itself, got "
            f"{env!r}. Use fxrl.envs.make(id, auto_reset=False, episode_stats=False)."
        )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state, first = env.reset(random.key(0))
    spec = tree.structure(state)
    names = [f"state_{n}" for n in tree.path_names(state)]

    def unflatten(leaves: dict[str, torch.Tensor]) -> Any:
        return tree.unflatten(spec, [leaves[n] for n in names])

    def outputs(new_state: Any, ts: Any) -> dict[str, torch.Tensor]:
        out = dict(zip(("next_" + n for n in names), tree.leaves(new_state), strict=True))
        out.update({k: getattr(ts, k) for k in _STEP_OUTPUTS})
        return out

    def reset_fn(_: Any, key: torch.Tensor) -> dict[str, torch.Tensor]:
        return outputs(*env.reset(key))

    def step_fn(_: Any, state: dict[str, torch.Tensor], action: Any) -> dict[str, torch.Tensor]:
        return outputs(*env.step(unflatten(state), action))

    leaves = dict(zip(names, tree.leaves(state), strict=True))
    action = env.action_spec.zeros()
    _save(export(reset_fn, {}, random.key(0)), out_dir / "reset.onnx")
    _save(export(step_fn, {}, leaves, action), out_dir / "step.onnx")
    frame = None
    if render and has_render(env, state):

        def render_fn(_: Any, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
            return {"frame": env.render(unflatten(state))}

        frame = list(env.render(state).shape)
        # Unoptimized: constant folding turns the drawing's index grids into initializers
        # (CartPole's render: 2 MB instead of 0.2 MB); onnxruntime optimizes it when loading.
        _save(export(render_fn, {}, leaves), out_dir / "render.onnx", optimize=False)
    return {
        "state": [_entry(n, leaves[n]) for n in names],
        "obs": _entry("obs", first.obs),
        "action": _entry("action", action),
        "models": {
            "reset": "reset.onnx",
            "step": "step.onnx",
            "render": "render.onnx" if frame is not None else None,
        },
        "frame": frame,
    }


def _save(exported: Any, path: Path, optimize: bool = True) -> None:
    """``to_onnx``, then ``Where`` over bool tensors rewritten over uint8: onnxruntime
    (its CPU kernels, which onnxruntime-web compiles to wasm) has no bool ``Where``, which
    grid envs (MinAtar's bricks and walls) select with."""
    onnx = require("onnx", "fxrl export --format web")
    TensorProto, helper = onnx.TensorProto, onnx.helper

    to_onnx(exported, path, optimize=optimize)
    model = onnx.load(str(path))
    graph = model.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.value_info, *graph.output]}
    nodes, changed = [], False
    for node in graph.node:
        if node.op_type != "Where" or types.get(node.output[0]) != TensorProto.BOOL:
            nodes.append(node)
            continue
        cond, a, b = node.input
        out = node.output[0]
        u8 = [f"{out}__u8_{i}" for i in range(3)]
        nodes += [
            helper.make_node("Cast", [a], [u8[0]], to=TensorProto.UINT8),
            helper.make_node("Cast", [b], [u8[1]], to=TensorProto.UINT8),
            helper.make_node("Where", [cond, u8[0], u8[1]], [u8[2]], name=node.name),
            helper.make_node("Cast", [u8[2]], [out], to=TensorProto.BOOL),
        ]
        changed = True
    if changed:
        del graph.node[:]
        graph.node.extend(nodes)
        onnx.save(model, str(path))
