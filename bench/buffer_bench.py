"""Replay-buffer speed: fxrl.buffers against TorchRL-equivalent plain torch, in one run.

Cases, one JSON line per (case, op), with fxrl's and the peer's milliseconds per call
(median of ``--repeats`` alternating rounds, with min and max) and their ratio:

  uniform_atari  {obs [4, 84, 84] uint8, action, reward, terminated}, ``--capacity``
                 (100k) transitions, full: add(100) and sample(128). Peer: preallocated
                 tensors written with index_put_ and read with torch.randint indices
                 (what TorchRL's LazyTensorStorage + RandomSampler do, without
                 TensorDict); also TorchRL's own ReplayBuffer when it imports.
  frames_atari   the same with next_obs [4, 84, 84] too: fxrl ``frame_stack=4`` (2
                 frames per transition) against the peer storing both stacks.
  prioritized    100k and 1M scalar items: sample(256) and update_priorities(256). Peer:
                 a binary sum tree and min tree in flat tensors, level by level, with
                 torch.rand (TorchRL's PrioritizedSampler algorithm; its C++
                 SumSegmentTree may not be built in the wheel, reported if so).
                 ``fxrl_rng_ms``: the fxrl.random draw inside fxrl's sample alone.
  --compile      adds fxrl sample/update_priorities under torch.compile (compile time
                 reported apart as ``compile_s``).

Memory at --capacity 100000: about 3 GB (uniform_atari) then 7 GB (frames_atari).

    python bench/buffer_bench.py [--threads 1] [--capacity 100000] [--compile] [--quick]
                                 [--case all|uniform_atari|frames_atari|prioritized]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch
from _common import cpu_model, measure  # bench/_common.py

from fxrl import buffers, random

FRAME = (4, 84, 84)


def compare(ours: Callable[[], object], peer: Callable[[], object], iters: int, repeats: int):
    """Alternating rounds of ``iters`` calls each; ms per call for both."""
    times, _ = measure({"ours": ours, "peer": peer}, iters, repeats)
    return times["ours"], times["peer"]


def row(case: str, op: str, a: list[float], b: list[float], peer: str, **extra) -> None:
    ma, mb = statistics.median(a), statistics.median(b)
    out = {
        "bench": "buffer",
        "case": case,
        "op": op,
        "fxrl_ms": round(ma, 4),
        "fxrl_spread_ms": [round(min(a), 4), round(max(a), 4)],
        f"{peer}_ms": round(mb, 4),
        f"{peer}_spread_ms": [round(min(b), 4), round(max(b), 4)],
        "ratio": f"fxrl/{peer}",
        "value": round(ma / mb, 3),
        "threads": torch.get_num_threads(),
        **extra,
    }
    print(json.dumps(out), flush=True)


# ------------------------------------------------------------------ plain torch peers


class PlainUniform:
    """Preallocated storage, a cursor and torch.randint: TorchRL's LazyTensorStorage +
    RandomSampler reduced to the tensor work."""

    def __init__(self, example: dict, capacity: int) -> None:
        self.store = {
            k: torch.zeros((capacity, *v.shape), dtype=v.dtype) for k, v in example.items()
        }
        self.capacity, self.cursor, self.size = capacity, 0, 0
        self.gen = torch.Generator().manual_seed(0)

    def add(self, batch: dict) -> None:
        n = next(iter(batch.values())).shape[0]
        idx = (self.cursor + torch.arange(n)) % self.capacity
        for k, v in batch.items():
            self.store[k].index_put_((idx,), v)
        self.cursor, self.size = (
            (self.cursor + n) % self.capacity,
            min(self.size + n, self.capacity),
        )

    def sample(self, n: int) -> dict:
        idx = torch.randint(self.size, (n,), generator=self.gen)
        return {k: v[idx] for k, v in self.store.items()}


class PlainPrioritized:
    """Binary sum and min trees in flat [2P] tensors (root at 1, leaves at P..2P-1),
    updated and searched level by level with torch.rand: TorchRL's algorithm."""

    def __init__(self, capacity: int, alpha: float = 0.6, beta: float = 0.4) -> None:
        self.p = 1 << max(capacity - 1, 1).bit_length()
        self.depth = self.p.bit_length() - 1
        self.sum = torch.zeros(2 * self.p, dtype=torch.float64)
        self.min = torch.full((2 * self.p,), torch.inf, dtype=torch.float64)
        self.alpha, self.beta, self.gen = alpha, beta, torch.Generator().manual_seed(0)
        self.update(torch.arange(capacity), torch.ones(capacity))

    def update(self, index: torch.Tensor, priority: torch.Tensor) -> None:
        node = index + self.p
        value = (priority.double() + 1e-6) ** self.alpha
        self.sum[node] = value
        self.min[node] = value
        for _ in range(self.depth):
            node = node // 2
            self.sum[node] = self.sum[2 * node] + self.sum[2 * node + 1]
            self.min[node] = torch.minimum(self.min[2 * node], self.min[2 * node + 1])

    def sample(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        mass = torch.rand(n, dtype=torch.float64, generator=self.gen) * self.sum[1]
        node = torch.ones(n, dtype=torch.int64)
        for _ in range(self.depth):
            left = self.sum[2 * node]
            go_right = mass >= left
            mass = torch.where(go_right, mass - left, mass)
            node = 2 * node + go_right
        weight = (self.sum[node] / self.min[1]) ** -self.beta
        return node - self.p, weight.float()


# ------------------------------------------------------------------ cases


def atari_example(next_obs: bool) -> dict:
    ex = {"obs": torch.zeros(FRAME, dtype=torch.uint8)}
    if next_obs:
        ex["next_obs"] = torch.zeros(FRAME, dtype=torch.uint8)
    ex |= {"action": torch.zeros((), dtype=torch.int64), "reward": torch.zeros(())}
    ex |= {"terminated": torch.zeros((), dtype=torch.bool)}
    if next_obs:
        ex["truncated"] = torch.zeros((), dtype=torch.bool)
    return ex


def atari_batch(example: dict, n: int, start: int) -> dict:
    """n consecutive steps of 1000-step episodes with frame-stack-consistent stacks."""
    t = torch.arange(start, start + n)
    frames = (t.view(n, 1, 1, 1) + torch.arange(-3, 2).view(1, 5, 1, 1)) % 251
    frames = frames.to(torch.uint8).expand(n, 5, *FRAME[1:])
    out = {"obs": frames[:, :4].contiguous(), "action": t % 6, "reward": torch.ones(n)}
    out["terminated"] = t % 1000 == 999
    if "next_obs" in example:
        out["next_obs"] = frames[:, 1:].contiguous()
        out["truncated"] = torch.zeros(n, dtype=torch.bool)
    return {k: out[k] for k in example}


def uniform_case(case: str, args: argparse.Namespace, frame_stack: int) -> None:
    example = atari_example(next_obs=frame_stack > 0)
    buf = buffers.init(example, args.capacity, frame_stack=frame_stack)
    peer = PlainUniform(example, args.capacity)
    for start in range(0, args.capacity, 1000):
        chunk = atari_batch(example, min(1000, args.capacity - start), start)
        buf = buffers.add(buf, chunk)
        peer.add(chunk)
    batch = atari_batch(example, 100, 0)
    key = random.key(0)
    state = {"buf": buf}

    def fx_add() -> None:
        state["buf"] = buffers.add(state["buf"], batch)

    def fx_sample() -> None:
        buffers.sample(state["buf"], key, 128)

    per_transition = sum(x[0].numel() * x.element_size() for x in state["buf"].storage.values())
    peer_bytes = sum(x[0].numel() * x.element_size() for x in peer.store.values())
    extra = {"capacity": args.capacity, "bytes_per_transition": per_transition}
    extra["plain_torch_bytes_per_transition"] = peer_bytes
    for op, ours, theirs in (
        ("add(100)", fx_add, lambda: peer.add(batch)),
        ("sample(128)", fx_sample, lambda: peer.sample(128)),
    ):
        a, b = compare(ours, theirs, args.iters, args.repeats)
        row(case, op, a, b, "plain_torch", **extra)
    if frame_stack == 0:
        torchrl_uniform(args, example, batch, fx_add, fx_sample)


def torchrl_uniform(args, example, batch, fx_add, fx_sample) -> None:
    try:
        from tensordict import TensorDict
        from torchrl.data import LazyTensorStorage, ReplayBuffer
    except Exception as err:  # an optional reference
        print(json.dumps({"bench": "buffer", "case": "uniform_atari", "torchrl": repr(err)}))
        return
    rb = ReplayBuffer(storage=LazyTensorStorage(args.capacity), batch_size=128)
    td = TensorDict(batch, batch_size=[100])
    for _ in range(0, args.capacity, 100):
        rb.extend(td)
    for op, ours, theirs in (
        ("add(100)", fx_add, lambda: rb.extend(td)),
        ("sample(128)", fx_sample, rb.sample),
    ):
        a, b = compare(ours, theirs, args.iters, args.repeats)
        row("uniform_atari", op, a, b, "torchrl", capacity=args.capacity)


def prioritized_case(args: argparse.Namespace, capacity: int) -> None:
    buf = buffers.init({"x": torch.zeros(())}, capacity, prioritized=True)
    buf = buffers.add(buf, {"x": torch.zeros(capacity)})
    peer = PlainPrioritized(capacity)
    gen = torch.Generator().manual_seed(1)
    index = torch.randint(capacity, (256,), generator=gen)
    priority = torch.rand(256, generator=gen)
    buf = buffers.update_priorities(
        buf, torch.arange(capacity), torch.rand(capacity, generator=gen)
    )
    key = random.key(0)
    rng = min(
        compare(
            lambda: random.uniform(key, (256,), dtype=torch.float64),
            lambda: None,
            args.iters,
            args.repeats,
        )[0]
    )
    extra = {"capacity": capacity, "fxrl_rng_ms": round(rng, 4)}
    ops = {
        "sample(256)": (lambda: buffers.sample(buf, key, 256), lambda: peer.sample(256)),
        "update_priorities(256)": (
            lambda: buffers.update_priorities(buf, index, priority),
            lambda: peer.update(index, priority),
        ),
    }
    for op, (ours, theirs) in ops.items():
        a, b = compare(ours, theirs, args.iters, args.repeats)
        row("prioritized", op, a, b, "plain_torch", **extra)
    if args.compile:
        compiled = {
            "sample(256)": torch.compile(lambda b, k: buffers.sample(b, k, 256), dynamic=False),
            "update_priorities(256)": torch.compile(buffers.update_priorities, dynamic=False),
        }
        for op, fn in compiled.items():
            inputs = (buf, key) if op.startswith("sample") else (buf, index, priority)
            start = time.perf_counter()
            fn(*inputs)
            compile_s = time.perf_counter() - start
            a, b = compare(
                lambda fn=fn, inputs=inputs: fn(*inputs), ops[op][1], args.iters, args.repeats
            )
            row(
                "prioritized_compiled",
                op,
                a,
                b,
                "plain_torch",
                capacity=capacity,
                compile_s=round(compile_s, 1),
            )
    torchrl_prioritized(capacity)


def torchrl_prioritized(capacity: int) -> None:
    try:
        from torchrl.data import LazyTensorStorage, PrioritizedReplayBuffer

        PrioritizedReplayBuffer(alpha=0.6, beta=0.4, storage=LazyTensorStorage(capacity))
        status = "built"
    except Exception as err:  # the finding itself is the output
        status = f"{type(err).__name__}: {err}"
    print(
        json.dumps(
            {
                "bench": "buffer",
                "case": "prioritized",
                "capacity": capacity,
                "torchrl_prioritized": status,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--capacity", type=int, default=100_000, help="Atari transitions")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--compile", action="store_true", help="also time torch.compile'd fxrl")
    parser.add_argument(
        "--quick", action="store_true", help="10k Atari, 100k priorities, few iters"
    )
    parser.add_argument(
        "--case",
        choices=["all", "uniform_atari", "frames_atari", "prioritized"],
        default="all",
        help="run one case only",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.quick:
        args.capacity, args.repeats, args.iters = 10_000, 5, 10
    print(
        json.dumps(
            {
                "bench": "buffer",
                "cpu": cpu_model(),
                "threads": torch.get_num_threads(),
                "torch": torch.__version__,
            }
        )
    )
    if args.case in ("all", "uniform_atari"):
        uniform_case("uniform_atari", args, frame_stack=0)
    if args.case in ("all", "frames_atari"):
        uniform_case("frames_atari", args, frame_stack=4)
    if args.case in ("all", "prioritized"):
        for capacity in (100_000,) if args.quick else (100_000, 1_000_000):
            prioritized_case(args, capacity)


if __name__ == "__main__":
    main()
