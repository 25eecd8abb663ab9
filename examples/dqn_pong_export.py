"""TorchRL's export-tutorial DQN loop on ALE Pong, with fxrl pieces, then ONNX deployment.

    python examples/dqn_pong_export.py                   # the tutorial's loop, as it stops
    python examples/dqn_pong_export.py --min-frames 8000 # also time the learning phase
    python examples/dqn_pong_export.py --min-frames 8000 --save-params dqn.pt   # keep them

The loop of TorchRL's "Exporting TorchRL modules" tutorial, piece for piece:
``GymEnv("ALE/Pong-v5")`` + ToTensorImage, Resize(84, nearest), GrayScale, StepCounter is
``envs.transform(envs.atari("Pong"), ...)``; ``ConvNet.default_atari_dqn`` is
``nn.atari_dqn(6, in_channels=1)``; EGreedyModule(eps_init=0.5, annealing 100k) is
``exploration.egreedy`` of ``linear_anneal(count, 0.5, 0.1, 100_000)``; SyncDataCollector
(100 frames a batch, 5000 random frames first) is ``fxrl.collector``; ReplayBuffer(100k)
is ``fxrl.buffers``; DQNLoss (l2, delay_value) + Adam + SoftUpdate(eps=0.99) are
``dqn.make_learner(..., loss="mse", tau=0.01)`` with ``optim.adam``, 10 optimisation
steps of batch 128 per batch once the buffer holds more than 5000 frames. The tutorial
stops as soon as the buffer holds a step of an episode longer than 200 steps (a few
hundred frames into the random phase); ``--min-frames`` keeps going to time collection
with the policy and the optimisation steps. Two deviations, both memory: frames are
stored as uint8 (x 255, rounded; ``atari_dqn`` divides uint8 input by 255), and the
epsilon counter advances by the batch size per optimisation step, as the tutorial's
``exploration_module.step(data.numel())`` inside its optimisation loop does.

Then the greedy policy, preprocessing included, is exported with ``fxrl.export`` to ONNX
and plays raw ALE screens (``examples/deploy_onnx_pong.py`` does the same without torch).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from fxrl import buffers, envs, exploration, nn, optim, random
from fxrl import transforms as T
from fxrl.algorithms import dqn
from fxrl.collector import collector
from fxrl.export import export, load_onnx, to_onnx

preprocess = T.compose(T.to_tensor_image(), T.resize(84, "nearest"), T.grayscale())
q = nn.atari_dqn(6, in_channels=1)  # Pong's minimal action set has 6 actions


def greedy(params: dict, pixels: torch.Tensor) -> torch.Tensor:
    """Raw screen [210, 160, 3] uint8 -> action [] int64: what gets exported."""
    action, _ = exploration.q_value(q.apply(params, preprocess(pixels)))
    return action


def to_uint8(frames: torch.Tensor) -> torch.Tensor:
    return (frames * 255).round().to(torch.uint8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-frames", type=int, default=0, help="go on at least this long")
    parser.add_argument("--stop-length", type=int, default=200, help="the tutorial's stop")
    parser.add_argument("--buffer-size", type=int, default=100_000, help="replay capacity")
    parser.add_argument("--play-steps", type=int, default=500, help="ONNX agent steps on ALE")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--out", default=None, help="write the figures here as JSON")
    parser.add_argument("--save-params", default=None, help="torch.save the trained params here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    learning_starts, frames_per_batch, optim_steps, batch_size = 5000, 100, 10, 128

    env = envs.transform(envs.atari("Pong"), preprocess, T.step_counter())
    key_q, key_collect, key_learn = random.split(random.key(args.seed), 3).unbind(0)
    params = q.init(key_q)
    target, opt = params, optim.adam(1e-3)  # torch.optim.Adam's defaults
    opt_state, count = opt.init(params), torch.tensor(0)
    learn = dqn.make_learner(q.apply, opt, batch_size=batch_size, gamma=0.99, loss="mse",
                             tau=1 - 0.99, target_update_every=1)  # fmt: skip
    frame = torch.zeros(1, 84, 84, dtype=torch.uint8)
    example = {"obs": frame, "action": torch.tensor(0), "reward": torch.tensor(0.0),
               "next_obs": frame, "terminated": torch.tensor(False)}  # fmt: skip
    buf = buffers.init(example, args.buffer_size)
    anneal = [0]  # the tutorial's exploration counter

    def act(params: dict, obs: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        eps = exploration.linear_anneal(anneal[0], 0.5, 0.1, 100_000)
        action, _ = exploration.q_value(q.apply(params, obs))
        return exploration.egreedy(key, action, env.action_spec, eps)

    batches = collector(env, act, lambda: params, key_collect, frames_per_batch,
                        learning_starts=learning_starts)  # fmt: skip
    timing = {"random": [0.0, 0], "policy": [0.0, 0], "optim": [0.0, 0]}
    frames_per_episode: dict[int, int] = {}
    t = time.perf_counter()
    for batch, stats in batches:
        timing["random" if stats["random"] else "policy"][0] += time.perf_counter() - t
        timing["random" if stats["random"] else "policy"][1] += frames_per_batch
        # the tutorial's stop reads the step counts in the buffer: count frames per episode
        ids, counts = batch["traj_id"].unique(return_counts=True)
        for i, c in zip(ids.tolist(), counts.tolist(), strict=True):
            frames_per_episode[i] = frames_per_episode.get(i, 0) + c
        fields = ("obs", "action", "reward", "next_obs", "terminated")
        buf = buffers.add(buf, {k: to_uint8(batch[k]) if "obs" in k else batch[k] for k in fields})
        if int(buf.size) > learning_starts:
            t = time.perf_counter()
            for k in random.split(random.fold_in(key_learn, batches.batches), optim_steps):
                params, target, opt_state, count, buf, _ = learn(
                    params, target, opt_state, count, buf, k
                )
                anneal[0] += frames_per_batch
            timing["optim"][0] += time.perf_counter() - t
            timing["optim"][1] += optim_steps
        longest = max(frames_per_episode.values())
        if longest > args.stop_length and stats["frames"] >= args.min_frames:
            break
        t = time.perf_counter()
    rate = {k: round(n / s, 1) if s else None for k, (s, n) in timing.items()}
    print(f"stopped after {stats['frames']} frames (longest episode so far {longest} steps); "
          f"frames/s random {rate['random']}, with the policy {rate['policy']}; "
          f"optimisation steps/s {rate['optim']} ({timing['optim'][1]} steps); TorchRL's "
          "tutorial: 1274 and 488 frames/s, 14 steps/s")  # fmt: skip

    # export the greedy policy with its preprocessing, and play raw ALE screens with it
    screen = torch.zeros(210, 160, 3, dtype=torch.uint8)
    start = time.perf_counter()
    onnx_path = to_onnx(export(greedy, params, screen), Path(tempfile.mkdtemp()) / "pong.onnx")
    export_seconds = time.perf_counter() - start
    played = play(load_onnx(onnx_path), params, args.play_steps, args.seed)
    print(f"exported to {onnx_path} in {export_seconds:.1f} s; {played}")
    if args.save_params:  # for examples/quantize_pong.py and export_pong_policy.py --params
        torch.save(params, args.save_params)
    if args.out:
        figures = {"frames": stats["frames"], "longest": longest, "rates": rate,
                   "timing": timing, "export_seconds": export_seconds, **played}  # fmt: skip
        Path(args.out).write_text(json.dumps(figures))


def play(policy: object, params: dict, steps: int, seed: int) -> dict:
    """``steps`` agent steps of the ONNX policy on raw screens of a fresh ALE/Pong-v5,
    checking each action against the eager policy."""
    import gymnasium

    game = gymnasium.make("ALE/Pong-v5")
    screen, _ = game.reset(seed=seed)
    same, total, start = 0, 0.0, time.perf_counter()
    for _ in range(steps):
        action = int(np.asarray(policy(torch.from_numpy(screen))))
        same += action == int(greedy(params, torch.from_numpy(screen)))
        screen, reward, terminated, truncated, _ = game.step(action)
        total += float(reward)
        if terminated or truncated:
            screen, _ = game.reset()
    seconds = time.perf_counter() - start
    return {"play_steps": steps, "return": total, "same_as_eager": same / steps,
            "play_seconds": round(seconds, 2)}  # fmt: skip


if __name__ == "__main__":
    main()
