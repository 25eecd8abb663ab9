"""The Python loop around ``update``: seeds, progress, metrics, curves, checkpoints, resume.

    result = train("ppo", ppo.Config(env="CartPole-v1"), "runs/cartpole", num_seeds=8)
    result = resume("runs/cartpole")          # continues an interrupted run, same key stream

``num_seeds`` TrainStates are trained together by ``vmap(algo.update)`` (compiled by
default, eager with ``compile=False``; a task ensemble's agents each run their own env
params, ``fxrl.run.tasks``). After every iteration the loop appends one metrics row per seed, checks
the losses and params are finite, and updates the progress bar; every ``checkpoint_every``
seconds (and at the end, or on Ctrl-C, SIGTERM or SIGUSR1) it writes
``checkpoints/latest.safetensors`` (the one before becomes ``previous.safetensors``) and,
if the mean return across seeds is the best so far, ``best.safetensors``.

A resumed run equals the uninterrupted one bit for bit (same threads, versions and
machine; docs/guide/resume.md): the run's randomness is all in the TrainState's keys, a
checkpoint holds every leaf of the TrainState with its memory layout, a ``latest``
checkpoint exists intact at every moment (Ctrl-C, a second Ctrl-C or SIGKILL anywhere,
mid-write included), metrics rows written after it are dropped and written again, and a
run killed before its first checkpoint starts again from its key.

On a cluster (docs/guide/resume.md, "On a cluster or a shared machine"): SIGTERM and
SIGUSR1 stop a run as Ctrl-C does; the run directory is held by its process
(``fxrl.run.lock``: a second train or resume on it raises ``RunLockedError``); a write that
fails (no space, a quota) raises ``WriteError``, a host env that raises ``HostEnvError``
and running out of memory torch's ``OutOfMemoryError`` or ``MemoryError``, each in one
line saying what the run kept (its last checkpoint and metrics, as they were).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import re
import signal
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from fxrl import random, tree
from fxrl.algorithms.core import batched
from fxrl.algorithms.sweeps import check_sweep
from fxrl.envs.host import HostEnvError
from fxrl.run import checkpoint
from fxrl.run import lock as run_lock
from fxrl.run import tasks as run_tasks
from fxrl.run.config_io import (
    algorithm_module,
    exactness_differences,
    read_run_config,
    write_run_config,
)
from fxrl.run.device import resolve as resolve_device
from fxrl.run.metrics import MetricsWriter, check_loggers, read_rows, rows_from_metrics
from fxrl.run.plots import plot_runs, plot_sweep
from fxrl.run.progress import Progress
from fxrl.run.sweep import agent_of, tag_rows

__all__ = ["InexactResumeWarning", "NonFiniteError", "RunResult", "resume", "train"]


class NonFiniteError(FloatingPointError):
    """A loss or a param became NaN/inf; the run stopped, its last good checkpoint kept."""


class InexactResumeWarning(UserWarning):
    """``resume`` continues a run with other threads, versions or CPU than it was trained
    with: it runs, but its numbers will not equal the uninterrupted run's bit for bit."""


@dataclasses.dataclass
class RunResult:
    """What ``train``/``resume`` return: the final batched TrainState and where it stands."""

    run_dir: Path
    state: Any
    iteration: int
    steps: int
    returns: dict[int, float]  # each seed's latest finished-episode return
    interrupted: bool  # stopped by a signal (Ctrl-C, SIGTERM, SIGUSR1), checkpoint written
    signal: int | None = None  # which one


