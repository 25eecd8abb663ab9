"""fxrl.nn.from_module / to_module: any torch.nn.Module as (params, apply) and back."""

import pytest
import torch

from fxrl import nn, random, tree
from fxrl.testing import assert_trees_close, check_vmap


def make_net(seed):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = torch.nn.Sequential(
            torch.nn.Linear(3, 8), torch.nn.BatchNorm1d(8), torch.nn.Tanh(), torch.nn.Linear(8, 2)
        )
        net[1].running_mean.uniform_(-1, 1)
        net[1].running_var.uniform_(0.5, 2)
    return net.eval()


def test_from_module_apply_equals_the_module_and_includes_buffers():
    net = make_net(0)
    params, apply = nn.from_module(net)
    assert tree.path_names(params) == [
        "0_weight",
        "0_bias",
        "1_weight",
        "1_bias",
        "1_running_mean",
        "1_running_var",
        "1_num_batches_tracked",
        "3_weight",
        "3_bias",
    ]
    x = random.normal(random.key(0), (5, 3))
    assert_trees_close(apply(params, x), net(x).detach())
    changed = tree.map(lambda p: p * 0 if p.dtype.is_floating_point else p, params)
    assert_trees_close(apply(changed, x), torch.zeros(5, 2))


def test_params_share_no_memory_with_the_module():
    net = make_net(0)
    params, _ = nn.from_module(net)
    with torch.no_grad():
        net[0].weight.add_(1.0)
    assert not torch.equal(params["0"]["weight"], net[0].weight)


def test_vmap_over_params_of_several_modules_equals_a_loop():
    nets = [make_net(s) for s in range(3)]
    _, apply = nn.from_module(nets[0])
    stacked = tree.stack([nn.from_module(n)[0] for n in nets])
    x = random.normal(random.key(0), (4, 3))
    out = check_vmap(apply, stacked, x, in_dims=(0, None))
    for i, n in enumerate(nets):
        assert_trees_close(out[i], n(x).detach())


def test_apply_never_writes_into_params_even_in_train_mode():
    net = make_net(0).train()
    params, apply = nn.from_module(net)
    before = tree.map(torch.clone, params)
    apply(params, random.normal(random.key(0), (6, 3)))
    assert_trees_close(params, before)


def test_grad_through_apply_without_buffers_gives_the_module_grads():
    net = make_net(1)
    params, apply = nn.from_module(net, buffers=False)  # int buffers cannot take grads
    x = random.normal(random.key(0), (5, 3))
    grads = torch.func.grad(lambda p: apply(p, x).square().sum())(params)
    net(x).square().sum().backward()
    assert_trees_close(grads["3"]["weight"], net[3].weight.grad)


def test_to_module_round_trips_params():
    params, _ = nn.from_module(make_net(0))
    other = nn.to_module(params, make_net(1))
    assert_trees_close(nn.from_module(other)[0], params)


def test_to_module_names_missing_and_unexpected_entries():
    params, _ = nn.from_module(make_net(0))
    del params["3"]["bias"]
    params["4"] = {"weight": torch.zeros(1)}
    with pytest.raises(ValueError, match=r"missing \['3.bias'\], unexpected \['4.weight'\]"):
        nn.to_module(params, make_net(1))


def test_to_module_names_shape_mismatches():
    params, _ = nn.from_module(make_net(0))
    params["3"]["bias"] = torch.zeros(5)
    with pytest.raises(ValueError, match=r"3.bias: \[5\] vs module \[2\]"):
        nn.to_module(params, make_net(1))


def test_from_module_rejects_non_modules():
    with pytest.raises(TypeError, match=r"expected a torch\.nn\.Module, got function"):
        nn.from_module(lambda x: x)
