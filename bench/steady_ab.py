"""A steady update under two or more sets of inductor options, alternated in one process.

On a shared machine two processes measured one after the other see different loads; here
each set of options gets its own program of PPO's 8-seed CartPole update (compiled once,
then called twice to warm it), and the programs take turns, one update each, for
``--rounds`` rounds (the order rotated every round), so that a change in the load falls
on all of them alike. Prints one JSON line per set: the median, minimum and mean CPU
milliseconds of an update (``time.process_time``, torch at ``--threads``).

Usage: ``python bench/steady_ab.py --rounds 50 '{}' '{"cpp.enable_loop_tail_vec": true}'``
(each argument: inductor options over ``fxrl.compile``'s defaults, JSON); ``--algo`` (ppo,
dqn or sac, each at its default Config) and ``--seeds`` (8) pick another update. A key
``fxrl:MODULE.NAME`` sets that attribute of ``fxrl.MODULE`` while the program is built
(``'{"fxrl:_build_patch.KERNELS_O2": false, "fx_graph_cache": false}'``: kernels at
inductor's ``-O3``; inductor's graph cache off in every set then, or a later program
would load an earlier one's build, the g++ flags not being part of its key).
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys

from _common import time_updates, warm_update  # bench/_common.py


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("options", nargs="+", help="inductor options over the defaults (JSON)")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--algo", choices=("ppo", "dqn", "sac"), default="ppo")
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    import fxrl  # noqa: F401  (fxrl.compile the module, below)
    from fxrl.algorithms import dqn, ppo, sac

    algo = {"ppo": ppo, "dqn": dqn, "sac": sac}[args.algo]

    fc = sys.modules["fxrl.compile"]
    defaults = dict(fc.DEFAULT_OPTIONS)
    runs = []
    for text in args.options:
        options = json.loads(text)
        attributes = {
            k.removeprefix("fxrl:"): v for k, v in options.items() if k.startswith("fxrl:")
        }
        fc.DEFAULT_OPTIONS.clear()
        fc.DEFAULT_OPTIONS.update(
            {**defaults, **{k: v for k, v in options.items() if not k.startswith("fxrl:")}}
        )
        saved = {}
        for path, value in attributes.items():
            module, name = path.rsplit(".", 1)
            owner = importlib.import_module(f"fxrl.{module}")
            saved[(owner, name)] = getattr(owner, name)
            setattr(owner, name, value)
        try:
            runs.append(warm_update(algo, args.seeds))
        finally:
            for (owner, name), value in saved.items():
                setattr(owner, name, value)
    fc.DEFAULT_OPTIONS.clear()
    fc.DEFAULT_OPTIONS.update(defaults)
    ms = time_updates({str(i): run for i, run in enumerate(runs)}, args.rounds, 1)
    for i, text in enumerate(args.options):
        xs = ms[str(i)]
        line = {"algo": args.algo, "seeds": args.seeds, "options": json.loads(text),
                "threads": args.threads, "rounds": args.rounds}  # fmt: skip
        line.update(median_ms=round(statistics.median(xs), 2), min_ms=round(min(xs), 2))
        print(json.dumps({**line, "mean_ms": round(statistics.mean(xs), 2)}), flush=True)


if __name__ == "__main__":
    main()
