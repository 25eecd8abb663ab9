"""The value estimators compose: vmap over seeds, torch.compile(fullgraph), torch.export."""

import pytest
import torch

from fxrl.objectives import gae, n_step, td_lambda, vtrace
from fxrl.testing import check_vmap


def _trajectory(shape, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    reward, value, next_value, log_rho = torch.randn(4, *shape, generator=gen, dtype=dtype)
    terminated = torch.rand(shape, generator=gen) < 0.1
    truncated = torch.rand(shape, generator=gen) < 0.1
    return reward, value, next_value, terminated, truncated, log_rho


def _gae(reward, value, next_value, terminated, truncated, gamma):
    return gae(reward, value, next_value, terminated, truncated, gamma=gamma, lmbda=0.95)


def _td_lambda(reward, value, next_value, terminated, truncated, gamma):
    return td_lambda(reward, next_value, terminated, truncated, gamma=gamma, lmbda=0.9)


def _n_step(reward, value, next_value, terminated, truncated, gamma):
    return n_step(reward, next_value, terminated, truncated, gamma=gamma, n=3)


def _vtrace(reward, value, next_value, terminated, truncated, gamma, log_rho):
    fields = (reward, value, next_value, terminated, truncated, log_rho)
    return vtrace(*fields, gamma=gamma, lmbda=0.9, clip_rho=1.0, clip_c=0.9, clip_pg_rho=1.2)


@pytest.mark.parametrize("fn", [_gae, _td_lambda, _n_step])
def test_vmap_over_a_leading_seed_dim_equals_a_loop_with_a_gamma_per_seed(fn):
    traj = _trajectory((3, 17, 4))
    gamma = torch.tensor([0.9, 0.99, 1.0]).view(3, 1)  # per seed: [1] inside, broadcasts to [T, B]
    check_vmap(fn, *traj[:5], gamma)


def test_vmapped_vtrace_equals_a_loop():
    traj = _trajectory((3, 17, 4))
    check_vmap(lambda *x: _vtrace(*x[:5], 0.99, x[5]), *traj)


@pytest.fixture(scope="module")
def compiled_gae():
    # One compile serves the tests below (fixed shapes [64, 8], gamma [8]).
    return torch.compile(_gae, fullgraph=True, dynamic=False)


@pytest.mark.parametrize("gamma", ["constant", "per_env"])
def test_compiled_gae_equals_eager(compiled_gae, gamma):
    # The same shapes each time, so the one compile serves both.
    traj = _trajectory((64, 8), seed=1)[:5]
    gamma = torch.full((8,), 0.99) if gamma == "constant" else torch.linspace(0.5, 1.0, 8)
    torch.testing.assert_close(compiled_gae(*traj, gamma), _gae(*traj, gamma), rtol=1e-5, atol=1e-5)


def test_vtrace_and_n_step_capture_in_one_graph():
    traj = _trajectory((32, 2))
    for fn, args in ((_vtrace, (*traj[:5], 0.99, traj[5])), (_n_step, (*traj[:5], 0.99))):
        got = torch.compile(fn, fullgraph=True, backend="aot_eager")(*args)
        torch.testing.assert_close(got, fn(*args))


class _GaeModule(torch.nn.Module):
    def forward(self, reward, value, next_value, terminated, truncated, gamma):
        return _gae(reward, value, next_value, terminated, truncated, gamma)


def test_exported_gae_with_a_dynamic_batch_equals_eager():
    traj, gamma = _trajectory((128, 4))[:5], torch.full((4,), 0.99)
    batch = torch.export.Dim("batch")
    shapes = [{1: batch}] * 5 + [{0: batch}]
    program = torch.export.export(_GaeModule(), (*traj, gamma), dynamic_shapes=shapes)
    other, other_gamma = _trajectory((128, 6), seed=3)[:5], torch.full((6,), 0.9)
    got = program.module()(*other, other_gamma)
    torch.testing.assert_close(got, _gae(*other, other_gamma))
