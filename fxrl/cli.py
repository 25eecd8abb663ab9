"""Command line: ``python -m fxrl.cli demo`` runs a short tour of what fxrl does."""

from __future__ import annotations

import argparse
import time

import torch

from fxrl import random, specs, tree


def _section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def demo_foundation() -> None:
    """Keys, vmap over seeds, bit-identical compiled draws, specs and pytrees."""
    _section("explicit random keys (Threefry-2x32)")
    key = random.key(0)
    key, sub = random.split(key)
    print("key(0) split ->", key.tolist(), sub.tolist())
    print("uniform(sub, (4,))  =", [round(v, 4) for v in random.uniform(sub, (4,)).tolist()])
    seeds = random.split(key, 8)
    per_seed = torch.func.vmap(lambda k: random.normal(k, (3,)).mean())(seeds)
    print("vmap over 8 seeds   =", [round(v, 3) for v in per_seed.tolist()])
    before = torch.get_rng_state()
    random.normal(key, (1000,))
    print("global torch RNG untouched:", torch.equal(before, torch.get_rng_state()))

    _section("specs: sample, contains, project")
    obs_spec = specs.Composite(
        {
            "pixels": specs.Box(0, 255, shape=(4, 4, 3), dtype=torch.uint8),
            "velocity": specs.Box(-1.0, 1.0, shape=(2,)),
        }
    )
    action_spec = specs.Box(-2.0, 2.0, shape=(1,))
    print(obs_spec)
    obs = obs_spec.sample(key, batch_shape=(16,))
    print("sample(batch 16) inside the spec:", bool(obs_spec.contains(obs)))
    print("project([[3.5]]) into", action_spec, "->", action_spec.project(torch.tensor([[3.5]])))

    _section("pytrees: one state for 16 envs")
    print(tree.summary(obs))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="fxrl", description=__doc__)
    parser.add_argument("command", choices=["demo"], help="what to run")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    demo_foundation()
    print(f"\ndemo finished in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
