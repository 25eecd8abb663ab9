"""fxrl's direct path into inductor (``fxrl._direct``) against AOTAutograd's, cold and warm.

Each round runs ``bench/compile_phases.py`` for each case twice, once with the direct
path (``FXRL_DIRECT=1``, the default) and once without (``FXRL_DIRECT=0``), the order
alternating from round to round: every run is a cold process with a fresh inductor cache
and then a warm process finding its program there, CPU seconds of the process and its
compilers phase by phase (see that script), inductor's one-time set-up reported apart.

Usage: ``python bench/direct_ab.py [--cases ppo_8seeds,sac_1seed] [--rounds 3]
[--threads 1]``. Prints JSON lines: a header, then one line per case, cache state, path
and round (compile_phases' line with ``direct`` and ``round`` added).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from _common import cpu_model  # bench/_common.py

PHASES = Path(__file__).resolve().parent / "compile_phases.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="ppo_8seeds,sac_1seed")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import torch

    header = {"torch": torch.__version__, "threads": args.threads, "cpu": cpu_model(),
              "cpus": os.cpu_count(), "cases": args.cases, "rounds": args.rounds}  # fmt: skip
    print(json.dumps(header), flush=True)
    for r in range(args.rounds):
        for direct in (True, False) if r % 2 == 0 else (False, True):
            env = {**os.environ, "FXRL_DIRECT": "1" if direct else "0"}
            cmd = [sys.executable, str(PHASES), "--cases", args.cases,
                   "--threads", str(args.threads), "--updates", "3"]  # fmt: skip
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            for line in done.stdout.splitlines():
                row = json.loads(line)
                if "case" in row:
                    print(json.dumps({**row, "direct": direct, "round": r}), flush=True)


if __name__ == "__main__":
    main()
