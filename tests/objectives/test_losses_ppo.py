"""ppo_loss and a2c_loss: hand-computed cases, a torch.nn + torch.distributions reference
(CleanRL's PPO), shared vs separate nets, vmap over seeds, errors."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import distributions, nn, random
from fxrl.objectives import a2c_loss, ppo_loss
from fxrl.testing import assert_trees_close, check_vmap, keys


def constant_policy(params, obs):
    return distributions.categorical(params["logits"].expand(obs.shape[0], -1))


def constant_value(params, obs):
    return params["v"].expand(obs.shape[0])


def hand_batch(ratio):
    # both actions have probability 1/2 under zero logits; log_prob = log(0.5 / r)
    return {
        "obs": torch.zeros(2, 1),
        "action": torch.tensor([0, 1]),
        "log_prob": torch.log(0.5 / torch.tensor(ratio)),
        "advantage": torch.tensor([1.0, 1.0]),
        "value_target": torch.tensor([0.0, 3.0]),
        "value": torch.tensor([0.5, 1.5]),
    }


HAND_PARAMS = {"logits": torch.zeros(2), "v": torch.tensor(1.0)}


def test_ppo_loss_by_hand():
    loss, m = ppo_loss(
        constant_policy,
        constant_value,
        HAND_PARAMS,
        hand_batch([0.5, 1.5]),
        normalize_advantage=False,
    )
    # surrogate min(rA, clip(r)A) = [0.5, 1.2]; value loss mean([1, 4]) / 2; entropy log 2
    assert_trees_close(m["policy_loss"], torch.tensor(-0.85))
    assert_trees_close(m["value_loss"], torch.tensor(1.25))
    assert_trees_close(m["entropy"], torch.tensor(math.log(2)))
    assert_trees_close(loss, torch.tensor(-0.85 + 0.5 * 1.25 - 0.01 * math.log(2)))
    assert_trees_close(m["clip_fraction"], torch.tensor(1.0))


def test_ppo_value_clipping_by_hand():
    _, m = ppo_loss(
        constant_policy,
        constant_value,
        HAND_PARAMS,
        hand_batch([1.0, 1.0]),
        clip_value=0.2,
        normalize_advantage=False,
    )
    # v = 1, v_clip = [0.7, 1.3]: max(1, 0.49) = 1 and max(4, 2.89) = 4 -> mean / 2 = 1.25
    assert_trees_close(m["value_loss"], torch.tensor(1.25))
    batch = hand_batch([1.0, 1.0]) | {"value_target": torch.tensor([1.0, 1.0])}
    _, m = ppo_loss(
        constant_policy,
        constant_value,
        HAND_PARAMS,
        batch,
        clip_value=0.2,
        normalize_advantage=False,
    )
    # v = 1 is exact, but v_clip = [0.7, 1.3] misses by 0.3: loss mean(0.09) / 2
    assert_trees_close(m["value_loss"], torch.tensor(0.045))


def test_ppo_gradient_is_zero_where_the_ratio_is_clipped_in_the_advantage_direction():
    params = {"logits": torch.zeros(2), "v": torch.tensor(0.0)}
    batch = hand_batch([1.5, 1.5]) | {"value_target": torch.tensor([0.0, 0.0])}
    grads, _ = torch.func.grad(ppo_loss, argnums=2, has_aux=True)(
        constant_policy, constant_value, params, batch, ent_coef=0.0, normalize_advantage=False
    )
    assert_trees_close(grads["logits"], torch.zeros(2))


def mlp_torch(params, activation=torch.nn.Tanh):
    layers = []
    for p in params["layers"]:
        linear = torch.nn.Linear(p["w"].shape[1], p["w"].shape[0])
        with torch.no_grad():
            linear.weight.copy_(p["w"])
            linear.bias.copy_(p["b"])
        layers += [linear, activation()]
    return torch.nn.Sequential(*layers[:-1])


def grads_of(net):
    return {"layers": [{"w": m.weight.grad, "b": m.bias.grad} for m in net[::2]]}


def reference_ppo(actor, critic, log_std, batch, clip_eps, clip_value, norm_adv, discrete):
    """CleanRL's PPO loss, written with torch.nn and torch.distributions."""
    out = actor(batch["obs"])
    if discrete:
        dist = torch.distributions.Categorical(logits=out)
        logp, ent = dist.log_prob(batch["action"]), dist.entropy()
    else:
        dist = torch.distributions.Normal(out, log_std.exp())
        logp, ent = dist.log_prob(batch["action"]).sum(-1), dist.entropy().sum(-1)
    ratio = (logp - batch["log_prob"]).exp()
    adv = batch["advantage"]
    if norm_adv:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)).mean()
    v = critic(batch["obs"]).view(-1)
    if clip_value is None:
        v_loss = 0.5 * ((v - batch["value_target"]) ** 2).mean()
    else:
        unclipped = (v - batch["value_target"]) ** 2
        v_clip = batch["value"] + torch.clamp(v - batch["value"], -clip_value, clip_value)
        v_loss = 0.5 * torch.max(unclipped, (v_clip - batch["value_target"]) ** 2).mean()
    return pg - 0.01 * ent.mean() + 0.5 * v_loss


