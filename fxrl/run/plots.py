"""Learning curves: mean and spread across seeds against env steps (matplotlib, no display).

curve("run/metrics.jsonl" rows) -> (steps, mean, low, high)
plot_runs(["runs/a", "runs/b"], "compare.png")   # one line and band per run
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from fxrl.run.metrics import read_rows

__all__ = ["curve", "plot_runs"]


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
        jsonl = Path(run_dir) / "metrics.jsonl"
        if not jsonl.exists():
            raise FileNotFoundError(f"plot: {run_dir} has no metrics.jsonl; is it a run directory?")
        rows = read_rows(jsonl)
        steps, mean, low, high = curve(rows, metric)
        seeds = len({r["seed"] for r in rows})
        (line,) = ax.plot(steps, mean, label=f"{label} ({seeds} seeds)")
        ax.fill_between(steps, low, high, alpha=0.2, color=line.get_color(), linewidth=0)
    ax.set_xlabel("env steps per seed")
    ax.set_ylabel(f"{metric.replace('_', ' ')} (mean, min-max over seeds)")
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)
    return path
