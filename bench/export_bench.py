"""Deployed Pong policy: eager fxrl vs torch.export vs ONNX Runtime (float32, int8) vs
AOTInductor (several compile options), one call and inside the ALE loop.

The policy is the one of examples/export_pong_policy.py: raw uint8 screen [210, 160, 3]
-> to_tensor_image -> resize 84 nearest -> grayscale -> Nature DQN (1 channel) -> argmax.
int8: ``to_onnx(..., quantize="int8")`` calibrated on 256 ALE screens of a random-action
game, in ONNX Runtime's two formats (QDQ, fxrl's; QOperator). The ``_u8pre`` variants
preprocess with ``fxrl.envs.atari.screen_preprocess(84)`` instead: the same numbers (checked
on held-out screens), with the nearest resize done on the uint8 screen before the float
conversion. JSON lines, in order:

  setup     CPU, threads, versions, the network's FLOPs and this CPU's sgemm GFLOP/s (a
            large torch.mm on the same threads), whose ratio is the FLOP floor of one call;
  build     seconds to export, to write ONNX, to quantize, to compile each AOTI variant;
  latency   one call on one observation, ms per call (median of alternating rounds, min,
            max) per target: eager (the Python function), exported (ExportedProgram
            .module()), onnx (InferenceSession.run), onnx_fxrl (fxrl.deploy's checked
            wrapper), onnx_int8 (QDQ), onnx_int8_qoperator, onnx_u8pre, onnx_int8_u8pre,
            and each AOTI variant; then ratios: each to the FLOP floor, the int8 and
            u8pre files / onnx, and each AOTI variant / onnx (target <= 1.2);
  rollout   agent steps of ALE Pong (4 frames a step, the screen read every step), ms per
            step, alternating rounds: ale (constant action, no screen read: ALE alone),
            ale_screen (constant action, screen read), then the whole loop with each
            policy; ratios "whole loop / ALE alone" (target <= 1.3 for int8; the
            onnx_int8_u8pre loop is the int8 deploy path with the cheaper preprocessing).

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
from _common import cpu_model, measure  # bench/_common.py

from fxrl import _quantize, exploration, nn, random
from fxrl import transforms as T
from fxrl.envs.atari import screen_preprocess
from fxrl.export import AOTI_OPTIONS, export, load_aoti, load_onnx, to_aoti, to_onnx

NUM_ACTIONS = 6
FRAMESKIP = 4
preprocess = T.compose(T.to_tensor_image(), T.resize(84, 84, "nearest"), T.grayscale())
dqn = nn.atari_dqn(NUM_ACTIONS, in_channels=1)
# AOTInductor variants: inductor settings over fxrl's AOTI_OPTIONS ("aoti" is fxrl's default),
# and whether the policy is exported with a batch dim of 1 ([1, 210, 160, 3]). Freezing with
# inductor's weight prepacking (mkldnn) fails on the unbatched policy in torch 2.13 (its
# reshape_linear_reshape pattern reduces over the empty batch shape of a 1-D linear input),
# hence no prepacking there and the batch-1 variant with it.
AOTI_VARIANTS: dict[str, tuple[dict, bool]] = {
    "aoti": ({}, False),
    "aoti_freezing": ({"freezing": True, "cpp.weight_prepack": False}, False),
    "aoti_max_autotune": ({"max_autotune": True}, False),
    "aoti_freezing_batch1": ({"freezing": True}, True),
}
QUICK_AOTI = ("aoti", "aoti_freezing")


preprocess_u8 = screen_preprocess(84)  # the same numbers, resized on uint8 first


def pong_policy(params: dict, pixels: torch.Tensor) -> torch.Tensor:
    action, _ = exploration.q_value(dqn.apply(params, preprocess(pixels)))
    return action


def pong_policy_u8(params: dict, pixels: torch.Tensor) -> torch.Tensor:
    action, _ = exploration.q_value(dqn.apply(params, preprocess_u8(pixels)))
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


def make_ale(seed: int) -> object:
    from ale_py import ALEInterface, LoggerMode, roms

    ALEInterface.setLoggerMode(LoggerMode.Error)
    ale = ALEInterface()
    ale.setInt("random_seed", seed)
    ale.setFloat("repeat_action_probability", 0.25)
    ale.loadROM(roms.get_rom_path("pong"))
    return ale


def ale_screens(n: int, seed: int) -> list[np.ndarray]:
    """``n`` screens of a Pong game played with random actions, one every 4th agent step."""
    ale, rng = make_ale(seed), np.random.default_rng(seed)
    actions, screens = ale.getMinimalActionSet(), []
    while len(screens) < n:
        for _ in range(4 * FRAMESKIP):
            ale.act(actions[rng.integers(len(actions))])
        if ale.game_over():
            ale.reset_game()
        screens.append(ale.getScreenRGB())
    return screens


def rollout(choose: Callable[[np.ndarray], int] | None, read_screen: bool) -> Callable[[], None]:
    """One agent step per call on a running game: screen read, ``choose(screen) -> action
    index`` (None: constant action), 4 frames. Each variant plays its own emulator."""
    ale = make_ale(0)
    actions = ale.getMinimalActionSet()
    screen = np.empty((210, 160, 3), dtype=np.uint8)

    def step() -> None:
        if read_screen:
            ale.getScreenRGB(screen)
        a = actions[choose(screen) if choose is not None else 0]
        for _ in range(FRAMESKIP):
            ale.act(a)
        if ale.game_over():
            ale.reset_game()

    return step


def timed_rows(case: str, times: dict[str, list[float]], common: dict) -> dict[str, float]:
    """One line per contender (ms: median of rounds, min, max); returns the medians."""
    medians = {}
    for impl, ms in times.items():
        medians[impl] = statistics.median(ms)
        row = {"case": case, "impl": impl, "ms": round(medians[impl], 5)}
        row |= {"ms_min": round(min(ms), 5), "ms_max": round(max(ms), 5)}
        print(json.dumps({**row, **common}), flush=True)
    return medians


def ratio_row(case: str, name: str, a: list[float], b: list[float], common: dict) -> None:
    """a/b per round (rounds alternate, so round i of both ran side by side)."""
    per_round = [x / y for x, y in zip(a, b, strict=True)]
    row = {"case": case, "ratio": name, "value": round(statistics.median(per_round), 3)}
    row |= {"min": round(min(per_round), 3), "max": round(max(per_round), 3)}
    print(json.dumps({**row, **common}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few iterations: check it runs")
    parser.add_argument("--threads", type=int, default=1, help="torch and ONNX Runtime threads")
    parser.add_argument("--steps", type=int, default=1000, help="agent steps per rollout round")
    parser.add_argument("--repeats", type=int, default=7, help="alternating rounds")
    parser.add_argument(
        "--aoti", default=None, help=f"comma-separated AOTI variants of {list(AOTI_VARIANTS)}"
    )
    parser.add_argument("--no-aoti", action="store_true", help="skip AOTInductor (no compiler)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    iters, repeats = (50, 3) if args.quick else (500, args.repeats)
    steps = min(args.steps, 200) if args.quick else args.steps
    variants = (
        args.aoti.split(",") if args.aoti else list(QUICK_AOTI if args.quick else AOTI_VARIANTS)
    )
    unknown = [v for v in variants if v not in AOTI_VARIANTS]
    if unknown:
        parser.error(f"--aoti: unknown variants {unknown}; expected some of {list(AOTI_VARIANTS)}")
    if args.no_aoti:
        variants = []
    common = {"threads": torch.get_num_threads(), "quick": args.quick}

    import onnxruntime

    flops, gflops = network_flops(), sgemm_gflops(512 if args.quick else 1024)
    floor_ms = flops / (gflops * 1e6)
    setup = {
        "case": "setup",
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "network_mflops": flops / 1e6,
        "sgemm_gflops": round(gflops, 2),
        "flop_floor_ms": round(floor_ms, 5),
        "aoti_options": AOTI_OPTIONS,
        "quantize_format": _quantize.FORMAT,
    }
    print(json.dumps({**setup, **common}), flush=True)

    params = dqn.init(random.key(0))
    screens = ale_screens(256 + 64, seed=1)
    calibration, held_out = screens[:256], screens[256:]
    screen = held_out[0]
    screen_t = torch.from_numpy(screen)
    work = Path(tempfile.mkdtemp(prefix="fxrl_export_bench_"))
    build: dict[str, float | None] = {}
    t = time.perf_counter()
    exported = export(pong_policy, params, screen_t)
    build["export_s"], t = time.perf_counter() - t, time.perf_counter()
    to_onnx(exported, work / "pong.onnx")
    build["onnx_s"], t = time.perf_counter() - t, time.perf_counter()
    to_onnx(exported, work / "pong_int8.onnx", quantize="int8", calibration=calibration)
    build["onnx_int8_s"], t = time.perf_counter() - t, time.perf_counter()
    items = _quantize.feeds(exported, calibration)
    fmt = next(f for f in _quantize.FORMATS if f != _quantize.FORMAT)
    _quantize.quantize_file(
        work / "pong.onnx", work / f"pong_int8_{fmt}.onnx", items, exported.meta, "fxrl", fmt
    )
    build[f"onnx_int8_{fmt}_s"], t = time.perf_counter() - t, time.perf_counter()
    exported_u8 = export(pong_policy_u8, params, screen_t)
    to_onnx(exported_u8, work / "pong_u8pre.onnx")
    build["onnx_u8pre_s"], t = time.perf_counter() - t, time.perf_counter()
    to_onnx(exported_u8, work / "pong_int8_u8pre.onnx", quantize="int8", calibration=calibration)
    build["onnx_int8_u8pre_s"] = time.perf_counter() - t
    aoti, batch1 = {}, {}
    exported_b1 = export(pong_policy, params, screen_t[None])
    for name in variants:
        t = time.perf_counter()
        options, batch1[name] = AOTI_VARIANTS[name]
        to_aoti(exported_b1 if batch1[name] else exported, work / f"{name}.pt2", options=options)
        aoti[name] = load_aoti(work / f"{name}.pt2")
        build[f"{name}_s"] = time.perf_counter() - t
    row = {"case": "build", **{k: round(v, 2) for k, v in build.items()}}
    print(json.dumps({**row, **common}), flush=True)

    onnx = load_onnx(work / "pong.onnx", threads=args.threads)
    int8 = load_onnx(work / "pong_int8.onnx", threads=args.threads)
    int8_other = load_onnx(work / f"pong_int8_{fmt}.onnx", threads=args.threads)
    u8pre = load_onnx(work / "pong_u8pre.onnx", threads=args.threads)
    int8_u8pre = load_onnx(work / "pong_int8_u8pre.onnx", threads=args.threads)
    module = exported.module
    calls: dict[str, Callable[[], object]] = {
        "eager": lambda: pong_policy(params, screen_t),
        "exported": lambda: module(screen_t),
        "onnx": lambda: onnx.session.run(None, {"pixels": screen}),
        "onnx_fxrl": lambda: onnx(screen),
        "onnx_int8": lambda: int8.session.run(None, {"pixels": screen}),
        f"onnx_int8_{fmt}": lambda: int8_other.session.run(None, {"pixels": screen}),
        "onnx_u8pre": lambda: u8pre.session.run(None, {"pixels": screen}),
        "onnx_int8_u8pre": lambda: int8_u8pre.session.run(None, {"pixels": screen}),
    }
    for name, policy in aoti.items():
        x = screen_t[None] if batch1[name] else screen_t
        calls[name] = lambda policy=policy, x=x: policy.compiled(x)
    # Everything but int8 computes in float32: the same action on held-out screens.
    for s in held_out:
        s_t = torch.from_numpy(s)
        expected = int(pong_policy(params, s_t))
        assert int(onnx(s)) == expected and int(exported(s_t)) == expected
        assert int(u8pre(s)) == expected  # uint8-first preprocessing: the same numbers
        for name, p in aoti.items():
            assert int(p(s_t[None])[0] if batch1[name] else p(s_t)) == expected, name
    with torch.inference_mode():
        times, _ = measure(calls, iters, repeats)
    timed_rows("latency", times, common)
    for name, ms in times.items():
        ratio_row("latency", f"{name}/flop_floor", ms, [floor_ms] * len(ms), common)
    ratio_row("latency", "onnx_int8/onnx", times["onnx_int8"], times["onnx"], common)
    ratio_row("latency", f"onnx_int8_{fmt}/onnx", times[f"onnx_int8_{fmt}"], times["onnx"], common)
    ratio_row("latency", "onnx_u8pre/onnx", times["onnx_u8pre"], times["onnx"], common)
    ratio_row("latency", "onnx_int8_u8pre/onnx", times["onnx_int8_u8pre"], times["onnx"], common)
    for name in aoti:
        ratio_row("latency", f"{name}/onnx", times[name], times["onnx"], common)

    def onnx_choose(session: object) -> Callable[[np.ndarray], int]:
        return lambda s: int(session.run(None, {"pixels": s})[0])

    def aoti_choose(policy: object, batched: bool) -> Callable[[np.ndarray], int]:
        if batched:
            return lambda s: int(policy.compiled(torch.from_numpy(s)[None])[0])
        return lambda s: int(policy.compiled(torch.from_numpy(s))[0])

    def eager_choose(s: np.ndarray) -> int:
        with torch.inference_mode():
            return int(pong_policy(params, torch.from_numpy(s)))

    loops = {
        "ale": rollout(None, False),
        "ale_screen": rollout(None, True),
        "onnx": rollout(onnx_choose(onnx.session), True),
        "onnx_int8": rollout(onnx_choose(int8.session), True),
        "onnx_u8pre": rollout(onnx_choose(u8pre.session), True),
        "onnx_int8_u8pre": rollout(onnx_choose(int8_u8pre.session), True),
        **{name: rollout(aoti_choose(p, batch1[name]), True) for name, p in aoti.items()},
        "eager_torch": rollout(eager_choose, True),
    }
    with torch.inference_mode():
        times, _ = measure(loops, steps, repeats)
    timed_rows("rollout", times, {**common, "steps": steps})
    for name in loops:
        if name != "ale":
            ratio_row("rollout", f"{name}/ale", times[name], times["ale"], common)
    print(f"done: {work}", file=sys.stderr)


if __name__ == "__main__":
    main()
