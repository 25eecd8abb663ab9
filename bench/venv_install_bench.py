"""How long ``make venv`` takes to build the test venv: pip alone against uv (tools/install.py).

    python3 bench/venv_install_bench.py --rounds 5

Each round builds ``make venv`` twice into fresh directories, once with
``FXRL_INSTALL_WITH=pip`` and once with uv, alternating which goes first, each with its own
empty pip and uv caches (a new machine's, as CI has). Both read packages from wherever this
machine's pip configuration says (local wheel directories, local indexes, PyPI). After each
build, ``import torch, fxrl`` is timed once in the new venv (bytecode compiled by both).
Prints one JSON line per build and a summary line (medians, spread) per tool. Run it with
the python that has no venv of its own: it runs nothing in-process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cpu_model

ROOT = Path(__file__).resolve().parents[1]


def build(tool: str, scratch: Path) -> dict:
    venv, caches = scratch / "venv", scratch / "caches"
    env = {**os.environ, "PIP_CACHE_DIR": str(caches / "pip"), "UV_CACHE_DIR": str(caches / "uv"),
           "FXRL_INSTALL_WITH": tool}  # fmt: skip
    t0 = time.perf_counter()
    times0 = os.times()
    subprocess.run(["make", "-s", "-C", ROOT, "venv", f"VENV={venv}"], env=env, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    wall = time.perf_counter() - t0
    times1 = os.times()
    cpu = sum(times1[i] - times0[i] for i in (2, 3))  # children user + system
    t1 = time.perf_counter()
    subprocess.run([venv / "bin/python", "-c", "import torch, fxrl"], check=True)
    imp = time.perf_counter() - t1
    return {"tool": tool, "venv_s": round(wall, 1), "venv_cpu_s": round(cpu, 1),
            "first_import_s": round(imp, 2)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    host = {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version()}
    print(json.dumps(host))
    rows: dict[str, list[dict]] = {"pip": [], "uv": []}
    for r in range(args.rounds):
        order = ("pip", "uv") if r % 2 == 0 else ("uv", "pip")
        for tool in order:
            scratch = Path(tempfile.mkdtemp(prefix=f"venv_{tool}_"))
            try:
                row = {"round": r, **build(tool, scratch)}
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            rows[tool].append(row)
            print(json.dumps(row), flush=True)
    for tool, got in rows.items():
        walls = [x["venv_s"] for x in got]
        med = {k: statistics.median(x[k] for x in got) for k in ("venv_cpu_s", "first_import_s")}
        print(json.dumps({"summary": tool, "rounds": len(got),
                          "venv_s_median": statistics.median(walls),
                          "venv_s_min": min(walls), "venv_s_max": max(walls),
                          "venv_cpu_s_median": med["venv_cpu_s"],
                          "first_import_s_median": med["first_import_s"]}))  # fmt: skip
    pip, uv = (statistics.median(x["venv_s"] for x in rows[t]) for t in ("pip", "uv"))
    print(json.dumps({"summary": "ratio", "uv_over_pip": round(uv / pip, 3)}))


if __name__ == "__main__":
    main()
