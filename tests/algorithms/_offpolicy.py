"""What the SAC and TD3 tests share: the learning tests' settings and the compiled update
checked against the eager one from the same state."""

from __future__ import annotations

from typing import Any

import torch

from fxrl import random, tree
from fxrl.algorithms import core

# The learning tests' settings: each compiled-vs-eager test compiles the same program,
# which the learning test then loads from inductor's on-disk cache instead of compiling.
LEARN = {"num_envs": 4, "num_steps": 2, "gradient_steps": 8, "total_steps": 6_400,
         "learning_starts": 400, "hidden": (64, 64), "batch_size": 128}  # fmt: skip


def compiled_and_eager(algo: core.Algorithm, num_seeds: int) -> tuple[Any, tuple, tuple]:
    """``(update, (compiled, m_compiled), (eager, m_eager))``: 50 compiled updates (400 env
    steps: the last of them learned), then one more update from that state, compiled
    (``update``, core.batched's program) and eager."""
    init, update = core.batched(algo, num_seeds, compile=True)
    _, eager_update = core.batched(algo, num_seeds, compile=False)
    state = init(random.key(5))
    for _ in range(50):
        state, _ = update(state)
    eager = eager_update(tree.map(torch.clone, state))
    compiled = update(tree.map(torch.clone, state))
    return update, compiled, eager
