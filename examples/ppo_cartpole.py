"""PPO on CartPole-v1, several seeds trained together in one vmapped program.

    .venv/bin/python examples/ppo_cartpole.py --num-seeds 8     # runs/ppo_cartpole.{jsonl,png}

Writes ``OUT.jsonl`` (one line per iteration: each seed's metrics, then one line per seed
with its greedy policy's returns over 10 episodes of gymnasium's own CartPole-v1) and
``OUT.png`` (the training curves), ``OUT`` being ``--out`` (default ``runs/ppo_cartpole``).
Learning is judged by that greedy evaluation.

The run the docs quote (``docs/results/ppo_cartpole_8seeds.*``) was recorded into the
repository with ``--num-seeds 8 --no-compile --out docs/results/ppo_cartpole_8seeds``;
record there only to update those figures (the pages' figures comments check them).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import torch
import tyro

from fxrl import random, tree
from fxrl.algorithms import core, ppo


@dataclasses.dataclass
class Args:
    env: str = "CartPole-v1"  # pure env id
    num_seeds: int = 8  # seeds trained together (vmapped)
    total_steps: int | None = None  # env steps per seed (None: the env's tuned budget)
    seed: int = 0  # the key all seeds are split from
    compile: bool = True  # compile the update's pieces (False: eager)
    eval_episodes: int = 10  # greedy episodes per seed in gymnasium's env
    out: str = "runs/ppo_cartpole"  # writes OUT.jsonl and OUT.png
    threads: int = 1  # torch.set_num_threads


def main(args: Args) -> None:
    torch.set_num_threads(args.threads)
    # the env's tuned settings (ppo.TUNED; PureJaxRL's CartPole defaults where none)
    budget = {} if args.total_steps is None else {"total_steps": args.total_steps}
    config = ppo.Config.tuned(args.env, **budget)
    algo = ppo.make(config)
    # The fast pair: torch.compile(vmap(piece)) for each piece of the update.
    init, update = core.batched(algo, args.num_seeds, compile=args.compile)
    state = init(random.key(args.seed))
    iterations = max(1, config.total_steps // algo.steps_per_update)
    start, history = time.perf_counter(), []
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(f"{args.out}.jsonl", "w") as log:
        log.write(json.dumps({"config": dataclasses.asdict(config), "args": vars(args)}) + "\n")
        for i in range(iterations):
            # collect, then learn: one call for all seeds
            state, metrics = update(state)
            row = {k: v.reshape(-1).tolist() for k, v in metrics.items()}
            row.update(iteration=i, wall_s=time.perf_counter() - start)
            log.write(json.dumps(row) + "\n")
            log.flush()
            history.append(metrics["episode_return"].reshape(-1))
            if i % 50 == 0 or i == iterations - 1:
                mean = metrics["episode_return"].nanmean().item()
                print(f"iter {i:4d} steps {int(metrics['steps'].max()):7d} return {mean:6.1f}")
        # judge each seed by its greedy policy in gymnasium's own env
        for s in range(args.num_seeds):
            params = tree.index(state.params, s) if args.num_seeds > 1 else state.params
            returns = core.evaluate(algo, params, args.eval_episodes, seed=1000 * s)
            late = torch.stack(history[-10:])[:, s].nanmean().item()
            row = {"seed": s, "eval_returns": returns.tolist(), "eval_mean": returns.mean().item(),
                   "train_return_last10": late}  # fmt: skip
            log.write(json.dumps(row) + "\n")
            print(f"seed {s}: greedy return {row['eval_mean']:.1f} (training, last 10: {late:.1f})")
    plot(torch.stack(history), algo.steps_per_update, f"{args.out}.png", args.env)


def plot(returns: torch.Tensor, steps_per_update: int, path: str, env: str) -> None:
    """Each seed's mean training return per iteration against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = torch.arange(1, returns.shape[0] + 1) * steps_per_update
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for s in range(returns.shape[1]):
        y = returns[:, s]
        keep = ~torch.isnan(y)
        ax.plot(steps[keep], y[keep], lw=0.8, label=f"seed {s}")
    ax.set(xlabel="env steps per seed", ylabel="episode return", title=f"fxrl PPO, {env}")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main(tyro.cli(Args))
