"""Run one benchmark and keep its JSON lines for the docs site.

    .venv/bin/python bench/record.py train_bench -- --threads 1
    .venv/bin/python bench/record.py value_bench

runs ``bench/NAME.py`` with the arguments after ``--`` and writes
``docs/results/NAME.jsonl`` (``record.py --out OUT NAME -- ...``: ``OUT.jsonl``, for one benchmark
recorded in two settings): a header line (``bench``, ``command``, ``cpu``, ``torch``,
``threads``, ``date``, ``wall_s``) and then every JSON line the benchmark printed, in order.
Lines that are not JSON objects pass through to stderr. The file is written to a temporary
name and renamed, so an interrupted run leaves the previous figures in place; a benchmark
that exits non-zero writes nothing. ``docs/hooks/results.py`` turns the file into tables
and a plot of its ratios at ``make docs`` time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from _common import cpu_model  # bench/_common.py

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH.parent / "docs" / "results"


def _threads(argv: list[str], rows: list[dict]) -> int | None:
    """The torch thread count: the ``--threads`` flag if given, else what a line reports."""
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
    for row in rows:
        for key in ("threads", "torch_threads"):
            if isinstance(row.get(key), int):
                return row[key]
    return None


def record(
    name: str,
    argv: list[str],
    out_dir: Path = RESULTS,
    bench_dir: Path = BENCH,
    out: str | None = None,
) -> Path:
    """Run ``bench/NAME.py argv``; write its lines under a header to ``out_dir/NAME.jsonl``
    (``out_dir/OUT.jsonl`` with ``out``: one benchmark recorded in two settings)."""
    if out is not None and not re.fullmatch(r"\w+", out):
        raise SystemExit(f"record: --out takes a file name without a suffix, got {out!r}")
    script = bench_dir / f"{name}.py"
    if not re.fullmatch(r"\w+", name) or not script.is_file():
        known = sorted(p.stem for p in bench_dir.glob("*.py") if not p.stem.startswith("_"))
        known = [k for k in known if k != "record"]
        raise SystemExit(f"record: no benchmark {name!r}; expected one of {', '.join(known)}")
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(script), *argv],
        cwd=bench_dir.parent,
        stdout=subprocess.PIPE,
        text=True,
    )
    rows: list[dict] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
            print(line, end="", flush=True)
        else:
            print(line, end="", file=sys.stderr, flush=True)
    if proc.wait() != 0:
        raise SystemExit(f"record: bench/{name}.py exited with {proc.returncode}; nothing written")
    import torch  # only for its version: after the run, so the benchmark's start is not slowed

    header = {
        "bench": name,
        "command": " ".join([".venv/bin/python", f"bench/{name}.py", *argv]),
        "cpu": cpu_model(),
        "torch": torch.__version__,
        "threads": _threads(argv, rows),
        "date": datetime.date.today().isoformat(),
        "wall_s": round(time.perf_counter() - start, 1),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{out or name}.jsonl"
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in [header, *rows]))
    os.replace(tmp, path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name", help="a benchmark in bench/, without .py")
    parser.add_argument("--out", help="write docs/results/OUT.jsonl instead of NAME.jsonl")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then the benchmark's flags")
    ns = parser.parse_args()
    argv = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    path = record(ns.name, argv, out=ns.out)
    print(f"record: wrote {path.relative_to(BENCH.parent)}", file=sys.stderr)


if __name__ == "__main__":
    main()
