"""``fxrl export RUN --format web --out SITE``: a static web page playing a run's policy.

    export_site("runs/cartpole", "site")    # then: cd site && python -m http.server

SITE holds ``index.html`` and its script, onnxruntime-web's JavaScript and wasm files, the
policy as ONNX (preprocessing included, as ``fxrl export --format onnx`` writes it), the
env's ``reset`` and ``step`` (and ``render``) as ONNX (``fxrl.web.env_onnx``) and
``site.json``, the manifest the page reads. Nothing is fetched from elsewhere when it runs.

The page's JavaScript API (``window.fxrl``)::

    fxrl.ready                    // Promise<void>: the models are loaded
    fxrl.play(seed, maxSteps?)    // Promise<{return, length, actions}>

``play(seed)`` plays, greedily, the episode that ``reference_episode`` plays in torch:
the one ``fxrl.envs.make(env_id, auto_reset=False, episode_stats=False)`` starts with
``env.reset(fxrl.random.key(seed))``, time limit kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from fxrl import envs, random, specs
from fxrl.export import _quiet
from fxrl.run.checkpoint import WriteError
from fxrl.run.config_io import read_run_config
from fxrl.web.env_onnx import export_env

__all__ = [
    "ORT_FILES",
    "WebExportError",
    "check_run_env",
    "export_site",
    "find_onnxruntime_web",
    "reference_episode",
    "web_envs",
    "write_site",
]

STATIC = Path(__file__).parent / "static"
# onnxruntime-web's wasm-only build: the loader script, the Emscripten glue it imports and
# the SIMD wasm binary (multi-threaded where the page is cross-origin isolated, else one
# thread: the same file serves both).
ORT_FILES = ("ort.wasm.min.js", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
ORT_ENV_VAR = "FXRL_ONNXRUNTIME_WEB"
# Frames per second of gymnasium's human rendering (its ``metadata["render_fps"]``): the
# page's 1x speed.
FPS = {"CartPole-v1": 50, "Acrobot-v1": 15, "Pendulum-v1": 30}


class WebExportError(ValueError):
    """The run or the machine cannot produce a web export (the message says why)."""


def web_envs() -> list[str]:
    """The env ids a run may be exported for the web with: fxrl's pure envs."""
    return envs.registered()


def find_onnxruntime_web() -> Path:
    """The ``dist`` folder of the npm package onnxruntime-web.

    Looked for in ``$FXRL_ONNXRUNTIME_WEB``, then ``node_modules/onnxruntime-web/dist``
    in the current folder and in the fxrl checkout (``make web-deps`` installs it there).
    """
    here = Path(__file__).resolve().parents[2]
    candidates = [Path(os.environ[ORT_ENV_VAR])] if os.environ.get(ORT_ENV_VAR) else []
    candidates += [d / "node_modules" / "onnxruntime-web" / "dist" for d in (Path.cwd(), here)]
    for c in candidates:
        if all((c / f).is_file() for f in ORT_FILES):
            return c
    raise WebExportError(
        "export --format web: onnxruntime-web not found (looked in "
        f"{', '.join(map(str, candidates))}); install it with `npm install onnxruntime-web` "
        f"(or `make web-deps` in an fxrl checkout), or set {ORT_ENV_VAR} to its dist folder."
    )


def _check_env(env_id: Any) -> str:
    if env_id not in web_envs():
        raise WebExportError(
            f"export --format web: env {env_id!r} cannot run in a web page (gymnasium and "
            f"ALE envs run outside torch); fxrl's pure envs can: {', '.join(web_envs())}."
        )
    return env_id


def _run_env_id(run_dir: Path) -> Any:
    """The env id in a run's config.json, read before the Config is rebuilt (which would
    reject a host env's id with a message about training, not about the web)."""
    try:
        return json.loads((run_dir / "config.json").read_text())["config"].get("env")
    except (OSError, ValueError, KeyError, AttributeError):
        return read_run_config(run_dir)["config_json"].get("env")  # its errors are clear


def check_run_env(run_dir: str | Path) -> str:
    """A run's env id, if the web can run it; else a ``WebExportError`` naming those it can
    (read from config.json before anything rebuilds the run's Config, whose own error
    would be about training)."""
    return _check_env(_run_env_id(Path(run_dir)))


