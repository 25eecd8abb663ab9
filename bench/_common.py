"""Pieces every benchmark here shares: the CPU's name for the JSON header, and timing of
several contenders in alternating rounds (so drift on a shared machine hits all alike)."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable

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


def measure(
    runs: dict[str, Callable[[], object]], iters: int, repeats: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Milliseconds per call of each run, one entry per round (the order alternates), and
    each run's first call in seconds (the compile time for compiled runs)."""
    first: dict[str, float] = {}
    for name, run in runs.items():
        start = time.perf_counter()
        run()
        first[name] = time.perf_counter() - start
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            for _ in range(iters):
                runs[name]()
            times[name].append((time.perf_counter() - start) / iters * 1e3)
    return times, first


class Concat(torch.nn.Module):
    """``net(cat([obs, action]))``: a critic module taking the two inputs separately (the
    call shape TorchRL's ``ValueOperator`` with two in_keys gives it)."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, action], -1))
