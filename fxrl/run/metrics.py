"""A run's metrics on disk: ``metrics.jsonl``, ``metrics.csv`` and, if asked, TensorBoard
and Weights & Biases.

One row per iteration and seed: ``iteration``, (in a sweep run ``combination``, see
``fxrl.run.sweep``), ``seed``, then everything the algorithm's
``update`` reported for that seed (``steps``, ``episodes``, ``episode_return``, the
losses...), then ``steps_per_s`` and ``time`` (seconds since the run started). Rows are
flushed when the iteration ends, so a killed run keeps its history; a NaN (no episode
ended) is written as JSON ``null`` and an empty CSV cell.

TensorBoard (``--tensorboard``, the ``tensorboard`` extra) and W&B (``--wandb``, the
``wandb`` extra) get every number of a row as ``seed{s}/{name}`` (``{combination}/seed{s}/
{name}`` in a sweep run) against ``steps``, the env steps per seed. The W&B run is named
after the run directory, carries its ``config.json`` as its config, is kept under
``DIR/wandb`` (``WANDB_MODE=offline`` keeps it there only; ``wandb sync`` uploads it
later), goes to the project ``WANDB_PROJECT`` (default ``fxrl``), and a resumed run
continues it (its id is in ``DIR/wandb_id``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import secrets
from pathlib import Path
from typing import Any

import torch

from fxrl._optional import require
from fxrl.run.checkpoint import WriteError, append_text, atomic_write

__all__ = ["MetricsWriter", "check_loggers", "read_rows", "rows_from_metrics"]

_FIRST = (
    "iteration",
    "combination",
    "seed",
    "steps",
    "episodes",
    "episode_return",
    "episode_length",
)


def rows_from_metrics(
    iteration: int, metrics: dict[str, torch.Tensor], extra: dict[str, float]
) -> list[dict[str, Any]]:
    """Split the metrics of one batched ``update`` (each [num_seeds]) into one row per seed."""
    values = {k: v.detach().to("cpu").reshape(-1).tolist() for k, v in metrics.items()}
    num_seeds = len(next(iter(values.values()))) if values else 0
    rows = []
    for s in range(num_seeds):
        row: dict[str, Any] = {"iteration": iteration, "seed": s}
        ordered = [k for k in _FIRST if k in values] + [k for k in values if k not in _FIRST]
        for k in ordered:
            v = values[k]
            x = v[s]
            row[k] = None if isinstance(x, float) and not math.isfinite(x) else x
        row.update(extra)
        rows.append(row)
    return rows


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """All rows of a ``metrics.jsonl`` (a torn last line, from a kill mid-write, is skipped)."""
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def check_loggers(*, tensorboard: bool = False, wandb: bool = False) -> None:
    """A logger whose package is missing, as a one-line error naming its extra (before a
    run writes anything)."""
    if tensorboard:
        require("tensorboard", "writing TensorBoard events (--tensorboard)")
    if wandb:
        require("wandb", "logging to Weights & Biases (--wandb)")


def _scalars(row: dict[str, Any]) -> dict[str, float]:
    """A row's numbers as ``[combination/]seed{s}/{name}`` (not the row's own coordinates)."""
    where = f"{row['combination']}/" if "combination" in row else ""
    return {
        f"{where}seed{row['seed']}/{k}": v
        for k, v in row.items()
        if k not in ("iteration", "combination", "seed", "steps") and isinstance(v, int | float)
    }


class _Wandb:
    """One W&B run for a run directory (see the module docstring)."""

    def __init__(self, run_dir: Path) -> None:
        wandb = require("wandb", "logging to Weights & Biases (--wandb)")
        id_file = run_dir / "wandb_id"
        run_id = id_file.read_text().strip() if id_file.exists() else secrets.token_hex(4)
        if not id_file.exists():
            atomic_write(id_file, run_id.encode())
        config_file = run_dir / "config.json"
        config = json.loads(config_file.read_text()) if config_file.exists() else {}
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "fxrl"),
            name=run_dir.name,
            id=run_id,
            resume="allow",
            dir=str(run_dir),
            config=config,
            settings=wandb.Settings(silent=True, console="off"),
        )

    def log(self, rows: list[dict[str, Any]]) -> None:
        """One W&B step per iteration, at the env steps per seed. A resumed run logs its
        replayed iterations again; W&B keeps the first copy of a step (they are equal)."""
        by_steps: dict[int, dict[str, float]] = {}
        for r in rows:
            by_steps.setdefault(int(r["steps"]), {}).update(_scalars(r))
        for steps, values in by_steps.items():
            if steps >= self.run.step:
                self.run.log(values, step=steps)

    def close(self) -> None:
        self.run.finish()


class MetricsWriter:
    """Appends rows to ``DIR/metrics.jsonl`` and ``DIR/metrics.csv`` (and TensorBoard, W&B).

    ``MetricsWriter(dir, keep_until=iteration)`` first drops rows after ``iteration``
    (those a resumed run will write again), so a resumed run's files equal an
    uninterrupted run's. The history stays on disk: the writer keeps the CSV's columns in
    memory, not the rows, so a run of any length uses the same memory. A write that fails
    (a full disk) leaves both files as they were and raises ``WriteError``.
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        tensorboard: bool = False,
        wandb: bool = False,
        keep_until: int | None = None,
    ) -> None:
        self.dir = Path(run_dir)
        self.jsonl_path, self.csv_path = self.dir / "metrics.jsonl", self.dir / "metrics.csv"
        self._columns: list[str] = []
        self._rewrite(keep_until)
        self._tb = None
        if tensorboard:
            require("tensorboard", "writing TensorBoard events (--tensorboard)")
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(self.dir / "tensorboard"))
        self._wandb = _Wandb(self.dir) if wandb else None

    def _rewrite(
        self, keep_until: int | None = None, more: list[dict[str, Any]] | None = None
    ) -> None:
        """Write both files again from the rows on disk (those up to ``keep_until``) and
        ``more``, atomically: a kill or a full disk meanwhile must not lose history."""
        rows = read_rows(self.jsonl_path) if self.jsonl_path.exists() else []
        if keep_until is not None:
            rows = [r for r in rows if r["iteration"] <= keep_until]
        rows += more or []
        csv_columns = _columns(rows)
        atomic_write(self.jsonl_path, "".join(json.dumps(r) + "\n" for r in rows).encode())
        atomic_write(self.csv_path, _csv_text(csv_columns, rows, header=True).encode())
        self._columns = csv_columns

    def write(self, rows: list[dict[str, Any]]) -> None:
        """Append one iteration's rows to both files."""
        if set(_columns(rows)) - set(self._columns):
            self._rewrite(more=rows)  # a metric appeared (rare): the CSV gets its column
        else:
            append_text(self.jsonl_path, "".join(json.dumps(r) + "\n" for r in rows))
            try:
                append_text(self.csv_path, _csv_text(self._columns, rows, header=False))
            except WriteError:
                _cut_last_rows(self.jsonl_path, len(rows))  # both files hold the same rows
                raise
        if self._tb is not None:
            for r in rows:
                for name, v in _scalars(r).items():
                    self._tb.add_scalar(name, v, r["steps"])
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(rows)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.close()

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _cut_last_rows(path: Path, count: int) -> None:
    """Remove the last ``count`` lines of ``path`` (shrinking a file needs no space)."""
    data = path.read_bytes()
    end = len(data)
    for _ in range(count):
        end = data.rfind(b"\n", 0, end - 1) + 1
    os.truncate(path, end)


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    seen = dict.fromkeys(c for c in _FIRST if any(c in r for r in rows))
    for r in rows:
        seen.update(dict.fromkeys(r))
    return list(seen)


def _csv_text(columns: list[str], rows: list[dict[str, Any]], *, header: bool) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, columns, extrasaction="ignore", restval="")
    if header:
        writer.writeheader()
    writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in rows)
    return buf.getvalue()
