"""What a run shows while it trains: the compile as its own phase, then one progress bar,
or (``quiet``) a log line now and then.

The compile phase (``with progress.compiling("the ppo update"): ...`` around the first
call of a compiled update) shows a spinner with the seconds elapsed and what is being
compiled, then one line: how long the compile took, or that inductor loaded the program
from its cache (``fxrl.compile.watch`` tells which). The bar then shows env steps per
seed, steps/s (all seeds together, counted after the compile), ETA and the live mean, min
and max episode return across seeds (each seed's latest finished episodes). Without a
terminal (a log file, CI) or with ``quiet=True`` it prints plain lines instead: one when
the compile starts, one when it ends, then one every ``log_every`` seconds, so logs stay
short.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

from fxrl.compile import CompileRecord, watch

__all__ = ["Progress", "compile_summary", "return_stats"]


def return_stats(latest: dict[int, float]) -> str:
    """``"return 21.3 (min 9.0, max 40.5)"`` from each seed's latest return; ``""`` if none."""
    vals = [v for v in latest.values() if math.isfinite(v)]
    if not vals:
        return "return -"
    return f"return {sum(vals) / len(vals):.1f} (min {min(vals):.1f}, max {max(vals):.1f})"


def compile_summary(what: str, records: list[CompileRecord], seconds: float) -> str:
    """The line that ends a compile phase of ``seconds`` that built ``records``."""
    if not records:
        return f"{what}: already compiled in this process ({seconds:.1f} s)"
    took = sum(r.seconds for r in records)
    cached = sum(r.from_cache for r in records)
    programs = f" ({len(records)} programs)" if len(records) > 1 else ""
    if cached == len(records):
        return f"{what}: loaded from the compile cache in {took:.1f} s{programs}"
    if cached:
        return (
            f"{what}: compiled in {took:.1f} s ({cached} of {len(records)} programs loaded "
            "from the compile cache)"
        )
    return f"{what}: compiled in {took:.1f} s{programs}"


class Progress:
    """Context manager: ``with Progress(total, start) as p: p.update(steps, rows)``.

    Args:
      total: env steps per seed the run will reach.
      start: env steps per seed already done (a resumed run).
      num_seeds: seeds trained together (steps/s counts all of them).
      quiet: plain log lines instead of a bar.
      log_every: seconds between log lines when quiet or not on a terminal.
      stream: where to write (default: stdout); a bar needs a terminal (``isatty()``).
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
        self.compiles: list[CompileRecord] = []  # every program the compile phases built
        self._start_steps, self._t0, self._last_log = start, time.perf_counter(), -math.inf
        self._restart = False  # count steps/s anew from the next update (after a compile)
        self._bar: Any = None
        self._console: Any = None

    def __enter__(self) -> Progress:
        if not self.quiet:
            from rich.console import Console

            self._console = Console(file=self.stream)
        return self

    def _open_bar(self) -> None:
        """The bar, on the first update or line (so a compile phase comes before it)."""
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
            console=self._console,
            refresh_per_second=4,
        )
        self._bar.__enter__()
        self._task = self._bar.add_task(
            "train", total=self.total, completed=self.steps, rate="-", ret=return_stats(self.latest)
        )

    @contextlib.contextmanager
    def compiling(self, what: str) -> Iterator[list[CompileRecord]]:
        """The compile phase around the call that compiles: a spinner with the seconds
        elapsed and ``what`` while inside, then ``compile_summary``'s line. Yields the
        records of the programs built inside (``fxrl.compile.watch``); steps/s is
        counted from the next ``update`` on."""
        start = time.perf_counter()
        spinner = None
        if self._console is not None and self._bar is None:
            from rich.progress import Progress as RichProgress
            from rich.progress import SpinnerColumn, TextColumn

            spinner = RichProgress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                _seconds_column(),
                console=self._console,
                transient=True,
                refresh_per_second=4,
            )
            spinner.__enter__()
            spinner.add_task(f"compiling {what}")
        else:
            self.log(f"compiling {what} ...")
        try:
            with watch() as records:
                yield records
        finally:
            if spinner is not None:
                spinner.__exit__(None, None, None)
        self.compiles += records
        self.log(compile_summary(what, records, time.perf_counter() - start))
        self._restart = True

    def rate(self) -> float:
        """Env steps per second over all seeds since this session started (or since the
        first update after a compile phase)."""
        dt = time.perf_counter() - self._t0
        return (self.steps - self._start_steps) * self.num_seeds / dt if dt > 0 else 0.0

    def update(self, steps: int, rows: list[dict[str, Any]]) -> None:
        """After an iteration: the steps per seed reached and that iteration's metric rows."""
        self.steps = steps
        if self._restart:  # the compile phase's own iteration does not count
            self._restart, self._start_steps, self._t0 = False, steps, time.perf_counter()
        for r in rows:
            v = r.get("episode_return")
            if isinstance(v, int | float) and math.isfinite(v):
                self.latest[r["seed"]] = float(v)
        shown_rate = f"{self.rate():,.0f}" if steps > self._start_steps else "-"
        if self._console is not None:
            if self._bar is None:
                self._open_bar()
            self._bar.update(
                self._task, completed=steps, rate=shown_rate, ret=return_stats(self.latest)
            )
            return
        now = time.perf_counter()
        if now - self._last_log >= self.log_every or steps >= self.total:
            self._last_log = now
            self.log(
                f"steps {steps:,}/{self.total:,}  {shown_rate} steps/s  {return_stats(self.latest)}"
            )

    def log(self, message: str) -> None:
        """A line above the bar (or a plain line when there is no bar)."""
        if self._console is not None:
            self._console.print(message)
        else:
            print(message, file=self.stream, flush=True)

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


def _seconds_column() -> Any:
    """A rich column showing the seconds since its task started, as ``12 s``."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class Seconds(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.elapsed or 0.0:.0f} s")

    return Seconds()