def train(
    algorithm: str,
    config: Any,
    run_dir: str | Path,
    *,
    num_seeds: int = 1,
    seed: int = 0,
    total_steps: int | None = None,
    compile: bool = True,
    sweep: dict[str, list[float]] | None = None,
    tasks: int | None = None,
    task_ranges: dict[str, tuple[float, float]] | None = None,
    device: str | torch.device | None = None,
    **loop_kw: Any,
) -> RunResult:
    """Train ``num_seeds`` agents of ``algorithm`` together, writing the run to ``run_dir``.

    Args:
      algorithm: ``"ppo"``, ``"dqn"``... or a module path with ``Config`` and ``make``.
      config: that algorithm's Config.
      run_dir: the run directory (created; must not hold a run already).
      num_seeds: agents trained together (one vmapped update).
      seed: the run's key is ``random.key(seed)``, split into one key per agent.
      total_steps: env steps per agent; defaults to ``config.total_steps``.
      compile: compile the batched update with ``fxrl.compile`` (the default, as every
        entry point that runs an update again and again does; compiling costs seconds to
        a minute once); False runs it eager (debugging, very short runs).
      sweep: ``{field: [values]}`` (``{"lr": [1e-4, 3e-4], "ent_coef": [0, 0.01]}``):
        every combination x ``num_seeds`` seeds, one vmapped update (``fxrl.run.sweep``);
        fields that can be swept: the algorithm's ``hyperparams`` (``algo.hyperparams``).
      tasks: train a task ensemble (``fxrl.run.tasks``): ``tasks`` env variants x
        ``num_seeds`` seeds as one vmapped update, each agent's envs running its task's
        params (algorithms whose ``init`` takes ``env_params``: PPO).
      task_ranges: ``{param: (low, high)}`` (``{"length": (0.25, 1.0)}``), each task's
        param drawn uniform in its range; None: the env's own ``sample_params``.
      device: where the agents train (``"cpu"``, ``"cuda"``...; None: torch's default
        device); recorded in ``config.json``, where ``resume`` reads it.
      loop_kw: ``quiet``, ``tensorboard``, ``wandb``, ``checkpoint_every``, ``plot_every``,
        ``max_iterations`` (stop after this many iterations, resumable).
    """
    total = _total_steps(config, total_steps)
    device = resolve_device(device)  # a device this machine lacks fails before anything runs
    if not isinstance(num_seeds, int) or num_seeds < 1:
        raise ValueError(f"train: num_seeds must be a positive int, got {num_seeds!r}.")
    algo = algorithm_module(algorithm).make(config)  # a bad config or env id fails first
    if sweep is not None:  # as must a bad sweep
        sweep = {k: list(v) for k, v in check_sweep(algo, sweep).items()}
        batched(algo, num_seeds, compile, sweep=sweep)
    task_entry = _draw_tasks(algorithm, algo, config, tasks, task_ranges, sweep, seed)
    check_loggers(tensorboard=loop_kw.get("tensorboard", False), wandb=loop_kw.get("wandb", False))
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with run_lock.hold(run_dir, "train"):  # a live run there: RunLockedError names it
        if (run_dir / "config.json").exists():
            raise FileExistsError(
                f"train: {run_dir} already holds a run. Continue it with `fxrl resume "
                f"{run_dir}`, or choose another --out."
            )
        (run_dir / "checkpoints").mkdir(exist_ok=True)
        write_run_config(
            run_dir, algorithm, config, num_seeds=num_seeds, seed=seed, total_steps=total,
            compile=compile, checkpoint_every=loop_kw.get("checkpoint_every"), sweep=sweep,
            tasks=task_entry, device=str(device),
        )  # fmt: skip
        return _run(run_dir, read_run_config(run_dir), None, **loop_kw)


def _draw_tasks(
    algorithm: str,
    algo: Any,
    config: Any,
    tasks: int | None,
    ranges: dict[str, tuple[float, float]] | None,
    sweep: Any,
    seed: int,
) -> dict[str, Any] | None:
    """A task run's ``config.json`` entry (``fxrl.run.tasks.draw``), or None; bad task
    settings fail here, before anything is written."""
    if tasks is None:
        if ranges:
            raise ValueError("train: task ranges (--task-param) need a task count: --tasks N.")
        return None
    if sweep is not None:
        raise ValueError(
            "train: a run is a sweep or a task ensemble, not both; drop --sweep or --tasks."
        )
    if "env_params" not in inspect.signature(algo.init).parameters:
        raise ValueError(
            f"train: --tasks: {algorithm}'s init takes no env params, so its agents cannot "
            "run a task each; task ensembles train with: ppo."
        )
    return run_tasks.draw(algo.env, getattr(config, "env", ""), tasks, ranges, seed)


