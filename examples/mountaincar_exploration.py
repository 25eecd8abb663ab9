"""How often does exploration noise alone reach MountainCarContinuous-v0's flag?

    .venv/bin/python examples/mountaincar_exploration.py > runs/mountaincar_exploration.jsonl

An actor that pushes nothing (a fresh TD3 actor is close to it), plus each kind of
acting noise, on fxrl's pure MountainCarContinuous-v0: 256 envs for 2000 steps each,
counting the episodes that ended at the flag. Per-step Gaussian noise rarely gets there;
Ornstein-Uhlenbeck noise, which holds a push for ~1/theta steps, does so most of the time.
Prints one JSON line per noise setting (the docs quote the lines kept in
``docs/results/mountaincar_exploration.jsonl``, printed by this script).
"""

from __future__ import annotations

import json

import torch

from fxrl import envs, exploration, random

NUM_ENVS, STEPS = 256, 2000


def goal_rate(kind: str, **kw: float) -> dict:
    env = envs.batch(envs.make("MountainCarContinuous-v0"), NUM_ENVS)
    spec = env.action_spec
    key = random.key(0)
    env_state, _ = env.reset(random.fold_in(key, 1))
    noise = exploration.ou_init(spec, (NUM_ENVS,))
    done = torch.zeros(NUM_ENVS, dtype=torch.bool)
    goals = episodes = 0
    for t in range(STEPS):
        k = random.fold_in(key, 100 + t)
        push_nothing = torch.zeros(NUM_ENVS, 1)
        if kind == "gaussian":
            action = exploration.gaussian_noise(k, push_nothing, spec, kw["std"])
        else:
            action, noise = exploration.ornstein_uhlenbeck(
                k, push_nothing, noise, spec, is_init=done, theta=kw["theta"],
                sigma=kw["sigma"], dt=kw["dt"],
            )  # fmt: skip
        env_state, ts = env.step(env_state, action)
        done = ts.terminated | ts.truncated
        goals += int(ts.terminated.sum())  # terminated only at the flag
        episodes += int(done.sum())
    return {"noise": kind, **kw, "episodes": episodes, "at_flag": goals,
            "fraction": round(goals / episodes, 3)}  # fmt: skip


def main() -> None:
    torch.set_num_threads(1)
    settings = [
        ("gaussian", {"std": 1.0}),
        ("ou", {"theta": 0.15, "sigma": 0.5, "dt": 1e-2}),  # RL Zoo's TD3 setting
        ("ou", {"theta": 0.15, "sigma": 0.2, "dt": 1.0}),  # DDPG paper's
        ("ou", {"theta": 0.05, "sigma": 0.3, "dt": 1.0}),  # fxrl's recorded TD3 run
    ]
    for kind, kw in settings:
        print(json.dumps(goal_rate(kind, **kw)), flush=True)


if __name__ == "__main__":
    main()
