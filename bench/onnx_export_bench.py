"""Writing ONNX files: ``fxrl.export.to_onnx`` against torch's exporter as torch ships it.

``to_onnx`` calls ``torch.onnx.export(dynamo=True)`` with two of its costs taken out
(``fxrl/_onnx_patch.py``): ONNX's function registry is built once per process instead of
once per export, and the program is lowered call by call instead of traced a second time.
``FXRL_FAST_ONNX=0`` gives torch's exporter unchanged: the peer, in the same run.

Each round starts one fresh process per setting (the order alternating from round to
round); a process exports each case once (torch.export, timed apart) and writes its ONNX
file four times: the first write (which builds the registry) and the median of the next
three, CPU seconds of the process. Cases: the CartPole step (an env, ``fxrl.web``'s
kind of export), the Atari DQN policy of ``examples/export_pong_policy.py`` (raw screen in),
a SAC actor drawing its action from a key (``mode="random"``).

    python bench/onnx_export_bench.py [--rounds 5] [--threads 1]

JSON lines: a header; per round, setting and case a line (``first_s``, ``next_s``,
``export_s``); then per case the medians per setting and their ratio fxrl / torch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from _common import cpu_model  # bench/_common.py

CASES = ("cartpole_step", "atari_policy", "sac_random")


def _programs() -> dict[str, object]:
    from fxrl import distributions as D
    from fxrl import exploration, nn, random, specs
    from fxrl import transforms as T
    from fxrl.envs import make
    from fxrl.export import export

    env = make("CartPole-v1")
    state, _ = env.reset(random.key(0))
    preprocess = T.compose(T.to_tensor_image(), T.resize(84, 84, "nearest"), T.grayscale())
    dqn = nn.atari_dqn(6, in_channels=1)
    actor = nn.mlp(8, 6, hidden=(64, 64), activation="relu")

    def atari_policy(params, pixels):
        return exploration.q_value(dqn.apply(params, preprocess(pixels)))[0]

    def sac_policy(params, obs, key, mode="random"):
        loc, scale = D.normal_param_extractor(actor.apply(params, obs))
        return D.draw(D.tanh_normal(loc, scale, low=-2.0, high=2.0), key, mode)

    screen = specs.Box(0, 255, shape=(210, 160, 3), dtype=torch.uint8).sample(random.key(1))
    makers = {
        "cartpole_step": lambda: export(lambda p, s, a: env.step(s, a), {}, state, torch.tensor(1)),
        "atari_policy": lambda: export(atari_policy, dqn.init(random.key(2)), screen),
        "sac_random": lambda: export(
            sac_policy, actor.init(random.key(3)), torch.ones(8), mode="random"
        ),
    }
    out = {}
    for name, make_one in makers.items():
        t = time.process_time()
        out[name] = (make_one(), time.process_time() - t)
    return out


def child(threads: int) -> None:
    from fxrl import _onnx_patch
    from fxrl.export import to_onnx

    torch.set_num_threads(threads)
    programs = _programs()
    with tempfile.TemporaryDirectory() as tmp:
        for name, (exported, export_s) in programs.items():
            times = []
            for i in range(4):
                t = time.process_time()
                to_onnx(exported, Path(tmp) / f"{name}_{i}.onnx")
                times.append(time.process_time() - t)
            line = {"case": name, "first_s": round(times[0], 3),
                    "next_s": round(statistics.median(times[1:]), 3),
                    "export_s": round(export_s, 3), "counts": dict(_onnx_patch.counts)}  # fmt: skip
            print(json.dumps(line), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.threads)
        return
    torch.set_num_threads(args.threads)
    print(json.dumps({"bench": "onnx_export_bench", "cpu": cpu_model(), "cpus": os.cpu_count(),
                      "threads": torch.get_num_threads(), "torch": torch.__version__,
                      "rounds": args.rounds}), flush=True)  # fmt: skip
    results: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        order = ("fxrl", "torch") if r % 2 == 0 else ("torch", "fxrl")
        for setting in order:
            env = {**os.environ, "FXRL_FAST_ONNX": "1" if setting == "fxrl" else "0"}
            cmd = [sys.executable, __file__, "--child", "--threads", str(args.threads)]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            for text in done.stdout.splitlines():
                if not text.startswith("{"):
                    continue
                line = json.loads(text)
                lowered = line.pop("counts")["lowered"]
                if (lowered > 0) != (setting == "fxrl"):
                    raise SystemExit(f"onnx_export_bench: {setting} lowered {lowered} programs")
                results.setdefault((line["case"], setting), []).append(line)
                print(json.dumps({"round": r, "setting": setting, **line}), flush=True)
    for case in CASES:
        summary: dict[str, object] = {"case": case, "summary": True}
        for key in ("first_s", "next_s", "export_s"):
            medians = {}
            for setting in ("fxrl", "torch"):
                xs = [x[key] for x in results[(case, setting)]]
                medians[setting] = statistics.median(xs)
                summary[f"{setting}_{key}"] = round(medians[setting], 3)
                summary[f"{setting}_{key}_spread"] = [round(min(xs), 3), round(max(xs), 3)]
            if key != "export_s":  # the same torch.export either way: no ratio
                summary[f"ratio_{key}"] = round(medians["fxrl"] / medians["torch"], 3)
        print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
