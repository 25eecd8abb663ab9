"""Memory stays flat over a long run: thousands of compiled updates in one process.

A run of hours would show a leak that a test of seconds cannot: in the compiled update,
in the metrics history, in the progress bar, in the plots. ``memory_probe.py`` runs the
whole loop as ``fxrl train`` does (a cheap compiled update, checkpoints and plots every
second, the bar drawn to a terminal) and reports its peak resident memory after a
warm-up and at the end. Before the metrics history was kept on disk only, 2800 more
updates of 4 seeds grew the peak by 39 MiB (rows kept by the metrics writer and read
back whole for each plot); now by about 0.1 MiB.
"""

import json
import os
import sys
from pathlib import Path

import pytest

from fxrl.run.metrics import read_rows

HERE = Path(__file__).parent
UPDATES, WARMUP, SEEDS = 3000, 200, 4
# The peak may grow by this much over UPDATES - WARMUP updates (~1.5 KiB an update): a
# leak of one metrics row per seed and update (~1 KiB each) goes over it several times.
GROWTH_KIB = 4096


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_thousands_of_compiled_updates_keep_the_peak_memory_flat(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore",
           "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parents[1]),
                                          os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    import subprocess

    proc = subprocess.run(
        [sys.executable, str(HERE / "memory_probe.py"), str(out), str(UPDATES), str(WARMUP),
         str(SEEDS)], capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    marks = {int(k): v for k, v in report["marks"].items()}
    assert sorted(marks) == [WARMUP, *range(500, UPDATES + 1, 500)]
    growth = marks[UPDATES]["peak"] - marks[WARMUP]["rss"]
    assert growth <= GROWTH_KIB, (growth, marks)
    # the run really ran: every update's rows on disk, checkpoints and the curve written
    rows = read_rows(out / "metrics.jsonl")
    assert len(rows) == UPDATES * SEEDS and rows[-1]["iteration"] == UPDATES
    assert (out / "checkpoints" / "latest.safetensors").exists() and (out / "curve.png").exists()
