"""``torch.compile`` of code that draws with ``fxrl.random``: the cipher as one op against
its plain ops.

``fxrl.random`` hands ``torch.compile`` (dynamo) the cipher as ``fxrl::threefry2x32``,
one node, as ``fxrl.compile`` has it (``fxrl/_threefry_op.py``); with
``_threefry_op.ENABLED`` off dynamo traces the 20 rounds op by op. Two cases, each
compiled in a fresh process with a fresh inductor cache, the two forms taken in turn
(``--rounds`` each): ``draws``, inductor on five draws (split, uniform, normal, randint,
categorical) from one key, and ``ppo_dynamo``, PPO's 2-seed update (4 envs x 16 steps,
2 epochs of 2 minibatches) captured by dynamo with the ``"eager"`` backend
(``core.batched(..., compile="eager")``: graph capture, no code generation). Prints one
JSON line per process: the CPU seconds of the first call (the compile, children
included) and whether its results equal eager's bit for bit.

Usage: ``python bench/threefry_torch_compile_ab.py --rounds 3``.
"""

from __future__ import annotations

import argparse
import json
import time

from _common import cpu_model, cpu_s, run_fresh  # bench/_common.py


def child(case: str, form: str) -> None:
    import torch

    torch.set_num_threads(1)
    from fxrl import _threefry_op, random, tree
    from fxrl.algorithms import core, ppo

    _threefry_op.ENABLED = form == "op"
    key = random.key(3)
    if case == "draws":

        def fn(k: torch.Tensor) -> dict:
            return {
                "split": random.split(k, 3),
                "uniform": random.uniform(k, (256,), -1.5, 2.5),
                "normal": random.normal(k, (512,)),
                "randint": random.randint(k, (64,), -7, 11),
                "categorical": random.categorical(k, torch.linspace(-1.0, 1.0, 7), (64,)),
            }

        compiled = torch.compile(fn, fullgraph=True, dynamic=False)
        args, eager = (key,), fn
    else:
        algo = ppo.make(ppo.Config(num_envs=4, num_steps=16, update_epochs=2, num_minibatches=2))
        init, compiled = core.batched(algo, 2, compile="eager")
        args, eager = (init(key),), torch.func.vmap(algo.update)
    begin, wall = cpu_s(), time.perf_counter()
    got = compiled(*args)
    spent, wall = cpu_s() - begin, time.perf_counter() - wall
    want = eager(*args)
    same = all(torch.equal(a, b) for a, b in zip(tree.leaves(got), tree.leaves(want), strict=True))
    line = {"case": case, "form": form, "compile_cpu_s": round(spent, 2),
            "compile_wall_s": round(wall, 2), "bit_for_bit": same}  # fmt: skip
    print(json.dumps(line))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", nargs="+", default=["draws", "ppo_dynamo"])
    parser.add_argument("--child", nargs=2, metavar=("CASE", "FORM"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    import torch

    print(json.dumps({"cpu": cpu_model(), "torch": torch.__version__, "threads": 1}))
    for case in args.cases:
        for r in range(args.rounds):
            forms = ("op", "plain") if r % 2 == 0 else ("plain", "op")
            for form in forms:
                line = run_fresh(__file__, ["--child", case, form])
                print(json.dumps({**line, "round": r}), flush=True)


if __name__ == "__main__":
    main()
