"""Pieces every benchmark here shares: the CPU's name for the JSON header, one way of
timing contenders (``measure``: alternating rounds, so drift on a shared machine hits all
alike), its form for A/B runs of compiled updates (``ab_args``, ``time_updates``,
``ms_summary``), and the torch networks the peers run (``torch_mlp``, ``nature_dqn``) with the
fxrl params that hold the same weights (``mlp_params``, ``nature_dqn_params``)."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_s() -> float:
    """CPU seconds of this process and of the children it waited for (compilers, say)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_fresh(script: str, argv: list[str]) -> dict[str, Any]:
    """``python script *argv`` in a fresh process with a fresh, empty inductor cache
    (``TORCHINDUCTOR_CACHE_DIR``): the last line it printed, a JSON object."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        cmd = [sys.executable, script, *argv]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(
    runs: dict[str, Callable[[], object]],
    iters: int | None,
    repeats: int,
    *,
    target_s: float = 0.05,
    warmup: bool = True,
    self_timed: bool = False,
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Milliseconds per call of each run, one entry per round, and each run's first call
    in seconds (the compile time of a compiled run).

    Args:
      runs: ``{name: run}``, each called with no arguments.
      iters: calls per round; ``None`` sizes each run to about ``target_s`` per round
        from one call after warm-up.
      repeats: rounds; the order of the runs reverses from one round to the next.
      warmup: call each run twice before timing (the first call's seconds are returned);
        ``False`` for runs that are long or warm already (no first-call times then).
      self_timed: each run returns the seconds of the part of its call to time (its
        setup left out) instead of being timed whole.
    """
    first: dict[str, float] = {}
    if warmup:
        for name, run in runs.items():
            first[name] = _seconds(run, self_timed)
            run()
    counts = {name: iters or max(1, int(target_s / max(_seconds(run, self_timed), 1e-7)))
              for name, run in runs.items()}  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            times[name].append(_round_ms(runs[name], counts[name], self_timed))
    return times, first


def ab_args(doc: str, cases: Sequence[str], name: str) -> argparse.Namespace:
    """The command line of an A/B benchmark of compiled updates: ``--cases`` (checked
    against ``cases``), ``--threads``, ``--rounds``, ``--updates`` per round, ``--warmup``
    updates; ``args.cases`` comes back as a list."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--cases", default=",".join(cases))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    args.cases = args.cases.split(",")
    unknown = [c for c in args.cases if c not in cases]
    if unknown:
        raise SystemExit(f"{name}: unknown case {unknown[0]!r}; expected one of {list(cases)}")
    return args


def warm_update(algo: Any, seeds: int, updates: int = 2) -> list[Any]:
    """``[update, state]`` for ``time_updates``: ``algo``'s (a module of fxrl.algorithms)
    default update, batched over ``seeds`` and compiled, after ``updates`` calls (the first
    traces and compiles it, so whatever is set while this runs is built into it)."""
    from fxrl import random
    from fxrl.algorithms import core

    init, update = core.batched(algo.make(algo.Config()), seeds, compile=True)
    state = init(random.key(0))
    for _ in range(updates):
        state, _ = update(state)
    return [update, state]


def time_updates(
    programs: dict[str, list[Any]], rounds: int, updates: int, warmup: int = 0
) -> dict[str, list[float]]:
    """Process CPU milliseconds per update of each ``[update, state]`` in ``programs``,
    one entry per round: ``warmup`` updates of each first, then per round ``updates`` of
    each in a row, the order rotated by one from round to round (so drift on a shared
    machine hits all alike). The states move on in place: ``programs[name][1]`` is the
    last one."""
    for _ in range(warmup):
        for p in programs.values():
            p[1], _ = p[0](p[1])
    names = list(programs)
    ms: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            update, state = programs[name]
            begin = time.process_time()
            for _ in range(updates):
                state, _ = update(state)
            ms[name].append(1e3 * (time.process_time() - begin) / updates)
            programs[name][1] = state
    return ms


def ms_summary(xs: list[float]) -> dict[str, Any]:
    """The median, min, max and every round's milliseconds, rounded for a JSON line."""
    return {"ms": round(statistics.median(xs), 3), "ms_min": round(min(xs), 3),
            "ms_max": round(max(xs), 3), "rounds_ms": [round(x, 3) for x in xs]}  # fmt: skip


