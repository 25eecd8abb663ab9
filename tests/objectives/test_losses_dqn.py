"""dqn_loss: a hand-computed table case, parity with a torch.nn reference, vmap, errors."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from fxrl import nn, random
from fxrl.objectives import dqn_loss
from fxrl.testing import assert_trees_close, check_vmap, keys


def table(params, obs):
    """A tabular Q: obs are state indices [B], q = params["q"][obs] of shape [B, A]."""
    return params["q"][obs]


ONLINE = {"q": torch.tensor([[1.0, 2.0], [3.0, 0.0]])}
TARGET = {"q": torch.tensor([[0.5, 4.0], [1.0, 2.0]])}


def table_batch(**overrides):
    batch = {
        "obs": torch.tensor([0, 1]),
        "action": torch.tensor([1, 0]),
        "reward": torch.tensor([1.0, -1.0]),
        "next_obs": torch.tensor([1, 0]),
        "terminated": torch.tensor([False, True]),
    }
    return {**batch, **overrides}


def test_dqn_loss_by_hand_on_a_two_state_table():
    # targets: 1 + 0.5 * max(T[1]) = 2 and -1 (terminated); q taken: 2 and 3; td = [0, 4]
    loss, metrics = dqn_loss(table, ONLINE, TARGET, table_batch(), gamma=0.5)
    assert_trees_close(loss, torch.tensor(1.75))  # huber: [0, 3.5]
    assert_trees_close(metrics["td_error"], torch.tensor([0.0, 4.0]))
    assert_trees_close(metrics["q"], torch.tensor(2.5))
    mse, _ = dqn_loss(table, ONLINE, TARGET, table_batch(), gamma=0.5, loss="mse")
    assert_trees_close(mse, torch.tensor(8.0))


def test_double_dqn_selects_the_next_action_with_the_online_table():
    # argmax Q[1] = 0, evaluated by T[1, 0] = 1: target 1.5, td 0.5 -> huber 0.125
    loss, metrics = dqn_loss(table, ONLINE, TARGET, table_batch(), gamma=0.5, double=True)
    assert_trees_close(metrics["td_error"], torch.tensor([0.5, 4.0]))
    assert_trees_close(loss, torch.tensor((0.125 + 3.5) / 2))


def test_truncated_transitions_bootstrap_and_terminated_ones_do_not():
    batch = table_batch(
        terminated=torch.tensor([False, False]), truncated=torch.tensor([False, True])
    )
    _, metrics = dqn_loss(table, ONLINE, TARGET, batch, gamma=0.5)
    # row 1 bootstraps: -1 + 0.5 * max(T[0]) = 1; q 3 -> td 2
    assert_trees_close(metrics["td_error"], torch.tensor([0.0, 2.0]))


def test_n_step_batches_bootstrap_with_their_discount_field():
    batch = table_batch(discount=torch.tensor([0.25, 0.25]))
    _, metrics = dqn_loss(table, ONLINE, TARGET, batch, gamma=0.5)
    assert_trees_close(metrics["target"], torch.tensor((1.5 - 1.0) / 2))


def test_importance_weights_scale_each_transition():
    batch = table_batch(weight=torch.tensor([1.0, 0.5]))
    loss, _ = dqn_loss(table, ONLINE, TARGET, batch, gamma=0.5)
    assert_trees_close(loss, torch.tensor(0.5 * 3.5 / 2))


def test_gradient_flows_only_into_the_taken_q_values():
    grads, _ = torch.func.grad(dqn_loss, argnums=1, has_aux=True)(
        table, ONLINE, TARGET, table_batch(), gamma=0.5
    )
    # d huber(td) / d q = clip(td, -1, 1) / B
    assert_trees_close(grads["q"], torch.tensor([[0.0, 0.0], [0.5, 0.0]]))


def random_batch(key, batch_size, obs_dim=4, num_actions=3):
    k = random.split(key, 6)
    return {
        "obs": random.normal(k[0], (batch_size, obs_dim)),
        "action": random.randint(k[1], (batch_size,), 0, num_actions),
        "reward": random.normal(k[2], (batch_size,)),
        "next_obs": random.normal(k[3], (batch_size, obs_dim)),
        "terminated": random.bernoulli(k[4], 0.3, (batch_size,)),
        "truncated": random.bernoulli(k[5], 0.1, (batch_size,)),
    }


def reference_dqn(q_net, target_net, batch, gamma, double, loss):
    """Straightforward DQN in torch.nn, as SB3 and CleanRL write it."""
    with torch.no_grad():
        next_q = target_net(batch["next_obs"])
        if double:
            a = q_net(batch["next_obs"]).argmax(1, keepdim=True)
            next_v = next_q.gather(1, a).squeeze(1)
        else:
            next_v = next_q.max(1).values
        target = batch["reward"] + gamma * (1 - batch["terminated"].float()) * next_v
    q = q_net(batch["obs"]).gather(1, batch["action"].unsqueeze(1)).squeeze(1)
    return F.smooth_l1_loss(q, target) if loss == "huber" else F.mse_loss(q, target)


def torch_mlp(params):
    """A torch.nn.Sequential holding copies of an fxrl relu mlp's params."""
    layers = []
    for p in params["layers"]:
        linear = torch.nn.Linear(p["w"].shape[1], p["w"].shape[0])
        with torch.no_grad():
            linear.weight.copy_(p["w"])
            linear.bias.copy_(p["b"])
        layers += [linear, torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def torch_grads(net):
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    return {"layers": [{"w": m.weight.grad, "b": m.bias.grad} for m in linears]}


@given(key=keys(), double=st.booleans(), loss=st.sampled_from(["huber", "mse"]))
def test_dqn_loss_and_grads_equal_a_torch_nn_reference(key, double, loss):
    k_net, k_target, k_batch = random.split(key, 3).unbind(0)
    model = nn.mlp(4, 3, (16,), "relu")
    params, target_params = model.init(k_net), model.init(k_target)
    batch = random_batch(k_batch, 32)
    q_net, target_net = torch_mlp(params), torch_mlp(target_params)

    expected = reference_dqn(q_net, target_net, batch, 0.9, double, loss)
    expected.backward()
    grads, metrics = torch.func.grad(dqn_loss, argnums=1, has_aux=True)(
        model.apply, params, target_params, batch, gamma=0.9, double=double, loss=loss
    )
    assert_trees_close(metrics["loss"], expected.detach())
    assert_trees_close(grads, torch_grads(q_net), rtol=1e-5, atol=1e-6)


def test_vmapped_grad_over_an_ensemble_equals_the_python_loop():
    model = nn.mlp(4, 3, (8,))
    keys_ = random.split(random.key(0), 3)
    params = torch.func.vmap(model.init)(keys_)
    target = torch.func.vmap(model.init)(random.split(random.key(1), 3))
    batch = torch.func.vmap(lambda k: random_batch(k, 5))(random.split(random.key(2), 3))

    def grad_fn(params, target, batch):
        return torch.func.grad(dqn_loss, argnums=1, has_aux=True)(
            model.apply, params, target, batch, gamma=0.9, double=True
        )

    check_vmap(grad_fn, params, target, batch, rtol=1e-5, atol=1e-6)


def test_dqn_loss_works_over_time_and_batch_dims_and_leaves_inputs_alone():
    model = nn.mlp(4, 3, (8,))
    params = model.init(random.key(0))
    batch = torch.func.vmap(lambda k: random_batch(k, 5))(random.split(random.key(2), 3))
    before = {k: v.clone() for k, v in batch.items()}
    loss, metrics = dqn_loss(model.apply, params, params, batch)
    flat = {k: v.reshape(15, *v.shape[2:]) for k, v in batch.items()}
    assert_trees_close(loss, dqn_loss(model.apply, params, params, flat)[0])
    assert metrics["td_error"].shape == (3, 5)
    assert_trees_close(batch, before)


def test_dqn_loss_compiles_without_graph_breaks():
    model = nn.mlp(4, 3, (8,))
    params = model.init(random.key(0))
    batch = random_batch(random.key(1), 8)
    grad_fn = torch.func.grad(dqn_loss, argnums=1, has_aux=True)

    def step(params, batch):
        return grad_fn(model.apply, params, params, batch, gamma=0.9, double=True)

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    assert_trees_close(compiled(params, batch), step(params, batch), rtol=1e-5, atol=1e-6)


# ---- bad input -------------------------------------------------------------------------


def test_dqn_loss_rejects_one_hot_actions():
    model = nn.mlp(4, 4, (8,))
    batch = random_batch(random.key(0), 32, num_actions=4)
    batch["action"] = F.one_hot(batch["action"], 4).float()
    with pytest.raises(
        ValueError,
        match=r'batch\["action"\] has shape \[32, 4\] float32; '
        r"expected \[32\] int64 indices, one per row of q \[32, 4\]\. One-hot",
    ):
        dqn_loss(model.apply, model.init(random.key(1)), model.init(random.key(1)), batch)


def test_dqn_loss_rejects_actions_with_a_trailing_dim():
    model = nn.mlp(4, 3, (8,))
    batch = random_batch(random.key(0), 8)
    batch["action"] = batch["action"].unsqueeze(-1)
    with pytest.raises(ValueError, match=r"\[8, 1\] int64; expected \[8\].*squeeze\(-1\)"):
        dqn_loss(model.apply, model.init(random.key(1)), model.init(random.key(1)), batch)


def test_dqn_loss_names_a_missing_field_and_what_to_add():
    batch = table_batch()
    del batch["terminated"]
    with pytest.raises(KeyError, match=r"dqn_loss: batch is missing field 'terminated'.*bool"):
        dqn_loss(table, ONLINE, TARGET, batch)


def test_dqn_loss_names_both_shapes_when_a_field_has_a_trailing_dim():
    batch = table_batch(terminated=torch.tensor([[False], [True]]))
    with pytest.raises(
        ValueError,
        match=r'batch\["terminated"\] has shape \[2, 1\]; expected '
        r'\[2\], matching batch\["reward"\] \[2\]\. Squeeze',
    ):
        dqn_loss(table, ONLINE, TARGET, batch)


def test_dqn_loss_names_swapped_time_and_batch_dims():
    model = nn.mlp(4, 3, (8,))
    batch = torch.func.vmap(lambda k: random_batch(k, 5))(random.split(random.key(2), 3))
    batch["next_obs"] = batch["next_obs"].transpose(0, 1)
    with pytest.raises(
        ValueError,
        match=r'batch\["next_obs"\] has shape \[5, 3, 4\]; expected '
        r'\[3, 5, \.\.\.\], matching batch\["reward"\] \[3, 5\]\. Time and batch',
    ):
        dqn_loss(model.apply, model.init(random.key(1)), model.init(random.key(1)), batch)


def test_dqn_loss_rejects_a_q_function_with_one_output_per_observation():
    model = nn.mlp(4, 1, (8,))
    batch = random_batch(random.key(0), 8)
    params = model.init(random.key(1))
    squeezed = lambda p, o: model.apply(p, o).squeeze(-1)
    with pytest.raises(
        ValueError, match=r"returned \[8\]; expected \[8, A\], one value per action"
    ):
        dqn_loss(squeezed, params, params, batch)


def test_dqn_loss_rejects_an_unknown_loss_name():
    with pytest.raises(ValueError, match=r"loss='l1'; expected one of \['huber', 'mse'\]"):
        dqn_loss(table, ONLINE, TARGET, table_batch(), loss="l1")
