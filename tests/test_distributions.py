"""fxrl.distributions: torch.distributions parity, moments at fixed keys, draw modes."""

import math

import pytest
import torch
import torch.distributions as td
from hypothesis import given
from hypothesis import strategies as st

from fxrl import distributions as D
from fxrl import random, tree
from fxrl.testing import assert_trees_close, check_vmap, keys

batch = st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple)


def gaussian_params(key, shape, dtype=torch.float32):
    k_loc, k_scale, k_x = random.split(key, 3).unbind(0)
    loc = random.uniform(k_loc, shape, -3.0, 3.0, dtype)
    scale = random.uniform(k_scale, shape, 0.05, 2.0, dtype)
    return loc, scale, k_x


@given(key=keys(), shape=batch, dtype=st.sampled_from([torch.float32, torch.float64]))
def test_normal_log_prob_and_entropy_equal_torch_independent_normal(key, shape, dtype):
    loc, scale, k_x = gaussian_params(key, shape, dtype)
    x = random.uniform(k_x, shape, -5.0, 5.0, dtype)
    ref = td.Independent(td.Normal(loc, scale), 1)
    dist = D.normal(loc, scale)
    assert_trees_close(dist.log_prob(x), ref.log_prob(x))
    assert_trees_close(dist.entropy(), ref.entropy())
    assert_trees_close(
        D.normal(loc, scale, event_ndims=0).log_prob(x), td.Normal(loc, scale).log_prob(x)
    )


@given(key=keys(), shape=batch, low=st.floats(-3.0, 0.0), width=st.floats(0.5, 4.0))
def test_tanh_normal_log_prob_equals_torch_transformed_normal_inside_the_box(
    key, shape, low, width
):
    loc, scale, k_x = gaussian_params(key, shape, torch.float64)
    high = low + width
    # Actions at least 1e-3 inside the bounds, where torch's atanh is still accurate.
    x = random.uniform(k_x, shape, low + 1e-3 * width, high - 1e-3 * width, torch.float64)
    ref = td.Independent(
        td.TransformedDistribution(
            td.Normal(loc, scale),
            [td.TanhTransform(), td.AffineTransform((high + low) / 2, (high - low) / 2)],
        ),
        1,
    )
    assert_trees_close(D.tanh_normal(loc, scale, low, high).log_prob(x), ref.log_prob(x))


@given(key=keys(), shape=batch, big=st.floats(5.0, 50.0))
def test_tanh_normal_log_prob_is_finite_on_the_bounds_and_with_saturated_samples(key, shape, big):
    loc = torch.full(shape, big)
    dist = D.tanh_normal(loc, torch.full(shape, 0.1))
    for a in (torch.ones(shape), -torch.ones(shape)):
        assert torch.isfinite(dist.log_prob(a)).all()
    action, logp = dist.sample_and_log_prob(key)
    assert torch.isfinite(logp).all()
    grads = torch.func.grad(lambda m: dist.replace(loc=m).sample_and_log_prob(key)[1].sum())(loc)
    assert torch.isfinite(grads).all()
    assert ((action >= -1) & (action <= 1)).all()


@given(key=keys(), shape=batch)
def test_tanh_normal_sample_and_log_prob_agrees_with_log_prob_of_the_sample(key, shape):
    loc, scale, k_x = gaussian_params(key, shape, torch.float64)
    dist = D.tanh_normal(loc * 0.3, scale, -2.0, 2.0)
    action, logp = dist.sample_and_log_prob(k_x)
    assert_trees_close(action, dist.sample(k_x))
    assert_trees_close(logp, dist.log_prob(action), rtol=1e-6, atol=1e-6)


@given(key=keys(), shape=batch)
def test_categorical_log_prob_entropy_and_mode_equal_torch(key, shape):
    k_logits, k_x = random.split(key).unbind(0)
    logits = random.normal(k_logits, (*shape, 5)) * 3
    logits = torch.where(logits < -4, -math.inf, logits)  # some impossible actions
    logits[..., 0] = 0.0
    x = random.randint(k_x, shape, 0, 5)
    ref, dist = td.Categorical(logits=logits), D.categorical(logits)
    assert_trees_close(dist.log_prob(x), ref.log_prob(x))
    assert_trees_close(dist.entropy(), ref.entropy())
    assert_trees_close(dist.mode(), ref.mode)
    assert_trees_close(dist.probs, ref.probs)