def state_max_abs_diff(a: Any, b: Any) -> float:
    """The largest absolute difference between two states' float leaves (0 for the rest):
    how far two programs of one update ended apart."""
    from fxrl import tree

    pairs = zip(tree.leaves(a), tree.leaves(b), strict=True)
    return max(
        float((x.double() - y.double()).abs().max()) if x.is_floating_point() else 0.0
        for x, y in pairs
    )


def _round_ms(run: Callable[[], object], n: int, self_timed: bool) -> float:
    """Milliseconds per call over ``n`` calls in a row: the wall time of the whole loop, or
    the sum of what the calls report when they time themselves."""
    if self_timed:
        return sum(float(run()) for _ in range(n)) / n * 1e3  # type: ignore[arg-type]
    start = time.perf_counter()
    for _ in range(n):
        run()
    return (time.perf_counter() - start) / n * 1e3


def _seconds(run: Callable[[], object], self_timed: bool) -> float:
    start = time.perf_counter()
    out = run()
    return float(out) if self_timed else time.perf_counter() - start  # type: ignore[arg-type]


def one_core_jax(env: dict[str, str], threads: int) -> Callable[[], None] | None:
    """For ``threads == 1``: set ``env``'s XLA flags so that XLA's CPU backend computes
    on one thread (``--xla_cpu_multi_thread_eigen=false``) and return a ``preexec_fn``
    pinning the JAX subprocess to one core, as torch runs on one thread. (The flag pair
    used before, with ``intra_op_parallelism_threads=1``, deadlocked jax 0.10.2 inside
    ``block_until_ready`` on PureJaxRL's MinAtar runs of 500k steps: the process sat
    idle; without it they finish.) ``None`` for several threads: nothing changed."""
    if threads != 1:
        return None
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_cpu_multi_thread_eigen=false".strip()
    import os

    core = min(os.sched_getaffinity(0))
    return lambda: os.sched_setaffinity(0, {core})


def torch_mlp(
    sizes: Sequence[int], activation: type[torch.nn.Module] = torch.nn.ReLU
) -> torch.nn.Sequential:
    """``Linear(sizes[0], sizes[1]), activation, ..., Linear(sizes[-2], sizes[-1])``: the
    torch peer of ``fxrl.nn.mlp`` (no activation after the last layer)."""
    layers: list[torch.nn.Module] = []
    for n_in, n_out in itertools.pairwise(sizes):
        layers += [torch.nn.Linear(n_in, n_out), activation()]
    return torch.nn.Sequential(*layers[:-1])


def layer_params(module: torch.nn.Module, kind: type[torch.nn.Module]) -> list[dict]:
    """``[{"w", "b"}, ...]``: copies of the weights of ``module``'s ``kind`` layers in order."""
    return [{"w": m.weight.detach().clone(), "b": m.bias.detach().clone()}
            for m in module.modules() if isinstance(m, kind)]  # fmt: skip


def mlp_params(module: torch.nn.Module) -> dict:
    """The ``fxrl.nn.mlp`` params holding a torch MLP's weights (``{"layers": [...]}``)."""
    return {"layers": layer_params(module, torch.nn.Linear)}


class Scale(torch.nn.Module):
    """uint8 pixels to floats in [0, 1], the first step of a network fed raw frames."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float() / 255.0


def nature_dqn(num_actions: int, pixels: bool = False) -> torch.nn.Sequential:
    """Mnih et al. (2015)'s network on [B, 4, 84, 84] frames: three convolutions, then 512
    hidden units; ``pixels=True`` takes uint8 frames and scales them to [0, 1] first."""
    return torch.nn.Sequential(
        *([Scale()] if pixels else []),
        torch.nn.Conv2d(4, 32, 8, 4), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 4, 2), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, 1), torch.nn.ReLU(), torch.nn.Flatten(-3),
        torch.nn.Linear(3136, 512), torch.nn.ReLU(), torch.nn.Linear(512, num_actions),
    )  # fmt: skip


def nature_dqn_params(module: torch.nn.Module) -> dict:
    """The ``fxrl.nn.atari_dqn`` params holding ``nature_dqn``'s weights."""
    return {"conv": {"layers": layer_params(module, torch.nn.Conv2d)},
            "head": {"layers": layer_params(module, torch.nn.Linear)}}  # fmt: skip


class Concat(torch.nn.Module):
    """``net(cat([obs, action]))``: a critic module taking the two inputs separately (the
    call shape TorchRL's ``ValueOperator`` with two in_keys gives it)."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, action], -1))
