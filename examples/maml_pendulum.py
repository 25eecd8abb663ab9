"""MAML (Finn et al. 2017) with a REINFORCE inner loop on Pendulum-v1 variants.

    .venv/bin/python examples/maml_pendulum.py        # runs/maml_pendulum.{jsonl,png}

A task is a Pendulum with its own gravity and mass. With ``--polarity`` (the default) the
mass is negative for half the tasks: in Pendulum's dynamics the mass only scales the
torque (``3 / (m l^2) * torque``), so a negative mass is a motor wired backwards, and no
single reactive policy can swing up both kinds; the policy has to find out from its own
rollouts. Per meta-iteration: draw ``num_tasks`` tasks; per task (vmapped), roll out
``episodes`` episodes, take ``inner_steps`` SGD steps on REINFORCE's loss, roll out the
adapted policy; then one Adam step on the adapted policies' loss, differentiated
through the inner steps (``--first-order``: FOMAML). ``--inner-steps 0`` is the baseline:
plain REINFORCE on the mixture of tasks, adapted the same way at evaluation.

Evaluation: held-out tasks (drawn with another key), mean return of the sampling policy
before and after 1..``eval_steps`` inner steps, and of the greedy (mean-action) policy.
Writes ``OUT.jsonl`` and ``OUT.png`` (``--out``, default ``runs/maml_pendulum``). The runs
the docs quote were recorded with ``--out docs/results/maml_pendulum`` and ``--inner-lr 1.0
--num-seeds 2 --iterations 100 --out docs/results/maml_pendulum_lr1``; record there only to
update those figures.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import torch
import tyro

from fxrl import distributions, envs, nn, optim, random, rollout, tree
from fxrl.algorithms import maml, tasks


@dataclasses.dataclass
class Args:
    num_tasks: int = 10  # tasks per meta-batch (vmapped)
    episodes: int = 16  # episodes per task per batch (the adaptation data)
    inner_steps: int = 1  # SGD steps in the inner loop during meta-training (0: baseline)
    inner_lr: float = 0.1  # inner SGD step size
    outer_lr: float = 3e-3  # Adam step size of the meta-update
    first_order: bool = False  # FOMAML: no second-order term
    iterations: int = 150  # meta-updates per seed
    gamma: float = 0.99  # discount of the returns-to-go
    gravity: tuple[float, float] = (5.0, 15.0)  # task gravity range (default 10)
    mass: tuple[float, float] = (0.5, 1.5)  # task |mass| range (default 1)
    polarity: bool = True  # half the tasks have a negative mass (reversed motor)
    num_seeds: int = 3  # meta-training runs, one after the other
    eval_tasks: int = 20  # held-out tasks
    eval_steps: int = 3  # inner steps measured at evaluation
    seed: int = 0
    out: str = "runs/maml_pendulum"  # writes OUT.jsonl and OUT.png
    threads: int = 1  # torch.set_num_threads
    replot: bool = False  # only redraw OUT.png from OUT.jsonl (e.g. of a run stopped early)


def make(args: Args):
    env = envs.make("Pendulum-v1")
    benv = envs.batch(env, args.episodes)
    net = nn.mlp(3, 1, (32, 32), "tanh")

    def init(key):
        return {"net": net.init(key), "log_std": torch.zeros(1)}

    def dist(params, obs):
        return distributions.normal(net.apply(params["net"], obs), params["log_std"].exp())

    def log_prob(params, obs, action):
        return dist(params, obs).log_prob(action)

    def loss_fn(params, batch):
        return maml.reinforce_loss(log_prob, params, batch)

    def collect(params, task, key):
        """``episodes`` episodes (200 steps) of the sampling policy in the task's env."""
        k_reset, k_act = random.split(key).unbind(-2)
        state, _ = benv.reset(k_reset, task)
        act = lambda p, obs, k: dist(p, obs).sample(k)
        _, traj = rollout.rollout(benv, act, params, state, k_act, 200)
        advantage = maml.reinforce_advantage(traj, gamma=args.gamma)
        return {"obs": traj["obs"], "action": traj["action"], "advantage": advantage,
                "return": traj["reward"].sum(0).mean()}  # fmt: skip

    def greedy_return(params, task, key):
        state, _ = benv.reset(key, task)
        act = lambda p, obs, k: dist(p, obs).mode()
        _, traj = rollout.rollout(benv, act, params, state, key, 200)
        return traj["reward"].sum(0).mean()

    def sample_tasks(key, n):
        k_params, k_sign = random.split(key).unbind(-2)
        ranges = {"gravity": args.gravity, "mass": args.mass}
        params = tasks.sample_params(env, k_params, n, ranges)
        if args.polarity:
            sign = torch.where(random.bernoulli(k_sign, 0.5, (n,)), 1.0, -1.0)
            params = params.replace(mass=params.mass * sign)
        return params

    return init, loss_fn, collect, greedy_return, sample_tasks


