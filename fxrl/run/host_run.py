"""Run directories of agents trained from Python on a host env (ALE Pong), for the CLI.

    from fxrl.run import host_run
    host_run.save_host_run(
        "runs/pong", params, algorithm="dqn", env="ALE/Pong-v5",
        network={"name": "atari_dqn", "num_actions": 6, "in_channels": 1},
        preprocess=[["to_tensor_image"], ["resize", 84, 84, "nearest"], ["grayscale"]],
        steps=frames,
    )

Then ``fxrl eval runs/pong --video pong.gif`` plays the greedy policy in
``envs.atari("Pong", render_mode="rgb_array")`` and records ALE's own frames;
``fxrl export runs/pong --format onnx`` writes ``runs/pong/policy.onnx`` (raw screens in,
preprocessing inside, a dynamic batch dim); ``fxrl eval runs/pong --video pong.gif --onnx``
records the same from that file in ONNX Runtime; ``fxrl eval runs/pong`` gives greedy
returns of whole ALE episodes.

Such a run is written by the Python that trained it (``examples/dqn_pong_video.py``); a run
of ``fxrl train dqn --env ale:Pong`` (``fxrl.algorithms.host``) is an ordinary run
directory instead. Its ``config.json`` names the algorithm, the host env
(``ALE/<Game>-v5``) and what rebuilds the greedy policy as data: the network (a name from
``NETWORKS`` and its arguments) and the per-screen preprocessing (a list of
``[name, *args]`` from ``PREPROCESS``, applied first to last). The params are
``checkpoints/latest.safetensors`` (``fxrl.run.checkpoint``: atomic, no pickle). Nothing
else of the training (optimizer, replay buffer, the env's state) is kept: the run can be
evaluated, recorded and exported, not resumed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from fxrl import envs, exploration, nn, random, tree
from fxrl import transforms as T
from fxrl.run import checkpoint
from fxrl.run.checkpoint import atomic_write
from fxrl.run.config_io import exactness

__all__ = [
    "KIND",
    "NETWORKS",
    "PREPROCESS",
    "HostRun",
    "build_network",
    "build_preprocess",
    "evaluate_host_run",
    "export_host_run",
    "is_host_run",
    "load_host_run",
    "record_host_run",
    "save_host_run",
]

KIND = "host"
# The networks a host run may name, with the keyword arguments each takes.
NETWORKS: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
    "atari_dqn": (nn.atari_dqn, ("num_actions", "in_channels")),
}
# Per-observation transforms without state (a frame stack would need the episode's past).
PREPROCESS: dict[str, Callable[..., Any]] = {
    "to_tensor_image": T.to_tensor_image,
    "resize": T.resize,
    "grayscale": T.grayscale,
}
ALGORITHMS = ("dqn",)  # greedy = argmax of the network's Q-values
_ENV_ID = re.compile(r"^ALE/([A-Za-z0-9]+)-v5$")


def _game(env: str) -> str:
    m = _ENV_ID.fullmatch(env) if isinstance(env, str) else None
    if m is None:
        raise ValueError(f"host run: env {env!r} is not an ALE id; expected 'ALE/<Game>-v5'.")
    return m.group(1)


def build_network(spec: Any) -> Any:
    """The network a host run's ``config["network"]`` names: ``{"name": ..., **kwargs}``."""
    if not isinstance(spec, dict) or spec.get("name") not in NETWORKS:
        name = spec.get("name") if isinstance(spec, dict) else spec
        raise ValueError(f"host run: unknown network {name!r}; expected one of {list(NETWORKS)}.")
    make, allowed = NETWORKS[spec["name"]]
    extra = sorted(set(spec) - {"name"} - set(allowed))
    if extra:
        raise ValueError(f"host run: network {spec['name']} takes {list(allowed)}, not {extra}.")
    return make(**{k: v for k, v in spec.items() if k != "name"})


def build_preprocess(spec: Any) -> Any:
    """The transform of a host run's ``config["preprocess"]``: ``[[name, *args], ...]``."""
    steps = []
    for item in spec if isinstance(spec, list) else [spec]:
        if not isinstance(item, list) or not item or item[0] not in PREPROCESS:
            raise ValueError(
                f"host run: unknown preprocessing step {item!r}; expected [name, *args] "
                f"with name one of {list(PREPROCESS)}."
            )
        steps.append(PREPROCESS[item[0]](*item[1:]))
    return T.compose(*steps)


