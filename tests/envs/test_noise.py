"""fxrl.envs.noise.uniforms: one Threefry block per reset, defined by fxrl.random.bits."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import random
from fxrl.envs.noise import uniforms
from fxrl.testing.strategies import keys


def _reference(key: torch.Tensor, n: int, low: float, high: float) -> torch.Tensor:
    """The documented algorithm in plain Python ints, value by value."""
    w0, w1 = (int(w) for w in random.bits(key, (2,)))
    if n <= 2:
        fields = [(w0 >> 8) / 2**24, (w1 >> 8) / 2**24][:n]
    else:
        fields = [(w >> s & 0xFFFF) / 2**16 for w in (w0, w1) for s in (16, 0)][:n]
    return torch.tensor([low + (high - low) * u for u in fields], dtype=torch.float64).float()


@given(key=keys(), n=st.integers(1, 4))
def test_uniforms_are_the_halves_or_top_bits_of_one_threefry_block(key, n):
    got = torch.stack(uniforms(key, n, -0.05, 0.05, torch.float32))
    assert torch.equal(got, _reference(key, n, -0.05, 0.05))


@given(key=keys())
def test_one_or_two_uniforms_equal_fxrl_random_uniform_bit_for_bit(key):
    for n in (1, 2):
        got = torch.stack(uniforms(key, n, -0.6, -0.4, torch.float32), -1)
        assert torch.equal(got, random.uniform(key, (n,), -0.6, -0.4))


def test_uniforms_agree_eager_vmapped_batched_and_compiled():
    batch = random.split(random.key(7), 64)
    eager = torch.stack(uniforms(batch, 4, -0.1, 0.1, torch.float32), -1)
    one = torch.stack([torch.stack(uniforms(k, 4, -0.1, 0.1, torch.float32)) for k in batch])
    vmapped = torch.func.vmap(lambda k: torch.stack(uniforms(k, 4, -0.1, 0.1, torch.float32)))
    compiled = torch.compile(
        lambda k: torch.stack(uniforms(k, 4, -0.1, 0.1, torch.float32), -1), backend="aot_eager"
    )
    for other in (one, vmapped(batch), compiled(batch)):
        assert torch.equal(eager, other)


def test_uniforms_refuse_more_than_one_block_of_float32_values():
    with pytest.raises(ValueError, match="n=5; one block gives 1 to 4 values"):
        uniforms(random.key(0), 5, 0.0, 1.0, torch.float32)
