"""A compile lever of fxrl's switched on and off by its environment variable, cold and warm:
by default the direct path into inductor (``fxrl._direct``) against AOTAutograd's.

Each round runs ``bench/compile_phases.py`` for each case twice, once with the variable
``1`` (the default of each lever) and once ``0``, the order alternating from round to
round: every run is a cold process with a fresh inductor cache and then a warm process
finding its program there, CPU seconds of the process and its compilers phase by phase
and the wall (see that script), inductor's one-time set-up reported apart.

Usage: ``python bench/direct_ab.py [--cases ppo_8seeds,sac_1seed] [--rounds 3]
[--threads 1] [--variable FXRL_DIRECT]``; ``--variable FXRL_PARALLEL_BUILD`` compares
``fxrl._build_patch``'s side-by-side g++ with inductor's one-after-the-other;
``--options '{"aot_inductor.enable_line_tables": true}'`` compares inductor options over
``fxrl.compile``'s defaults (on) with the defaults (off), the variable unused. Prints JSON
lines: a header, then one line per case, cache state, setting and round (compile_phases'
line with ``round`` and the setting added: ``direct`` for FXRL_DIRECT, else the
variable's name in lower case without ``fxrl_``, e.g. ``parallel_build``; with
``--options``, ``options_on``).
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
    parser.add_argument("--variable", default="FXRL_DIRECT")
    parser.add_argument("--options", default=None, help="inductor options to compare (JSON)")
    args = parser.parse_args()
    field = "direct" if args.variable == "FXRL_DIRECT" else args.variable.lower()
    field = "options_on" if args.options else field.removeprefix("fxrl_")
    import torch

    header = {"torch": torch.__version__, "threads": args.threads, "cpu": cpu_model(),
              "cpus": os.cpu_count(), "cases": args.cases, "rounds": args.rounds,
              "variable": None if args.options else args.variable,
              "options": json.loads(args.options or "{}")}  # fmt: skip
    print(json.dumps(header), flush=True)
    for r in range(args.rounds):
        for on in (True, False) if r % 2 == 0 else (False, True):
            env = dict(os.environ)
            if not args.options:
                env[args.variable] = "1" if on else "0"
            cmd = [sys.executable, str(PHASES), "--cases", args.cases,
                   "--threads", str(args.threads), "--updates", "3",
                   "--options", args.options if on and args.options else "{}"]  # fmt: skip
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            for line in done.stdout.splitlines():
                row = json.loads(line)
                if "case" in row:
                    print(json.dumps({**row, field: on, "round": r}), flush=True)


if __name__ == "__main__":
    main()
