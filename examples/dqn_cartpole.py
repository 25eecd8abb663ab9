"""DQN on the pure CartPole-v1, several seeds vmapped in one program, judged in gymnasium.

    python examples/dqn_cartpole.py --seeds 4              # writes runs/dqn_cartpole/

Trains ``dqn.Config()`` (PureJaxRL's DQN settings, 500k env steps per seed) for all seeds
at once with ``torch.func.vmap(algo.update)``, writes one JSON line per iteration to
``OUT/metrics.jsonl`` (flushed as it goes), plots the per-seed training returns to
``OUT/returns.png``, then plays each seed's greedy policy for 10 episodes in gymnasium's
own ``CartPole-v1`` every ``--eval-every`` steps (``OUT/eval.jsonl``) and at the end
(``OUT/eval.json``): the claim is per seed, on gymnasium. ``OUT`` is ``--out`` (default
``runs/dqn_cartpole``); the run the docs quote was recorded into the repository with
``OMP_NUM_THREADS=1 ... --seeds 4 --out docs/results/dqn_cartpole`` (its
``command.txt``); record there only to update those figures.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from fxrl import random, tree
from fxrl.algorithms import core, dqn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4, help="seeds trained together")
    parser.add_argument("--seed", type=int, default=0, help="the key all seeds come from")
    parser.add_argument("--total-steps", type=int, default=500_000, help="env steps per seed")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--out", default="runs/dqn_cartpole", help="run directory")
    parser.add_argument("--eval-every", type=int, default=50_000, help="env steps between evals")
    parser.add_argument(
        "--stop-when-solved",
        action="store_true",
        help="stop at the first eval where 3 of 4 seeds (75%%) average >= 475",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    config = dqn.Config(total_steps=args.total_steps)
    algo = dqn.make(config)
    init, update = core.batched(algo, args.seeds, compile=False)
    state = init(random.key(args.seed))
    iterations = -(-config.total_steps // algo.steps_per_update)
    start = time.perf_counter()
    returns = []  # [iterations][seeds], NaN where no episode ended
    with open(out / "metrics.jsonl", "w") as log:
        for i in range(iterations):
            state, metrics = update(state)
            row = {k: v.reshape(-1).tolist() for k, v in metrics.items()}
            row["iteration"], row["seconds"] = i, round(time.perf_counter() - start, 2)
            log.write(json.dumps(row) + "\n")
            log.flush()
            returns.append(row["episode_return"])
            steps = (i + 1) * algo.steps_per_update
            if steps % args.eval_every < algo.steps_per_update or i == iterations - 1:
                evals = _evaluate(algo, state, args.seeds)
                passed = sum(e["mean"] >= 475 for e in evals)
                print(json.dumps({"steps": steps, "seeds_at_475": passed,
                                  "means": [e["mean"] for e in evals]}), flush=True)  # fmt: skip
                with open(out / "eval.jsonl", "a") as f:
                    f.write(json.dumps({"steps": steps, "eval": evals}) + "\n")
                if args.stop_when_solved and passed >= 0.75 * args.seeds:
                    break
            if i % 250 == 0 or i == iterations - 1:
                print(f"iter {i} steps {row['steps'][0]} return {row['episode_return']} "
                      f"loss {row['loss']} {row['seconds']} s", flush=True)  # fmt: skip
    train_seconds = time.perf_counter() - start

    summary = {"env": config.env, "seeds": args.seeds, "steps": steps,
               "train_seconds": round(train_seconds, 1), "threads": args.threads,
               "seeds_at_475": passed, "eval": evals,
               "config": core.config_fields(config)}  # fmt: skip
    (out / "eval.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "config"}))
    _plot(returns, algo.steps_per_update, out / "returns.png")


def _evaluate(algo: core.Algorithm, state: dqn.TrainState, seeds: int) -> list[dict]:
    """The judge: each seed's greedy policy, 10 episodes in gymnasium's own CartPole-v1."""
    evals = []
    for s in range(seeds):
        params = tree.index(state.params, s) if seeds > 1 else state.params
        episode_returns = core.evaluate(algo, params, 10, seed=1000 * s)
        evals.append({"seed": s, "mean": float(episode_returns.mean()),
                      "returns": episode_returns.tolist()})  # fmt: skip
    return evals


def _plot(returns: list[list[float]], steps_per_update: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for s in range(len(returns[0])):
        xs = [(i + 1) * steps_per_update for i, r in enumerate(returns) if not math.isnan(r[s])]
        ys = [r[s] for r in returns if not math.isnan(r[s])]
        ax.plot(xs, ys, lw=0.8, label=f"seed {s}")
    ax.axhline(475, color="k", ls="--", lw=0.7)
    ax.set(xlabel="env steps per seed", ylabel="training episode return", title="DQN CartPole-v1")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