class HostRun:
    """A host run read back: ``policy(params, screens) -> actions`` (any leading dims),
    its ``params`` and ``config`` (config.json) and ``meta`` (the checkpoint's header)."""

    def __init__(self, run_dir: Path, config: dict[str, Any], params: Any, meta: dict) -> None:
        self.run_dir, self.config, self.params, self.meta = run_dir, config, params, meta
        self.network = build_network(config["network"])
        self.preprocess = build_preprocess(config["preprocess"])
        self.game = _game(config["env"])

    def policy(self, params: Any, screens: torch.Tensor) -> torch.Tensor:
        """Greedy actions of raw screens ``[..., 210, 160, 3]`` uint8 (what is exported)."""
        action, _ = exploration.q_value(self.network.apply(params, self.preprocess(screens)))
        return action

    def act(self, screen: Any) -> torch.Tensor:
        """The greedy action of one raw screen (a policy for ``video.record``)."""
        with torch.no_grad():
            return self.policy(self.params, torch.as_tensor(screen))

    def make_env(self, **kwargs: Any) -> Any:
        """The run's env, ``envs.atari(game, **kwargs)`` (ALE/<Game>-v5's settings)."""
        return envs.atari(self.game, **kwargs)


def save_host_run(
    run_dir: str | Path,
    params: Any,
    *,
    algorithm: str,
    env: str,
    network: dict[str, Any],
    preprocess: list[list[Any]],
    steps: int,
    seed: int = 0,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write a host run: ``run_dir/config.json`` and ``run_dir/checkpoints/latest.safetensors``.

    Args:
      run_dir: the directory (made if missing).
      params: the trained network's params (one agent, no seed dim).
      algorithm: ``"dqn"`` (the policy is the argmax of the network's outputs).
      env: the host env's id, ``"ALE/<Game>-v5"`` (``envs.atari(Game)``'s defaults).
      network: ``{"name": ..., **kwargs}`` with a name from ``NETWORKS``.
      preprocess: ``[[name, *args], ...]`` from ``PREPROCESS``, raw screen to network input.
      steps: env steps (frames) trained, recorded with the checkpoint.
      seed: the training seed, recorded.
      extra: more JSON entries for config.json (e.g. the training settings).
    Returns:
      ``run_dir``. The network and preprocessing are rebuilt and checked against
      ``params`` before anything is written.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"save_host_run: algorithm {algorithm!r}; expected one of {ALGORITHMS}.")
    _game(env)
    net, pre = build_network(network), build_preprocess(preprocess)
    template = net.init(random.key(0))
    screen = torch.zeros(210, 160, 3, dtype=torch.uint8)
    got = {"/".join(map(str, p)): x for p, x in tree.flatten_with_paths(params)}
    want = {"/".join(map(str, p)): x for p, x in tree.flatten_with_paths(template)}
    shape = lambda x: list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
    if {n: shape(x) for n, x in got.items()} != {n: shape(x) for n, x in want.items()}:
        raise ValueError(
            f"save_host_run: params do not fit network {network!r}: leaves "
            f"{ {n: shape(x) for n, x in list(got.items())[:3]} }..., expected "
            f"{ {n: shape(x) for n, x in list(want.items())[:3]} }..."
        )
    with torch.no_grad():  # the preprocessing gives the network's input
        net.apply(params, pre(screen))
    run_dir = Path(run_dir)
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    config = {
        "kind": KIND,
        "algorithm": algorithm,
        "env": env,
        "network": network,
        "preprocess": preprocess,
        "seed": seed,
        "steps": int(steps),
        **(extra or {}),
        **exactness(),
    }
    meta = {"algorithm": algorithm, "env": env, "steps": int(steps)}
    checkpoint.save(run_dir / "checkpoints" / "latest.safetensors", params, meta)
    atomic_write(run_dir / "config.json", (json.dumps(config, indent=2) + "\n").encode())
    return run_dir


def is_host_run(run_dir: str | Path) -> bool:
    """Whether ``run_dir/config.json`` is a host run's (``save_host_run``)."""
    try:
        return json.loads((Path(run_dir) / "config.json").read_text()).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False


