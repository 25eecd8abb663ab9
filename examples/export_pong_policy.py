"""Export a Pong policy that reads raw ALE screens, for deploy_onnx_pong.py.

The whole policy is one pure function: the env transforms used in training
(to_tensor_image, resize 84 nearest, grayscale), the Nature DQN network and the greedy
argmax. ``fxrl.export`` traces it once with params baked in and writes an ONNX file whose
single input is ``pixels`` (uint8 [210, 160, 3]) and single output the action index.

    python examples/export_pong_policy.py                    # -> pong_policy.onnx
    python examples/export_pong_policy.py --params dqn.pt    # trained params (torch.save)
    python examples/deploy_onnx_pong.py pong_policy.onnx     # play, with numpy + onnxruntime

Without ``--params`` the network is freshly initialised from a key: an untrained but
complete policy, enough to measure deployment speed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from fxrl import exploration, nn, random
from fxrl import transforms as T
from fxrl.export import export, to_onnx

NUM_ACTIONS = 6  # Pong's minimal action set: NOOP, FIRE, RIGHT, LEFT, RIGHTFIRE, LEFTFIRE
preprocess = T.compose(T.to_tensor_image(), T.resize(84, 84, "nearest"), T.grayscale())
dqn = nn.atari_dqn(NUM_ACTIONS, in_channels=1)


def pong_policy(params: dict, pixels: torch.Tensor) -> torch.Tensor:
    """Raw screen [210, 160, 3] uint8 -> greedy action [] int64 (index into the minimal set)."""
    action, _ = exploration.q_value(dqn.apply(params, preprocess(pixels)))
    return action


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="pong_policy.onnx", help="ONNX file to write")
    parser.add_argument("--params", help="torch.save'd params of nn.atari_dqn(6, in_channels=1)")
    parser.add_argument("--seed", type=int, default=0, help="init key when no --params")
    parser.add_argument("--print-graph", action="store_true", help="print the exported graph")
    args = parser.parse_args()

    if args.params:
        params = torch.load(args.params, weights_only=True)
    else:
        params = dqn.init(random.key(args.seed))
    screen = torch.zeros(210, 160, 3, dtype=torch.uint8)
    exported = export(pong_policy, params, screen)
    if args.print_graph:
        print(exported)
    path = to_onnx(exported, Path(args.out))
    print(f"wrote {path}: {exported!r}")


if __name__ == "__main__":
    main()
