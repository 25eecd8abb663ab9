"""fxrl.nn.initializers: pure functions of keys with torch.nn.init's bounds and gains."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import random
from fxrl.nn import initializers as inits
from fxrl.testing import assert_trees_close, check_vmap, keys

shapes = st.lists(st.integers(1, 6), min_size=2, max_size=4).map(tuple)


@given(key=keys(), shape=shapes, scale=st.floats(0.1, 3.0))
def test_orthogonal_rows_or_columns_are_orthonormal_times_scale(key, shape, scale):
    w = inits.orthogonal(scale)(key, shape)
    flat = w.reshape(shape[0], -1).double() / scale
    gram = flat @ flat.T if flat.shape[0] <= flat.shape[1] else flat.T @ flat
    assert_trees_close(gram, torch.eye(gram.shape[0], dtype=torch.float64), atol=1e-5, rtol=0)


@given(key=keys(), shape=shapes)
def test_orthogonal_weights_are_dense_row_major_whatever_their_shape(key, shape):
    # A wide weight comes from a transposed QR factor; stored transposed, it made a matmul
    # round differently from the same values stored densely (on an AMD EPYC's BLAS path),
    # so two programs with equal params disagreed in the last bits.
    w = inits.orthogonal(1.0)(key, shape)
    assert w.is_contiguous(), f"{shape}: strides {w.stride()}"


@pytest.mark.parametrize(
    "init",
    [
        inits.orthogonal(2.0),
        inits.torch_default(),
        inits.lecun_uniform(),
        inits.kaiming_uniform(),
        inits.kaiming_normal(),
        inits.xavier_uniform(),
        inits.normal(0.3),
        inits.uniform(-1.0, 2.0),
    ],
)
@given(key=keys(), n=st.integers(1, 4))
def test_vmapped_init_equals_a_loop_and_is_pure(init, key, n):
    ks = random.split(key, n)
    out = check_vmap(lambda k: init(k, (3, 5)), ks)
    assert_trees_close(out[0], init(ks[0], (3, 5)))


@pytest.mark.parametrize(
    ("init", "bound"),
    [
        (inits.torch_default(), 1 / math.sqrt(250)),
        (inits.lecun_uniform(), math.sqrt(3 / 250)),
        (inits.kaiming_uniform(), math.sqrt(2) * math.sqrt(3 / 250)),
        (
            inits.kaiming_uniform(nonlinearity="relu", mode="fan_out"),
            math.sqrt(2) * math.sqrt(3 / 800),
        ),
        (inits.xavier_uniform(), math.sqrt(6 / (250 + 800))),
    ],
)
def test_uniform_initializers_fill_torch_bound_with_the_right_variance(init, bound):
    w = init(random.key(0), (32, 10, 5, 5))  # fan_in 250, fan_out 800
    assert float(w.abs().max()) <= bound
    assert float(w.abs().max()) > 0.99 * bound
    # 8000 draws of U(-b, b): variance b^2 / 3, standard error of the estimate ~ 1.2%.
    assert float(w.double().var()) == pytest.approx(bound**2 / 3, rel=0.05)


def test_kaiming_normal_has_torch_std():
    w = inits.kaiming_normal(nonlinearity="relu")(random.key(1), (400, 100))
    assert float(w.double().std()) == pytest.approx(math.sqrt(2 / 100), rel=0.02)
    assert abs(float(w.double().mean())) < 0.003


@pytest.mark.parametrize(
    ("name", "param"),
    [
        ("linear", None),
        ("tanh", None),
        ("relu", None),
        ("leaky_relu", None),
        ("leaky_relu", 0.2),
        ("selu", None),
        ("sigmoid", None),
    ],
)
def test_gain_equals_torch_calculate_gain(name, param):
    assert inits.gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param))


def test_fans_follow_torch_for_linear_and_conv_weights():
    assert inits.fans((64, 4)) == (4, 64)
    assert inits.fans((32, 4, 8, 8)) == (256, 2048)


def test_zeros_ones_constant_follow_key_batch():
    ks = random.split(random.key(0), 3)
    assert inits.zeros(ks, (2,)).shape == (3, 2)
    assert_trees_close(inits.constant(0.5)(random.key(0), (2,)), torch.full((2,), 0.5))


def test_orthogonal_rejects_vectors_with_a_hint():
    with pytest.raises(ValueError, match=r"shape \[4\] has fewer than 2 dims; use it for weights"):
        inits.orthogonal()(random.key(0), (4,))


def test_unknown_nonlinearity_and_mode_are_listed():
    with pytest.raises(ValueError, match=r"unknown nonlinearity 'relu6'; known: \["):
        inits.kaiming_uniform(nonlinearity="relu6")
    with pytest.raises(ValueError, match=r"mode must be 'fan_in' or 'fan_out', got 'fan_avg'"):
        inits.kaiming_uniform(mode="fan_avg")
