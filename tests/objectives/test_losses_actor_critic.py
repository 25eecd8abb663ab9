"""ddpg_loss and td3_loss: a hand-computed case, a torch.nn reference, the delayed actor,
vmap over seeds, errors."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings

from fxrl import nn, random, tree
from fxrl.objectives import ddpg_loss, td3_loss
from fxrl.testing import assert_trees_close, check_vmap, keys


def linear_actor(p, obs):
    return p["k"] * obs


def linear_critic(p, obs, action):
    return (p["w"] * obs + p["v"] * action).squeeze(-1)


HAND_BATCH = {
    "obs": torch.tensor([[1.0]]),
    "action": torch.tensor([[0.5]]),
    "reward": torch.tensor([1.0]),
    "next_obs": torch.tensor([[2.0]]),
    "terminated": torch.tensor([False]),
}


def test_ddpg_loss_and_grads_by_hand():
    params = {
        "actor": {"k": torch.tensor(3.0)},
        "critic": {"w": torch.tensor(1.0), "v": torch.tensor(2.0)},
    }
    target = {
        "actor": {"k": torch.tensor(1.0)},
        "critic": {"w": torch.tensor(0.5), "v": torch.tensor(1.0)},
    }
    # y = 1 + 0.5 * (0.5 * 2 + 1 * (1 * 2)) = 2.5; Q = 1 + 2 * 0.5 = 2; td = -0.5
    # actor: Q(s, 3 * 1) = 1 + 2 * 3 = 7 -> actor loss -7
    (grads, metrics) = torch.func.grad(ddpg_loss, argnums=2, has_aux=True)(
        linear_actor, linear_critic, params, target, HAND_BATCH, gamma=0.5
    )
    assert_trees_close(metrics["critic_loss"], torch.tensor(0.25))
    assert_trees_close(metrics["actor_loss"], torch.tensor(-7.0))
    assert_trees_close(metrics["loss"], torch.tensor(-6.75))
    # critic grads from the critic loss only (2 td obs, 2 td action); actor: -v * obs
    expected = {
        "actor": {"k": torch.tensor(-2.0)},
        "critic": {"w": torch.tensor(-1.0), "v": torch.tensor(-0.5)},
    }
    assert_trees_close(grads, expected)


def twin(params):
    return tree.map(lambda *x: torch.stack(x), *params)


def make_nets(key, obs_dim=3, act_dim=2):
    keys_ = random.split(key, 6).unbind(0)
    actor, critic = (
        nn.mlp(obs_dim, act_dim, (16,), "relu", output_activation="tanh"),
        nn.mlp(obs_dim + act_dim, 1, (16,), "relu"),
    )
    params = {
        "actor": actor.init(keys_[0]),
        "critic": twin([critic.init(keys_[1]), critic.init(keys_[2])]),
    }
    target = {
        "actor": actor.init(keys_[3]),
        "critic": twin([critic.init(keys_[4]), critic.init(keys_[5])]),
    }

    def critic_apply(p, obs, action):
        return critic.apply(p, torch.cat([obs, action], -1))

    return actor.apply, critic_apply, params, target


def random_batch(key, n, obs_dim=3, act_dim=2):
    k = random.split(key, 5)
    return {
        "obs": random.normal(k[0], (n, obs_dim)),
        "action": random.uniform(k[1], (n, act_dim), -1.0, 1.0),
        "reward": random.normal(k[2], (n,)),
        "next_obs": random.normal(k[3], (n, obs_dim)),
        "terminated": random.bernoulli(k[4], 0.2, (n,)),
    }


def torch_mlp(params, out_act=None):
    layers = []
    for p in params["layers"]:
        linear = torch.nn.Linear(p["w"].shape[1], p["w"].shape[0])
        with torch.no_grad():
            linear.weight.copy_(p["w"])
            linear.bias.copy_(p["b"])
        layers += [linear, torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1], *([out_act] if out_act else []))


def grads_of(net, loss):
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    flat = torch.autograd.grad(
        loss, [t for m in linears for t in (m.weight, m.bias)], retain_graph=True
    )
    return {"layers": [{"w": flat[2 * i], "b": flat[2 * i + 1]} for i in range(len(linears))]}


def reference_td3(params, target, batch, key, gamma=0.99, std=0.2, clip=0.5):
    """TD3 as the authors' code writes it, with torch.nn modules."""
    actor, t_actor = (
        torch_mlp(params["actor"], torch.nn.Tanh()),
        torch_mlp(target["actor"], torch.nn.Tanh()),
    )
    critics = [torch_mlp(tree.index(params["critic"], i)) for i in range(2)]
    t_critics = [torch_mlp(tree.index(target["critic"], i)) for i in range(2)]
    with torch.no_grad():
        noise = (random.normal(key, (batch["obs"].shape[0], 2)) * std).clamp(-clip, clip)
        next_a = (t_actor(batch["next_obs"]) + noise).clamp(-1, 1)
        sa = torch.cat([batch["next_obs"], next_a], 1)
        next_q = torch.min(t_critics[0](sa), t_critics[1](sa)).squeeze(1)
        y = batch["reward"] + gamma * (1 - batch["terminated"].float()) * next_q
    sa = torch.cat([batch["obs"], batch["action"]], 1)
    critic_loss = sum(F.mse_loss(c(sa).squeeze(1), y) for c in critics)
    actor_loss = -critics[0](torch.cat([batch["obs"], actor(batch["obs"])], 1)).mean()
    grads = {
        "actor": grads_of(actor, actor_loss),
        "critic": twin([grads_of(c, critic_loss) for c in critics]),
    }
    return critic_loss + actor_loss, grads


