"""MemoryChain-bsuite in pure torch: bsuite's ``environments/memory_chain.py``.

The first observation shows ``num_bits`` random context bits (as -1/+1); the one at
step ``memory_length - 1`` shows which bit is queried. The action of the final step
(the ``memory_length + 1``-th) must be the queried bit: reward +1, else -1; all other
steps pay 0 and their actions do nothing. As in bsuite, a step returns the observation
of the time *before* it (so the first step shows the context again and the episode
ends with the observation of time ``memory_length``). Observation: [1 - time /
memory_length, query (at time memory_length - 1, else 0), context (at time 0, else 0)].
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from fxrl import random, specs, tree
from fxrl.envs.bsuite._grid import palette_image
from fxrl.envs.core import Env, TimeStep, params_as_tensors

__all__ = ["MemoryChain", "MemoryChainParams", "MemoryChainState"]


@tree.dataclass
class MemoryChainParams:
    memory_length: Any = 5  # gymnax's default (bsuite's memory_len sweep: 1 to 100)


@tree.dataclass
class MemoryChainState:
    context: Tensor  # [num_bits] int64 in {0, 1}
    query: Tensor  # [] int64 index of the queried bit
    t: Tensor  # [] int64 steps taken (bsuite's _timestep)
    key: Tensor  # [2] int64 (unused after reset)
    params: MemoryChainParams


class MemoryChain(Env):
    """MemoryChain: observation float [num_bits + 2], action Discrete(2).

    Args:
      num_bits: context bits (bsuite's and gymnax's default 1).
      dtype: float dtype of observations and rewards.
    """

    vectorized = True  # step and observe are elementwise: batch() skips vmap

    def __init__(self, num_bits: int = 1, dtype: torch.dtype = torch.float32) -> None:
        if num_bits < 1:
            raise ValueError(f"MemoryChain: num_bits={num_bits}; expected a positive int.")
        self.num_bits, self.dtype = num_bits, dtype
        low = [-math.inf, 0.0] + [-1.0] * num_bits
        high = [1.0, float(num_bits - 1)] + [1.0] * num_bits
        self.observation_spec = specs.Box(low, high, dtype=dtype)
        self.action_spec = specs.Discrete(2)
        self.default_params = MemoryChainParams()

    def reset(
        self, key: Tensor, params: MemoryChainParams | None = None
    ) -> tuple[MemoryChainState, TimeStep]:
        """Context bits Bernoulli(0.5), a uniform query."""
        params = params_as_tensors(
            self.default_params if params is None else params, self.dtype, key.device
        )
        k_context, k_query = random.split(key).unbind(-2)
        context = random.bernoulli(k_context, 0.5, (self.num_bits,)).long()
        query = random.randint(k_query, (), 0, self.num_bits)
        t = torch.zeros_like(query)
        state = MemoryChainState(context, query, t, key, params)
        flag = torch.zeros_like(t, dtype=torch.bool)
        reward = torch.zeros(t.shape, dtype=self.dtype, device=t.device)
        return state, TimeStep(self.observe(state), reward, flag, flag.clone(), {})

    def step(self, state: MemoryChainState, action: Tensor) -> tuple[MemoryChainState, TimeStep]:
        """Pay +-1 for the answer at time memory_length, 0 before; then count the step."""
        final = state.t >= state.params.memory_length
        bits = torch.arange(self.num_bits, device=state.query.device)
        bit = (state.context * (bits == state.query[..., None])).sum(-1)
        answer = torch.where(action.long() == bit, 1.0, -1.0).to(self.dtype)
        reward = torch.where(final, answer, torch.zeros_like(answer))
        moved = state.replace(t=state.t + 1)
        return moved, TimeStep(self.observe(moved), reward, final, torch.zeros_like(final), {})

    def observe(self, state: MemoryChainState) -> Tensor:
        """bsuite's observation of time ``max(t - 1, 0)`` (a step shows the time before it)."""
        length = state.params.memory_length
        time = (state.t - 1).clamp(min=0)
        left = 1 - time.double() / length
        query = torch.where(time == length - 1, state.query, 0).double()
        context = torch.where(time[..., None] == 0, 2 * state.context - 1, 0).double()
        return torch.cat([left[..., None], query[..., None], context], dim=-1).to(self.dtype)

    def render(self, state: MemoryChainState) -> Tensor:
        """uint8 [32, 16 * max(L + 1, num_bits), 3] for L = memory_length (a static
        width: the default's 6 cells unless the chain or the bits need more). Top row: the
        chain, the agent red; bottom: the context bits (green 1, purple 0), the queried
        one bright, the others dim."""
        width = max(6, self.num_bits)
        cols = torch.arange(width, device=state.t.device)
        agent = cols == state.t[..., None].clamp(max=width - 1)
        on_chain = cols <= state.params.memory_length
        top = torch.where(agent, 1, torch.where(on_chain, 2, 0))
        bits = torch.cat(
            [state.context, torch.zeros_like(state.context[..., :1]).expand(
                *state.context.shape[:-1], width - self.num_bits)], dim=-1
        )  # fmt: skip
        queried = cols == state.query[..., None]
        bottom = torch.where(cols < self.num_bits, 3 + bits + 2 * queried.long(), 0)
        colors = [(0, 0, 0), (230, 40, 40), (90, 90, 90), (90, 40, 110), (30, 100, 40),
                  (190, 80, 240), (60, 220, 90)]  # fmt: skip
        return palette_image(torch.stack([top, bottom], dim=-2), colors, 16)

    def _repr_args(self) -> str:
        args = [] if self.num_bits == 1 else [str(self.num_bits)]
        if self.dtype != torch.float32:
            args.append(f"dtype={self.dtype}")
        return ", ".join(args)
