"""examples/ppo_single_file.py computes what fxrl.algorithms.ppo computes, and learns.

The example and ``ppo.make`` do the same math in the same order (same key splits, same
parameter and optimizer trees, same loops, same tensor layouts), so in eager mode, in one
process, they agree bit for bit on any CPU; the example just writes it in one function
instead of through ``Algorithm``. Same values in another layout are not enough: a
transposed weight once made the two disagree in the last bits on an AMD EPYC (not on the
Xeon it was written on), which is why initializers return dense tensors.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from fxrl import random, tree
from fxrl.algorithms import ppo

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"num_envs": 4, "num_steps": 32, "total_steps": 3 * 4 * 32, "update_epochs": 2}


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location(
        "ppo_single_file", ROOT / "examples" / "ppo_single_file.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def _same(a, b) -> bool:
    return tree.structure(a) == tree.structure(b) and all(
        torch.equal(x, y) for x, y in zip(tree.leaves(a), tree.leaves(b), strict=True)
    )


@pytest.mark.parametrize("num_seeds", [1, 2])
def test_the_example_computes_what_fxrl_algorithms_ppo_computes_bit_for_bit(example, num_seeds):
    config = example.Config(**SMALL, num_seeds=num_seeds, seed=3, compile=False)
    ours, our_metrics = example.train(config)
    theirs, their_metrics = ppo.train(ppo.Config(**SMALL), random.key(3), num_seeds, compile=False)
    assert _same(ours.params, theirs.params["net"])
    assert _same(ours.opt_state, theirs.opt_state)
    assert _same((ours.env_state, ours.obs, ours.key), (theirs.env_state, theirs.obs, theirs.key))
    assert not our_metrics["episode_return"].isnan().all()  # episodes ended: returns compared
    for name in ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "episode_return"):
        torch.testing.assert_close(
            our_metrics[name], their_metrics[name], rtol=0, atol=0, equal_nan=True
        )
    # the comparison tells configs apart: another discount gives other parameters
    other, _ = example.train(example.Config(**SMALL, num_seeds=num_seeds, seed=3, compile=False,
                                            gamma=0.9))  # fmt: skip
    assert not _same(other.params, theirs.params["net"])


def test_the_example_learns_cartpole_on_a_short_budget(example):
    # 12 updates of 32 envs x 32 steps, a 10x learning rate: random play scores about 20
    config = example.Config(num_envs=32, num_steps=32, num_minibatches=2, total_steps=12_288,
                            lr=2.5e-3, compile=False)  # fmt: skip
    _, metrics = example.train(config)
    late = metrics["episode_return"][-3:]
    assert float(late.nanmean()) > 100, metrics["episode_return"].tolist()


@pytest.mark.slow  # compiles the vmapped update: tens of seconds
def test_the_compiled_example_agrees_with_the_eager_one(example):
    one_update = {**SMALL, "total_steps": 4 * 32, "num_seeds": 2}
    eager, eager_metrics = example.train(example.Config(**one_update, compile=False))
    compiled, compiled_metrics = example.train(example.Config(**one_update))
    for x, y in zip(tree.leaves(compiled.params), tree.leaves(eager.params), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(
        compiled_metrics["loss"], eager_metrics["loss"], rtol=1e-4, atol=1e-5
    )