@settings(max_examples=15)
@given(key=keys())
def test_td3_loss_and_grads_equal_the_authors_update_in_torch_nn(key):
    k_nets, k_batch, k_noise = random.split(key, 3).unbind(0)
    actor_apply, critic_apply, params, target = make_nets(k_nets)
    batch = random_batch(k_batch, 32)
    expected_loss, expected_grads = reference_td3(params, target, batch, k_noise)
    grads, metrics = torch.func.grad(td3_loss, argnums=2, has_aux=True)(
        actor_apply, critic_apply, params, target, batch, k_noise
    )
    assert_trees_close(metrics["loss"], expected_loss.detach(), rtol=1e-5, atol=1e-6)
    assert_trees_close(grads, expected_grads, rtol=1e-4, atol=1e-6)


def test_td3_delayed_actor_as_a_bool_or_a_tensor_gives_the_same_grads():
    actor_apply, critic_apply, params, target = make_nets(random.key(0))
    batch, key = random_batch(random.key(1), 16), random.key(2)
    grad = torch.func.grad(td3_loss, argnums=2, has_aux=True)
    args = (actor_apply, critic_apply, params, target, batch, key)
    off, _ = grad(*args, update_actor=False)
    off_t, _ = grad(*args, update_actor=torch.tensor(False))
    on, _ = grad(*args, update_actor=True)
    on_t, _ = grad(*args, update_actor=torch.tensor(True))
    assert_trees_close(off, off_t)
    assert_trees_close(on, on_t)
    assert all((g == 0).all() for g in tree.leaves(off["actor"]))
    assert_trees_close(off["critic"], on["critic"])


def test_vmapped_td3_grad_over_seeds_equals_the_python_loop():
    seeds = random.split(random.key(0), 3)
    nets = [make_nets(k) for k in seeds.unbind(0)]
    actor_apply, critic_apply = nets[0][0], nets[0][1]
    params, target = tree.stack([n[2] for n in nets]), tree.stack([n[3] for n in nets])
    batch = torch.func.vmap(lambda k: random_batch(k, 8))(random.split(random.key(1), 3))
    step = random.split(random.key(2), 3)
    update_actor = torch.tensor([True, False, True])

    def grad_fn(params, target, batch, key, update_actor):
        return torch.func.grad(td3_loss, argnums=2, has_aux=True)(
            actor_apply, critic_apply, params, target, batch, key, update_actor=update_actor
        )

    check_vmap(grad_fn, params, target, batch, step, update_actor, rtol=1e-5, atol=1e-6)


def test_ddpg_vmapped_over_seeds_equals_the_python_loop():
    actor_apply, critic_apply, params, target = make_nets(random.key(0))
    single = lambda p: {"actor": p["actor"], "critic": tree.index(p["critic"], 0)}
    stacked = tree.stack([single(params), single(target), single(params)])
    batch = torch.func.vmap(lambda k: random_batch(k, 8))(random.split(random.key(1), 3))

    def grad_fn(params, batch):
        return torch.func.grad(ddpg_loss, argnums=2, has_aux=True)(
            actor_apply, critic_apply, params, single(target), batch
        )

    check_vmap(grad_fn, stacked, batch, in_dims=(0, 0), rtol=1e-5, atol=1e-6)


# ---- bad input -------------------------------------------------------------------------


def test_td3_loss_explains_critics_that_are_not_an_ensemble():
    actor_apply, critic_apply, params, target = make_nets(random.key(0))
    params = params | {"critic": tree.index(params["critic"], 0)}
    with pytest.raises(
        ValueError, match=r'params\["critic"\] must be an ensemble.*vmap\(critic\.init\)'
    ):
        td3_loss(
            actor_apply, critic_apply, params, target, random_batch(random.key(1), 4), random.key(2)
        )


def test_td3_loss_rejects_discrete_actions():
    actor_apply, critic_apply, params, target = make_nets(random.key(0))
    batch = random_batch(random.key(1), 4) | {"action": torch.zeros(4, dtype=torch.int64)}
    with pytest.raises(
        ValueError, match=r'batch\["action"\] has shape \[4\] int64; expected \[4, A\] float'
    ):
        td3_loss(actor_apply, critic_apply, params, target, batch, random.key(2))


def test_ddpg_loss_names_missing_target_actor():
    with pytest.raises(KeyError, match=r"target_params must be a dict with an entry 'actor'"):
        ddpg_loss(
            linear_actor, linear_critic, {"actor": {}, "critic": {}}, {"critic": {}}, HAND_BATCH
        )


def test_ddpg_loss_names_mismatched_reward_and_terminated():
    batch = HAND_BATCH | {"terminated": torch.tensor([False, True])}
    with pytest.raises(ValueError, match=r'batch\["terminated"\] has shape \[2\]; expected \[1\]'):
        ddpg_loss(linear_actor, linear_critic, {"actor": {}, "critic": {}}, {}, batch)


def test_ensemble_q_equals_vmap_over_the_members():
    from fxrl.objectives.actor_critic import ensemble_q

    _, critic_apply, params, _ = make_nets(random.key(0))
    batch = random_batch(random.key(1), 8)
    inputs = (batch["obs"], batch["action"])
    expected = torch.func.vmap(critic_apply, in_dims=(0, None, None))(params["critic"], *inputs)
    assert_trees_close(
        ensemble_q("f", critic_apply, params["critic"], inputs, (8,)), expected[..., 0]
    )
