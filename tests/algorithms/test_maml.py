"""MAML: the outer gradient against finite differences, the inner step against torch.optim,
first vs second order, the data gathered along the inner loop, REINFORCE's pieces."""

import pytest
import torch

from fxrl import distributions, nn, random, tree
from fxrl.algorithms import maml
from fxrl.testing import assert_trees_close, check_vmap

NET = nn.mlp(2, 1, (3,), "tanh")


def _params(seed=0, dtype=torch.float64):
    p = {"net": NET.init(random.key(seed)), "log_std": torch.tensor([-0.3])}
    return tree.map(lambda x: x.to(dtype), p)


def _log_prob(params, obs, action):
    return distributions.normal(NET.apply(params["net"], obs), params["log_std"].exp()).log_prob(
        action
    )


def _loss_fn(params, batch):
    return maml.reinforce_loss(_log_prob, params, batch)


def _batches(seed, num_batches, t=4, b=3, dtype=torch.float64):
    """Fixed rollouts-like data [num_batches, T, B, ...]: the tiny problem."""
    k_obs, k_act, k_adv = random.split(random.key(seed), 3).unbind(-2)
    shape = (num_batches, t, b)
    return {
        "obs": random.normal(k_obs, (*shape, 2), dtype=dtype),
        "action": random.normal(k_act, (*shape, 1), dtype=dtype),
        "advantage": random.normal(k_adv, shape, dtype=dtype),
    }


def _central_differences(f, params, h=1e-5):
    """d f / d params, one element at a time, (f(p + h) - f(p - h)) / 2h."""
    leaves, spec = tree.leaves(params), tree.structure(params)
    out = []
    for i, leaf in enumerate(leaves):
        g = torch.zeros_like(leaf)
        for j in range(leaf.numel()):
            step = torch.zeros_like(leaf).reshape(-1)
            step[j] = h
            step = step.reshape(leaf.shape)
            plus = [x + step if k == i else x for k, x in enumerate(leaves)]
            minus = [x - step if k == i else x for k, x in enumerate(leaves)]
            g.reshape(-1)[j] = (f(tree.unflatten(spec, plus)) - f(tree.unflatten(spec, minus))) / (
                2 * h
            )
        out.append(g)
    return tree.unflatten(spec, out)


@pytest.mark.parametrize("num_steps", [1, 2])
def test_second_order_outer_gradient_equals_central_finite_differences(num_steps):
    params, batches = _params(), _batches(1, num_steps + 1)
    f = lambda p: maml.maml_loss(_loss_fn, p, batches, lr=0.5)
    grads = torch.func.grad(f)(params)
    assert_trees_close(grads, _central_differences(f, params), rtol=1e-6, atol=1e-8)


def test_first_order_gradient_is_the_loss_gradient_at_the_adapted_params():
    params, batches = _params(), _batches(2, 2)
    second = torch.func.grad(lambda p: maml.maml_loss(_loss_fn, p, batches, lr=0.5))(params)
    first = torch.func.grad(
        lambda p: maml.maml_loss(_loss_fn, p, batches, lr=0.5, first_order=True)
    )(params)
    adapted = maml.adapt(_loss_fn, params, tree.map(lambda x: x[:1], batches), lr=0.5)
    at_adapted = torch.func.grad(_loss_fn)(
        tree.map(torch.Tensor.detach, adapted), tree.map(lambda x: x[1], batches)
    )
    assert_trees_close(first, at_adapted, rtol=1e-10, atol=1e-12)
    # the second-order term is not negligible on this problem
    diff = max(
        (a - b).abs().max().item()
        for a, b in zip(tree.leaves(first), tree.leaves(second), strict=True)
    )
    assert diff > 1e-3


def test_adapt_takes_the_same_step_as_torch_optim_sgd():
    params, batches = _params(dtype=torch.float32), _batches(3, 1, dtype=torch.float32)
    adapted = maml.adapt(_loss_fn, params, batches, lr=0.3)
    leaves = [x.clone().requires_grad_(True) for x in tree.leaves(params)]
    sgd = torch.optim.SGD(leaves, lr=0.3)
    loss = _loss_fn(tree.unflatten(tree.structure(params), leaves), tree.index(batches, 0))
    loss.backward()
    sgd.step()
    expected = tree.unflatten(tree.structure(params), [x.detach() for x in leaves])
    assert_trees_close(tree.map(torch.Tensor.detach, adapted), expected, rtol=1e-6, atol=1e-7)


def test_the_inner_step_size_is_data_a_vmap_over_step_sizes_equals_a_loop():
    # lr as a [] tensor: vmapped over step sizes, each member is its own run, to float64
    # rounding. Not bit for bit: under vmap the adapted params are batched and the network's
    # matmuls become batched matmuls, which a Xeon's BLAS rounds unlike one matmul per step
    # size (1.7e-16 apart seen); members swapped or one step size for all would differ by
    # about 0.1
    params, batches = _params(), _batches(2, 2)
    lrs = torch.tensor([0.05, 0.2, 0.4], dtype=torch.float64)
    swept = torch.func.vmap(lambda lr: maml.maml_loss(_loss_fn, params, batches, lr=lr))(lrs)
    alone = [maml.maml_loss(_loss_fn, params, batches, lr=float(lr)) for lr in lrs]
    assert_trees_close(swept, torch.stack(alone), rtol=1e-12, atol=0)
    grads = torch.func.vmap(
        lambda lr: torch.func.grad(lambda p: maml.maml_loss(_loss_fn, p, batches, lr=lr))(params)
    )(lrs)
    for i, lr in enumerate(lrs.tolist()):
        want = torch.func.grad(lambda p, lr=lr: maml.maml_loss(_loss_fn, p, batches, lr=lr))(params)
        assert_trees_close(tree.index(grads, i), want, rtol=1e-12, atol=0)