def random_batch(key, n, obs_dim, discrete, num_actions=3):
    k = random.split(key, 6)
    action = (
        random.randint(k[1], (n,), 0, num_actions)
        if discrete
        else random.normal(k[1], (n, num_actions))
    )
    return {
        "obs": random.normal(k[0], (n, obs_dim)),
        "action": action,
        "log_prob": random.normal(k[2], (n,)) * 0.3 - 1.5,
        "advantage": random.normal(k[3], (n,)),
        "value_target": random.normal(k[4], (n,)),
        "value": random.normal(k[5], (n,)),
    }


@given(
    key=keys(),
    discrete=st.booleans(),
    clip_value=st.sampled_from([None, 0.2]),
    norm_adv=st.booleans(),
)
def test_ppo_loss_and_grads_equal_cleanrl_in_torch_nn(key, discrete, clip_value, norm_adv):
    k_actor, k_critic, k_batch = random.split(key, 3).unbind(0)
    actor, critic = nn.mlp(4, 3, (16, 16)), nn.mlp(4, 1, (16, 16))
    params = {"actor": actor.init(k_actor), "critic": critic.init(k_critic)}
    params["log_std"] = torch.full((3,), -0.5)
    batch = random_batch(k_batch, 64, 4, discrete)

    def policy(p, obs):
        out = actor.apply(p["actor"], obs)
        return (
            distributions.categorical(out)
            if discrete
            else distributions.normal(out, p["log_std"].exp())
        )

    def value(p, obs):
        return critic.apply(p["critic"], obs)

    t_actor, t_critic = mlp_torch(params["actor"]), mlp_torch(params["critic"])
    t_log_std = params["log_std"].clone().requires_grad_()
    expected = reference_ppo(
        t_actor, t_critic, t_log_std, batch, 0.2, clip_value, norm_adv, discrete
    )
    expected.backward()
    grads, metrics = torch.func.grad(ppo_loss, argnums=2, has_aux=True)(
        policy, value, params, batch, clip_value=clip_value, normalize_advantage=norm_adv
    )
    assert_trees_close(metrics["loss"], expected.detach(), rtol=1e-5, atol=1e-6)
    expected_grads = {
        "actor": grads_of(t_actor),
        "critic": grads_of(t_critic),
        "log_std": t_log_std.grad,
    }
    if discrete:
        expected_grads["log_std"] = torch.zeros(3)
    assert_trees_close(grads, expected_grads, rtol=1e-4, atol=1e-6)


def test_a_shared_net_returning_dist_and_value_equals_separate_apply_functions():
    net = nn.mlp(4, 4, (16,))
    params = net.init(random.key(0))
    batch = random_batch(random.key(1), 32, 4, True)

    def shared(p, obs):
        out = net.apply(p, obs)
        return distributions.categorical(out[..., :3]), out[..., 3]

    def policy(p, obs):
        return shared(p, obs)[0]

    def value(p, obs):
        return shared(p, obs)[1]

    for loss in (ppo_loss, a2c_loss):
        a = torch.func.grad(loss, argnums=2, has_aux=True)(shared, None, params, batch)
        b = torch.func.grad(loss, argnums=2, has_aux=True)(policy, value, params, batch)
        assert_trees_close(a, b)


def test_a2c_loss_by_hand():
    batch = hand_batch([1.0, 1.0]) | {"advantage": torch.tensor([2.0, -1.0])}
    loss, m = a2c_loss(constant_policy, constant_value, HAND_PARAMS, batch)
    # -mean(log(1/2) * [2, -1]) = log(2) / 2; value loss 1.25; entropy log 2
    assert_trees_close(m["policy_loss"], torch.tensor(math.log(2) / 2))
    assert_trees_close(loss, torch.tensor(math.log(2) / 2 + 0.625 - 0.01 * math.log(2)))