def load_host_run(run_dir: str | Path, checkpoint_name: str = "latest") -> HostRun:
    """Read a host run back: its config, and its params from ``checkpoints/<name>``."""
    run_dir = Path(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    path = run_dir / "checkpoints" / f"{checkpoint_name}.safetensors"
    if not path.exists():
        have = sorted(p.stem for p in (run_dir / "checkpoints").glob("*.safetensors"))
        raise FileNotFoundError(f"{path} does not exist; checkpoints in {run_dir}: {have}.")
    template = build_network(config["network"]).init(random.key(0))
    expect = {"algorithm": config["algorithm"], "env": config["env"]}
    params, meta = checkpoint.load(path, template, expect=expect)
    return HostRun(run_dir, config, params, meta)


@torch.no_grad()
def evaluate_host_run(
    run_dir: str | Path, *, episodes: int = 10, checkpoint_name: str = "latest", seed: int = 0
) -> dict[str, Any]:
    """Greedy returns of ``episodes`` whole episodes of the run's ALE env, written to
    ``run_dir/eval.json`` and returned (``{"checkpoint", "steps", "ale": {0: [...]}}``;
    episode ``i`` starts from ``reset(fold_in(key(seed), i))``)."""
    if not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"eval: --episodes must be a positive int, got {episodes!r}.")
    run = load_host_run(run_dir, checkpoint_name)
    env, returns = run.make_env(auto_reset=False), []
    try:
        for i in range(episodes):
            state, ts = env.reset(random.fold_in(random.key(seed), i))
            total = 0.0
            while True:
                state, ts = env.step(state, run.act(ts.obs))
                total += float(ts.reward)
                if bool(ts.terminated | ts.truncated):
                    break
            returns.append(total)
    finally:
        env.close()
    out = {"checkpoint": checkpoint_name, "steps": run.meta["steps"], "ale": {0: returns}}
    atomic_write(Path(run_dir) / "eval.json", (json.dumps(out, indent=1) + "\n").encode())
    return out


def record_host_run(
    run_dir: str | Path,
    path: str | Path,
    *,
    onnx: bool = False,
    episodes: int = 1,
    checkpoint_name: str = "latest",
    key: torch.Tensor | None = None,
    max_steps: int = 10_000,
    fps: int = 25,
) -> Any:
    """Record the run's greedy agent in ``envs.atari(game, render_mode="rgb_array")``
    (ALE's own frames) to ``path``: from the checkpoint, or with ``onnx=True`` from
    ``run_dir/policy.onnx`` (``fxrl export RUN --format onnx``) in ONNX Runtime.
    ``key``: the env's reset key (default ``fxrl.random.key(0)``). Returns the
    ``video.Recording``."""
    from fxrl.run import video

    path = video.check_path(path)
    if onnx:
        program = Path(run_dir) / "policy.onnx"
        if not program.is_file():
            raise FileNotFoundError(
                f"--onnx: {program} does not exist; write it first with "
                f"fxrl export {run_dir} --format onnx."
            )
        config = json.loads((Path(run_dir) / "config.json").read_text())
        game, policy = _game(config["env"]), video.onnx_policy(program, batched=True)
    else:
        run = load_host_run(run_dir, checkpoint_name)
        game, policy = run.game, run.act
    env = envs.atari(game, render_mode="rgb_array")
    try:
        rec = video.record(
            env, policy, path, key=key, episodes=episodes, max_steps=max_steps, fps=fps
        )
    finally:
        env.close()
    rec.seed = 0
    return rec


def export_host_run(
    run_dir: str | Path,
    format: str = "onnx",
    *,
    out: str | Path | None = None,
    checkpoint_name: str = "latest",
) -> Path:
    """Write the run's greedy policy, raw screens ``[B, 210, 160, 3]`` uint8 in (a dynamic
    batch dim, preprocessing inside), actions ``[B]`` out: ``onnx``, ``pt2`` or ``aoti``
    as ``fxrl.run.export_run`` does; ``<path>.json`` records checkpoint and steps."""
    from fxrl.export import export, to_aoti, to_onnx
    from fxrl.run.export_run import FORMATS

    if format not in FORMATS:
        raise ValueError(f"export: unknown --format {format!r}; expected one of {list(FORMATS)}.")
    run_dir = Path(run_dir)
    if not (run_dir / "checkpoints" / f"{checkpoint_name}.safetensors").exists():
        checkpoint_name = "latest"  # a host run keeps one checkpoint
    run = load_host_run(run_dir, checkpoint_name)
    screens = torch.zeros(2, 210, 160, 3, dtype=torch.uint8)
    exported = export(run.policy, run.params, screens, dynamic_batch=True)
    path = Path(out) if out is not None else run_dir / f"policy{FORMATS[format]}"
    path.parent.mkdir(parents=True, exist_ok=True)
    with checkpoint.written_atomically(path) as tmp:  # a failed write leaves `path` as it was
        if format == "onnx":
            to_onnx(exported, tmp)
        elif format == "pt2":
            exported.save(tmp)
        else:
            to_aoti(exported, tmp)
    record = {"seed": 0, "checkpoint": checkpoint_name, "steps": run.meta["steps"],
              "format": format, "env": run.config["env"]}  # fmt: skip
    atomic_write(path.with_name(path.name + ".json"), (json.dumps(record) + "\n").encode())
    return path
