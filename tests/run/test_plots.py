"""Plots read ``metrics.jsonl`` line by line, and draw a long run from evenly spaced iterations.

``plots._rows`` is what ``plot_runs`` and ``plot_sweep`` draw from: for a run of up to
``2 * MAX_POINTS`` iterations its curves equal those of every row (``curve`` and
``seed_curves`` over ``read_rows``), values carried forward per group and seed; a longer
run keeps evenly spaced iterations, the first and the last, whose values are the full
curve's at those iterations.
"""

import itertools
import json
import math

from hypothesis import given
from hypothesis import strategies as st

from fxrl.run import plots
from fxrl.run.metrics import read_rows
from fxrl.run.plots import MAX_POINTS, curve, seed_curves


def write_run(path, iterations: int, seeds: int, values, groups=(None,)) -> list[dict]:
    """metrics.jsonl of ``iterations`` x ``groups`` x ``seeds`` rows; ``values(i, g, s)``
    is the row's return or None (no episode ended)."""
    rows = []
    for i in range(1, iterations + 1):
        for g in groups:
            for s in range(seeds):
                row = {"iteration": i, "seed": s, "steps": 16 * i, "loss": 0.5}
                if g is not None:
                    row = {"iteration": i, "combination": g, **row}
                row["episode_return"] = values(i, g, s)
                rows.append(row)
    path.mkdir(parents=True, exist_ok=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def group_of(rows, g):
    return [r for r in rows if r.get("combination") == g]


@given(
    iterations=st.integers(1, 40),
    seeds=st.integers(1, 3),
    ended=st.lists(st.booleans(), min_size=1, max_size=50),
)
def test_a_short_run_draws_the_curves_of_every_row(tmp_path_factory, iterations, seeds, ended):
    path = tmp_path_factory.mktemp("run")
    # a return in some iterations only: the others carry the last one forward
    groups = ("lr=0.1", "lr=0.01")
    values = lambda i, g, s: float(i * (s + 1)) if ended[(i + s) % len(ended)] else None
    rows = write_run(path, iterations, seeds, values, groups)
    drawn = plots._rows(path, "episode_return")
    assert [(r["iteration"], r["seed"]) for r in drawn] == [
        (r["iteration"], r["seed"]) for r in rows
    ]
    assert set(drawn[0]) <= {"iteration", "combination", "seed", "steps", "episode_return"}
    for g in groups:
        assert curve(group_of(drawn, g)) == curve(group_of(read_rows(path / "metrics.jsonl"), g))
        assert seed_curves(group_of(drawn, g)) == seed_curves(group_of(rows, g))


def test_a_long_run_is_drawn_from_evenly_spaced_iterations_with_the_full_curves_values(tmp_path):
    n = 5 * MAX_POINTS + 3
    values = lambda i, g, s: math.sin(i / 50) + s if (i + s) % 3 else None
    rows = write_run(tmp_path, n, 2, values)
    drawn = plots._rows(tmp_path, "episode_return")
    kept = sorted({r["iteration"] for r in drawn})
    assert MAX_POINTS <= len(kept) <= 2 * MAX_POINTS + 1
    assert kept[0] == 1 and kept[-1] == n
    assert len({b - a for a, b in itertools.pairwise(kept[:-1])}) == 1  # even, but the last
    full = {s: v for s, *v in zip(*curve(rows), strict=True)}
    for s, *v in zip(*curve(drawn), strict=True):
        assert full[s] == v
    assert len(drawn) == 2 * len(kept)  # whole iterations: every seed's row
