"""Recurrent PPO on CartPole-v1 with the velocities masked out, against feed-forward PPO.

    .venv/bin/python examples/recurrent_ppo_cartpole.py --num-seeds 4 --compile
    # writes runs/recurrent_ppo_masked_cartpole.{jsonl,png}; --cells lstm for an LSTM core

Compile it: eager, 500k steps per cell take hours on a small CPU. The runs the docs quote
were recorded into the repository with ``--out docs/results/recurrent_ppo_masked_cartpole``
and ``--cells lstm --out docs/results/recurrent_ppo_lstm_masked_cartpole``; record there
only to update those figures.

The agent sees only the cart position and the pole angle (``transforms.select([0, 2])``),
so it must infer the velocities from what it saw before. Each cell in ``--cells`` is
trained on the same seeds: "gru" (or "lstm") carries a recurrent state; "mlp" is the
feed-forward baseline (the same network with the core replaced by a dense layer, the
carry passed through unused). Writes ``OUT.jsonl`` (a config line per cell, one line per
iteration with each seed's metrics, then per seed its greedy policy's returns over 10
episodes of gymnasium's own CartPole-v1, masked the same way) and ``OUT.png`` (both
cells' training curves).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import torch
import tyro

from fxrl import random, tree
from fxrl.algorithms import core, recurrent_ppo


@dataclasses.dataclass
class Args:
    num_seeds: int = 4  # seeds trained together (vmapped), per cell
    total_steps: int = 500_000  # env steps per seed
    cells: tuple[str, ...] = ("gru", "mlp")  # cores to train, one after the other
    seed: int = 0  # the key all seeds are split from (the same for every cell)
    compile: bool = False  # compile the update's pieces (False: eager)
    eval_episodes: int = 10  # greedy episodes per seed in gymnasium's env
    out: str = "runs/recurrent_ppo_masked_cartpole"  # writes OUT.jsonl and OUT.png
    threads: int = 1  # torch.set_num_threads


def run(args: Args, cell: str, log: object) -> torch.Tensor:
    """Train ``args.num_seeds`` seeds with ``cell``; log; return [iterations, seeds] returns."""
    config = recurrent_ppo.Config(cell=cell, total_steps=args.total_steps)
    algo = recurrent_ppo.make(config)
    init, update = core.batched(algo, args.num_seeds, compile=args.compile)  # type: ignore[arg-type]
    state = init(random.key(args.seed))
    iterations = max(1, config.total_steps // algo.steps_per_update)
    log.write(json.dumps({"cell": cell, "config": dataclasses.asdict(config)}) + "\n")
    start, history = time.perf_counter(), []
    for i in range(iterations):
        # collect, then learn: one call for all seeds
        state, metrics = update(state)
        row = {k: v.reshape(-1).tolist() for k, v in metrics.items()}
        row.update(cell=cell, iteration=i, wall_s=time.perf_counter() - start)
        log.write(json.dumps(row) + "\n")
        log.flush()
        history.append(metrics["episode_return"].reshape(-1))
        if i % 50 == 0 or i == iterations - 1:
            mean = metrics["episode_return"].nanmean().item()
            print(f"{cell} iter {i:4d} steps {int(metrics['steps'].max()):7d} return {mean:6.1f}",
                  flush=True)  # fmt: skip
    # judge each seed by its greedy policy in gymnasium's CartPole-v1, masked, carry fed back
    for s in range(args.num_seeds):
        params = tree.index(state.params, s) if args.num_seeds > 1 else state.params
        returns = core.evaluate(algo, params, args.eval_episodes, seed=1000 * s)
        late = torch.stack(history[-10:])[:, s].nanmean().item()
        row = {"cell": cell, "seed": s, "eval_returns": returns.tolist(),
               "eval_mean": returns.mean().item(), "train_return_last10": late,
               "wall_s": time.perf_counter() - start}  # fmt: skip
        log.write(json.dumps(row) + "\n")
        log.flush()
        print(f"{cell} seed {s}: greedy return {row['eval_mean']:.1f} (training, last 10: "
              f"{late:.1f})", flush=True)  # fmt: skip
    return torch.stack(history)


def main(args: Args) -> None:
    torch.set_num_threads(args.threads)
    curves = {}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(f"{args.out}.jsonl", "w") as log:
        log.write(json.dumps({"args": vars(args)}) + "\n")
        for cell in args.cells:
            curves[cell] = run(args, cell, log)
    steps_per_update = recurrent_ppo.make(recurrent_ppo.Config()).steps_per_update
    plot(curves, steps_per_update, f"{args.out}.png")


def plot(curves: dict[str, torch.Tensor], steps_per_update: int, path: str) -> None:
    """Each seed's mean training return per iteration against env steps, one colour per cell."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for (cell, returns), colour in zip(curves.items(), ("C0", "C3", "C2"), strict=False):
        steps = torch.arange(1, returns.shape[0] + 1) * steps_per_update
        for s in range(returns.shape[1]):
            y = returns[:, s]
            keep = ~torch.isnan(y)
            label = (
                f"{cell} ({'feed-forward' if cell == 'mlp' else 'recurrent'})" if s == 0 else None
            )
            ax.plot(steps[keep], y[keep], lw=0.7, color=colour, alpha=0.8, label=label)
    ax.set(xlabel="env steps per seed", ylabel="training episode return",
           title="fxrl recurrent PPO, CartPole-v1 without velocities")  # fmt: skip
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main(tyro.cli(Args))