def resume(
    run_dir: str | Path,
    *,
    checkpoint_name: str = "latest",
    device: str | torch.device | None = None,
    **loop_kw: Any,
) -> RunResult:
    """Continue the run in ``run_dir`` from ``checkpoints/<checkpoint_name>.safetensors``,
    on ``device`` (default: the device the run trained on, from its ``config.json``).

    The continued run equals the uninterrupted one bit for bit when the torch threads, the
    fxrl and torch versions and the CPU are the run's (``config.json`` records them); if
    one differs an ``InexactResumeWarning`` names it, and the run continues. A run killed
    before its first checkpoint starts again from its key (the same run, from the start).

    Raises:
      FileNotFoundError: no such checkpoint (the message lists those there are).
      CheckpointError: a corrupt checkpoint, or one written by another algorithm or config.
      RunLockedError: a live process holds the run directory (the message names it).
    """
    run_dir = Path(run_dir)
    info = read_run_config(run_dir)
    trained_on = info["device"]
    info["device"] = str(resolve_device(trained_on if device is None else device))
    check_loggers(tensorboard=loop_kw.get("tensorboard", False), wandb=loop_kw.get("wandb", False))
    with run_lock.hold(run_dir, "resume"):
        return _resume_held(run_dir, info, checkpoint_name, loop_kw, trained_on)


def _resume_held(
    run_dir: Path,
    info: dict[str, Any],
    checkpoint_name: str,
    loop_kw: dict[str, Any],
    trained_on: str,
) -> RunResult:
    ckpts = run_dir / "checkpoints"
    ckpts.mkdir(exist_ok=True)
    for d in (run_dir, ckpts):  # writes a crash cut short, never renamed into place
        checkpoint.remove_temporary(d)
    path: Path | None = ckpts / f"{checkpoint_name}.safetensors"
    have = sorted(p.stem for p in ckpts.glob("*.safetensors"))
    if not path.exists():
        if checkpoint_name != "latest" or have:
            raise FileNotFoundError(
                f"resume: {path} does not exist; checkpoints in {run_dir}: {have or 'none'}."
            )
        path = None  # stopped before its first checkpoint: the same run from its start
    meta = checkpoint.read_meta(path) if path is not None else {}
    if path is not None:
        _check_same_run(path, meta, info)
    _warn_inexact(run_dir, info, meta, trained_on)
    if info.get("checkpoint_every") is not None:  # the run's cadence, unless told otherwise
        loop_kw.setdefault("checkpoint_every", info["checkpoint_every"])
    return _run(run_dir, info, path, **loop_kw)


def _check_same_run(path: Path, meta: dict[str, Any], info: dict[str, Any]) -> None:
    """The checkpoint's algorithm and config are config.json's; config fields this fxrl
    added since the checkpoint was written are not compared (their defaults apply)."""
    if meta.get("algorithm") != info["algorithm"]:
        raise checkpoint.CheckpointError(
            f"resume: {path} was written by algorithm {meta.get('algorithm')!r}, the run's "
            f"config.json says {info['algorithm']!r}: not this run's checkpoint; it cannot "
            "continue this run, exactly or at all."
        )
    # config.json as written (its names are the checkpoint's, renamed fields included)
    here, there = info["config_json"], meta.get("config") or {}
    diff = [k for k in there if here.get(k) != there[k]]
    if meta.get("tasks") != info["tasks"]:
        raise checkpoint.CheckpointError(
            f"resume: {path} was written by a run with other tasks than the run's "
            "config.json: it cannot continue this run exactly. Restore config.json, or "
            "start a new run (fxrl train) with the new tasks."
        )
    if meta.get("sweep") != info["sweep"]:
        raise checkpoint.CheckpointError(
            f"resume: {path} was written by a run with sweep {meta.get('sweep')!r}, the "
            f"run's config.json says {info['sweep']!r}: it cannot continue this run exactly. "
            "Restore config.json, or start a new run (fxrl train) with the new sweep."
        )
    if diff:
        shown = ", ".join(f"{k}={there[k]!r} in the checkpoint, {here.get(k)!r} in config.json"
                          for k in diff)  # fmt: skip
        raise checkpoint.CheckpointError(
            f"resume: {path} was written with another config ({shown}): resuming it with "
            "this config would not continue the same run exactly. Restore config.json, or "
            "start a new run (fxrl train) with the new settings."
        )


