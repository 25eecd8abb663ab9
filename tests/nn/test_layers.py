"""fxrl.nn layers: parity with torch.nn, ensembles by vmap, errors naming the layer."""

import itertools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import nn, random, tree
from fxrl.testing import assert_trees_close, check_vmap, keys

TORCH_ACTIVATIONS = {
    "tanh": torch.nn.Tanh,
    "relu": torch.nn.ReLU,
    "elu": torch.nn.ELU,
    "silu": torch.nn.SiLU,
    "gelu": torch.nn.GELU,
}


def torch_module(seed, build):
    """Build a torch.nn module with its default init, without touching the global RNG."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return build()


def linear_params(layer):
    return {"w": layer.weight.detach().clone(), "b": layer.bias.detach().clone()}


def torch_mlp(sizes, activation, layer_norm):
    layers = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        layers.append(torch.nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            if layer_norm:
                layers.append(torch.nn.LayerNorm(n_out))
            layers.append(TORCH_ACTIVATIONS[activation]())
    return torch.nn.Sequential(*layers)


def mlp_params_from(module, layer_norm):
    linears = [m for m in module if isinstance(m, torch.nn.Linear)]
    norms = [m for m in module if isinstance(m, torch.nn.LayerNorm)]
    params = {"layers": [linear_params(m) for m in linears]}
    for p, n in zip(params["layers"], norms, strict=False) if layer_norm else ():
        p["norm"] = linear_params(n)
    return params


@given(
    seed=st.integers(0, 2**31),
    in_features=st.integers(1, 6),
    out_features=st.integers(1, 4),
    hidden=st.lists(st.integers(1, 8), max_size=3),
    activation=st.sampled_from(sorted(TORCH_ACTIVATIONS)),
    layer_norm=st.booleans(),
    batch=st.lists(st.integers(1, 3), max_size=2),
)
def test_mlp_with_params_copied_from_torch_gives_the_same_output(
    seed, in_features, out_features, hidden, activation, layer_norm, batch
):
    sizes = [in_features, *hidden, out_features]
    module = torch_module(seed, lambda: torch_mlp(sizes, activation, layer_norm))
    model = nn.mlp(in_features, out_features, hidden, activation, layer_norm=layer_norm)
    x = random.normal(random.key(seed), (*batch, in_features))
    out = model.apply(mlp_params_from(module, layer_norm), x)
    assert_trees_close(out, module(x).detach())


def test_mlp_params_are_named_layers_i_w_and_shaped_like_torch_linear():
    params = nn.mlp(3, 2, hidden=(5,), layer_norm=True).init(random.key(0))
    assert tree.path_names(params) == [
        "layers_0_w",
        "layers_0_b",
        "layers_0_norm_w",
        "layers_0_norm_b",
        "layers_1_w",
        "layers_1_b",
    ]
    assert params["layers"][0]["w"].shape == (5, 3)


def test_mlp_output_activation_and_callable_activation_are_applied():
    model = nn.mlp(3, 2, hidden=(4,), activation=lambda x: x * 0.0, output_activation="sigmoid")
    params = model.init(random.key(0))
    out = model.apply(params, torch.ones(3))
    assert_trees_close(out, torch.sigmoid(params["layers"][1]["b"]))


def test_default_linear_init_is_torch_nn_linear_uniform_bound():
    w = nn.linear(100, 400).init(random.key(0))["w"]
    assert float(w.abs().max()) <= 0.1
    assert float(w.abs().max()) > 0.099
    assert abs(float(w.var()) - 0.1**2 / 3) < 2e-4  # variance of U(-b, b) is b^2 / 3


@given(
    seed=st.integers(0, 2**31),
    stride=st.integers(1, 3),
    padding=st.integers(0, 2),
    batch=st.lists(st.integers(1, 2), max_size=2),
)
def test_conv2d_equals_torch_conv2d_with_copied_params(seed, stride, padding, batch):
    module = torch_module(seed, lambda: torch.nn.Conv2d(3, 5, 3, stride, padding))
    model = nn.conv2d(3, 5, 3, stride, padding)
    x = random.normal(random.key(seed), (*batch, 3, 9, 8))
    expected = module(x.reshape(-1, 3, 9, 8)).detach()  # torch.nn takes one batch dim or none
    out = model.apply(linear_params(module), x)
    assert_trees_close(out, expected.reshape(*batch, *expected.shape[-3:]))


def test_convnet_equals_torch_sequential_of_conv_relu_then_flatten():
    module = torch_module(
        1,
        lambda: torch.nn.Sequential(
            torch.nn.Conv2d(2, 4, 3, 2),
            torch.nn.ReLU(),
            torch.nn.Conv2d(4, 6, 2, 1),
            torch.nn.ReLU(),
            torch.nn.Flatten(-3),
        ),
    )
    model = nn.convnet(2, channels=(4, 6), kernels=(3, 2), strides=(2, 1))
    params = {"layers": [linear_params(module[0]), linear_params(module[2])]}
    x = random.normal(random.key(0), (5, 2, 11, 11))
    assert_trees_close(model.apply(params, x), module(x).detach())


def nature_dqn(num_actions, in_channels):
    return torch.nn.Sequential(
        torch.nn.Conv2d(in_channels, 32, 8, 4),
        torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 4, 2),
        torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, 1),
        torch.nn.ReLU(),
        torch.nn.Flatten(-3),
        torch.nn.Linear(3136, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, num_actions),
    )


def atari_params_from(module):
    return {
        "conv": {"layers": [linear_params(module[i]) for i in (0, 2, 4)]},
        "head": {"layers": [linear_params(module[i]) for i in (7, 9)]},
    }


@pytest.mark.parametrize("in_channels", [4, 1])
def test_atari_dqn_equals_the_nature_dqn_torch_module(in_channels):
    module = torch_module(2, lambda: nature_dqn(6, in_channels))
    frames = random.randint(random.key(3), (2, in_channels, 84, 84), 0, 256, torch.uint8)
    out = nn.atari_dqn(6, in_channels).apply(atari_params_from(module), frames)
    assert out.shape == (2, 6)
    assert_trees_close(out, module(frames.float() / 255.0).detach())


@pytest.fixture(scope="module")
def atari_params():
    return nn.atari_dqn(3).init(random.key(0))  # 1.7M weights: drawn once for the module


def test_atari_dqn_init_has_the_nature_shapes(atari_params):
    params = atari_params
    shapes = [list(x.shape) for x in tree.leaves(params)]
    assert shapes == [
        [32, 4, 8, 8],
        [32],
        [64, 32, 4, 4],
        [64],
        [64, 64, 3, 3],
        [64],
        [512, 3136],
        [512],
        [3, 512],
        [3],
    ]


@given(key=keys(), members=st.integers(1, 4))
def test_vmapped_mlp_ensemble_equals_a_loop_over_members(key, members):
    model = nn.mlp(3, 2, hidden=(8, 8), layer_norm=True)
    params = check_vmap(model.init, random.split(key, members))
    x = random.normal(key, (5, 3))
    check_vmap(model.apply, params, x, in_dims=(0, None))


def test_vmapped_atari_dqn_ensemble_equals_a_loop_over_members(atari_params):
    model = nn.atari_dqn(3)
    params = tree.map(lambda x: torch.stack([x, -x, 0.5 * x]), atari_params)
    frames = random.uniform(random.key(1), (2, 4, 84, 84))
    check_vmap(model.apply, params, frames, in_dims=(0, None))


def test_sequential_mixes_models_and_functions_with_torch_sequential_indices():
    model = nn.sequential(nn.linear(3, 4), torch.relu, nn.linear(4, 2))
    params = model.init(random.key(0))
    assert tree.path_names(params) == ["layers_0_w", "layers_0_b", "layers_2_w", "layers_2_b"]
    x = random.normal(random.key(1), (7, 3))
    expected = nn.linear(4, 2).apply(
        params["layers"][2], torch.relu(nn.linear(3, 4).apply(params["layers"][0], x))
    )
    assert_trees_close(model.apply(params, x), expected)
    check_vmap(model.init, random.split(random.key(0), 3))


def test_init_is_pure_same_key_same_params_other_key_other_params():
    model = nn.mlp(3, 2)
    assert_trees_close(model.init(random.key(5)), model.init(random.key(5)))
    assert not torch.equal(
        model.init(random.key(5))["layers"][0]["w"], model.init(random.key(6))["layers"][0]["w"]
    )


# ------------------------------------------------------------------------------- bad input


def test_mlp_rejects_input_of_wrong_width_naming_the_layer_and_both_shapes():
    model = nn.mlp(4, 2)
    with pytest.raises(
        nn.LayerError,
        match=r"mlp at params path 'layers_0': input has shape "
        r"\[3, 5\] but w has shape \[64, 4\]",
    ):
        model.apply(model.init(random.key(0)), torch.zeros(3, 5))


def test_mlp_rejects_params_of_another_model_at_the_first_layer_that_differs():
    params = nn.mlp(4, 2, hidden=(32, 64)).init(random.key(0))
    params["layers"][1] = nn.linear(16, 64).init(random.key(1))
    with pytest.raises(
        ValueError,
        match=r"'layers_1': input has shape \[32\] but w has shape "
        r"\[64, 16\]",
    ):
        nn.mlp(4, 2, hidden=(32, 64)).apply(params, torch.zeros(4))


def test_mlp_rejects_params_with_the_wrong_number_of_layers():
    params = nn.mlp(4, 2, hidden=(8,)).init(random.key(0))
    with pytest.raises(ValueError, match=r"expected a list of 3 layer params, got 2"):
        nn.mlp(4, 2, hidden=(8, 8)).apply(params, torch.zeros(4))


def test_nested_errors_carry_the_full_params_path(atari_params):
    params = tree.map(lambda x: x, atari_params)
    params["head"]["layers"][0]["w"] = torch.zeros(512, 100)
    with pytest.raises(
        nn.LayerError,
        match=r"atari_dqn at params path 'head_layers_0': input "
        r"has shape \[2, 3136\] but w has shape \[512, 100\]",
    ):
        nn.atari_dqn(3).apply(params, torch.zeros(2, 4, 84, 84))


def test_atari_dqn_rejects_frames_that_are_not_84_by_84(atari_params):
    with pytest.raises(
        ValueError,
        match=r"input has shape \[2, 4, 64, 64\]; expected frames "
        r"\[\.\.\., 4, 84, 84\]",
    ):
        nn.atari_dqn(3).apply(atari_params, torch.zeros(2, 4, 64, 64))


def test_conv2d_rejects_channels_last_input():
    model = nn.conv2d(3, 8, 3)
    with pytest.raises(
        ValueError,
        match=r"input has shape \[2, 9, 9, 3\] but w has shape "
        r"\[8, 3, 3, 3\]; expected \[\.\.\., 3, H, W\] \(channels first\)",
    ):
        model.apply(model.init(random.key(0)), torch.zeros(2, 9, 9, 3))


def test_linear_rejects_integer_input_with_a_cast_hint():
    model = nn.linear(2, 1)
    with pytest.raises(ValueError, match=r"input has dtype int64 but w has float32; cast"):
        model.apply(model.init(random.key(0)), torch.zeros(2, dtype=torch.int64))


def test_missing_params_keys_are_named():
    with pytest.raises(
        ValueError,
        match=r"params has keys \['weight', 'bias'\]; missing "
        r"\['w', 'b'\]",
    ):
        nn.linear(2, 1).apply({"weight": torch.zeros(1, 2), "bias": torch.zeros(1)}, torch.zeros(2))


def test_unknown_activation_lists_the_known_ones():
    with pytest.raises(
        ValueError,
        match=r"unknown activation 'tahn'\. Did you mean 'tanh'\? Expected one of: .*tanh.*"
        r"Or pass a callable",
    ):
        nn.mlp(2, 2, activation="tahn")


def test_init_rejects_a_key_of_the_wrong_shape():
    with pytest.raises(
        ValueError,
        match=r"key has shape \[\] and dtype int64; expected int64 "
        r"with shape \[2\]",
    ):
        nn.mlp(2, 2).init(torch.tensor(0))
