"""``RayCollector``: ``fxrl.collector`` with each env on a Ray actor, exact under worker loss.

    c = RayCollector(lambda: envs.batch(envs.make("CartPole-v1"), 8), policy, params, key,
                     num_workers=4, frames_per_batch=1024, total_frames=100_000)
    for batch, stats in c:
        params = learn(params, batch)
        c.update(params)          # one ray.put; every worker reads it from the object store
    c.close()

The driver owns the schedule. Worker ``w`` plays the stream that
``fxrl.collector(make_env(), policy, params, random.fold_in(key, w), ...)`` would play, and
its batch ``i`` is a task ``(w, i, params version, start state)``. The driver keeps every
task in flight; when an actor dies the task goes again to the restarted actor (or, for pure
envs, to any live one) and, the env being pure, comes back bit for bit. Frames are counted
from delivered batches only, so no batch is lost or counted twice.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import ray
import torch
from torch import Tensor

from fxrl import random, tree
from fxrl.collector import check_policy_state
from fxrl.distributed._worker import RolloutWorker, callable_name, to_numpy
from fxrl.envs.core import Env

__all__ = ["RayCollector", "WorkerError"]


class WorkerError(RuntimeError):
    """A rollout worker failed for a reason a restart does not cure (its env raised), or
    lost the same batch more than ``max_resubmits`` times."""


class RayCollector:
    """Iterator over ``(batch, stats)`` from ``num_workers`` Ray actors.

    Args:
      make_env: zero-argument callable building the worker's auto-resetting fxrl env
        (``lambda: envs.batch(envs.make(id), n)``, ``lambda: envs.gym(id, num_envs=n)``);
        called on each worker, so nothing unpicklable crosses the wire.
      policy: ``policy(params, obs, key) -> action`` or ``(action, extras)``, as for
        ``fxrl.collector``.
      params: the policy's params (a pytree of tensors); replace them with ``update``.
      key: worker ``w`` uses ``random.fold_in(key, w)`` as its collector key.
      num_workers: Ray actors, one env each.
      frames_per_batch: frames per yielded batch. Sync mode splits them evenly over the
        workers; async mode has each worker collect whole batches.
      total_frames: stop after this many frames (whole batches); ``None``: forever.
      sync: True: each batch holds one part from every worker, all with the same params
        version; False: batches are yielded as workers finish them (one task in flight
        per worker, so the object store never fills up).
      num_cpus: CPUs Ray reserves per worker; torch threads on the worker match it.
      max_restarts: times Ray restarts a dead worker (``-1``: always; then an env that
        kills its process on every try is retried for ever).
      max_resubmits: times one batch is resubmitted after its worker died for good
        (``max_restarts`` used up); while Ray restarts a worker, its task waits for it.
      timeout_s: longest wait for any batch before ``TimeoutError`` (names the workers).
      flat: leaves ``[frames_per_batch, ...]``; ``False``: sync ``[T, workers x envs,
        ...]`` (an unbatched env counts as one), async the worker's ``[T, *batch_shape,
        ...]`` as ``fxrl.collector(..., flat=False)`` gives.
      compile: pure envs step with ``fxrl.compile(env.step)`` on the workers, compiled
        when the worker starts (pays from a few thousand steps per worker on). A
        restarted worker loads the graph from inductor's on-disk FX graph cache
        (``info[w]["compile_cache"]``, ``info[w]["compile_s"]``). Compiled float code
        may differ from eager by an ulp: compare compiled batches with compiled ones.
      policy_state: a stateful policy's state at the start of each worker's stream (a
        recurrent carry, OU noise), one per env of a worker's env: tensors
        ``[*batch_shape, ...]``, as ``fxrl.collector``'s ``policy_state``; the policy is
        then ``policy(params, obs, policy_state, is_init, key) -> (action,
        policy_state)``. Each worker keeps its state from batch to batch and sets
        ``is_init`` where an episode ended, as the local collector does; for pure envs the
        state travels with the task, so a restarted worker continues it exactly.
    Yields:
      ``(batch, stats)`` as ``fxrl.collector`` does (with ``policy_state``: also
      ``is_init``, ``policy_state`` and ``next_policy_state``). ``batch["traj_id"]`` is the worker's
      own id times ``num_workers`` plus the worker index (unique over all workers).
      ``stats`` adds ``params_version`` (sync: a tensor, one per worker; async: an int),
      ``worker`` and ``index`` (which stream and batch; sync: ``index`` only),
      ``resubmitted`` (batches that had to run again because their worker died: run by
        its restarted process, or resubmitted to another worker; so far) and
      ``params_fetch_s`` (seconds each worker spent reading new params from the object
      store before the batch; 0 where it held them already).
    """

    def __init__(
        self,
        make_env: Callable[[], Env],
        policy: Callable[..., Any],
        params: Any,
        key: Tensor,
        num_workers: int,
        frames_per_batch: int,
        total_frames: int | None = None,
        *,
        sync: bool = True,
        num_cpus: float = 1,
        max_restarts: int = 3,
        max_resubmits: int = 3,
        timeout_s: float = 300.0,
        flat: bool = True,
        compile: bool = False,
        policy_state: Any = None,
        workers: RayCollector | None = None,
    ) -> None:
        _check(make_env, params, num_workers, frames_per_batch, total_frames, sync)
        _check_reuse(workers, num_workers, num_cpus, max_restarts)
        if not ray.is_initialized():
            ray.init()
        self.num_workers, self.sync, self.flat = num_workers, sync, flat
        self.frames_per_batch, self.total_frames = frames_per_batch, total_frames
        self.max_resubmits, self.timeout_s = max_resubmits, timeout_s
        self.num_cpus, self.max_restarts = num_cpus, max_restarts
        per_worker = frames_per_batch // num_workers if sync else frames_per_batch
        # What the workers build (env, policy, batch size): one object, named by an id in
        # every call, so a restarted or taken-over actor builds it when it first sees it.
        setup = {"make_env": make_env, "policy": policy, "frames_per_batch": per_worker,
                 "compile": compile, "policy_state": policy_state}  # fmt: skip
        self._setup_box = [uuid.uuid4().hex, ray.put(setup)]
        self._make_env_name = callable_name(make_env)
        # Actors started here are this collector's to kill; taken-over ones only once
        # it has started (until then they stay with the other collector).
        self._owned = workers is None
        self._handed_over = False
        if workers is None:
            actor = ray.remote(RolloutWorker).options(
                num_cpus=num_cpus, max_restarts=max_restarts, max_task_retries=0
            )
            threads = max(1, int(num_cpus))
            self.workers = [actor.remote(w, threads) for w in range(num_workers)]
        else:
            self.workers = list(workers.workers)
        self._suspect: set[int] = set()  # workers whose last task died: check before use
        self.info = self._start(make_env)
        self.host = self.info[0]["host"]
        self.batch_shape = self.info[0]["batch_shape"]
        self._check_frames(per_worker)
        if policy_state is not None:
            try:
                check_policy_state(policy_state, tuple(self.batch_shape), self.info[0]["env"])
            except ValueError as e:
                self.close()
                raise ValueError(f"RayCollector: {str(e).removeprefix('collector: ')}") from None
        self._keys = [random.fold_in(key, w) for w in range(num_workers)]
        self._snapshots: list[Any] = [None] * num_workers
        self._next_index = [0] * num_workers
        self._in_flight: dict[Any, dict[str, Any]] = {}
        self.frames = self.batches = self.resubmitted = 0
        self._pid = [i["pid"] for i in self.info]  # the process each worker's last batch came from
        self.version = -1
        self.update(params)
        if workers is not None:
            workers._hand_over()
            self._owned = True

    # ------------------------------------------------------------------ public

    def update(self, params: Any) -> None:
        """Act with ``params`` from the next submitted batch on: one ``ray.put`` (numpy
        leaves, read zero-copy by the workers), a new version number."""
        self._params_ref = ray.put(to_numpy(params))
        self.version += 1

    def worker_pids(self) -> list[int]:
        """The current process id of each worker (changes when Ray restarts one)."""
        return [self.info[self._first_alive([w])]["pid"] for w in range(len(self.workers))]

    def close(self) -> None:
        """Kill the workers (the Ray cluster itself stays up); after handing them to
        another collector (its ``workers=``), kill nothing."""
        if self._owned:
            for w in self.workers:
                ray.kill(w, no_restart=True)
        self.workers, self._in_flight = [], {}

    def _hand_over(self) -> None:
        """Give the workers up to the collector that took them over (``workers=self``)."""
        self._owned, self._handed_over = False, True
        self.close()

    def __enter__(self) -> RayCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        return self

    def __next__(self) -> tuple[dict[str, Any], dict[str, Any]]:
        if self._done(self.frames):
            self._in_flight = {}
            raise StopIteration
        if not self.workers:
            if self._handed_over:
                raise RuntimeError(
                    "RayCollector: used after another RayCollector took its workers (workers=)."
                )
            raise RuntimeError("RayCollector: used after close().")
        return self._next_sync() if self.sync else self._next_async()

    # ------------------------------------------------------------------ schedule

    def _next_sync(self) -> tuple[dict[str, Any], dict[str, Any]]:
        for w in range(self.num_workers):
            self._submit(self._task(w), w)
        parts: dict[int, dict[str, Any]] = {}
        while self._in_flight:
            task, out = self._wait_one()
            parts[task["worker"]] = out
        outs = [parts[w] for w in range(self.num_workers)]
        # [T, *batch_shape, ...] -> [T, envs, ...] (an unbatched env too), then side by side
        parts_ = [self._env_dim(o["batch"]) for o in outs]
        batch = tree.map(lambda *xs: torch.cat(xs, dim=1), *parts_)
        stats = self._stats(outs)
        stats["params_version"] = torch.tensor([o["version"] for o in outs])
        stats["index"] = self.batches
        return self._deliver(batch, stats)

    def _next_async(self) -> tuple[dict[str, Any], dict[str, Any]]:
        for w in range(self.num_workers):
            busy = any(t["worker"] == w for t in self._in_flight.values())
            planned = self.frames + self.frames_per_batch * len(self._in_flight)
            if not busy and not self._done(planned):
                self._submit(self._task(w), w)
        task, out = self._wait_one()
        stats = self._stats([out])
        stats.update(params_version=out["version"], worker=task["worker"], index=task["index"])
        stats["params_fetch_s"] = float(out["fetch_s"])
        return self._deliver(out["batch"], stats)

    def _task(self, w: int) -> dict[str, Any]:
        index = self._next_index[w]
        self._next_index[w] += 1
        snapshot = self._snapshots[w]
        return {"worker": w, "index": index, "version": self.version, "key": self._keys[w],
                "snapshot": snapshot, "params": self._params_ref, "attempt": 0}  # fmt: skip

    def _submit(self, task: dict[str, Any], w: int) -> None:
        if w in self._suspect:
            # This worker died for good (max_restarts used up): a pure task goes to the
            # first worker that answers, a host task waits for this one (and fails).
            order = (
                [w] if self.host else [(w + k) % self.num_workers for k in range(self.num_workers)]
            )
            w = self._first_alive(order)
        # max_task_retries=-1: a task whose actor dies (in flight, or sent while Ray
        # restarts it) runs again on the restarted actor, as Ray restarts it; the driver
        # resubmits only when max_restarts is used up.
        collect = self.workers[w].collect.options(max_task_retries=-1)
        ref = collect.remote(task_args(task), [task["params"]], self._setup_box)
        self._in_flight[ref] = {**task, "on": w}

    def _wait_one(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The next finished task and its result; resubmits tasks whose worker died."""
        while True:
            ready, _ = ray.wait(list(self._in_flight), num_returns=1, timeout=self.timeout_s)
            if not ready:
                waiting = sorted({t["on"] for t in self._in_flight.values()})
                raise TimeoutError(
                    f"RayCollector: no batch from workers {waiting} in {self.timeout_s} s "
                    "(timeout_s); a slow env? raise timeout_s."
                )
            task = self._in_flight.pop(ready[0])
            try:
                out = ray.get(ready[0], timeout=self.timeout_s)
            except ray.exceptions.RayActorError as e:
                self._suspect.add(task["on"])
                self._resubmit(task, e)
                continue
            except ray.exceptions.RayTaskError as e:
                raise WorkerError(self._describe_failure(task, e)) from None
            out["version"] = task["version"]
            if out["pid"] != self._pid[task["on"]]:  # a restarted worker ran it
                self._pid[task["on"]] = out["pid"]
                self.resubmitted += 1
                self._refresh_info(task["on"], out["pid"])
            if "snapshot" in out:
                self._snapshots[task["worker"]] = out.pop("snapshot")
            return task, out

    def _resubmit(self, task: dict[str, Any], error: Exception) -> None:
        if task["attempt"] >= self.max_resubmits:
            raise WorkerError(
                f"RayCollector: batch {task['index']} of worker {task['worker']} was lost "
                f"{task['attempt'] + 1} times (max_resubmits={self.max_resubmits}); last "
                f"error: {error}"
            ) from None
        self.resubmitted += 1
        # Pure tasks carry their start state: the first worker that answers takes it
        # (_submit picks it, the dead one being suspect). Host env state lives on its
        # actor, which is gone: _submit's wait for it ends in a WorkerError.
        self._submit({**task, "attempt": task["attempt"] + 1}, task["on"])

    def _refresh_info(self, w: int, pid: int) -> None:
        """``info[w]`` from the restarted process that answered as worker ``w`` (its own
        compile time and cache counters); left as it was if that process is gone again."""
        try:
            info = ray.get(self.workers[w].describe.remote(self._setup_box), timeout=self.timeout_s)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return
        if info["pid"] == pid:
            self.info[w] = info

    def _first_alive(self, order: list[int]) -> int:
        """The first of ``order`` whose actor answers, waiting while they restart."""
        deadline = time.monotonic() + self.timeout_s
        dead: set[int] = set()
        while time.monotonic() < deadline and len(dead) < len(order):
            for w in order:
                if w in dead:
                    continue
                try:
                    self.info[w] = ray.get(
                        self.workers[w].describe.remote(self._setup_box), timeout=self.timeout_s
                    )
                    self._suspect.discard(w)
                    return w
                except ray.exceptions.ActorUnavailableError:
                    continue  # restarting
                except ray.exceptions.RayActorError:
                    dead.add(w)  # died for good: its max_restarts are used up
                except ray.exceptions.RayTaskError as e:  # its make_env raised this time
                    raise WorkerError(
                        f"RayCollector: worker {w} restarted but did not start again: "
                        f"{_start_failure(e, self._make_env_name)}"
                    ) from None
            time.sleep(0.05)
        if len(dead) == len(order):
            raise WorkerError(
                f"RayCollector: workers {order} died and will not restart (max_restarts "
                "used up); no live worker can take their batches."
            )
        raise WorkerError(
            f"RayCollector: workers {order} did not come back within {self.timeout_s} s "
            f"(timeout_s)."
        )

    def _stats(self, outs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "episode_return": torch.cat([o["stats"]["episode_return"] for o in outs]),
            "episode_length": torch.cat([o["stats"]["episode_length"] for o in outs]),
            "random": False,
            "params_fetch_s": torch.tensor([o["fetch_s"] for o in outs], dtype=torch.float64),
        }

    def _deliver(self, batch: dict[str, Any], stats: dict[str, Any]) -> tuple[dict, dict]:
        worker = stats.get("worker")
        if worker is None:  # sync: env j of the combined batch belongs to worker j // n
            n = batch["traj_id"].shape[1] // self.num_workers
            worker = torch.arange(self.num_workers).repeat_interleave(n)
        batch = {**batch, "traj_id": batch["traj_id"] * self.num_workers + worker}
        if self.flat:  # sync batches are [T, envs, ...] already
            by_env = batch if self.sync else self._env_dim(batch)
            batch = tree.map(lambda x: x.reshape(-1, *x.shape[2:]), by_env)
        self.frames += self.frames_per_batch
        self.batches += 1
        stats.update(frames=self.frames, resubmitted=self.resubmitted)
        return batch, stats

    # ------------------------------------------------------------------ helpers

    def _done(self, frames: int) -> bool:
        return self.total_frames is not None and frames >= self.total_frames

    def _env_dim(self, batch: Any) -> Any:
        """A worker's leaves ``[T, *batch_shape, ...]`` as ``[T, envs, ...]`` (an
        unbatched env: ``[T, 1, ...]``)."""
        n, k = self._num_envs(), len(self.batch_shape)
        return tree.map(lambda x: x.reshape(x.shape[0], n, *x.shape[1 + k :]), batch)

    def _num_envs(self) -> int:
        n = 1
        for d in self.batch_shape:
            n *= d
        return n

    def _start(self, make_env: Callable[[], Env]) -> list[dict[str, Any]]:
        """Each worker's ``describe()``; a worker whose ``make_env`` failed is named. A
        worker that Ray is restarting (a taken-over one) is waited for, as a collect task
        is; one whose restarts are used up did not start."""
        info = []
        for w, worker in enumerate(self.workers):
            try:
                ref = worker.describe.options(max_task_retries=-1).remote(self._setup_box)
                info.append(ray.get(ref, timeout=self.timeout_s))
            except (
                ray.exceptions.RayActorError,
                ray.exceptions.RayTaskError,
                ray.exceptions.GetTimeoutError,
            ) as e:
                self.close()
                raise WorkerError(
                    f"RayCollector: worker {w} did not start: "
                    f"{_start_failure(e, callable_name(make_env))}"
                ) from None
        shapes = {i["batch_shape"] for i in info}
        if len(shapes) > 1:
            self.close()
            raise ValueError(
                f"RayCollector: make_env built envs of batch shapes {sorted(shapes)} on "
                "different workers; every worker must build the same env."
            )
        return info

    def _describe_failure(self, task: dict[str, Any], error: Exception) -> str:
        w = task["on"]
        env = self.info[w]["env"] if w < len(self.info) else "?"
        cause = getattr(error, "cause", None) or error
        return (
            f"RayCollector: worker {w} (env {env}) failed on batch {task['index']} of "
            f"stream {task['worker']}: {cause}"
        )

    def _check_frames(self, per_worker: int) -> None:
        num_envs = self._num_envs()
        if per_worker % num_envs:
            self.close()
            raise ValueError(
                f"RayCollector: each worker collects {per_worker} frames per batch, not a "
                f"multiple of its {num_envs} envs ({self.info[0]['env']}); make "
                "frames_per_batch a multiple of num_workers x envs per worker."
            )