def _warn_inexact(
    run_dir: Path, info: dict[str, Any], meta: dict[str, Any], trained_on: str
) -> None:
    diffs = {label: (was, now) for label, was, now in exactness_differences(meta)}
    diffs.update({label: (was, now) for label, was, now in exactness_differences(info)})
    if info["device"] != trained_on:  # other kernels: the same math, other rounding
        diffs["device"] = (trained_on, info["device"])
    if not diffs:
        return
    was = ", ".join(f"{label} {v[0]}" for label, v in diffs.items())
    now = ", ".join(f"{label} {v[1]}" for label, v in diffs.items())
    fix = f" (--threads {diffs['threads'][0]} restores that)" if list(diffs) == ["threads"] else ""
    warnings.warn(
        f"{run_dir} was trained with {was}; this resume has {now}. It continues, but the "
        f"result will not be bit-identical to an uninterrupted run{fix}.",
        InexactResumeWarning,
        stacklevel=4,
    )


def _total_steps(config: Any, total_steps: int | None) -> int:
    own = getattr(config, "total_steps", None)
    if total_steps is not None and own is not None and total_steps != own:
        raise ValueError(
            f"train: total_steps={total_steps} but config.total_steps={own}; give one "
            "(the CLI's --total-steps sets config.total_steps)."
        )
    total = total_steps if total_steps is not None else own
    if not isinstance(total, int) or total < 1:
        raise ValueError(f"train: total_steps must be a positive int, got {total!r}.")
    return total


def build(info: dict[str, Any], device: str | torch.device = "cpu") -> tuple[Any, Any]:
    """``(algo, template)``: the algorithm and its initial TrainState for a run, with a
    leading agent dim (also for one seed), as ``fxrl.algorithms.core.batched`` inits it
    (a sweep run's agents: combinations x seeds), on ``device`` (a checkpoint loads onto
    the template's device: the CPU for evaluation and export, whatever the run trained on)."""
    algo = algorithm_module(info["algorithm"]).make(info["config"])
    key = torch.tensor(info["key"], dtype=torch.int64, device=device)
    if info.get("tasks"):  # agent t * seeds + s: seed s's key, task t's env params
        seeds = info["seeds"]
        keys = key.unsqueeze(0) if seeds == 1 else random.split(key, seeds)
        init = torch.func.vmap(lambda k, p: algo.init(k, env_params=p))
        params = tree.map(lambda x: x.to(device), run_tasks.agent_params(algo.env, info))
        state = init(keys.repeat(info["tasks"]["count"], 1), params)
        return algo, tree.map(lambda x: x.clone(memory_format=torch.contiguous_format), state)
    init, _ = batched(algo, info["seeds"], compile=False, sweep=info["sweep"])
    state = init(key)
    return algo, _add_seed_dim(state) if info["num_seeds"] == 1 and not info["sweep"] else state


def _add_seed_dim(tree_: Any) -> Any:
    return tree.map(lambda x: x.unsqueeze(0), tree_)


def batched_update(
    algo: Any, num_seeds: int, compile: bool, sweep: dict[str, list[float]] | None = None
) -> Any:
    """``core.batched``'s update (one compiled program; recurrent PPO's in pieces),
    taking and returning states and metrics with a leading agent dim."""
    _, update = batched(algo, num_seeds, compile, sweep=sweep)
    if num_seeds > 1 or sweep:
        return update

    def one_seed(state: Any) -> tuple[Any, dict[str, Any]]:
        state, metrics = update(tree.map(lambda x: x[0], state))
        return _add_seed_dim(state), _add_seed_dim(metrics)

    return one_seed


def _expect(info: dict[str, Any]) -> dict[str, Any]:
    expect = {"algorithm": info["algorithm"], "config": info["config_json"]}
    if info.get("tasks"):
        expect["tasks"] = info["tasks"]
    return {**expect, "sweep": info["sweep"]} if info["sweep"] else expect


def _check_finite(iteration: int, metrics: dict[str, torch.Tensor], state: Any) -> None:
    """Stop on non-finite params or an infinite loss. A NaN loss alone is a loss not
    computed this iteration (SAC and TD3 before ``learning_starts``, TD3's actor between
    its delayed steps); a diverged run's NaN loss has NaN gradients, so its params show it."""
    losses = {k: v for k, v in metrics.items() if "loss" in k}
    bad_params = {}
    params = getattr(state, "params", None)
    if params is not None:
        for name, leaf in zip(tree.path_names(params, "/"), tree.leaves(params), strict=True):
            if leaf.is_floating_point() and not bool(torch.isfinite(leaf).all()):
                bad_params[f"params/{name}"] = leaf
    if bad_params or any(bool(torch.isinf(v).any()) for v in losses.values()):
        # name the losses first: they are what a user recognises
        bad = {k: v for k, v in losses.items() if not bool(torch.isfinite(v).all())}
        bad.update(bad_params)
        name, value = next(iter(bad.items()))
        seeds = torch.nonzero(~torch.isfinite(value.reshape(value.shape[0], -1)).all(-1))
        raise NonFiniteError(
            f"iteration {iteration}: {name} is not finite (NaN/inf) for seeds "
            f"{seeds.reshape(-1).tolist()} (also: {sorted(bad)[:4]}). The run stopped; the "
            "last good checkpoint is kept. Lower the learning rate or clip gradients."
        )


