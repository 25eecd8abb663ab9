"""int8 Pong policy: does it play what the float32 one plays?

    python examples/dqn_pong_export.py --min-frames 8000 --save-params dqn.pt   # train briefly
    python examples/quantize_pong.py --params dqn.pt --out runs/pong_int8.json
    # a DQN whose greedy actions vary (30,000 frames, DQN's usual schedule):
    python examples/dqn_pong_video.py --frames 30000 --video-steps 400 --out runs/pong30k
    python examples/quantize_pong.py --params runs/pong30k/checkpoint.safetensors \
        --out runs/pong_int8_30k.jsonl

(The docs quote ``docs/results/pong_int8.json`` and ``docs/results/pong_int8_30k.jsonl``,
written by these two commands with ``--out`` there.)

The policy is examples/export_pong_policy.py's (raw uint8 screen -> resize 84 nearest ->
grayscale -> Nature DQN -> argmax). It is exported twice with ``fxrl.export.to_onnx``: in
float32, and with ``quantize="int8"`` calibrated on screens recorded while the float32
policy plays (every screen of ``--calibration-episodes`` episodes from
``--calibration-seed``; one episode's every 4th screen agreed less on the 30k-frame DQN).
Then:

1. one recorded episode (``--seed``): the float32 policy plays it; the int8 policy is asked
   for an action on every screen of it; the fraction of equal actions is reported (the
   goal: 99% or more), with the Q-value gap between the best two actions where they differ;
2. ``--episodes`` episodes (seeds ``--seed + 1``...), each played once by each policy on its
   own emulator (ALE/Pong-v5's frameskip 4 and sticky actions 0.25, seeded): the returns.

The recorded episode is also asked of an int8 file with every layer quantized (the
options before the Q-value head was kept in float32), for comparison. ``--params`` is a
``torch.save``'d file or an fxrl checkpoint (``.safetensors``, as dqn_pong_video.py
writes). ``--out`` ending in ``.jsonl`` writes JSON lines: the command, the recorded
episode, the episodes.

The emulator is ale_py's ALEInterface as in examples/deploy_onnx_pong.py; both policies run
in ONNX Runtime with one thread. Without ``--params`` the network is freshly initialised.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_pong_policy import dqn, preprocess

from fxrl import _quantize, random
from fxrl.export import export, load_onnx, to_onnx
from fxrl.run import checkpoint

FRAMESKIP = 4


def pong_q(params: dict, pixels: torch.Tensor) -> dict:
    """Raw screen -> {"action": greedy action, "q": the 6 Q-values}."""
    q = dqn.apply(params, preprocess(pixels))
    return {"action": q.argmax(-1), "q": q}


def make_ale(seed: int):
    from ale_py import ALEInterface, LoggerMode, roms

    ALEInterface.setLoggerMode(LoggerMode.Error)
    ale = ALEInterface()
    ale.setInt("random_seed", seed)
    ale.setFloat("repeat_action_probability", 0.25)  # ALE/Pong-v5's sticky actions
    ale.loadROM(roms.get_rom_path("pong"))
    return ale


def play(policy, seed: int, max_steps: int, keep: bool = True) -> dict:
    """One episode of ``policy`` on a fresh emulator: actions and return (and, with
    ``keep``, its screens and Q-values)."""
    ale = make_ale(seed)
    actions = ale.getMinimalActionSet()
    screens, chosen, qs, total = [], [], [], 0.0
    while not ale.game_over() and len(chosen) < max_steps:
        screen = ale.getScreenRGB()
        out = policy(screen)
        a = int(out["action"])
        if keep:
            screens.append(screen)
            qs.append(np.asarray(out["q"]))
        chosen.append(a)
        for _ in range(FRAMESKIP):
            total += ale.act(actions[a])
    return {"screens": screens, "actions": chosen, "q": qs, "return": total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", help="torch.save'd params of nn.atari_dqn(6, in_channels=1)")
    parser.add_argument("--seed", type=int, default=0, help="the recorded episode's seed")
    parser.add_argument("--calibration-seed", type=int, default=100)
    parser.add_argument("--calibration-episodes", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=10, help="episodes per policy")
    parser.add_argument("--max-steps", type=int, default=27_000, help="agent steps an episode")
    parser.add_argument("--out", default=None, help="write the figures here as JSON")
    args = parser.parse_args()
    torch.set_num_threads(1)

    params = dqn.init(random.key(0))  # untrained, unless --params
    if args.params and args.params.endswith(".safetensors"):
        params, _ = checkpoint.load(args.params, params)  # no unpickling
    elif args.params:
        params = torch.load(args.params, weights_only=True)
    work = Path(tempfile.mkdtemp(prefix="fxrl_pong_int8_"))
    exported = export(pong_q, params, torch.zeros(210, 160, 3, dtype=torch.uint8))
    fp32 = load_onnx(to_onnx(exported, work / "fp32.onnx"), threads=1)

    calibration = [  # every screen of --calibration-episodes episodes
        s
        for i in range(args.calibration_episodes)
        for s in play(fp32, args.calibration_seed + i, args.max_steps)["screens"]
    ]
    start = time.perf_counter()
    path = to_onnx(exported, work / "int8.onnx", quantize="int8", calibration=calibration)
    quantize_s = time.perf_counter() - start
    int8 = load_onnx(path, threads=1)
    every_layer = work / "int8_every_layer.onnx"
    _quantize.quantize_file(work / "fp32.onnx", every_layer, _quantize.feeds(exported, calibration),
                            exported.meta, "fxrl", float_head=False)  # fmt: skip
    int8_all = load_onnx(every_layer, threads=1)

    # 1. one recorded episode, every screen asked of both
    episode = play(fp32, args.seed, args.max_steps)
    int8_out = [int8(s) for s in episode["screens"]]
    same = [int(o["action"]) == a for o, a in zip(int8_out, episode["actions"], strict=True)]
    same_all = [
        int(int8_all(s)["action"]) == a
        for s, a in zip(episode["screens"], episode["actions"], strict=True)
    ]
    gaps = []
    for q, ok in zip(episode["q"], same, strict=True):
        top2 = np.sort(q)[-2:]
        gaps.append((float(top2[1] - top2[0]), ok))
    q_err = max(
        float(np.abs(np.asarray(o["q"]) - q).max())
        for o, q in zip(int8_out, episode["q"], strict=True)
    )

    # 2. episodes played by each policy on its own emulator
    returns = {"fp32": [], "int8": []}
    lengths = {"fp32": [], "int8": []}
    counts = {"fp32": collections.Counter(), "int8": collections.Counter()}
    for i in range(args.episodes):
        for name, policy in (("fp32", fp32), ("int8", int8)):
            ep = play(policy, args.seed + 1 + i, args.max_steps, keep=False)
            returns[name].append(ep["return"])
            lengths[name].append(len(ep["actions"]))
            counts[name].update(ep["actions"])

    figures = {
        "params": args.params or "untrained (dqn.init(random.key(0)))",
        "recorded_episode": {
            "seed": args.seed,
            "frames": len(same),
            "same_action": round(sum(same) / len(same), 5),
            "differing_frames": len(same) - sum(same),
            "q_gap_where_different": sorted(round(g, 5) for g, ok in gaps if not ok),
            "median_q_gap": round(float(np.median([g for g, _ in gaps])), 5),
            "min_q_gap": round(min(g for g, _ in gaps), 6),
            "max_abs_q_error": round(q_err, 5),
            "fp32_action_counts": dict(sorted(collections.Counter(episode["actions"]).items())),
            "return": episode["return"],
            "every_layer_int8_same_action": round(sum(same_all) / len(same_all), 5),
        },
        "episodes": {
            "seeds": [args.seed + 1 + i for i in range(args.episodes)],
            "fp32_returns": returns["fp32"],
            "int8_returns": returns["int8"],
            "returns_equal": returns["fp32"] == returns["int8"],
            "fp32_lengths": lengths["fp32"],
            "int8_lengths": lengths["int8"],
            "fp32_action_counts": dict(sorted(counts["fp32"].items())),
            "int8_action_counts": dict(sorted(counts["int8"].items())),
        },
        "calibration_frames": len(calibration),
        "quantize_s": round(quantize_s, 2),
        "file_kb": {
            "fp32": round((work / "fp32.onnx").stat().st_size / 1024),
            "int8": round(path.stat().st_size / 1024),
        },
        "command": " ".join(["python", "examples/quantize_pong.py", *sys.argv[1:]]),
    }
    print(json.dumps(figures, indent=1))
    if args.out and args.out.endswith(".jsonl"):
        head = {k: v for k, v in figures.items() if k not in ("recorded_episode", "episodes")}
        lines = [head, {"case": "recorded_episode", **figures["recorded_episode"]},
                 {"case": "episodes", **figures["episodes"]}]  # fmt: skip
        Path(args.out).write_text("".join(json.dumps(line) + "\n" for line in lines))
    elif args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
