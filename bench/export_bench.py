"""Deployed Pong policy: eager fxrl vs torch.export vs ONNX Runtime vs AOTInductor.

The policy is the one of examples/export_pong_policy.py: raw uint8 screen [210, 160, 3]
-> to_tensor_image -> resize 84 nearest -> grayscale -> Nature DQN (1 channel) -> argmax.
JSON lines, in order:

  setup     threads, versions, the network's FLOPs and this CPU's sgemm GFLOP/s (a large
            torch.mm on the same threads), whose ratio is the FLOP floor of one call;
  build     seconds to export, to write ONNX, to compile with AOTInductor;
  latency   one call on one observation, median microseconds, per target: eager (the
            Python function), exported (ExportedProgram.module()), onnx (InferenceSession
            .run), onnx_fxrl (fxrl.deploy's checked wrapper), aoti (the compiled package),
            each with its ratio to eager and to the FLOP floor;
  rollout   1000 agent steps of ALE Pong (4 frames per step, screen read every step):
            ale (constant action, no screen: the floor), ale_screen (constant action, screen
            read), onnx policy, eager torch policy; ms per step and ratio to ``ale``.

    python bench/export_bench.py              # full run (the lead takes figures from it)
    python bench/export_bench.py --quick      # fewer iterations, 200 steps: check it runs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from fxrl import exploration, nn, random
from fxrl import transforms as T
from fxrl.export import export, load_aoti, load_onnx, to_aoti, to_onnx

NUM_ACTIONS = 6
FRAMESKIP = 4
preprocess = T.compose(T.to_tensor_image(), T.resize(84, 84, "nearest"), T.grayscale())
dqn = nn.atari_dqn(NUM_ACTIONS, in_channels=1)


def pong_policy(params: dict, pixels: torch.Tensor) -> torch.Tensor:
    action, _ = exploration.q_value(dqn.apply(params, preprocess(pixels)))
    return action


def network_flops() -> int:
    """Multiply-adds x 2 of the DQN on one 84x84 frame (convs and dense layers)."""
    macs, (c, h, w) = 0, (1, 84, 84)
    for c_out, k, s in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
        h, w = (h - k) // s + 1, (w - k) // s + 1
        macs += c_out * h * w * c * k * k
        c = c_out
    macs += c * h * w * 512 + 512 * NUM_ACTIONS
    return 2 * macs


def sgemm_gflops(n: int = 1024, iters: int = 10) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    start = time.perf_counter()
    for _ in range(iters):
        torch.mm(a, b)
    return 2 * n**3 * iters / (time.perf_counter() - start) / 1e9


def median_us(call: Callable[[], object], iters: int, rounds: int) -> float:
    for _ in range(max(3, iters // 10)):
        call()  # warm up
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(iters):
            call()
        times.append((time.perf_counter() - start) / iters * 1e6)
    return statistics.median(times)


def make_ale(seed: int) -> object:
    from ale_py import ALEInterface, LoggerMode, roms

    ALEInterface.setLoggerMode(LoggerMode.Error)
    ale = ALEInterface()
    ale.setInt("random_seed", seed)
    ale.setFloat("repeat_action_probability", 0.25)
    ale.loadROM(roms.get_rom_path("pong"))
    return ale


def rollout_ms(choose: Callable[[np.ndarray], int] | None, steps: int, read_screen: bool) -> float:
    """Milliseconds per agent step; ``choose(screen) -> action index`` (None: constant)."""
    ale = make_ale(0)
    actions = ale.getMinimalActionSet()
    screen = np.empty((210, 160, 3), dtype=np.uint8)
    start = time.perf_counter()
    for _ in range(steps):
        if read_screen:
            ale.getScreenRGB(screen)
        a = actions[choose(screen) if choose is not None else 0]
        for _ in range(FRAMESKIP):
            ale.act(a)
        if ale.game_over():
            ale.reset_game()
    return (time.perf_counter() - start) / steps * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few iterations: check it runs")
    parser.add_argument("--threads", type=int, default=1, help="torch and ONNX Runtime threads")
    parser.add_argument("--steps", type=int, default=1000, help="agent steps per rollout")
    parser.add_argument("--no-aoti", action="store_true", help="skip AOTInductor (no compiler)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    iters, rounds = (50, 3) if args.quick else (500, 7)
    steps = min(args.steps, 200) if args.quick else args.steps
    common = {"threads": torch.get_num_threads(), "quick": args.quick}
    print(f"torch threads: {torch.get_num_threads()}", file=sys.stderr)

    import onnxruntime

    flops, gflops = network_flops(), sgemm_gflops(512 if args.quick else 1024)
    floor_us = flops / (gflops * 1e3)
    setup = {
        "case": "setup",
        "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "cpu_count": os.cpu_count(),
        "network_mflops": flops / 1e6,
        "sgemm_gflops": round(gflops, 2),
        "flop_floor_us": round(floor_us, 2),
    }
    print(json.dumps({**setup, **common}), flush=True)

    params = dqn.init(random.key(0))
    screen_t = torch.randint(0, 256, (210, 160, 3), dtype=torch.uint8)
    screen = screen_t.numpy()
    work = Path(tempfile.mkdtemp(prefix="fxrl_export_bench_"))
    t0 = time.perf_counter()
    exported = export(pong_policy, params, screen_t)
    t1 = time.perf_counter()
    to_onnx(exported, work / "pong.onnx")
    t2 = time.perf_counter()
    aoti = None
    if not args.no_aoti:
        to_aoti(exported, work / "pong.pt2")
        aoti = load_aoti(work / "pong.pt2")
    t3 = time.perf_counter()
    build = {
        "case": "build",
        "export_s": round(t1 - t0, 2),
        "onnx_s": round(t2 - t1, 2),
        "aoti_s": None if aoti is None else round(t3 - t2, 2),
    }
    print(json.dumps({**build, **common}), flush=True)

    onnx = load_onnx(str(work / "pong.onnx"), threads=args.threads)
    module = exported.module
    calls: dict[str, Callable[[], object]] = {
        "eager": lambda: pong_policy(params, screen_t),
        "exported": lambda: module(screen_t),
        "onnx": lambda: onnx.session.run(None, {"pixels": screen}),
        "onnx_fxrl": lambda: onnx(screen),
    }
    if aoti is not None:
        calls["aoti"] = lambda: aoti.compiled(screen_t)
    expected = int(pong_policy(params, screen_t))
    assert int(onnx(screen)) == expected and int(exported(screen_t)) == expected
    eager_us = None
    with torch.inference_mode():
        for target, call in calls.items():
            us = median_us(call, iters, rounds)
            eager_us = us if eager_us is None else eager_us
            row = {
                "case": "latency",
                "target": target,
                "us": round(us, 1),
                "ratio_to_eager": round(us / eager_us, 3),
                "ratio_to_flop_floor": round(us / floor_us, 2),
            }
            print(json.dumps({**row, **common}), flush=True)

    session = onnx.session

    def onnx_choose(s: np.ndarray) -> int:
        return int(session.run(None, {"pixels": s})[0])

    def eager_choose(s: np.ndarray) -> int:
        with torch.inference_mode():
            return int(pong_policy(params, torch.from_numpy(s)))

    variants = {
        "ale": (None, False),
        "ale_screen": (None, True),
        "onnx": (onnx_choose, True),
        "eager_torch": (eager_choose, True),
    }
    ale_ms = None
    for name, (choose, read) in variants.items():
        ms = rollout_ms(choose, steps, read)
        ale_ms = ms if ale_ms is None else ale_ms
        row = {
            "case": "rollout",
            "variant": name,
            "steps": steps,
            "ms_per_step": round(ms, 4),
            "steps_per_s": round(1e3 / ms),
            "ratio_to_ale": round(ms / ale_ms, 2),
        }
        print(json.dumps({**row, **common}), flush=True)


if __name__ == "__main__":
    main()
