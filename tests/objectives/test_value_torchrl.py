"""Parity with TorchRL's functional estimators (torchrl.objectives.value.functional).

TorchRL lays data out [*B, T, F] and calls ``done = terminated | truncated``: its ``done``
cuts the trace, its ``terminated`` stops bootstrapping, the same split fxrl makes, so the
two agree exactly once the time dim is moved.
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl.objectives import gae, td0, td_lambda, vtrace

functional = pytest.importorskip("torchrl.objectives.value.functional")

# Dyadic discounts: TorchRL multiplies gamma by an int mask (a float32 result), so 0.97
# would be rounded to float32 there and not here; its clip thresholds become float32 tensors.
GAMMA, LMBDA = 0.96875, 0.875
BATCHES = st.sampled_from([(), (3,), (2, 3)])


def _trl(x):
    """[T, *B] -> TorchRL's [*B, T, 1]."""
    return x.movedim(0, -1).unsqueeze(-1)


def _back(x):
    return x.squeeze(-1).movedim(-1, 0)


def _trajectory(seed, horizon, batch):
    gen = torch.Generator().manual_seed(seed)
    shape = (horizon, *batch)
    reward, value, next_value, log_rho = torch.randn(4, *shape, generator=gen, dtype=torch.float64)
    terminated = torch.rand(shape, generator=gen) < 0.15
    truncated = torch.rand(shape, generator=gen) < 0.15
    return reward, value, next_value, terminated, truncated, log_rho


@given(seed=st.integers(0, 2**31), horizon=st.integers(1, 50), batch=BATCHES)
def test_gae_td_lambda_and_td0_match_torchrl(seed, horizon, batch):
    reward, value, next_value, terminated, truncated, _ = _trajectory(seed, horizon, batch)
    done = terminated | truncated
    advantage, target = gae(
        reward, value, next_value, terminated, truncated, gamma=GAMMA, lmbda=LMBDA
    )
    trl_adv, trl_target = functional.generalized_advantage_estimate(
        GAMMA, LMBDA, _trl(value), _trl(next_value), _trl(reward), _trl(done), _trl(terminated)
    )
    torch.testing.assert_close(advantage, _back(trl_adv))
    torch.testing.assert_close(target, _back(trl_target))
    ret = td_lambda(reward, next_value, terminated, truncated, gamma=GAMMA, lmbda=LMBDA)
    trl_ret = functional.td_lambda_return_estimate(
        GAMMA, LMBDA, _trl(next_value), _trl(reward), _trl(done), _trl(terminated)
    )
    torch.testing.assert_close(ret, _back(trl_ret))
    one = td0(reward, next_value, terminated, gamma=GAMMA)
    trl_one = functional.td0_return_estimate(
        GAMMA, _trl(next_value), _trl(reward), _trl(terminated)
    )
    torch.testing.assert_close(one, _back(trl_one))


@given(seed=st.integers(0, 2**31), horizon=st.integers(1, 50), batch=BATCHES)
def test_vtrace_matches_torchrl_with_its_single_rho_clip(seed, horizon, batch):
    reward, value, next_value, terminated, truncated, log_rho = _trajectory(seed, horizon, batch)
    fields = (reward, value, next_value, terminated, truncated, log_rho)
    vs, pg = vtrace(*fields, gamma=GAMMA, clip_rho=1.0, clip_c=0.75, clip_pg_rho=1.0)
    # TorchRL's rho is exp(log_pi - log_mu): pass log_rho against zeros.
    trl_pg, trl_vs = functional.vtrace_advantage_estimate(
        GAMMA,
        _trl(log_rho),
        torch.zeros_like(_trl(log_rho)),
        _trl(value),
        _trl(next_value),
        _trl(reward),
        _trl(terminated | truncated),
        _trl(terminated),
        rho_thresh=1.0,
        c_thresh=0.75,
    )
    torch.testing.assert_close(vs, _back(trl_vs))
    torch.testing.assert_close(pg, _back(trl_pg))
