"""Play a run's greedy policy: in fxrl's pure env, and in gymnasium's own env of the same id.

    returns = evaluate_run("runs/cartpole", episodes=10, gymnasium=True)
    returns["pure"][seed], returns["gymnasium"][seed]     # per-episode returns

Learning is judged per seed: each seed's final greedy policy (``mode="mode"``) averaged
over ``episodes`` episodes; gymnasium's env is an independent check that what was learnt
in fxrl's torch physics works in the reference implementation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fxrl import envs, random, specs, tree
from fxrl._optional import require
from fxrl.algorithms.evaluation import params_device
from fxrl.algorithms.sweeps import combination_names
from fxrl.envs.registry import is_host_id
from fxrl.run import checkpoint
from fxrl.run.config_io import read_run_config

__all__ = ["evaluate_gymnasium", "evaluate_pure", "evaluate_run", "load_run", "seed_params"]


def load_run(run_dir: str | Path, name: str = "latest") -> tuple[dict[str, Any], Any, Any, dict]:
    """``(info, algo, state, meta)`` of a run directory's checkpoint ``name``."""
    from fxrl.run.loop import build

    run_dir = Path(run_dir)
    info = read_run_config(run_dir)
    algo, template = build(info)
    path = run_dir / "checkpoints" / f"{name}.safetensors"
    if not path.exists():
        have = sorted(p.stem for p in (run_dir / "checkpoints").glob("*.safetensors"))
        raise FileNotFoundError(f"{path} does not exist; checkpoints in {run_dir}: {have}.")
    # config.json as written: the checkpoint's names (config_io.RENAMED_FIELDS included)
    expect = {"algorithm": info["algorithm"], "config": info["config_json"]}
    state, meta = checkpoint.load(path, template, expect=expect)
    return info, algo, state, meta


def seed_params(state: Any, seed: int) -> Any:
    """The params of agent ``seed`` in a batched TrainState."""
    return tree.index(state.params, seed)


@torch.no_grad()
def evaluate_pure(
    algo: Any,
    params: Any,
    key: torch.Tensor,
    episodes: int,
    max_steps: int = 100_000,
    env_params: Any = None,
) -> list[float]:
    """Returns of ``episodes`` greedy episodes in ``algo.env``, played as one batch
    (``env_params``: one task's params, as a task run's agent trained on; default the
    env's own)."""
    env = envs.batch(algo.env, episodes)
    state, ts = env.reset(key, env_params)
    total = torch.zeros(episodes, dtype=torch.float64, device=key.device)
    finished = torch.zeros(episodes, dtype=torch.bool, device=key.device)
    recurrent = is_recurrent(algo)
    if recurrent:  # the carry is fed back; is_init resets it on each episode's first step
        carry = algo.initial_carry((episodes,), key.device)
        is_init = torch.ones(episodes, dtype=torch.bool, device=key.device)
    for _ in range(max_steps):
        if recurrent:
            action, carry = algo.policy(params, ts.obs, carry, is_init, mode="mode")
        else:
            action = algo.policy(params, ts.obs, mode="mode")
        state, ts = env.step(state, action)
        if recurrent:
            is_init = ts.terminated | ts.truncated
        total += torch.where(finished, 0.0, ts.reward.double())
        finished |= ts.terminated | ts.truncated
        if bool(finished.all()):
            break
    return total.tolist()


def evaluate_gymnasium(
    act: Callable[[np.ndarray], Any],
    env_id: str,
    episodes: int,
    seed: int = 0,
    make: Callable[[], Any] | None = None,
) -> list[float]:
    """Returns of ``episodes`` episodes of ``act(obs) -> action`` in ``gymnasium.make(env_id)``
    (or ``make()``, e.g. a task's env from ``fxrl.algorithms.tasks.gymnasium_env``).

    Episode ``i`` starts from ``reset(seed=seed + i)``.
    """
    if make is None:
        env = require("gymnasium", "playing gymnasium's own env (--gymnasium)").make(env_id)
    else:
        env = make()
    returns = []
    try:
        for i in range(episodes):
            obs, _ = env.reset(seed=seed + i)
            if hasattr(act, "reset"):  # a recurrent actor starts each episode from is_init
                act.reset()
            total, done = 0.0, False
            while not done:
                obs, reward, terminated, truncated, _ = env.step(act(obs))
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
    finally:
        env.close()
    return returns


