"""A run's metrics on disk: ``metrics.jsonl``, ``metrics.csv`` and, if asked, TensorBoard.

One row per iteration and seed: ``iteration``, (in a sweep run ``combination``, see
``fxrl.run.sweep``), ``seed``, then everything the algorithm's
``update`` reported for that seed (``steps``, ``episodes``, ``episode_return``, the
losses...), then ``steps_per_s`` and ``time`` (seconds since the run started). Rows are
flushed when the iteration ends, so a killed run keeps its history; a NaN (no episode
ended) is written as JSON ``null`` and an empty CSV cell.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any

import torch

from fxrl.run.checkpoint import WriteError, append_text, atomic_write

__all__ = ["MetricsWriter", "read_rows", "rows_from_metrics"]

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


class MetricsWriter:
    """Appends rows to ``DIR/metrics.jsonl`` and ``DIR/metrics.csv`` (and TensorBoard).

    ``MetricsWriter(dir, keep_until=iteration)`` first drops rows after ``iteration``
    (those a resumed run will write again), so a resumed run's files equal an
    uninterrupted run's. The history stays on disk: the writer keeps the CSV's columns in
    memory, not the rows, so a run of any length uses the same memory. A write that fails
    (a full disk) leaves both files as they were and raises ``WriteError``.
    """

    def __init__(
        self, run_dir: str | Path, *, tensorboard: bool = False, keep_until: int | None = None
    ) -> None:
        self.dir = Path(run_dir)
        self.jsonl_path, self.csv_path = self.dir / "metrics.jsonl", self.dir / "metrics.csv"
        self._columns: list[str] = []
        self._rewrite(keep_until)
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(self.dir / "tensorboard"))

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
                where = f"{r['combination']}/" if "combination" in r else ""
                for k, v in r.items():
                    if k not in ("iteration", "seed", "steps") and isinstance(v, int | float):
                        self._tb.add_scalar(f"{where}seed{r['seed']}/{k}", v, r["steps"])
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()

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
