"""What a run shows while it trains: one progress bar, or (``quiet``) a log line now and then.

The bar shows env steps per seed, steps/s (all seeds together), ETA and the live mean, min
and max episode return across seeds (each seed's latest finished episodes). Without a
terminal (a log file, CI) or with ``quiet=True`` it prints one plain line every
``log_every`` seconds instead, so logs stay short.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

__all__ = ["Progress", "return_stats"]


def return_stats(latest: dict[int, float]) -> str:
    """``"return 21.3 (min 9.0, max 40.5)"`` from each seed's latest return; ``""`` if none."""
    vals = [v for v in latest.values() if math.isfinite(v)]
    if not vals:
        return "return -"
    return f"return {sum(vals) / len(vals):.1f} (min {min(vals):.1f}, max {max(vals):.1f})"


class Progress:
    """Context manager: ``with Progress(total, start) as p: p.update(steps, rows)``.

    Args:
      total: env steps per seed the run will reach.
      start: env steps per seed already done (a resumed run).
      num_seeds: seeds trained together (steps/s counts all of them).
      quiet: plain log lines instead of a bar.
      log_every: seconds between log lines when quiet or not on a terminal.
    """

    def __init__(
        self,
        total: int,
        start: int = 0,
        *,
        num_seeds: int = 1,
        quiet: bool = False,
        log_every: float = 10.0,
        stream: TextIO | None = None,
    ) -> None:
        self.total, self.steps, self.num_seeds = total, start, num_seeds
        self.stream = stream or sys.stdout
        self.quiet = quiet or not self.stream.isatty()
        self.log_every = log_every
        self.latest: dict[int, float] = {}
        self._start_steps, self._t0, self._last_log = start, time.perf_counter(), -math.inf
        self._bar: Any = None

    def __enter__(self) -> Progress:
        if not self.quiet:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("[bold]train"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("steps  {task.fields[rate]} steps/s"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[ret]}"),
                console=Console(file=self.stream),
                refresh_per_second=4,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(
                "train", total=self.total, completed=self.steps, rate="-", ret=return_stats({})
            )
        return self

    def rate(self) -> float:
        """Env steps per second over all seeds since this session started."""
        dt = time.perf_counter() - self._t0
        return (self.steps - self._start_steps) * self.num_seeds / dt if dt > 0 else 0.0

    def update(self, steps: int, rows: list[dict[str, Any]]) -> None:
        """After an iteration: the steps per seed reached and that iteration's metric rows."""
        self.steps = steps
        for r in rows:
            v = r.get("episode_return")
            if isinstance(v, int | float) and math.isfinite(v):
                self.latest[r["seed"]] = float(v)
        if self._bar is not None:
            self._bar.update(
                self._task,
                completed=steps,
                rate=f"{self.rate():,.0f}",
                ret=return_stats(self.latest),
            )
            return
        now = time.perf_counter()
        if now - self._last_log >= self.log_every or steps >= self.total:
            self._last_log = now
            self.log(
                f"steps {steps:,}/{self.total:,}  {self.rate():,.0f} steps/s  "
                f"{return_stats(self.latest)}"
            )

    def log(self, message: str) -> None:
        """A line above the bar (or a plain line when there is no bar)."""
        if self._bar is not None:
            self._bar.console.print(message)
        else:
            print(message, file=self.stream, flush=True)

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