def torch_actor(algo: Any, params: Any) -> Callable[[np.ndarray], Any]:
    """``act(obs) -> action`` for gymnasium from ``algo.policy`` (greedy, one observation)."""
    discrete = isinstance(algo.env.action_spec, specs.Discrete)
    dtype = getattr(algo.env.observation_spec, "dtype", torch.float32)
    if is_recurrent(algo):
        return _RecurrentActor(algo, params, dtype, discrete)

    device = params_device(params)  # observations go where the params are

    @torch.no_grad()
    def act(obs: np.ndarray) -> Any:
        x = torch.as_tensor(np.asarray(obs), dtype=dtype, device=device)[None]
        action = algo.policy(params, x, mode="mode")
        return int(action[0]) if discrete else action[0].cpu().numpy()

    return act


def is_recurrent(algo: Any) -> bool:
    """Whether ``algo.policy`` takes and returns a carry (``algo.initial_carry`` is set)."""
    return algo.initial_carry is not None


class _RecurrentActor:
    """``act(obs)`` for gymnasium from a recurrent ``algo.policy``: it keeps the carry
    between calls; ``reset()`` marks the next observation as an episode's first."""

    def __init__(self, algo: Any, params: Any, dtype: torch.dtype, discrete: bool) -> None:
        self.algo, self.params, self.dtype, self.discrete = algo, params, dtype, discrete
        self.device = params_device(params)
        self.carry, self.first = algo.initial_carry((1,), self.device), True

    def reset(self) -> None:
        self.first = True

    @torch.no_grad()
    def __call__(self, obs: np.ndarray) -> Any:
        x = torch.as_tensor(np.asarray(obs), dtype=self.dtype, device=self.device)[None]
        is_init = torch.full((1,), self.first, device=self.device)
        action, self.carry = self.algo.policy(self.params, x, self.carry, is_init, mode="mode")
        self.first = False
        return int(action[0]) if self.discrete else action[0].cpu().numpy()


def evaluate_run(
    run_dir: str | Path,
    *,
    episodes: int = 10,
    gymnasium: bool = False,
    checkpoint_name: str = "latest",
    seed: int = 0,
    pick: str | None = None,
) -> dict[str, Any]:
    """Per-seed greedy returns of a run, written to ``run_dir/eval.json`` and returned.

    Keys are agent indices (the seeds; in a sweep run ``combination * seeds + seed``, in
    a task run ``task * seeds + seed``, named in ``result["labels"]``; a task run's
    agents play their own task's params, in gymnasium too where
    ``fxrl.algorithms.tasks.gymnasium_env`` maps them). ``pick`` (a sweep run): only
    that combination's seeds,
    ``"best"`` or a name such as ``"lr=3e-4,ent_coef=0.01"`` (``fxrl.run.sweep.pick``).
    """
    from fxrl.run import sweep

    if not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"eval: --episodes must be a positive int, got {episodes!r}.")
    if gymnasium:  # before the pure env's episodes, not after them
        require("gymnasium", "playing gymnasium's own env (--gymnasium)")
    info, algo, state, meta = load_run(run_dir, checkpoint_name)
    out: dict[str, Any] = {"checkpoint": checkpoint_name, "steps": meta["steps"], "pure": {}}
    members = list(range(info["num_seeds"]))
    if pick is not None:
        combination = sweep.pick(info, meta, pick)  # a run without a sweep: a clear error
        out["pick"] = combination_names(info["sweep"])[combination]
        members = sweep.agents(info, combination)
    if info["sweep"]:
        names = combination_names(info["sweep"])
        out["labels"] = {a: f"{names[a // info['seeds']]} seed {a % info['seeds']}"
                         for a in members}  # fmt: skip
    task_params = None
    if info["tasks"]:  # each agent plays its own task
        from fxrl.run import tasks

        task_params = tasks.agent_params(algo.env, info)
        names = tasks.names(info)
        out["labels"] = {a: f"{names[a // info['seeds']]} seed {a % info['seeds']}"
                         for a in members}  # fmt: skip
    env_id = info["config"].env
    if is_host_id(env_id):  # played in the host env itself: gymnasium's, or ALE's
        del out["pure"]
        return _evaluate_host_run(run_dir, out, info, algo, state, members, episodes, seed)
    if gymnasium:
        _check_gymnasium_id(env_id)
        out["gymnasium"] = {}
    for s in members:
        params = seed_params(state, s)
        key = random.fold_in(random.key(seed), s)
        task = None if task_params is None else tree.index(task_params, s)
        out["pure"][s] = evaluate_pure(algo, params, key, episodes, env_params=task)
        if gymnasium:
            make = None
            if task is not None:
                from fxrl.algorithms.tasks import gymnasium_env

                gymnasium_env(env_id, task).close()  # an env without a mapping: its error now
                make = lambda task=task: gymnasium_env(env_id, task)
            out["gymnasium"][s] = evaluate_gymnasium(
                torch_actor(algo, params), env_id, episodes, seed, make=make
            )
    text = json.dumps(out, indent=1) + "\n"
    checkpoint.atomic_write(Path(run_dir) / "eval.json", text.encode())  # a full disk: WriteError
    return out


