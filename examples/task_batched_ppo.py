"""PPO on a batch of CartPole variants (pole lengths and masses) or Pendulum variants
(gravity and mass), one agent per task, all trained together in one vmapped program.

    .venv/bin/python examples/task_batched_ppo.py --num-tasks 8        # runs/ppo_tasks_cartpole.*
    .venv/bin/python examples/task_batched_ppo.py --env Pendulum-v1 --num-tasks 4 \
        --total-steps 1000000 --no-compile --out runs/ppo_tasks_pendulum

Each task's env params live in its env state, so ``vmap(algo.update)`` over TrainStates
[num_tasks] trains every variant at once. Writes ``OUT.jsonl`` (the task params, one line
per iteration with each task's metrics, then one line per task with its greedy returns in
fxrl's pure env with that task's params and in gymnasium's own env with the same
attributes) and ``OUT.png`` (training curves per task). PPO runs with
``ppo.Config.tuned(env)`` (PureJaxRL's settings for CartPole, fxrl's tuned ones for
Pendulum). The runs the docs quote were recorded with ``--out
docs/results/ppo_tasks_cartpole`` and ``--out docs/results/ppo_tasks_pendulum``; record
there only to update those figures.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import torch
import tyro

from fxrl import envs, random, tree
from fxrl.algorithms import ppo, tasks


@dataclasses.dataclass
class Args:
    env: str = "CartPole-v1"  # "CartPole-v1" or "Pendulum-v1"
    num_tasks: int = 8  # env variants trained together (vmapped)
    length: tuple[float, float] = (0.25, 1.0)  # CartPole: half pole length range (default 0.5)
    masspole: tuple[float, float] = (0.05, 0.5)  # CartPole: pole mass range (default 0.1)
    masscart: tuple[float, float] = (0.5, 2.0)  # CartPole: cart mass range (default 1.0)
    gravity: tuple[float, float] = (6.0, 14.0)  # Pendulum: gravity range (default 10)
    mass: tuple[float, float] = (0.7, 1.3)  # Pendulum: mass range (default 1)
    total_steps: int = 500_000  # env steps per task
    seed: int = 0  # the key tasks, agents and evaluation come from
    compile: bool = True  # compile the update's pieces (False: eager)
    eval_episodes: int = 10  # greedy episodes per task (pure env and gymnasium)
    out: str = "runs/ppo_tasks_cartpole"  # writes OUT.jsonl and OUT.png
    threads: int = 1  # torch.set_num_threads


def main(args: Args) -> None:
    torch.set_num_threads(args.threads)
    k_tasks, k_agents = random.split(random.key(args.seed)).unbind(0)
    # the tasks: env params with leaves [num_tasks]
    if args.env == "CartPole-v1":
        ranges = {"length": args.length, "masspole": args.masspole, "masscart": args.masscart}
    elif args.env == "Pendulum-v1":
        ranges = {"gravity": args.gravity, "mass": args.mass}
    else:
        raise ValueError(f"--env {args.env!r}: expected 'CartPole-v1' or 'Pendulum-v1'.")
    env_params = tasks.sample_params(envs.make(args.env), k_tasks, args.num_tasks, ranges)
    config = ppo.Config.tuned(args.env, total_steps=args.total_steps)
    algo = ppo.make(config)
    state = tasks.init_tasks(algo, k_agents, env_params)
    update = tasks.update_tasks(algo, args.num_tasks, compile=args.compile)
    iterations = max(1, config.total_steps // algo.steps_per_update)
    start, history = time.perf_counter(), []
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(f"{args.out}.jsonl", "w") as log:
        table = {k: v.tolist() for k, v in dataclasses.asdict(env_params).items() if k in ranges}
        log.write(json.dumps({"config": dataclasses.asdict(config), "args": vars(args),
                              "task_params": table}) + "\n")  # fmt: skip
        for i in range(iterations):
            # collect, then learn: one call for all tasks
            state, metrics = update(state)
            row = {k: v.reshape(-1).tolist() for k, v in metrics.items()}
            row.update(iteration=i, wall_s=time.perf_counter() - start)
            log.write(json.dumps(row) + "\n")
            log.flush()
            history.append(metrics["episode_return"])
            if i % 50 == 0 or i == iterations - 1:
                mean = metrics["episode_return"].nanmean().item()
                print(f"iter {i:4d} steps {int(metrics['steps'].max()):7d} return {mean:6.1f}")
        train_s = time.perf_counter() - start
        # judge each task's greedy policy in the pure env with its params, and in gymnasium
        pure = tasks.evaluate_tasks(algo, state.params, env_params, args.eval_episodes, seed=1)
        for t in range(args.num_tasks):
            gym_returns = tasks.evaluate_gymnasium(
                algo, tree.index(state.params, t), tree.index(env_params, t),
                args.eval_episodes, seed=1000 * t,
            )  # fmt: skip
            row = {"task": t, **{k: v[t] for k, v in table.items()},
                   "pure_returns": pure[t].tolist(), "pure_mean": pure[t].mean().item(),
                   "gym_returns": gym_returns.tolist(),
                   "gym_mean": gym_returns.mean().item()}  # fmt: skip
            log.write(json.dumps(row) + "\n")
            named = " ".join(f"{k} {row[k]:.3f}" for k in ranges)
            print(f"task {t} {named}: greedy {row['pure_mean']:.1f} (pure), "
                  f"{row['gym_mean']:.1f} (gymnasium)")  # fmt: skip
        log.write(json.dumps({"train_wall_s": train_s, "total_wall_s": time.perf_counter() - start})
                  + "\n")  # fmt: skip
    plot(torch.stack(history), algo.steps_per_update, table, args.env, f"{args.out}.png")


def plot(returns: torch.Tensor, steps_per_update: int, table: dict, env: str, path: str) -> None:
    """Each task's mean training return per iteration against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = torch.arange(1, returns.shape[0] + 1) * steps_per_update
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for t in range(returns.shape[1]):
        y = returns[:, t]
        keep = ~torch.isnan(y)
        label = " ".join(f"{k}={v[t]:.2f}" for k, v in table.items())
        ax.plot(steps[keep], y[keep], lw=0.8, label=label)
    ax.set(xlabel="env steps per task", ylabel="episode return",
           title=f"fxrl PPO, {env} variants trained together")  # fmt: skip
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main(tyro.cli(Args))