def task_args(task: dict[str, Any]) -> dict[str, Any]:
    """What a worker needs of a task (the params ref travels boxed, separately)."""
    return {k: task[k] for k in ("index", "version", "key", "snapshot")}


def _start_failure(error: Exception, make_env: str) -> str:
    """What the worker's own ``__init__`` said (``make_env NAME raised ...``), found in
    Ray's wrapped error text; else the first line of Ray's error."""
    for line in reversed(str(error).splitlines()):
        if "RayCollector worker " in line and ": make_env " in line:
            return line[line.index("make_env ") :].strip()
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return f"make_env {make_env}: {first}"


def _check_reuse(workers: Any, num_workers: int, num_cpus: float, max_restarts: int) -> None:
    if workers is None:
        return
    if not isinstance(workers, RayCollector):
        raise TypeError(
            f"RayCollector: workers must be another RayCollector whose workers to take "
            f"over, got {type(workers).__name__}."
        )
    if not workers.workers:
        raise ValueError(
            "RayCollector: workers= names a collector without workers (closed, or handed "
            "over already); start new ones with workers=None."
        )
    if len(workers.workers) != num_workers:
        raise ValueError(
            f"RayCollector: workers= has {len(workers.workers)} workers; num_workers is "
            f"{num_workers}."
        )
    if (workers.num_cpus, workers.max_restarts) != (num_cpus, max_restarts):
        raise ValueError(
            f"RayCollector: workers= were started with num_cpus={workers.num_cpus}, "
            f"max_restarts={workers.max_restarts}; got num_cpus={num_cpus}, "
            f"max_restarts={max_restarts} (they are the actors' own: pass the same)."
        )