def test_a2c_gradient_equals_the_policy_gradient_theorem_estimate():
    params = {"logits": torch.tensor([0.3, -0.2]), "v": torch.tensor(0.0)}
    batch = hand_batch([1.0, 1.0]) | {"advantage": torch.tensor([2.0, -1.0])}
    grads, _ = torch.func.grad(a2c_loss, argnums=2, has_aux=True)(
        constant_policy, constant_value, params, batch, ent_coef=0.0
    )
    p = params["logits"].softmax(0)
    # d log pi(a) / d logits = onehot(a) - p
    expected = -((torch.eye(2) - p) * torch.tensor([[2.0], [-1.0]])).mean(0)
    assert_trees_close(grads["logits"], expected)


def test_vmapped_ppo_grad_over_seeds_equals_the_python_loop():
    net = nn.mlp(4, 4, (8,))
    params = torch.func.vmap(net.init)(random.split(random.key(0), 3))
    batch = torch.func.vmap(lambda k: random_batch(k, 16, 4, True))(random.split(random.key(1), 3))

    def shared(p, obs):
        out = net.apply(p, obs)
        return distributions.categorical(out[..., :3]), out[..., 3]

    def grad_fn(params, batch):
        return torch.func.grad(ppo_loss, argnums=2, has_aux=True)(shared, None, params, batch)

    check_vmap(grad_fn, params, batch, rtol=1e-5, atol=1e-6)


def test_ppo_with_a_tanh_normal_policy_uses_the_key_for_its_entropy():
    params = {"loc": torch.zeros(2)}
    batch = random_batch(random.key(0), 8, 1, False, 2) | {"action": torch.full((8, 2), 0.3)}

    def policy(p, obs):
        return distributions.tanh_normal(p["loc"].expand(obs.shape[0], 2), 0.5)

    value = lambda p, obs: torch.zeros(obs.shape[0])
    _, m_key = ppo_loss(policy, value, params, batch, key=random.key(1))
    _, m_nokey = ppo_loss(policy, value, params, batch)
    dist = policy(params, batch["obs"])
    assert_trees_close(m_key["entropy"], dist.entropy(random.key(1)).mean())
    assert_trees_close(m_nokey["entropy"], -dist.log_prob(batch["action"]).mean())


# ---- bad input -------------------------------------------------------------------------


def test_ppo_loss_names_a_missing_advantage():
    batch = hand_batch([1.0, 1.0])
    del batch["advantage"]
    with pytest.raises(KeyError, match=r"ppo_loss: batch is missing field 'advantage'.*gae"):
        ppo_loss(constant_policy, constant_value, HAND_PARAMS, batch)


def test_ppo_loss_asks_for_the_collected_values_when_clipping_them():
    batch = hand_batch([1.0, 1.0])
    del batch["value"]
    with pytest.raises(KeyError, match=r"missing field 'value'"):
        ppo_loss(constant_policy, constant_value, HAND_PARAMS, batch, clip_value=0.2)


def test_ppo_loss_rejects_float_actions_for_a_categorical_policy():
    batch = hand_batch([1.0, 1.0]) | {"action": torch.tensor([0.0, 1.0])}
    with pytest.raises(
        ValueError,
        match=r'batch\["action"\] has shape \[2\] float32; expected '
        r"\[2\] int64 indices, one per row of logits \[2, 2\]",
    ):
        ppo_loss(constant_policy, constant_value, HAND_PARAMS, batch)


def test_ppo_loss_rejects_continuous_actions_without_their_action_dim():
    batch = random_batch(random.key(0), 8, 4, False) | {"action": torch.zeros(8)}
    policy = lambda p, obs: distributions.normal(torch.zeros(obs.shape[0], 1), 1.0)
    with pytest.raises(ValueError, match=r"expected \[8, A\] float actions.*unsqueeze\(-1\)"):
        ppo_loss(policy, constant_value, HAND_PARAMS, batch)


def test_ppo_loss_names_mismatched_advantage_shape():
    batch = hand_batch([1.0, 1.0]) | {"advantage": torch.ones(2, 2)}
    with pytest.raises(
        ValueError,
        match=r'batch\["advantage"\] has shape \[2, 2\]; expected '
        r'\[2\], matching batch\["log_prob"\] \[2\]',
    ):
        ppo_loss(constant_policy, constant_value, HAND_PARAMS, batch)


def test_ppo_loss_names_a_value_function_with_the_wrong_output_shape():
    value = lambda p, obs: torch.zeros(obs.shape[0], 3)
    with pytest.raises(
        ValueError,
        match=r"the value function returned shape \[2, 3\]; expected "
        r"\[2\]",
    ):
        ppo_loss(constant_policy, value, HAND_PARAMS, hand_batch([1.0, 1.0]))


def test_ppo_loss_explains_value_apply_none():
    with pytest.raises(TypeError, match=r"value_apply=None.*\(dist, value\)"):
        ppo_loss(constant_policy, None, HAND_PARAMS, hand_batch([1.0, 1.0]))