def test_adapt_with_no_batches_returns_the_params():
    params = _params()
    out = maml.adapt(_loss_fn, params, _batches(0, 0), lr=0.1)
    assert_trees_close(out, params, rtol=0, atol=0)


def test_maml_loss_vmapped_over_tasks_equals_a_loop():
    params = _params()
    batches = tree.stack([_batches(s, 2) for s in range(3)])  # [tasks, steps + 1, ...]
    check_vmap(lambda b: maml.maml_loss(_loss_fn, params, b, lr=0.2), batches)


def _collect(params, task, key):
    """Fake rollouts: observations drawn from the key, actions the policy's mean shifted by
    the task, advantages from the key; enough to tell which params made a batch."""
    k_obs, k_adv = random.split(key).unbind(-2)
    obs = random.normal(k_obs, (4, 3, 2), dtype=torch.float64)
    action = NET.apply(params["net"], obs) + task
    return {"obs": obs, "action": action, "advantage": random.normal(k_adv, (4, 3), torch.float64)}


def test_collect_adaptation_collects_each_batch_with_the_params_after_that_many_steps():
    params, task, key = _params(), torch.tensor(0.7, dtype=torch.float64), random.key(4)
    batches = maml.collect_adaptation(_loss_fn, _collect, params, task, key, lr=0.3, num_steps=2)
    assert batches["obs"].shape == (3, 4, 3, 2)
    assert not any(x.requires_grad for x in tree.leaves(batches))
    p = params
    for i in range(3):
        expected = _collect(p, task, random.fold_in(key, i))
        assert_trees_close(tree.index(batches, i), expected, rtol=1e-12, atol=1e-12)
        p = maml.adapt(_loss_fn, p, tree.map(lambda x, i=i: x[i : i + 1], batches), lr=0.3)
    # the inner steps moved the policy: later batches' actions differ from the first's
    assert not torch.allclose(batches["action"][0], batches["action"][2])


def test_reinforce_advantage_is_the_normalised_return_to_go_minus_the_batch_mean():
    reward = torch.tensor([[1.0, 0.0], [2.0, 1.0], [0.0, 3.0]])
    done = torch.zeros_like(reward, dtype=torch.bool)
    adv = maml.reinforce_advantage(
        {"reward": reward, "terminated": done, "truncated": done}, gamma=0.5
    )
    ret = torch.tensor([[1 + 0.5 * 2, 0 + 0.5 * 1 + 0.25 * 3], [2.0, 1 + 0.5 * 3], [0.0, 3.0]])
    centred = ret - ret.mean(1, keepdim=True)
    torch.testing.assert_close(adv, centred / (centred.std() + 1e-8))


def test_reinforce_loss_is_minus_the_advantage_weighted_log_prob():
    params, batch = _params(), tree.index(_batches(5, 1), 0)
    expected = -(_log_prob(params, batch["obs"], batch["action"]) * batch["advantage"]).mean()
    torch.testing.assert_close(_loss_fn(params, batch), expected)


def test_reinforce_advantage_rejects_a_single_episode():
    r = torch.zeros(5, 1)
    with pytest.raises(
        ValueError, match=r"reward has shape \[5, 1\]; expected \[T, B\] with B >= 2"
    ):
        maml.reinforce_advantage(
            {"reward": r, "terminated": r.bool(), "truncated": r.bool()}, gamma=0.9
        )


def test_reinforce_loss_rejects_log_probs_of_another_shape():
    batch = tree.index(_batches(5, 1), 0)
    batch["advantage"] = batch["advantage"][:, :2]
    with pytest.raises(
        ValueError, match=r"log_prob gave shape \[4, 3\]; expected advantage's \[4, 2\]"
    ):
        _loss_fn(_params(), batch)


@pytest.mark.parametrize(
    ("lr", "num_steps", "match"),
    [
        (0.0, 1, r"lr must be a positive number .* got 0\.0"),
        (-1.0, 1, r"lr must be a positive number"),
        (True, 1, r"lr must be a positive number .* got True"),
        (0.1, -1, r"num_steps must be an int >= 0, got -1"),
        (0.1, 1.5, r"num_steps must be an int >= 0, got 1\.5"),
    ],
)
def test_collect_adaptation_rejects_bad_step_sizes_and_counts(lr, num_steps, match):
    with pytest.raises(ValueError, match=match):
        maml.collect_adaptation(
            _loss_fn,
            _collect,
            _params(),
            torch.tensor(0.0),
            random.key(0),
            lr=lr,
            num_steps=num_steps,
        )


def test_adapt_rejects_a_non_positive_step_size():
    with pytest.raises(ValueError, match=r"adapt: lr must be a positive number"):
        maml.adapt(_loss_fn, _params(), _batches(0, 1), lr=-0.1)


def test_maml_loss_rejects_batches_without_a_shared_leading_dim():
    with pytest.raises(ValueError, match=r"leading dims \[0\]; expected one shared leading dim"):
        maml.maml_loss(_loss_fn, _params(), _batches(0, 0), lr=0.1)
    ragged = _batches(0, 2)
    ragged["advantage"] = ragged["advantage"][:1]
    with pytest.raises(ValueError, match=r"leading dims \[1, 2\]"):
        maml.maml_loss(_loss_fn, _params(), ragged, lr=0.1)
