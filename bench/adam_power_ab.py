"""Adam's bias corrections written as ``pow`` against ``exp(count * log(beta))``, compiled.

Inductor inlines a cheap 0-d value into every fused kernel that reads it, so with ``pow``
the compiled update recomputed both corrections for each vector of each parameter
tensor; ``fxrl.optim._power`` writes them with ``exp``, which inductor computes once and
reads back. Both programs of one algorithm's batched update are built in one process and
take turns (``bench/_common.time_updates``: one update each per round, the order rotated),
so a change in the machine's load falls on both. Prints one JSON line per algorithm and
form (median, spread and every round's CPU ms of an update), then one with the largest
difference between the two programs' states after the timed updates.

Usage: ``python bench/adam_power_ab.py --algos dqn ppo sac --rounds 40 --threads 1``.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
from _common import (  # bench/_common.py
    cpu_model,
    ms_summary,
    state_max_abs_diff,
    time_updates,
    warm_update,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["dqn", "ppo", "sac"])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from fxrl import optim
    from fxrl.algorithms import dqn, ppo, sac

    exp_form = optim._power

    def pow_form(base: float, count: torch.Tensor) -> torch.Tensor:
        return base ** count.double()

    modules = {"dqn": dqn, "ppo": ppo, "sac": sac}
    for name in args.algos:
        algo = modules[name]
        programs = {}
        for form, power in (("pow", pow_form), ("exp", exp_form)):
            optim._power = power  # read when the update is traced (its first call)
            try:
                programs[form] = warm_update(algo, args.seeds)
            finally:
                optim._power = exp_form
        ms = time_updates(programs, args.rounds, 1)
        base = {"algo": name, "seeds": args.seeds, "threads": torch.get_num_threads(),
                "rounds": args.rounds, "cpu": cpu_model(), "torch": torch.__version__}  # fmt: skip
        for form, xs in ms.items():
            print(json.dumps({**base, "form": form, **ms_summary(xs)}), flush=True)
        ratio = statistics.median(ms["pow"]) / statistics.median(ms["exp"])
        diff = state_max_abs_diff(programs["pow"][1], programs["exp"][1])
        print(json.dumps({**base, "pow_over_exp": round(ratio, 3), "state_max_abs_diff": diff}))


if __name__ == "__main__":
    main()