def main(args: Args) -> None:
    torch.set_num_threads(args.threads)
    if args.replot:
        return replot(args.out)
    init, loss_fn, collect, greedy_return, sample_tasks = make(args)
    opt = optim.adam(args.outer_lr)
    kw = {"lr": args.inner_lr}

    def gather(params, task_batch, key):
        """Each task's batches along its inner loop, [num_tasks, inner_steps + 1] (no grad)."""
        fn = lambda task, k: maml.collect_adaptation(
            loss_fn, collect, params, task, k, num_steps=args.inner_steps, **kw
        )
        return torch.func.vmap(fn, randomness="error")(
            task_batch, random.split(key, args.num_tasks)
        )

    def meta_objective(params, batches):
        per_task = lambda b: maml.maml_loss(loss_fn, params, b, first_order=args.first_order, **kw)
        return torch.func.vmap(per_task)(batches).mean()

    def meta_step(params, opt_state, key):
        k_tasks, k_collect = random.split(key).unbind(-2)
        batches = gather(params, sample_tasks(k_tasks, args.num_tasks), k_collect)
        grads, loss = torch.func.grad_and_value(meta_objective)(params, batches)
        updates, opt_state = opt.update(grads, opt_state, params)
        ret = batches["return"]
        metrics = {
            "loss": loss,
            "return_before": ret[:, 0].mean(),
            "return_after": ret[:, -1].mean(),
        }
        return optim.apply_updates(params, updates), opt_state, metrics

    def evaluate(params, key):
        """Held-out tasks: sampling and greedy returns after 0..eval_steps inner steps."""
        k_tasks, k_collect = random.split(key).unbind(-2)
        held_out = sample_tasks(k_tasks, args.eval_tasks)

        def one(task, k):
            b = maml.collect_adaptation(
                loss_fn, collect, params, task, k, num_steps=args.eval_steps, **kw
            )
            greedy = []
            for s in range(args.eval_steps + 1):
                adapted = maml.adapt(loss_fn, params, tree.map(lambda x, s=s: x[:s], b), **kw)
                greedy.append(greedy_return(tree.map(torch.Tensor.detach, adapted), task, k))
            return b["return"], torch.stack(greedy)

        keys = random.split(k_collect, args.eval_tasks)
        sampled, greedy = torch.func.vmap(one, randomness="error")(held_out, keys)
        return held_out, sampled.detach(), greedy.detach()

    start = time.perf_counter()
    eval_key = random.key(10_000 + args.seed)  # held-out tasks: the same for every seed
    curves, table = [], []
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(f"{args.out}.jsonl", "w") as log:
        log.write(json.dumps({"args": vars(args)}) + "\n")
        for seed in range(args.num_seeds):
            k_init, k_train = random.split(random.key(args.seed * 100 + seed)).unbind(0)
            params = init(k_init)
            opt_state = opt.init(params)
            _, before0, _ = evaluate(params, eval_key)
            curve = []
            for i in range(args.iterations):
                params, opt_state, m = meta_step(params, opt_state, random.fold_in(k_train, i))
                row = {k: v.item() for k, v in m.items()}
                row.update(seed=seed, iteration=i, wall_s=time.perf_counter() - start)
                log.write(json.dumps(row) + "\n")
                log.flush()
                curve.append((row["return_before"], row["return_after"]))
                if i % 10 == 0 or i == args.iterations - 1:
                    print(f"seed {seed} iter {i:4d} return before {row['return_before']:8.1f} "
                          f"after {row['return_after']:8.1f}  ({row['wall_s']:.0f} s)")  # fmt: skip
            held_out, sampled, greedy = evaluate(params, eval_key)
            row = {"seed": seed, "eval": True, "task_gravity": held_out.gravity.tolist(),
                   "task_mass": held_out.mass.tolist(),
                   "initial_policy_return": before0.mean(0).tolist(),
                   "sampled_return_per_task": sampled.tolist(),
                   "greedy_return_per_task": greedy.tolist(),
                   "sampled_mean": sampled.mean(0).tolist(),
                   "greedy_mean": greedy.mean(0).tolist(),
                   "wall_s": time.perf_counter() - start}  # fmt: skip
            log.write(json.dumps(row) + "\n")
            log.flush()
            table.append(row)
            curves.append(curve)
            steps = " ".join(f"{v:8.1f}" for v in row["sampled_mean"])
            greedy_steps = " ".join(f"{v:8.1f}" for v in row["greedy_mean"])
            print(f"seed {seed} held-out, after 0..{args.eval_steps} inner steps: sampled "
                  f"{steps} | greedy {greedy_steps}")  # fmt: skip
    plot(curves, table, args, f"{args.out}.png")


def plot(curves: list, table: list, args: Args, path: str) -> None:
    """Meta-training returns (before and after adaptation) and held-out returns per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
    for s, curve in enumerate(curves):
        c = torch.tensor(curve)
        a.plot(c[:, 0], lw=0.8, color=f"C{s}", ls="--", label=f"seed {s} before")
        a.plot(c[:, 1], lw=0.8, color=f"C{s}", label=f"seed {s} after {args.inner_steps}")
    a.set(xlabel="meta-iteration", ylabel="mean return (sampling policy)", title="meta-training")
    a.legend(fontsize=6)
    steps = range(args.eval_steps + 1)
    for s, row in enumerate(table):
        b.plot(steps, row["sampled_mean"], "o-", color=f"C{s}", label=f"seed {s} sampled")
        b.plot(steps, row["greedy_mean"], "s:", color=f"C{s}", label=f"seed {s} greedy")
        b.plot(steps, row["initial_policy_return"], "x--", color=f"C{s}", alpha=0.4,
               label=f"seed {s} sampled, before meta-training")  # fmt: skip
    b.set(xlabel="inner steps on the held-out task", ylabel="mean return",
          title=f"{args.eval_tasks} held-out tasks", xticks=list(steps))  # fmt: skip
    b.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def replot(out: str) -> None:
    """Redraw ``OUT.png`` from the seeds ``OUT.jsonl`` holds (those with an eval line)."""
    with open(f"{out}.jsonl") as f:
        rows = [json.loads(line) for line in f]
    args = Args(**{k: tuple(v) if isinstance(v, list) else v for k, v in rows[0]["args"].items()})
    table = [r for r in rows if r.get("eval")]
    curves = [
        [(r["return_before"], r["return_after"]) for r in rows if r.get("seed") == t["seed"]
         and "iteration" in r]
        for t in table
    ]  # fmt: skip
    plot(curves, table, args, f"{out}.png")


if __name__ == "__main__":
    main(tyro.cli(Args))