def _evaluate_host_run(
    run_dir: str | Path,
    out: dict[str, Any],
    info: dict[str, Any],
    algo: Any,
    state: Any,
    members: list[int],
    episodes: int,
    seed: int,
) -> dict[str, Any]:
    """A host run's greedy returns: ``out["gymnasium"]`` (episode ``i`` from
    ``reset(seed=seed + i)`` in ``gymnasium.make(id)``) or ``out["ale"]`` (whole games,
    unclipped, in the run's ALE settings)."""
    env_id = info["config"].env
    prefix, _, name = env_id.partition(":")
    where = "ale" if prefix == "ale" else "gymnasium"
    out[where] = {}
    for s in members:
        params = seed_params(state, s)
        if where == "gymnasium":
            out[where][s] = evaluate_gymnasium(torch_actor(algo, params), name, episodes, seed)
        else:
            key = random.fold_in(random.key(seed), s)
            out[where][s] = evaluate_ale(algo, params, env_id, key, episodes)
    (Path(run_dir) / "eval.json").write_text(json.dumps(out, indent=1) + "\n")
    return out


@torch.no_grad()
def evaluate_ale(
    algo: Any, params: Any, env_id: str, key: torch.Tensor, episodes: int, max_steps: int = 4500
) -> list[float]:
    """Greedy returns of ``episodes`` whole games (unclipped rewards, every life) of
    ``env_id`` (``"ale:<Game>"``, the training settings: ``fxrl.algorithms.host``), played
    side by side from ``key``; a game is cut after ``max_steps`` agent steps (18,000
    frames: the five minutes of Machado et al. 2018's evaluation)."""
    from fxrl.algorithms.host import make_env

    env = make_env(env_id, episodes)
    try:
        state, ts = env.reset(key)
        obs = ts.obs
        total = torch.zeros(episodes, dtype=torch.float64)
        over = torch.zeros(episodes, dtype=torch.bool)
        for _ in range(max_steps):
            state, ts = env.step(state, algo.policy(params, obs, mode="mode"))
            total += torch.where(over, 0.0, ts.reward.double())
            over |= ts.terminated | ts.truncated
            obs = ts.info["next_obs"]
            if bool(over.all()):
                break
    finally:
        env.close()
    return total.tolist()


def _check_gymnasium_id(env_id: str) -> None:
    """A one-line error unless gymnasium has an env of the run's id to play in."""
    gymnasium = require("gymnasium", "fxrl eval --gymnasium")

    if env_id not in gymnasium.registry:
        raise ValueError(
            f"eval --gymnasium: gymnasium has no env {env_id!r} (the run's env is fxrl's "
            "own or a registered one, with no gymnasium original); evaluate in fxrl's env: "
            "drop --gymnasium."
        )


def table(result: dict[str, Any]) -> str:
    """``evaluate_run``'s result as a text table: mean return per seed and where."""
    where = [w for w in ("pure", "gymnasium", "ale") if w in result]
    labels = {int(k): v for k, v in result.get("labels", {}).items()}
    width = max([4, *(len(v) for v in labels.values())])
    lines = [f"{'seed':<{width}}  " + "  ".join(f"{w:>10}" for w in where)]
    for s in result[where[0]]:
        vals = [sum(result[w][s]) / len(result[w][s]) for w in where]
        name = f"{labels[int(s)]:<{width}}" if labels else f"{s:>{width}}"
        lines.append(f"{name}  " + "  ".join(f"{v:10.1f}" for v in vals))
    means = [sum(sum(r) / len(r) for r in result[w].values()) / len(result[w]) for w in where]
    lines.append(f"{'mean':<{width}}  " + "  ".join(f"{v:10.1f}" for v in means))
    return "\n".join(lines)
