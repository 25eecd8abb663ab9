"""A briefly trained DQN playing ALE Pong, recorded from its checkpoint and from its ONNX export.

    .venv/bin/python examples/dqn_pong_video.py --frames 30000 --video-steps 400 \
        --gif docs/images/pong_dqn.gif      # docs/guide/video.md's GIF: 17 minutes, busy machine

Training is ``examples/dqn_pong_export.py``'s setup (TorchRL's export tutorial: raw
``ALE/Pong-v5`` screens through ``to_tensor_image, resize(84, nearest), grayscale``, the
Nature DQN net on one frame, frames stored as uint8) with DQN's usual schedule: epsilon
from 1 to 0.05 over the first half of the budget, one gradient step (batch 32, Huber loss,
Adam 1e-4) per 4 frames after ``--learning-starts``, the target copied every 1000 gradient steps.
``--frames`` is a budget of minutes, far below the millions of frames DQN needs on Pong:
the agent has learnt little, and the video shows a game, not a result.

Then, in this order: ``OUT`` becomes a host-env run directory (``fxrl.run.host_run``:
``OUT/config.json`` naming DQN, ``ALE/Pong-v5``, the network and the preprocessing, and the
params in ``OUT/checkpoints/latest.safetensors``, ``fxrl.run.checkpoint``), which is read
back; the greedy policy of the read-back params, preprocessing included, is exported to
``OUT/policy.onnx`` (what ``fxrl export OUT --format onnx`` writes); ``video.record`` plays
``--video-steps`` steps of ``envs.atari("Pong", render_mode="rgb_array")`` from the same
key twice, once with the checkpoint's torch policy and once with the ONNX program in ONNX
Runtime (``video.onnx_policy``), and writes both GIFs. The CLI records the same run:
``fxrl eval OUT --video pong.gif [--onnx]``. The params also go to
``OUT/checkpoint.safetensors`` (what ``examples/quantize_pong.py --params`` reads). The two
runs' actions are compared step by step; where they agree throughout, their frames are
identical. ``--gif`` gets a copy of the checkpoint's GIF. Prints one JSON line of what
happened.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from fxrl import buffers, envs, exploration, optim, random
from fxrl.algorithms import dqn
from fxrl.collector import collector
from fxrl.run import checkpoint, host_run, video

# What the run directory's config.json records, and what rebuilds the policy from it.
NETWORK = {"name": "atari_dqn", "num_actions": 6, "in_channels": 1}  # Pong: 6 actions
PREPROCESS = [["to_tensor_image"], ["resize", 84, 84, "nearest"], ["grayscale"]]
preprocess = host_run.build_preprocess(PREPROCESS)  # to_tensor_image, resize, grayscale
q = host_run.build_network(NETWORK)  # nn.atari_dqn(6, in_channels=1)


def train(args: argparse.Namespace) -> tuple[dict, dict]:
    """DQN on preprocessed Pong for ``args.frames`` frames; ``(params, figures)``."""
    pong = envs.atari("Pong")
    env = envs.transform(pong, preprocess)
    k_q, k_collect, k_learn = random.split(random.key(args.seed), 3).unbind(0)
    params = q.init(k_q)
    target, opt = params, optim.adam(1e-4)
    opt_state, count = opt.init(params), torch.tensor(0)
    learn = dqn.make_learner(q.apply, opt, batch_size=32, gamma=0.99, loss="huber",
                             tau=1.0, target_update_every=1000)  # fmt: skip
    frame = torch.zeros(1, 84, 84, dtype=torch.uint8)
    example = {"obs": frame, "action": torch.tensor(0), "reward": torch.tensor(0.0),
               "next_obs": frame, "terminated": torch.tensor(False)}  # fmt: skip
    buf = buffers.init(example, args.frames)
    seen = [0]

    def act(params: dict, obs: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        eps = exploration.linear_anneal(seen[0], 1.0, 0.05, args.frames // 2)
        action, _ = exploration.q_value(q.apply(params, obs))
        return exploration.egreedy(key, action, env.action_spec, eps)

    per_batch = 64
    batches = collector(env, act, lambda: params, k_collect, per_batch, args.frames,
                        learning_starts=args.learning_starts)  # fmt: skip
    start, returns, loss = time.perf_counter(), [], float("nan")
    for batch, stats in batches:
        seen[0] = stats["frames"]
        fields = ("obs", "action", "reward", "next_obs", "terminated")
        to_uint8 = lambda x: (x * 255).round().to(torch.uint8)
        buf = buffers.add(buf, {k: to_uint8(batch[k]) if "obs" in k else batch[k] for k in fields})
        returns += stats["episode_return"].tolist()
        if stats["frames"] >= args.learning_starts:
            for k in random.split(random.fold_in(k_learn, batches.batches), per_batch // 4):
                params, target, opt_state, count, buf, m = learn(
                    params, target, opt_state, count, buf, k
                )
            loss = float(m["loss"])
        if batches.batches % 50 == 0:
            print(f"frames {stats['frames']:6d}  episodes {len(returns):3d}  "
                  f"last return {returns[-1] if returns else float('nan'):5.1f}  "
                  f"loss {loss:.4f}  {time.perf_counter() - start:5.0f} s", flush=True)  # fmt: skip
    pong.close()
    figures = {"frames": batches.frames, "gradient_steps": int(count),
               "train_seconds": round(time.perf_counter() - start, 1),
               "episode_returns": returns}  # fmt: skip
    return params, figures


def record(policy: object, path: Path, args: argparse.Namespace) -> video.Recording:
    pong = envs.atari("Pong", render_mode="rgb_array")
    try:
        return video.record(pong, policy, path, key=random.key(args.seed + 1),
                            max_steps=args.video_steps, fps=args.fps, keep_frames=True)  # fmt: skip
    finally:
        pong.close()


class Logged:
    """``policy(obs)`` that keeps the actions it returned."""

    def __init__(self, policy: object) -> None:
        self.policy, self.actions = policy, []

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        action = self.policy(obs)
        self.actions.append(int(action))
        return action


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20_000, help="training frames")
    parser.add_argument("--learning-starts", type=int, default=2_000, help="random frames first")
    parser.add_argument("--video-steps", type=int, default=150, help="agent steps recorded")
    parser.add_argument("--fps", type=int, default=25, help="GIF frames per second")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/dqn_pong_video", help="the run directory, GIFs")
    parser.add_argument("--gif", default=None, help="also copy the checkpoint's GIF here")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    params, figures = train(args)
    settings = {k: getattr(args, k) for k in ("frames", "learning_starts", "threads")}
    host_run.save_host_run(out, params, algorithm="dqn", env="ALE/Pong-v5", network=NETWORK,
                           preprocess=PREPROCESS, steps=figures["frames"], seed=args.seed,
                           extra={"trained_by": "examples/dqn_pong_video.py",
                                  "settings": settings})  # fmt: skip
    checkpoint.save(out / "checkpoint.safetensors", params, {"frames": figures["frames"]})
    # the run, read back: the video's torch policy uses what was on disk
    run = host_run.load_host_run(out)
    onnx_path = host_run.export_host_run(out, "onnx")  # OUT/policy.onnx, batch dim dynamic

    from_checkpoint = Logged(run.act)
    from_onnx = Logged(video.onnx_policy(onnx_path, batched=True))
    rec_torch = record(from_checkpoint, out / "pong_checkpoint.gif", args)
    rec_onnx = record(from_onnx, out / "pong_onnx.gif", args)
    n = min(len(from_checkpoint.actions), len(from_onnx.actions))
    agree = np.mean(np.equal(from_checkpoint.actions[:n], from_onnx.actions[:n]))
    same_frames = rec_torch.frames.shape == rec_onnx.frames.shape and bool(
        np.array_equal(rec_torch.frames, rec_onnx.frames)
    )
    if args.gif:
        shutil.copyfile(rec_torch.path, args.gif)
    figures.update(
        video_steps=rec_torch.lengths, video_return=rec_torch.returns,
        onnx_video_steps=rec_onnx.lengths, onnx_video_return=rec_onnx.returns,
        actions_agree=float(agree), same_frames=same_frames,
        gif_bytes=rec_torch.path.stat().st_size, onnx_gif_bytes=rec_onnx.path.stat().st_size,
    )  # fmt: skip
    figures["episode_returns"] = figures["episode_returns"][-10:]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
