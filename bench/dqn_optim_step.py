"""One DQN optimisation step of TorchRL's export tutorial (Pong): fxrl against TorchRL.

Both sides: sample 128 transitions from a replay buffer of [1, 84, 84] float frames, the
Nature DQN net (``nn.atari_dqn(6, 1)`` / ``ConvNet.default_atari_dqn(6)``), the l2 DQN
loss with a delayed target net, Adam (lr 1e-3), a soft target update (eps 0.99).

  fxrl     dqn.make_learner(q.apply, optim.adam(1e-3), batch_size=128, loss="mse",
           tau=0.01) on fxrl.buffers
  torchrl  ReplayBuffer(LazyTensorStorage) + DQNLoss(delay_value=True) + torch.optim.Adam
           + SoftUpdate(eps=0.99), as the tutorial's loop

Prints one JSON line: steps/s of each (median of alternating rounds, with the spread) and
``"ratio": "fxrl/torchrl"`` (> 1: fxrl faster). The tutorial's figure is 14 steps/s.

    python bench/dqn_optim_step.py [--threads 1] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from fxrl import buffers, nn, optim, random
from fxrl.algorithms import dqn

CAPACITY, BATCH, ACTIONS = 2_000, 128, 6


def data(n: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)  # benchmark data only; fxrl code never does this
    frames = torch.rand(n + 1, 1, 84, 84, generator=g)
    action = torch.randint(0, ACTIONS, (n,), generator=g)
    reward, terminated = torch.randn(n, generator=g), torch.rand(n, generator=g) < 0.01
    return {"obs": frames[:-1], "next_obs": frames[1:], "action": action, "reward": reward,
            "terminated": terminated}  # fmt: skip


def fxrl_step() -> callable:
    q = nn.atari_dqn(ACTIONS, in_channels=1)
    opt = optim.adam(1e-3)
    learn = dqn.make_learner(q.apply, opt, batch_size=BATCH, loss="mse", tau=0.01)
    d = data(CAPACITY)
    buf = buffers.add(buffers.init({k: v[0] for k, v in d.items()}, CAPACITY), d)
    params = q.init(random.key(0))
    state = [params, params, opt.init(params), torch.tensor(0)]
    count = [0]

    def step() -> None:
        count[0] += 1
        *new, _, _ = learn(*state, buf, random.key(count[0]))
        state[:] = new

    return step


def torchrl_step() -> callable:
    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule, TensorDictSequential
    from torchrl.data import Categorical, LazyTensorStorage, ReplayBuffer
    from torchrl.modules import ConvNet, QValueModule
    from torchrl.objectives import DQNLoss, SoftUpdate

    spec = Categorical(ACTIONS)
    net = TensorDictModule(ConvNet.default_atari_dqn(num_actions=ACTIONS), ["pixels"],
                           ["action_value"])  # fmt: skip
    policy = TensorDictSequential(net, QValueModule(spec=spec))
    policy(TensorDict({"pixels": torch.zeros(1, 1, 84, 84)}, [1]))  # materialise lazy layers
    loss = DQNLoss(value_network=policy, action_space=spec, delay_value=True)
    adam = torch.optim.Adam(loss.parameters())
    updater = SoftUpdate(loss, eps=0.99)
    d = data(CAPACITY)
    rb = ReplayBuffer(storage=LazyTensorStorage(CAPACITY))
    rb.extend(TensorDict({"pixels": d["obs"], "action": d["action"], "next": {
        "pixels": d["next_obs"], "reward": d["reward"].unsqueeze(-1),
        "done": d["terminated"].unsqueeze(-1), "terminated": d["terminated"].unsqueeze(-1)}},
        [CAPACITY]))  # fmt: skip

    def step() -> None:
        sample = rb.sample(BATCH)
        loss(sample)["loss"].backward()
        adam.step()
        adam.zero_grad()
        updater.step()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--quick", action="store_true", help="a few steps, to check it runs")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    iters, rounds = (2, 2) if args.quick else (10, 5)
    steps = {"fxrl": fxrl_step(), "torchrl": torchrl_step()}
    times: dict[str, list[float]] = {k: [] for k in steps}
    for step in steps.values():
        step()  # warm up
    for _ in range(rounds):  # alternate, so load changes hit both alike
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(iters):
                step()
            times[name].append(iters / (time.perf_counter() - start))
    with open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    med = {k: statistics.median(v) for k, v in times.items()}
    print(json.dumps({
        "bench": "dqn_optim_step", "batch": BATCH, "fxrl_steps_per_s": round(med["fxrl"], 2),
        "torchrl_steps_per_s": round(med["torchrl"], 2),
        "spread": {k: [round(min(v), 2), round(max(v), 2)] for k, v in times.items()},
        "ratio": "fxrl/torchrl", "value": round(med["fxrl"] / med["torchrl"], 3),
        "tutorial_steps_per_s": 14, "cpu": cpu, "threads": torch.get_num_threads(),
        "rounds": rounds, "iters": iters,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
