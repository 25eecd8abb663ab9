"""The rollout worker behind ``RayCollector``: a plain class that Ray turns into an actor.

A task names everything its batch depends on: the setup (make_env, policy, batch size), the
stream key, the batch index, the params version and, for pure envs, the collector state the
batch starts from (env state, last observation, trajectory ids, running returns). So a task
is a pure function of its arguments and any worker, fresh or restarted, collects the same
batch from it. Host envs (gymnasium, ALE) keep their state in the worker; a restarted one
starts them again.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

import numpy as np
import torch

from fxrl import tree
from fxrl.collector import Collector
from fxrl.envs.core import Env, Wrapper
from fxrl.envs.host import HostEnv

# The collector fields that carry over from one batch to the next (the policy's state and
# its is_init too: a recurrent carry or OU noise continues across batches).
_SNAPSHOT = ("state", "_obs", "_traj", "_next_traj", "_return", "_length", "frames", "batches",
             "policy_state", "is_init")  # fmt: skip


def is_host(env: Env) -> bool:
    """Whether ``env`` (or the env it wraps) runs outside torch (gymnasium, ALE)."""
    while isinstance(env, Wrapper):
        env = env.env
    return isinstance(env, HostEnv)


def callable_name(fn: Any) -> str:
    """``fn``'s qualified name for error messages (``make_env`` closures included)."""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module else name


def to_numpy(params: Any) -> Any:
    """Leaves as numpy arrays where numpy holds the dtype, so Ray reads them zero-copy."""

    def conv(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.dtype not in (torch.bfloat16,) and not x.is_complex():
            return x.detach().cpu().numpy()
        return x

    return tree.map(conv, params)


def to_torch(params: Any) -> Any:
    """Numpy leaves back as tensors sharing their memory (read-only in the object store:
    policies only read params, so the copy torch would want is not needed)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "the given NumPy array is not writable"
        return tree.map(lambda x: torch.from_numpy(x) if isinstance(x, np.ndarray) else x, params)


class RolloutWorker:
    """Collects batches on request for the setup its calls name.

    The actor's own arguments are only its index and torch threads; the env, policy and
    batch size come with each call as a setup (an id and a boxed object-store ref), built
    when the id is new. So a restarted actor (Ray runs ``__init__`` again) rebuilds the
    setup of the task it is given, and another ``RayCollector`` can take over running
    actors (``workers=``) without starting processes.
    """

    def __init__(self, index: int, num_threads: int) -> None:
        torch.set_num_threads(num_threads)
        self.index = index
        self._setup_id: str | None = None
        self.env: Env | None = None
        self.compile_s = 0.0
        self.compile_cache: dict[str, int] = {}

    def _ensure(self, setup_box: list[Any]) -> None:
        """Build the setup ``setup_box`` = ``[id, ObjectRef]`` names, unless held already."""
        setup_id, ref = setup_box
        if setup_id != self._setup_id:
            import ray

            self._configure(ray.get(ref))
            self._setup_id = setup_id

    def _configure(self, setup: dict[str, Any]) -> None:
        make_env = setup["make_env"]
        name = callable_name(make_env)
        try:
            env = make_env()
        except Exception as e:
            raise RuntimeError(
                f"RayCollector worker {self.index}: make_env {name} raised {type(e).__name__}: {e}"
            ) from e
        if not isinstance(env, Env):
            raise TypeError(
                f"RayCollector worker {self.index}: make_env {name} must return an fxrl env "
                f"(fxrl.envs.make, batch, gym, atari), got {type(env).__name__}."
            )
        self.env, self.policy = env, setup["policy"]
        self.frames_per_batch = setup["frames_per_batch"]
        self.policy_state = setup["policy_state"]  # each stream's state at its start
        self.host = is_host(env)
        self.compile_s, self.compile_cache = 0.0, {}
        if setup["compile"] and not self.host:
            self._compile_step()
        # the params and a host env's stream belong to the collector that set this up
        self._version, self._params = -1, None
        self._local: Collector | None = None  # host envs: the worker's own stream

    def _compile_step(self) -> None:
        """Replace this worker's ``env.step`` by ``fxrl.compile(env.step)``, compiled now
        on a reset state (``reset`` and ``step`` give the same shapes and strides, so the
        collector's calls find this program). ``fxrl.compile`` uses inductor's on-disk FX
        graph cache, so a restarted worker (or another on the same machine) loads the
        compiled program instead of generating it again; the cache counters (this
        compile's only) say which."""
        from torch._dynamo.utils import counters

        from fxrl import random
        from fxrl.compile import compile as fxrl_compile

        assert self.env is not None
        before = {k: v for k, v in counters["inductor"].items() if "cache" in k}
        start = time.perf_counter()
        step = fxrl_compile(self.env.step)
        k_reset, k_action = random.split(random.key(0)).unbind(0)
        state, _ = self.env.reset(k_reset)
        action = self.env.action_spec.sample(k_action, tuple(self.env.batch_shape))
        step(state, action)
        self.env.step = step  # type: ignore[method-assign]
        self.compile_s = time.perf_counter() - start
        after = {k: v for k, v in counters["inductor"].items() if "cache" in k}
        self.compile_cache = {k: v - before.get(k, 0) for k, v in after.items()}

    def describe(self, setup_box: list[Any]) -> dict[str, Any]:
        """pid, env name, its batch shape and whether it is a host env (of the setup
        ``setup_box`` names, built first if new)."""
        self._ensure(setup_box)
        assert self.env is not None
        return {
            "pid": os.getpid(),
            "env": repr(self.env),
            "host": self.host,
            "batch_shape": tuple(self.env.batch_shape),
            "compile_s": self.compile_s,
            "compile_cache": self.compile_cache,
        }

    def collect(
        self, task: dict[str, Any], params_box: list[Any], setup_box: list[Any]
    ) -> dict[str, Any]:
        """One batch for ``task``; ``params_box`` is ``[ObjectRef]`` of the task's version
        (boxed so Ray does not fetch it when this worker already holds that version), and
        ``setup_box`` names the setup (see ``_ensure``)."""
        import ray

        self._ensure(setup_box)
        fetch_s = 0.0
        if task["version"] != self._version:
            start = time.perf_counter()
            self._params = to_torch(ray.get(params_box[0]))
            self._version, fetch_s = task["version"], time.perf_counter() - start
        collector = self._collector(task)
        try:
            batch, stats = next(collector)
        except Exception as e:
            raise RuntimeError(
                f"RayCollector worker {self.index} (pid {os.getpid()}): env {self.env!r} "
                f"raised while collecting batch {task['index']}: {type(e).__name__}: {e}"
            ) from e
        out = {"batch": batch, "stats": stats, "pid": os.getpid(), "fetch_s": fetch_s}
        if not self.host:
            out["snapshot"] = {f: getattr(collector, f) for f in _SNAPSHOT}
        return out

    def _collector(self, task: dict[str, Any]) -> Collector:
        if self.host:
            # Host env state lives here: continue the worker's stream (a restarted worker
            # starts a new one from the task's key; documented as not bit-exact).
            if self._local is None:
                self._local = self._new(task)
                self._local.batches = task["index"]
            self._local.update(self._params)
            return self._local
        collector = self._new(task)
        for field, value in (task["snapshot"] or {}).items():
            setattr(collector, field, value)
        return collector

    def _new(self, task: dict[str, Any]) -> Collector:
        return Collector(
            self.env, self.policy, self._params, task["key"], self.frames_per_batch, flat=False,
            policy_state=self.policy_state,
        )  # fmt: skip