def export_site(
    run_dir: str | Path,
    out: str | Path,
    *,
    checkpoint_name: str = "best",
    seed: int | None = None,
) -> Path:
    """Write the static site playing one seed of a run in its pure env.

    Args:
      run_dir: the run directory.
      out: the site folder to write (created; files of an earlier export are replaced).
      checkpoint_name: which checkpoint (``best``, falling back to ``latest``).
      seed: which agent; default the one with the best latest training return.
    Returns:
      ``out``. Serve it over http (``python -m http.server`` in it) and open index.html.
    """
    from fxrl.run.evaluate import is_recurrent, load_run
    from fxrl.run.export_run import export_run

    run_dir, out = Path(run_dir), Path(out)
    env_id = check_run_env(run_dir)
    info = read_run_config(run_dir)
    find_onnxruntime_web()  # before minutes of exporting
    if not (run_dir / "checkpoints" / f"{checkpoint_name}.safetensors").exists():
        checkpoint_name = "latest"
    _, algo, _, _ = load_run(run_dir, checkpoint_name)
    if is_recurrent(algo):
        raise WebExportError(
            "export --format web: recurrent policies (a carry between steps) are not "
            "supported by the web page yet; export a feed-forward run."
        )
    with _staged(out) as stage:
        with _quiet("onnx_ir"):
            policy = export_run(
                run_dir, "onnx", out=stage / "policy.onnx", checkpoint_name=checkpoint_name,
                seed=seed,
            )  # fmt: skip
        record = json.loads(policy.with_name(policy.name + ".json").read_text())
        policy.with_name(policy.name + ".json").unlink()
        run = {"dir": run_dir.resolve().name, "algorithm": info["algorithm"]} | record
        _write_site(policy, env_id, stage, run)
    return out


def write_site(
    policy_onnx: str | Path, env_id: str, out: str | Path, *, run: dict | None = None
) -> Path:
    """Write the site for any greedy policy exported to ONNX, in the pure env ``env_id``.

    Args:
      policy_onnx: ``fxrl.export.to_onnx`` of ``export(policy, params, obs, dynamic_batch=
        True)``: one input, observations [batch, *obs_shape]; one output, actions [batch, ...].
      env_id: a pure env id (``web_envs()``).
      out: the site folder (created); the policy is copied in as ``policy.onnx``.
      run: what the page's header says about the policy (``export_site`` puts the run's
        algorithm, directory, seed, checkpoint and steps there).
    Returns:
      ``out``.
    """
    env_id, out = _check_env(env_id), Path(out)
    find_onnxruntime_web()
    with _staged(out) as stage:
        _write_site(Path(policy_onnx), env_id, stage, run)
    return out


def _write_site(policy_onnx: Path, env_id: str, out: Path, run: dict | None) -> None:
    """Write the site's files into ``out`` (a staging folder)."""
    ort_dir = find_onnxruntime_web()
    if policy_onnx.resolve() != (out / "policy.onnx").resolve():
        shutil.copyfile(policy_onnx, out / "policy.onnx")
    env = envs.make(env_id, auto_reset=False, episode_stats=False)
    with _quiet("onnx_ir"):
        manifest = export_env(env, out)
    manifest["models"]["policy"] = "policy.onnx"
    manifest.update(
        env_id=env_id,
        fps=FPS.get(env_id, 30),
        discrete=isinstance(env.action_spec, specs.Discrete),
        run=run,
    )
    for f in ORT_FILES:
        shutil.copyfile(ort_dir / f, out / f)
    for f in STATIC.iterdir():
        if f.is_file():
            shutil.copyfile(f, out / f.name)
    (out / "site.json").write_text(json.dumps(manifest, indent=1) + "\n")


@contextlib.contextmanager
def _staged(out: Path) -> Iterator[Path]:
    """``with _staged(out) as stage:`` write the site into ``stage``, a new folder beside
    ``out``; at the end each file is renamed into ``out`` (site.json last, so a page
    never reads a manifest ahead of its files). A write that fails (a full disk, a
    quota) leaves ``out`` as it was, removes ``stage`` and raises ``WriteError``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    except OSError as e:
        raise WriteError(out, e) from e
    try:
        try:
            yield stage
        except OSError as e:
            raise WriteError(out, e) from e
        out.mkdir(exist_ok=True)
        names = sorted((f.name for f in stage.iterdir()), key=lambda n: n == "site.json")
        for name in names:
            os.replace(stage / name, out / name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


@torch.no_grad()
def reference_episode(
    policy: Callable[[torch.Tensor], torch.Tensor],
    env_id: str,
    seed: int,
    max_steps: int | None = None,
) -> dict[str, Any]:
    """The episode the page's ``fxrl.play(seed, maxSteps)`` plays, played in torch.

    Args:
      policy: ``policy(obs [1, *obs_shape]) -> action [1, ...]``, greedy, e.g.
        ``lambda obs: algo.policy(params, obs, mode="mode")``.
      env_id: a pure env id (``web_envs()``).
      seed: the episode is ``env.reset(fxrl.random.key(seed))``.
      max_steps: stop after this many steps even if the episode goes on.
    Returns:
      ``{"return": float, "length": int, "actions": list}`` (as the page: the return is the
      float64 sum of the float32 rewards; a one-dim continuous action is a float).
    """
    env = envs.make(_check_env(env_id), auto_reset=False, episode_stats=False)
    state, ts = env.reset(random.key(seed))
    total, actions = 0.0, []
    while max_steps is None or len(actions) < max_steps:
        action = policy(ts.obs[None])[0]
        state, ts = env.step(state, action)
        actions.append(action.item() if action.numel() == 1 else action.tolist())
        total += float(ts.reward)
        if bool(ts.terminated | ts.truncated):
            break
    return {"return": total, "length": len(actions), "actions": actions}