def test_normal_moments_at_a_fixed_key():
    loc, scale = torch.tensor([0.5, -2.0]), torch.tensor([1.0, 0.25])
    x = D.normal(loc, scale).sample(random.key(0), (50_000,)).double()
    # Standard errors: scale / sqrt(n) for the mean, scale / sqrt(2n) for the std.
    assert (x.mean(0) - loc).abs().max() < 4 * 1.0 / math.sqrt(50_000)
    assert ((x.std(0) - scale).abs() / scale).max() < 4 / math.sqrt(100_000)


def test_tanh_normal_samples_match_the_pushed_forward_normal_at_a_fixed_key():
    dist = D.tanh_normal(torch.tensor([0.7]), torch.tensor([0.6]), -2.0, 2.0)
    x = dist.sample(random.key(1), (50_000,)).double()
    # E[2 tanh(u)] with u ~ N(0.7, 0.6^2), by quadrature on a fine grid.
    u = torch.linspace(0.7 - 8 * 0.6, 0.7 + 8 * 0.6, 20001, dtype=torch.float64)
    w = torch.exp(-0.5 * ((u - 0.7) / 0.6) ** 2)
    mean = float((2 * torch.tanh(u) * w).sum() / w.sum())
    assert abs(float(x.mean()) - mean) < 4 * float(x.std()) / math.sqrt(50_000)
    assert abs(float(dist.mean(random.key(2), 50_000)) - mean) < 4 * float(x.std()) / math.sqrt(
        50_000
    )
    assert_trees_close(dist.mode(), 2 * torch.tanh(torch.tensor([0.7])))


def test_tanh_normal_entropy_estimate_matches_quadrature():
    loc, scale, n = torch.tensor([0.3, -1.0]), torch.tensor([0.5, 1.2]), 20_000
    estimate = D.tanh_normal(loc, scale).entropy(random.key(1), num_samples=n)
    # H = H(normal) + E[log(1 - tanh(u)^2)] per dim, the expectation by quadrature.
    expected, var = 0.0, 0.0
    for m, s in zip(loc.double().tolist(), scale.double().tolist(), strict=True):
        u = torch.linspace(m - 10 * s, m + 10 * s, 40001, dtype=torch.float64)
        w = torch.exp(-0.5 * ((u - m) / s) ** 2)
        w = w / w.sum()
        log_det = torch.log1p(-(torch.tanh(u) ** 2))
        expected += 0.5 + 0.5 * math.log(2 * math.pi) + math.log(s) + float((w * log_det).sum())
        var += float((w * log_det**2).sum()) - float((w * log_det).sum()) ** 2
    assert abs(float(estimate) - expected) < 4 * math.sqrt(var / n)


def test_categorical_frequencies_at_a_fixed_key():
    probs = torch.tensor([0.1, 0.6, 0.0, 0.3])
    x = D.categorical(probs.log()).sample(random.key(0), (40_000,))
    freq = torch.bincount(x, minlength=4).double() / 40_000
    assert freq[2] == 0
    assert (freq - probs.double()).abs().max() < 4 * math.sqrt(0.25 / 40_000)


def test_delta_is_a_point_mass():
    value = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    dist = D.delta(value)
    assert_trees_close(dist.sample(random.key(0)), value)
    assert_trees_close(
        dist.log_prob(torch.tensor([[1.0, 2.0], [3.0, 5.0]])), torch.tensor([0.0, -math.inf])
    )
    assert_trees_close(dist.entropy(), torch.zeros(2))
    assert_trees_close(dist.mode(), value)