def _check(
    make_env: Any,
    params: Any,
    num_workers: Any,
    frames_per_batch: Any,
    total_frames: Any,
    sync: bool,
) -> None:
    if not callable(make_env) or isinstance(make_env, Env):
        raise TypeError(
            f"RayCollector: make_env must be a zero-argument callable returning an env "
            f"(e.g. lambda: envs.batch(envs.make('CartPole-v1'), 8)), got "
            f"{type(make_env).__name__}; envs are built on the workers."
        )
    if callable(params):
        raise TypeError(
            "RayCollector: params must be a pytree of tensors, not a callable; pass new "
            "params with update(params)."
        )
    if not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"RayCollector: num_workers must be a positive int, got {num_workers!r}.")
    if not isinstance(frames_per_batch, int) or frames_per_batch < 1:
        raise ValueError(
            f"RayCollector: frames_per_batch must be a positive int, got {frames_per_batch!r}."
        )
    if sync and frames_per_batch % num_workers:
        raise ValueError(
            f"RayCollector: frames_per_batch={frames_per_batch} does not split evenly over "
            f"num_workers={num_workers} in sync mode; use a multiple of {num_workers}."
        )
    if total_frames is not None and (not isinstance(total_frames, int) or total_frames < 1):
        raise ValueError(
            f"RayCollector: total_frames must be a positive int or None, got {total_frames!r}."
        )
