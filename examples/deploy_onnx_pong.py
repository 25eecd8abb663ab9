"""Play Pong with an exported policy: numpy, onnxruntime and ale_py only (no torch, no fxrl).

Make the policy first (that step needs fxrl and torch):

    python examples/export_pong_policy.py pong_policy.onnx
    python examples/deploy_onnx_pong.py pong_policy.onnx --steps 1000

One agent step is one policy call on the raw [210, 160, 3] screen and 4 emulator frames
with that action, as ALE/Pong-v5 does (frameskip 4, sticky actions with probability 0.25).
The screen preprocessing (resize, grayscale) is inside the ONNX graph, so the program
feeds the emulator's screen as it is.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import onnxruntime as ort
from ale_py import ALEInterface, LoggerMode, roms

FRAMESKIP = 4


def make_ale(seed: int) -> ALEInterface:
    ALEInterface.setLoggerMode(LoggerMode.Error)
    ale = ALEInterface()
    ale.setInt("random_seed", seed)
    ale.setFloat("repeat_action_probability", 0.25)  # ALE/Pong-v5's sticky actions
    ale.loadROM(roms.get_rom_path("pong"))
    return ale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", nargs="?", default="pong_policy.onnx", help="the .onnx file")
    parser.add_argument("--steps", type=int, default=1000, help="agent steps (4 frames each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads")
    args = parser.parse_args()

    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    session = ort.InferenceSession(args.policy, options, providers=["CPUExecutionProvider"])
    (pixels_input,) = session.get_inputs()  # "pixels": uint8 [210, 160, 3]
    ale = make_ale(args.seed)
    actions = ale.getMinimalActionSet()
    screen = np.empty((210, 160, 3), dtype=np.uint8)

    episode_return, returns, policy_seconds = 0.0, [], 0.0
    start = time.perf_counter()
    for _ in range(args.steps):
        ale.getScreenRGB(screen)
        t = time.perf_counter()
        (action,) = session.run(None, {pixels_input.name: screen})
        policy_seconds += time.perf_counter() - t
        for _ in range(FRAMESKIP):
            episode_return += ale.act(actions[int(action)])
        if ale.game_over():
            returns.append(episode_return)
            episode_return = 0.0
            ale.reset_game()
    elapsed = time.perf_counter() - start

    print(
        f"{args.steps} agent steps ({args.steps * FRAMESKIP} frames) in {elapsed:.2f} s: "
        f"{args.steps / elapsed:.0f} steps/s; policy {policy_seconds / args.steps * 1e3:.3f} "
        f"ms/step; finished episodes {len(returns)} (returns {returns}), current return "
        f"{episode_return:+.0f}"
    )


if __name__ == "__main__":
    main()
