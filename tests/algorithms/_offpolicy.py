"""What the SAC and TD3 tests share: the learning tests' settings and the compiled update
checked against the eager one from the same state."""

from __future__ import annotations

from typing import Any

import torch

from fxrl import random, tree
from fxrl.algorithms import core

# The learning tests' settings: each compiled-vs-eager test compiles the same program,
# which the learning test then trains through. The replay holds every transition of the
# run (6400): the same learning as the default 100k capacity, whose size each compiled
# update pays for (the update's time grows with the capacity, not with what it holds).
LEARN = {"num_envs": 4, "num_steps": 2, "gradient_steps": 8, "total_steps": 6_400,
         "learning_starts": 400, "hidden": (64, 64), "batch_size": 128,
         "buffer_size": 6_400}  # fmt: skip


def compiled_and_eager(
    algo: core.Algorithm, num_seeds: int, program: tuple | None = None
) -> tuple[Any, tuple, tuple]:
    """``(update, (compiled, m_compiled), (eager, m_eager))``: 50 compiled updates (400 env
    steps: the last of them learned), then one more update from that state, compiled
    (``update``, core.batched's program, or ``program = (init, update)`` built before) and
    eager."""
    init, update = program or core.batched(algo, num_seeds, compile=True)
    _, eager_update = core.batched(algo, num_seeds, compile=False)
    state = init(random.key(5))
    for _ in range(50):
        state, _ = update(state)
    eager = eager_update(tree.map(torch.clone, state))
    compiled = update(tree.map(torch.clone, state))
    return update, compiled, eager


def learn_and_judge(algo: core.Algorithm, program: tuple, num_seeds: int) -> tuple[list, list]:
    """Train ``num_seeds`` seeds through ``program = (init, update)`` for the config's
    budget; returns each seed's greedy returns over 5 episodes of gymnasium's env, fresh
    (before training) and trained."""
    init, update = program
    state = init(random.key(0))
    pick = (lambda s, i: s) if num_seeds == 1 else tree.index
    fresh = [core.evaluate(algo, pick(state.params, i), 5) for i in range(num_seeds)]
    for _ in range(algo.config.total_steps // algo.steps_per_update):
        state, _ = update(state)
    trained = [core.evaluate(algo, pick(state.params, i), 5) for i in range(num_seeds)]
    return fresh, trained
