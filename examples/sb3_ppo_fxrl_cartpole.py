"""Stable-Baselines3's PPO, unchanged, on fxrl's batched CartPole.

fxrl's CartPole-v1 (a pure torch env, checked against gymnasium's) runs as 8 envs in one
batched step behind SB3's VecEnv API (``fxrl.envs.to_sb3``); SB3 does the rest. The
trained policy is then played for 10 episodes in gymnasium's own CartPole-v1, the way
fxrl judges learning. Hyperparameters: RL Zoo's PPO CartPole-v1 entry.

    python examples/sb3_ppo_fxrl_cartpole.py --total-timesteps 50000 --out runs/sb3_ppo

Writes ``metrics.jsonl`` (one line per PPO iteration: env steps, seconds, mean episode
return over the last 100 episodes) and, at the end, the greedy evaluation in gymnasium.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import gymnasium
import numpy as np
import torch
import tyro
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback

from fxrl import envs
from fxrl.envs.sb3 import to_sb3


@dataclasses.dataclass
class Args:
    total_timesteps: int = 50_000
    """env steps to train for (all envs together)"""
    num_envs: int = 8
    """fxrl CartPoles stepped together in one batched call"""
    seed: int = 0
    """seeds SB3 (torch init, sampling) and the envs (fxrl.random.key(seed))"""
    compile: bool = False
    """step the batch with fxrl.compile (10-20 s to compile, then faster steps)"""
    out: str | None = None
    """run directory for metrics.jsonl; None: print only"""
    eval_episodes: int = 10
    """greedy episodes in gymnasium's own CartPole-v1 at the end"""


class JsonlLog(BaseCallback):
    """One JSON line per PPO iteration: steps, seconds, mean return of the last 100 episodes."""

    def __init__(self, path: Path | None) -> None:
        super().__init__()
        self.file = None if path is None else path.open("w")
        self.start = time.perf_counter()

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        returns = [e["r"] for e in self.model.ep_info_buffer]
        row = {
            "step": self.num_timesteps,
            "seconds": round(time.perf_counter() - self.start, 2),
            "mean_return_100": float(np.mean(returns)) if returns else None,
            "episodes": len(returns),
        }
        if self.file is not None:
            self.file.write(json.dumps(row) + "\n")
            self.file.flush()


def make_ppo(venv, seed: int) -> PPO:
    # RL Zoo's tuned PPO for CartPole-v1 (n_envs 8, 1e5 steps to 500)
    return PPO(
        "MlpPolicy",
        venv,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=lambda f: 1e-3 * f,
        clip_range=lambda f: 0.2 * f,
        seed=seed,
        device="cpu",
    )


def evaluate(model: PPO, episodes: int, seed: int) -> list[float]:
    """Greedy returns in gymnasium's own CartPole-v1."""
    env = gymnasium.make("CartPole-v1")
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(int(action))
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    return returns


def main(args: Args) -> dict:
    torch.set_num_threads(1)
    out = None if args.out is None else Path(args.out)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    venv = to_sb3(envs.batch(envs.make("CartPole-v1"), args.num_envs), compile=args.compile)
    venv.seed(args.seed)
    model = make_ppo(venv, args.seed)
    start = time.perf_counter()
    model.learn(
        args.total_timesteps, callback=JsonlLog(None if out is None else out / "metrics.jsonl")
    )
    seconds = time.perf_counter() - start
    returns = evaluate(model, args.eval_episodes, seed=10_000 + args.seed)
    result = {
        "total_timesteps": args.total_timesteps,
        "train_seconds": round(seconds, 1),
        "eval_mean_return": float(np.mean(returns)),
        "eval_returns": returns,
    }
    print(json.dumps(result))
    if out is not None:
        (out / "eval.json").write_text(json.dumps(result) + "\n")
    return result


if __name__ == "__main__":
    main(tyro.cli(Args))