def _mean(returns: dict[int, float]) -> float:
    vals = [v for v in returns.values() if math.isfinite(v)]
    return sum(vals) / len(vals) if vals else -math.inf


def latest_returns(rows: list[dict[str, Any]]) -> dict[int, float]:
    """``{seed: episode_return}`` of the rows where an episode ended (``seed``: the agent
    index, as ``rows_from_metrics`` numbers rows)."""
    return {
        r["seed"]: float(r["episode_return"]) for r in rows if r.get("episode_return") is not None
    }


def save_checkpoints(ckpts: Path, state: Any, meta: dict[str, Any], best: float) -> float:
    """Write ``latest`` (the old one becomes ``previous``) and, if the mean of
    ``meta["returns"]`` beats ``best``, ``best``; returns the new best."""
    mean = _mean(meta["returns"])
    improved, best = mean > best, max(best, mean)
    meta = {**meta, "best_return": best if math.isfinite(best) else None}
    # The new latest is written to a temporary file first; only then does the old one
    # become previous (a hard link renamed into place) and the new one replace it: an
    # intact latest exists at every moment a kill may come, and a write that fails (a
    # full disk) leaves latest and previous as they were.
    checkpoint.save(ckpts / "latest.safetensors", state, meta, keep=ckpts / "previous.safetensors")
    if improved:
        checkpoint.save(ckpts / "best.safetensors", state, meta)
    return best


# What a scheduler sends before it stops a job: Slurm and Kubernetes SIGTERM, then SIGKILL
# after a grace period; Slurm's `--signal=USR1@SECONDS` SIGUSR1 ahead of a job's end.
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGUSR1") if hasattr(signal, name)
)


class _Stop:
    """While inside: the first stop signal (Ctrl-C's SIGINT, SIGTERM, SIGUSR1) sets
    ``requested`` and ``signal`` (the loop finishes the update in flight, checkpoints and
    stops); a second one interrupts at once. Only the main thread may catch signals."""

    def __enter__(self) -> _Stop:
        self.requested, self.signal = False, None
        self._main = threading.current_thread() is threading.main_thread()
        self._old = {}
        if self._main:
            self._old = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested, self.signal = True, signum

    def __exit__(self, *exc: Any) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)