@pytest.mark.parametrize(
    "make",
    [
        lambda loc: D.normal(loc, 0.5),
        lambda loc: D.tanh_normal(loc, 0.5),
        lambda loc: D.categorical(loc),
        lambda loc: D.delta(loc),
    ],
)
def test_draw_modes(make):
    loc = torch.tensor([[0.2, -0.4, 1.5]])
    dist = make(loc)
    assert_trees_close(D.draw(dist, random.key(0), "random"), dist.sample(random.key(0)))
    assert_trees_close(D.draw(dist, None, "mode"), dist.mode())


def test_draw_mean_and_unknown_modes():
    loc = torch.tensor([0.2, -0.4])
    assert_trees_close(D.draw(D.normal(loc, 1.0), None, "mean"), loc)
    with pytest.raises(
        ValueError,
        match=r"unknown mode 'greedy'; expected one of \['random', "
        r"'mode', 'mean'\]",
    ):
        D.draw(D.normal(loc, 1.0), None, "greedy")
    with pytest.raises(ValueError, match=r"Categorical: an index has no meaningful mean"):
        D.draw(D.categorical(loc), None, "mean")
    with pytest.raises(ValueError, match=r"mean has no closed form; pass a key"):
        D.draw(D.tanh_normal(loc, 1.0), None, "mean")


@given(key=keys(), n=st.integers(1, 4))
def test_vmap_over_params_and_keys_equals_a_loop(key, n):
    loc, scale, _ = gaussian_params(key, (n, 3))
    ks = random.split(key, n)
    for make in (D.normal, D.tanh_normal):
        check_vmap(lambda m, s, k, make=make: make(m, s).sample_and_log_prob(k), loc, scale, ks)
    check_vmap(lambda logits, k: D.categorical(logits).sample_and_log_prob(k), loc, ks)


def test_distributions_are_pytrees_that_pass_through_vmap():
    dist = torch.func.vmap(lambda m: D.tanh_normal(m, 1.0))(torch.zeros(4, 2))
    assert isinstance(dist, D.TanhNormal)
    assert dist.loc.shape == (4, 2)
    assert [x.shape for x in tree.leaves(dist)] == [(4, 2), (4,), (4,), (4,)]


def test_normal_samples_are_reparameterised():
    loc, scale = torch.tensor([0.5]), torch.tensor([2.0])
    eps = random.normal(random.key(0), (1,))
    g_loc, g_scale = torch.func.grad(
        lambda m, s: D.normal(m, s).sample(random.key(0)).sum(), argnums=(0, 1)
    )(loc, scale)
    assert_trees_close(g_loc, torch.ones(1))
    assert_trees_close(g_scale, eps)


def test_normal_param_extractor_matches_torchrl_default_mapping():
    loc, scale = D.normal_param_extractor(torch.tensor([[1.0, -1.0, 0.0, -30.0]]))
    assert_trees_close(loc, torch.tensor([[1.0, -1.0]]))
    assert float(scale[0, 0]) == pytest.approx(1.0)  # biased_softplus_1.0: scale 1 at 0
    assert float(scale[0, 1]) == pytest.approx(0.01, abs=1e-6)  # its floor
    _, scale = D.normal_param_extractor(torch.tensor([0.0, -30.0]), "exp")
    assert float(scale[0]) == pytest.approx(1e-4)  # scale_lb


def test_bad_inputs_give_clear_errors():
    with pytest.raises(ValueError, match=r"last dim must be even"):
        D.normal_param_extractor(torch.zeros(3))
    with pytest.raises(ValueError, match=r"unknown scale_mapping 'softmax'; known: 'softplus'"):
        D.normal_param_extractor(torch.zeros(2), "softmax")
    with pytest.raises(
        ValueError,
        match=r"key must be one int64 key of shape \[2\].*got shape "
        r"\[3, 2\]",
    ):
        D.normal(torch.zeros(2), 1.0).sample(random.split(random.key(0), 3))
    with pytest.raises(ValueError, match=r"One-hot actions\? Pass x.argmax\(-1\)"):
        D.categorical(torch.zeros(2, 3)).log_prob(torch.eye(3)[:2])
