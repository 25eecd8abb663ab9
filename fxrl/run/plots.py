"""Learning curves: mean and spread across seeds against env steps (matplotlib, no display).

curve("run/metrics.jsonl" rows) -> (steps, mean, low, high)
plot_runs(["runs/a", "runs/b"], "compare.png")   # one line and band per run
plot_sweep("runs/sweep", "grid.png")             # a sweep: one panel per combination
                                                 # (a task run: one panel per task)
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from fxrl.algorithms.sweeps import combination_names
from fxrl.run.checkpoint import written_atomically

__all__ = ["curve", "plot_runs", "plot_sweep", "seed_curves"]


def curve(
    rows: list[dict[str, Any]], metric: str = "episode_return"
) -> tuple[list[int], list[float], list[float], list[float]]:
    """Per iteration: env steps, and the mean, min and max across seeds of ``metric``.

    A seed with no finished episode in an iteration carries its last value forward (a
    seed's return does not vanish because its episodes are long); iterations before any
    seed has a value are left out.
    """
    last: dict[int, float] = {}
    by_iter: dict[int, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: (r["iteration"], r["seed"])):
        v = r.get(metric)
        if isinstance(v, int | float) and math.isfinite(v):
            last[r["seed"]] = float(v)
        entry = by_iter.setdefault(r["iteration"], {"steps": r["steps"], "values": {}})
        if r["seed"] in last:
            entry["values"][r["seed"]] = last[r["seed"]]
    steps, mean, low, high = [], [], [], []
    for _, entry in sorted(by_iter.items()):
        vals = list(entry["values"].values())
        if vals:
            steps.append(entry["steps"])
            mean.append(sum(vals) / len(vals))
            low.append(min(vals))
            high.append(max(vals))
    return steps, mean, low, high


def seed_curves(
    rows: list[dict[str, Any]], metric: str = "episode_return"
) -> dict[int, tuple[list[int], list[float]]]:
    """``{seed: (steps, values)}``: each seed's ``metric`` per iteration, the last value
    carried forward where none was reported (as ``curve`` does)."""
    out: dict[int, tuple[list[int], list[float]]] = {}
    last: dict[int, float] = {}
    for r in sorted(rows, key=lambda r: (r["iteration"], r["seed"])):
        v = r.get(metric)
        if isinstance(v, int | float) and math.isfinite(v):
            last[r["seed"]] = float(v)
        if r["seed"] in last:
            steps, values = out.setdefault(r["seed"], ([], []))
            steps.append(r["steps"])
            values.append(last[r["seed"]])
    return out


def _config(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        return {}


def _group(row: dict[str, Any]) -> str | None:
    """The curve a row belongs to within its run: its sweep combination or its task."""
    if row.get("combination") is not None:
        return row["combination"]
    return None if row.get("task") is None else f"task {row['task']}"


# Iterations a curve is drawn from: a longer run's are thinned evenly to between
# MAX_POINTS and twice that (a 640-pixel-wide plot shows no more), so plotting a run of
# any length reads its metrics.jsonl line by line in the same memory.
MAX_POINTS = 500


def _rows(run_dir: str | Path, metric: str) -> list[dict[str, Any]]:
    """The rows of ``run_dir/metrics.jsonl`` a plot draws: each holding only the keys a
    plot reads, ``metric`` carried forward per (group, seed) as ``curve`` carries it, and
    of a run with more than ``2 * MAX_POINTS`` iterations only evenly spaced iterations
    (and the last). Read line by line: memory does not grow with the run's length."""
    jsonl = Path(run_dir) / "metrics.jsonl"
    if not jsonl.exists():
        raise FileNotFoundError(f"plot: {run_dir} has no metrics.jsonl; is it a run directory?")
    keys = ("iteration", "seed", "steps", "combination", "task")
    last: dict[tuple[Any, Any], float] = {}
    kept: list[list[dict[str, Any]]] = []  # one list of rows per kept iteration
    current: list[dict[str, Any]] = []
    seen, stride = 0, 1  # iterations seen; every stride-th is kept
    with open(jsonl) as f:
        for line in f:
            try:
                r = json.loads(line)
            except json.JSONDecodeError:  # a torn last line (a kill mid-write)
                continue
            if current and r.get("iteration") != current[0].get("iteration"):
                seen, stride = _keep(kept, current, seen, stride)
                current = []
            row = {k: r[k] for k in keys if k in r}
            v, group = r.get(metric), (_group(r), r.get("seed"))
            if isinstance(v, int | float) and math.isfinite(v):
                last[group] = float(v)
            if group in last:
                row[metric] = last[group]
            current.append(row)
    if current:
        if seen % stride:  # the last iteration is always drawn
            kept.append(current)
        else:
            _keep(kept, current, seen, stride)
    return [r for rows in kept for r in rows]


def _keep(
    kept: list[list[dict[str, Any]]], rows: list[dict[str, Any]], seen: int, stride: int
) -> tuple[int, int]:
    """Keep iteration number ``seen`` (counting from 0) if the stride says so; past
    ``2 * MAX_POINTS`` kept, drop every other one and double the stride."""
    if seen % stride == 0:
        kept.append(rows)
        if len(kept) > 2 * MAX_POINTS:
            kept[:] = kept[::2]
            stride *= 2
    return seen + 1, stride


def plot_runs(
    run_dirs: list[str | Path],
    path: str | Path,
    *,
    metric: str = "episode_return",
    title: str | None = None,
    labels: list[str] | None = None,
) -> Path:
    """Write one PNG overlaying the curves of ``run_dirs`` (mean line, min-max band).

    Args:
      run_dirs: run directories holding ``metrics.jsonl``.
      path: the PNG to write (written to a temporary name, then renamed).
      metric: the metric to plot per seed.
      title, labels: the figure title and one legend label per run (default: dir names).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = labels or [Path(d).name for d in run_dirs]
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for run_dir, label in zip(run_dirs, labels, strict=True):
        rows = _rows(run_dir, metric)
        # a sweep run: one curve per combination
        groups: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            name = _group(r)
            groups.setdefault(label if name is None else f"{label}: {name}", []).append(r)
        for name, group in groups.items():
            steps, mean, low, high = curve(group, metric)
            seeds = len({r["seed"] for r in group})
            (line,) = ax.plot(steps, mean, label=f"{name} ({seeds} seeds)")
            ax.fill_between(steps, low, high, alpha=0.2, color=line.get_color(), linewidth=0)
    ax.set_xlabel("env steps per seed")
    ax.set_ylabel(f"{metric.replace('_', ' ')} (mean, min-max over seeds)")
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    return _save(fig, path)


def plot_sweep(
    run_dir: str | Path,
    path: str | Path,
    *,
    metric: str = "episode_return",
    title: str | None = None,
) -> Path:
    """Write a sweep run's grid: one panel per combination, one line per seed.

    With two swept fields the panels are laid out by their values (rows: the first
    field's, columns: the second's); otherwise in ``sweeps.combinations`` order, row by row.
    A task run (``fxrl.run.tasks``) gets one panel per task, named by its params. All
    panels share both axes.

    Args:
      run_dir: a run directory trained with a sweep or tasks (``config.json`` has
        ``"sweep"`` or ``"tasks"``).
      path: the PNG to write (written to a temporary name, then renamed).
      metric: the metric to plot per seed.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    info = _config(run_dir)
    sweep, tasks = info.get("sweep") or None, info.get("tasks") or None
    if sweep is None and tasks is None:
        raise ValueError(
            f"plot: {run_dir} is not a sweep or task run (its config.json has neither)."
        )
    rows = _rows(run_dir, metric)
    if sweep is not None:
        names = combination_names(sweep)
        sizes = [len(v) for v in sweep.values()]
        members = [(lambda r, n=n: r.get("combination") == n) for n in names]
    else:
        from fxrl.run.tasks import names as task_names

        names, sizes = task_names(info), [tasks["count"]]
        members = [(lambda r, t=t: r.get("task") == t) for t in range(len(names))]
    if len(sizes) == 2:
        nrows, ncols = sizes
    else:
        ncols = math.ceil(math.sqrt(len(names)))
        nrows = math.ceil(len(names) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(2.8 * ncols + 0.6, 2.2 * nrows + 0.6), dpi=100,
        sharex=True, sharey=True, squeeze=False,
    )  # fmt: skip
    for i, name in enumerate(names):
        ax = axes[i // ncols][i % ncols]
        group = [r for r in rows if members[i](r)]
        for seed, (steps, values) in sorted(seed_curves(group, metric).items()):
            ax.plot(steps, values, linewidth=1.0, label=f"seed {seed}")
        ax.set_title(name, fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    for j in range(len(names), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    fig.supxlabel("env steps per seed", fontsize=9)
    fig.supylabel(f"{metric.replace('_', ' ')} (one line per seed)", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` atomically (a temporary file, then a rename) and close it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    try:
        with written_atomically(path) as tmp:  # a failed write (a full disk): WriteError
            fig.savefig(tmp)
    finally:
        plt.close(fig)
    return path