def _run(
    run_dir: Path,
    info: dict[str, Any],
    ckpt_path: Path | None,
    *,
    quiet: bool = False,
    tensorboard: bool = False,
    wandb: bool = False,
    checkpoint_every: float = 60.0,
    plot_every: float = 30.0,
    max_iterations: int | None = None,
) -> RunResult:
    algo, state = build(info, info["device"])
    meta: dict[str, Any] = {"iteration": 0, "steps": 0, "best_return": -math.inf}
    if ckpt_path is not None:
        # resume() checked the config (fields added since the file was written allowed)
        state, meta = checkpoint.load(ckpt_path, state, expect={"algorithm": info["algorithm"]})
    iteration, steps, t_before = meta["iteration"], meta["steps"], meta.get("time", 0.0)
    best = meta.get("best_return")
    best = -math.inf if best is None else best
    returns = {int(k): float(v) for k, v in meta.get("returns", {}).items()}
    num_iters = math.ceil(info["total_steps"] / algo.steps_per_update)
    if info.get("tasks"):  # the agents' update, as for seeds: each state holds its task
        update = batched_update(algo, info["num_seeds"], info["compile"])
    else:
        update = batched_update(algo, info["seeds"], info["compile"], info["sweep"])

    saved = iteration if ckpt_path is not None else None  # the last checkpoint's iteration

    def save() -> None:
        nonlocal best, saved
        m = {**_expect(info), "iteration": iteration, "steps": steps, "returns": returns,
             "time": round(t_before + time.perf_counter() - t_start, 3)}  # fmt: skip
        try:
            best = save_checkpoints(run_dir / "checkpoints", state, m, best)
        except checkpoint.WriteError as e:
            if e.path.name == "best.safetensors":  # written after latest, which is done
                saved = iteration
            raise
        saved = iteration

    t_start, last_ckpt, last_plot, first_call = time.perf_counter(), time.perf_counter(), 0.0, None
    plot_wait = plot_every
    session_iters = 0
    stop = _Stop()
    try:
        with (
            stop,
            MetricsWriter(
                run_dir, tensorboard=tensorboard, wandb=wandb, keep_until=iteration
            ) as writer,
            Progress(
                num_iters * algo.steps_per_update, steps, num_seeds=info["num_seeds"], quiet=quiet
            ) as bar,
        ):
            while iteration < num_iters and not stop.requested:
                if max_iterations is not None and session_iters >= max_iterations:
                    break
                t0 = time.perf_counter()
                compiles = info["compile"] and first_call is None  # the first call compiles
                with bar.compiling(_update_name(info)) if compiles else contextlib.nullcontext():
                    new_state, metrics = update(state)
                _check_finite(iteration + 1, metrics, new_state)
                state, iteration, session_iters = new_state, iteration + 1, session_iters + 1
                steps = int(metrics["steps"].reshape(-1)[0])
                dt = time.perf_counter() - t0
                first_call = dt if first_call is None else first_call
                rows = rows_from_metrics(
                    iteration, metrics,
                    {"steps_per_s": round(algo.steps_per_update * info["num_seeds"] / dt, 1),
                     "time": round(t_before + time.perf_counter() - t_start, 3)},
                )  # fmt: skip
                writer.write(run_tasks.tag_rows(rows, info) if info.get("tasks")
                             else tag_rows(rows, info))  # fmt: skip
                returns.update(latest_returns(rows))
                bar.update(steps, rows)
                now = time.perf_counter()
                if now - last_ckpt >= checkpoint_every:
                    save()
                    last_ckpt = now
                if now - last_plot >= plot_wait:
                    _plot(run_dir, info)
                    last_plot = time.perf_counter()
                    # a long run's plot reads a long file: at most a tenth of the time
                    plot_wait = max(plot_every, 10 * (last_plot - now))
            if stop.requested:
                by = "" if stop.signal == signal.SIGINT else f" by {_name(stop.signal)}"
                bar.log(f"interrupted{by} at step {steps:,}: writing a checkpoint")
            save()
        _plot(run_dir, info)
        if first_call is not None:
            seconds = time.perf_counter() - t_start
            _summary(run_dir, info, algo, session_iters, seconds, first_call, bar.compiles)
    except _STOPPING_FAILURES as e:
        # what the run met outside its numbers: the last checkpoint and metrics are kept
        raise _stopped(e, _kept(run_dir, iteration, saved)) from e
    return RunResult(run_dir, state, iteration, steps, returns, stop.requested, stop.signal)


def _name(signum: int | None) -> str:
    return signal.Signals(signum).name if signum is not None else "a signal"


# Failures that end a run without a checkpoint of their own: the file system refusing a
# write, a host env raising, memory running out. The message says what is kept.
_STOPPING_FAILURES = (checkpoint.WriteError, HostEnvError, torch.OutOfMemoryError, MemoryError)


def _kept(run_dir: Path, iteration: int, saved: int | None) -> str:
    if saved is None:
        return (
            f"The run stopped after iteration {iteration}, before its first checkpoint; once "
            f"this is fixed, `fxrl resume {run_dir}` starts it again from its key."
        )
    return (
        f"The run stopped after iteration {iteration}; its last checkpoint (iteration "
        f"{saved}) and metrics are kept, and once this is fixed `fxrl resume {run_dir}` "
        "continues from there."
    )


def _stopped(e: BaseException, kept: str) -> BaseException:
    """``e`` said in one line with what the run kept (the same exception type)."""
    if isinstance(e, checkpoint.WriteError):
        return e.with_context(kept)
    if isinstance(e, torch.OutOfMemoryError | MemoryError):
        return type(e)(f"{_out_of_memory(e)} {kept}")
    return type(e)(f"{e} {kept}")


