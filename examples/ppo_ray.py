"""PPO on CartPole-v1 with Ray rollout workers: the workers act, the driver learns, seeds vmapped.

    .venv/bin/python examples/ppo_ray.py --num-workers 2 --num-seeds 4   # runs/ray_ppo_cartpole.*

Each of ``num_workers`` Ray actors steps ``num_seeds x envs_per_worker`` pure CartPole envs
and acts with every seed's policy at once (the network vmapped over the seeds' params).
``RayCollector`` (sync mode) gathers one batch from all workers; the driver reshapes it
to ``[seeds, T, envs]``, runs GAE and PPO's epochs of minibatches for all seeds in one
``torch.func.vmap`` call, and sends the new params back with ``update`` (one ``ray.put``
per iteration). The network, its init, ``objectives.gae``, ``objectives.ppo_loss`` and the
optimizer are single-machine PPO's (``fxrl.algorithms.ppo``); only the rollout moved.

Writes ``OUT.jsonl`` (one line per iteration, then one per seed with its greedy policy's
returns over 10 episodes of gymnasium's own CartPole-v1) and ``OUT.png`` (``--out``, default
``runs/ray_ppo_cartpole``). The run the docs quote was recorded with ``--out
docs/results/ray_ppo_cartpole``; record there only to update those figures.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
import torch
import tyro

from fxrl import distributions, envs, objectives, optim, random, tree
from fxrl.algorithms import core, ppo
from fxrl.distributed import RayCollector


@dataclasses.dataclass
class Args:
    num_workers: int = 2  # Ray rollout actors
    num_seeds: int = 4  # seeds trained together (vmapped in the learner and the policy)
    envs_per_worker: int = 4  # envs per seed on each worker
    num_steps: int = 64  # steps per env per iteration
    total_steps: int = 500_000  # env steps per seed
    seed: int = 0  # the key all seeds are split from
    eval_episodes: int = 10  # greedy episodes per seed in gymnasium's env
    out: str = "runs/ray_ppo_cartpole"  # writes OUT.jsonl and OUT.png
    threads: int = 1  # torch threads, in the driver and on each worker
    ray_cpus: int = 2  # CPUs of the local Ray cluster (ray.init(num_cpus=...))


def make_rollout(
    net_apply: Callable[..., Any], num_seeds: int, envs_per_worker: int
) -> tuple[Callable[[], envs.Env], Callable[..., Any]]:
    """make_env and the vmapped behaviour policy the workers run (sent by value)."""

    def make_env() -> envs.Env:
        return envs.batch(envs.make("CartPole-v1"), num_seeds * envs_per_worker)

    def policy(net: dict, obs: torch.Tensor, key: torch.Tensor):
        # obs [seeds * envs, 4] -> [seeds, envs, 4]; net leaves carry a leading [seeds]
        head, value = torch.func.vmap(net_apply)(net, obs.reshape(num_seeds, -1, obs.shape[-1]))
        action, log_prob = distributions.categorical(head).sample_and_log_prob(key)
        extras = {"log_prob": log_prob.reshape(-1), "value": value.reshape(-1)}
        return action.reshape(-1), extras

    return make_env, policy


def make_learner(
    config: ppo.Config, net_apply: Callable[..., Any]
) -> tuple[optim.GradientTransformation, Callable[..., Any]]:
    """``learn(net, opt_state, key, traj) -> (net, opt_state, key, metrics)`` for one seed:
    GAE, then ``update_epochs`` x ``num_minibatches`` steps of ``objectives.ppo_loss``."""
    batch_size = config.num_envs * config.num_steps
    mb_size = batch_size // config.num_minibatches
    grad_steps = config.update_epochs * config.num_minibatches
    num_updates = max(1, config.total_steps // batch_size)

    def lr_schedule(count: torch.Tensor) -> torch.Tensor:  # ppo.make's linear annealing
        done = torch.div(count, grad_steps, rounding_mode="floor").double()
        return config.lr * (1.0 - done / num_updates).clamp(min=0.0)

    opt = optim.chain(
        optim.clip_by_global_norm(config.max_grad_norm), optim.adam(lr_schedule, eps=1e-5)
    )

    def forward(net: dict, x: torch.Tensor):
        head, value = net_apply(net, x)
        return distributions.categorical(head), value

    def loss_fn(net: dict, mb: dict):
        return objectives.ppo_loss(
            forward, None, net, mb, clip_eps=config.clip_eps, vf_coef=config.vf_coef,
            ent_coef=config.ent_coef, clip_value=config.clip_eps,
            normalize_advantage=config.normalize_advantages,
        )  # fmt: skip

    def learn(net: dict, opt_state, key: torch.Tensor, traj: dict):
        # next_obs is the observation each step reached (an episode's last where it ended)
        _, next_value = net_apply(net, traj["next_obs"])
        advantage, target = objectives.gae(
            traj["reward"], traj["value"], next_value, traj["terminated"], traj["truncated"],
            gamma=config.gamma, lmbda=config.gae_lambda,
        )  # fmt: skip
        batch = {k: traj[k].flatten(0, 1) for k in ("obs", "action", "log_prob", "value")}
        batch["advantage"], batch["value_target"] = advantage.flatten(0, 1), target.flatten(0, 1)
        metrics = []
        for _ in range(config.update_epochs):
            key, k_perm = random.split(key).unbind(-2)
            perm = random.permutation(k_perm, batch_size)
            for m in range(config.num_minibatches):
                idx = perm[m * mb_size : (m + 1) * mb_size]
                mb = tree.map(lambda v, idx=idx: v[idx], batch)
                grads, aux = torch.func.grad(loss_fn, has_aux=True)(net, mb)
                updates, opt_state = opt.update(grads, opt_state, net)
                net = optim.apply_updates(net, updates)
                metrics.append(aux)
        return net, opt_state, key, tree.map(lambda *xs: torch.stack(xs).mean(), *metrics)

    return opt, torch.func.vmap(learn)


def by_seed(batch: dict, num_workers: int, num_seeds: int) -> dict:
    """Sync batch leaves [T, workers * seeds * envs, ...] -> [seeds, T, workers * envs, ...]."""

    def one(x: torch.Tensor) -> torch.Tensor:
        T, rest = x.shape[0], x.shape[2:]
        x = x.reshape(T, num_workers, num_seeds, -1, *rest).movedim(2, 0)
        return x.reshape(num_seeds, T, -1, *rest)

    return tree.map(one, batch)


def main(args: Args) -> None:
    torch.set_num_threads(args.threads)
    num_envs = args.num_workers * args.envs_per_worker  # per seed
    config = ppo.Config(env="CartPole-v1", num_envs=num_envs, num_steps=args.num_steps,
                        total_steps=args.total_steps)  # fmt: skip
    algo = ppo.make(config)  # single-machine PPO: its init, network and greedy policy
    net_apply = ppo.network(config, (4,), 2).apply  # the network algo.init initialised
    opt, learn = make_learner(config, net_apply)
    keys = random.split(random.key(args.seed), args.num_seeds)
    net = torch.func.vmap(lambda k: algo.init(k).params["net"])(keys)
    opt_state = torch.func.vmap(opt.init)(net)
    learn_keys = torch.func.vmap(lambda k: random.fold_in(k, 1))(keys)

    ray.init(num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False)
    make_env, policy = make_rollout(net_apply, args.num_seeds, args.envs_per_worker)
    frames = args.num_workers * args.num_seeds * args.envs_per_worker * args.num_steps
    iterations = max(1, args.total_steps // (num_envs * args.num_steps))
    collector = RayCollector(make_env, policy, net, random.key(args.seed + 1), args.num_workers,
                             frames, iterations * frames, num_cpus=args.threads,
                             flat=False)  # fmt: skip
    running = torch.zeros(args.num_seeds, num_envs, dtype=torch.float64)
    start, history = time.perf_counter(), []
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(f"{args.out}.jsonl", "w") as log:
        log.write(json.dumps({"config": dataclasses.asdict(config), "args": vars(args)}) + "\n")
        for i, (batch, stats) in enumerate(collector):
            assert bool((stats["params_version"] == i).all()), stats["params_version"]
            traj = by_seed(batch, args.num_workers, args.num_seeds)
            flat = {k: traj[k] for k in ("obs", "action", "reward", "next_obs", "terminated",
                                          "truncated")}  # fmt: skip
            flat.update(log_prob=traj["extras"]["log_prob"], value=traj["extras"]["value"])
            collected = time.perf_counter()
            # learn: all seeds in one vmapped call, then one broadcast of the new params
            net, opt_state, learn_keys, metrics = learn(net, opt_state, learn_keys, flat)
            collector.update(net)
            # each seed's finished episodes (for the log; the claim is the greedy eval)
            returns, running = episode_returns(traj, running)
            history.append(returns)
            row = {k: v.tolist() for k, v in metrics.items()}
            row.update(iteration=i, steps=(i + 1) * num_envs * args.num_steps,
                       episode_return=returns.tolist(), wall_s=time.perf_counter() - start,
                       learn_s=time.perf_counter() - collected)  # fmt: skip
            log.write(json.dumps(row) + "\n")
            log.flush()
            if i % 50 == 0 or i == iterations - 1:
                mean = returns.nanmean().item()
                print(f"iter {i:4d} steps {row['steps']:7d} return {mean:6.1f} "
                      f"({row['wall_s']:.0f} s)", flush=True)  # fmt: skip
        collector.close()
        ray.shutdown()
        for s in range(args.num_seeds):
            params = {"net": tree.index(net, s)}
            returns = core.evaluate(algo, params, args.eval_episodes, seed=1000 * s)
            late = torch.stack(history[-10:])[:, s].nanmean().item()
            row = {"seed": s, "eval_returns": returns.tolist(), "eval_mean": returns.mean().item(),
                   "train_return_last10": late, "wall_s": time.perf_counter() - start}  # fmt: skip
            log.write(json.dumps(row) + "\n")
            print(f"seed {s}: greedy return {row['eval_mean']:.1f} (training, last 10: {late:.1f})")
    plot(torch.stack(history), num_envs * args.num_steps, f"{args.out}.png")


def episode_returns(traj: dict, running: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean return of the episodes each seed finished in ``traj`` (NaN if none), and the
    running sums carried into the next batch."""
    total = torch.zeros(running.shape[0], dtype=torch.float64)
    count = torch.zeros(running.shape[0])
    for t in range(traj["reward"].shape[1]):
        running = running + traj["reward"][:, t].double()
        done = traj["terminated"][:, t] | traj["truncated"][:, t]
        total += torch.where(done, running, 0.0).sum(-1)
        count += done.sum(-1)
        running = torch.where(done, 0.0, running)
    return (total / count).float(), running


def plot(returns: torch.Tensor, steps_per_iteration: int, path: str) -> None:
    """Each seed's mean training return per iteration against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = torch.arange(1, returns.shape[0] + 1) * steps_per_iteration
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for s in range(returns.shape[1]):
        keep = ~torch.isnan(returns[:, s])
        ax.plot(steps[keep], returns[keep, s], lw=0.8, label=f"seed {s}")
    ax.set(xlabel="env steps per seed", ylabel="episode return",
           title="fxrl PPO, CartPole-v1, Ray rollout workers")  # fmt: skip
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main(tyro.cli(Args))