def _out_of_memory(e: BaseException) -> str:
    """What ran out, from torch's long message ("CUDA out of memory. Tried to allocate
    2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.2 GiB is free...")."""
    text = " ".join(str(e).split())
    device, fix = "the machine", "Free memory (other processes), or start a new run"
    if "CUDA" in text:
        device = "the GPU"
        fix = "Free the GPU's memory (other processes may hold it: nvidia-smi), or start a new run"
    asked = re.search(r"[Tt]ried to allocate ([\d.]+ \w+)", text)
    free = re.search(r"capacity of ([\d.]+ \w+) of which ([\d.]+ \w+) is free", text)
    detail = [f"tried to allocate {asked[1]}"] if asked else []
    detail += [f"{free[2]} free of {free[1]}"] if free else []
    return (
        f"{device} ran out of memory while training"
        f"{' (' + '; '.join(detail) + ')' if detail else ''}. {fix} with fewer --seeds or "
        "--num-envs (the memory an update needs grows with both)."
    )


def _update_name(info: dict[str, Any]) -> str:
    """``"the ppo update (8 seeds, CartPole-v1)"``: what the compile phase compiles."""
    env = getattr(info["config"], "env", "")
    if info["sweep"]:
        agents = f"{info['num_seeds'] // info['seeds']} combinations x {info['seeds']} seeds"
    elif info.get("tasks"):
        agents = f"{info['tasks']['count']} tasks x {info['seeds']} seeds"
    else:
        agents = f"{info['num_seeds']} seed{'s' if info['num_seeds'] > 1 else ''}"
    return f"the {info['algorithm']} update ({agents}{', ' + env if env else ''})"


def _title(info: dict[str, Any]) -> str:
    env = getattr(info["config"], "env", "")
    if info["sweep"]:
        count = info["num_seeds"] // info["seeds"]
        return f"{info['algorithm']} {env}: {count} combinations x {info['seeds']} seeds"
    if info.get("tasks"):
        count = info["tasks"]["count"]
        return f"{info['algorithm']} {env}: {count} tasks x {info['seeds']} seeds"
    return f"{info['algorithm']} {env} ({info['num_seeds']} seeds)".replace("  ", " ")


def _plot(run_dir: Path, info: dict[str, Any]) -> None:
    """``curve.png``: the seeds' mean and spread, or a sweep's grid of combinations."""
    if info["sweep"] or info.get("tasks"):
        plot_sweep(run_dir, run_dir / "curve.png", title=_title(info))
    else:
        plot_runs([run_dir], run_dir / "curve.png", title=_title(info))


def _summary(
    run_dir: Path,
    info: dict[str, Any],
    algo: Any,
    iters: int,
    seconds: float,
    first: float,
    compiles: list[Any],
) -> None:
    """Append this session's timing to ``run_dir/timing.jsonl`` (compile time apart:
    ``compile_s`` the programs' tracing and inductor, ``compile_from_cache`` whether
    inductor loaded every one from its cache; None where nothing was compiled)."""
    import json

    line = {
        "iterations": iters,
        "seconds": round(seconds, 3),
        "first_iteration_s": round(first, 3),
        "steps_per_s_after_first": round(
            (iters - 1) * algo.steps_per_update * info["num_seeds"] / max(seconds - first, 1e-9), 1
        )
        if iters > 1
        else None,
        "compile": info["compile"],
        "compile_s": round(sum(r.seconds for r in compiles), 3) if compiles else None,
        "compile_from_cache": all(r.from_cache for r in compiles) if compiles else None,
        "threads": torch.get_num_threads(),
    }
    checkpoint.append_text(run_dir / "timing.jsonl", json.dumps(line) + "\n")


def final_returns(run_dir: str | Path) -> dict[int, float]:
    """Each agent's last finished-episode return in a run's ``metrics.jsonl`` (agents:
    seeds, or in a sweep run ``combination * seeds + seed``)."""
    info = read_run_config(run_dir)
    out: dict[int, float] = {}
    for r in read_rows(Path(run_dir) / "metrics.jsonl"):
        if r.get("episode_return") is not None:
            agent = run_tasks.agent_of(r, info) if info.get("tasks") else agent_of(r, info)
            out[agent] = r["episode_return"]
    return out
