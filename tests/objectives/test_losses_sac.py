"""sac_loss and discrete_sac_loss against torch.nn + torch.distributions references (each
part's gradient from its own loss only), fixed alpha, vmap over seeds, errors."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from fxrl import distributions, nn, random, tree
from fxrl.objectives import discrete_sac_loss, sac_loss
from fxrl.testing import assert_trees_close, check_vmap, keys

OBS, ACT = 3, 2


def twin(params):
    return tree.map(lambda *x: torch.stack(x), *params)


def make_nets(key, discrete=False, num_actions=4):
    k = random.split(key, 5).unbind(0)
    out = num_actions if discrete else 2 * ACT
    actor = nn.mlp(OBS, out, (16,), "relu")
    critic = nn.mlp(OBS if discrete else OBS + ACT, num_actions if discrete else 1, (16,), "relu")
    params = {
        "actor": actor.init(k[0]),
        "critic": twin([critic.init(k[1]), critic.init(k[2])]),
        "log_alpha": torch.tensor(-0.7),
    }
    target = {"critic": twin([critic.init(k[3]), critic.init(k[4])])}

    def actor_apply(p, obs):
        out = actor.apply(p, obs)
        if discrete:
            return distributions.categorical(out)
        loc, log_std = out.chunk(2, -1)
        return distributions.tanh_normal(loc, log_std.clamp(-5, 2).exp())

    def critic_apply(p, obs, action=None):
        return critic.apply(p, obs if discrete else torch.cat([obs, action], -1))

    return actor_apply, critic_apply, params, target


def random_batch(key, n, discrete=False, num_actions=4):
    k = random.split(key, 6)
    action = (
        random.randint(k[1], (n,), 0, num_actions)
        if discrete
        else random.uniform(k[1], (n, ACT), -0.99, 0.99)
    )
    return {
        "obs": random.normal(k[0], (n, OBS)),
        "action": action,
        "reward": random.normal(k[2], (n,)),
        "next_obs": random.normal(k[3], (n, OBS)),
        "terminated": random.bernoulli(k[4], 0.2, (n,)),
        "truncated": random.bernoulli(k[5], 0.1, (n,)),
    }


def torch_mlp(params):
    layers = []
    for p in params["layers"]:
        linear = torch.nn.Linear(p["w"].shape[1], p["w"].shape[0])
        with torch.no_grad():
            linear.weight.copy_(p["w"])
            linear.bias.copy_(p["b"])
        layers += [linear, torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def grads_of(net, loss):
    ps = [t for m in net if isinstance(m, torch.nn.Linear) for t in (m.weight, m.bias)]
    flat = torch.autograd.grad(loss, ps, retain_graph=True)
    return {"layers": [{"w": flat[i], "b": flat[i + 1]} for i in range(0, len(flat), 2)]}


def torch_nets(params, target):
    actor = torch_mlp(params["actor"])
    critics = [torch_mlp(tree.index(params["critic"], i)) for i in range(2)]
    t_critics = [torch_mlp(tree.index(target["critic"], i)) for i in range(2)]
    log_alpha = params["log_alpha"].clone().requires_grad_()
    return actor, critics, t_critics, log_alpha


def tanh_normal_draw(actor, obs, eps):
    """A squashed Gaussian draw with torch.distributions (noise given, so no global RNG)."""
    loc, log_std = actor(obs).chunk(2, -1)
    base = torch.distributions.Normal(loc, log_std.clamp(-5, 2).exp())
    dist = torch.distributions.TransformedDistribution(
        base, [torch.distributions.TanhTransform(cache_size=1)]
    )
    action = dist.transforms[0](base.loc + base.scale * eps)
    return action, dist.log_prob(action).sum(-1)


def reference_sac(params, target, batch, key, gamma=0.99):
    """SAC v2 (SB3's losses) in torch.nn + torch.distributions; grads per part."""
    actor, critics, t_critics, log_alpha = torch_nets(params, target)
    k_next, k_now = random.split(key).unbind(0)
    alpha = log_alpha.detach().exp()
    shape = batch["action"].shape
    with torch.no_grad():
        next_a, next_logp = tanh_normal_draw(actor, batch["next_obs"], random.normal(k_next, shape))
        sa = torch.cat([batch["next_obs"], next_a], 1)
        next_q = torch.min(t_critics[0](sa), t_critics[1](sa)).squeeze(1) - alpha * next_logp
        y = batch["reward"] + gamma * (1 - batch["terminated"].float()) * next_q
    sa = torch.cat([batch["obs"], batch["action"]], 1)
    critic_loss = 0.5 * sum(F.mse_loss(c(sa).squeeze(1), y) for c in critics)
    a, logp = tanh_normal_draw(actor, batch["obs"], random.normal(k_now, shape))
    sa = torch.cat([batch["obs"], a], 1)
    actor_loss = (alpha * logp - torch.min(critics[0](sa), critics[1](sa)).squeeze(1)).mean()
    alpha_loss = -(log_alpha * (logp.detach() - ACT)).mean()
    grads = {
        "actor": grads_of(actor, actor_loss),
        "critic": twin([grads_of(c, critic_loss) for c in critics]),
        "log_alpha": torch.autograd.grad(alpha_loss, log_alpha)[0],
    }
    return critic_loss + actor_loss + alpha_loss, grads


@settings(max_examples=15)
@given(key=keys())
def test_sac_loss_and_grads_equal_a_torch_distributions_reference(key):
    k_nets, k_batch, k_loss = random.split(key, 3).unbind(0)
    actor_apply, critic_apply, params, target = make_nets(k_nets)
    batch = random_batch(k_batch, 32)
    expected_loss, expected_grads = reference_sac(params, target, batch, k_loss)
    grads, metrics = torch.func.grad(sac_loss, argnums=2, has_aux=True)(
        actor_apply, critic_apply, params, target, batch, k_loss
    )
    assert_trees_close(metrics["loss"], expected_loss.detach(), rtol=1e-5, atol=1e-5)
    assert_trees_close(grads, expected_grads, rtol=1e-4, atol=1e-5)


def reference_discrete_sac(params, target, batch, gamma=0.99, num_actions=4):
    actor, critics, t_critics, log_alpha = torch_nets(params, target)
    alpha = log_alpha.detach().exp()
    with torch.no_grad():
        next_pi = torch.distributions.Categorical(logits=actor(batch["next_obs"]))
        next_q = torch.min(t_critics[0](batch["next_obs"]), t_critics[1](batch["next_obs"]))
        next_v = (next_pi.probs * (next_q - alpha * next_pi.logits)).sum(-1)
        y = batch["reward"] + gamma * (1 - batch["terminated"].float()) * next_v
    qs = [c(batch["obs"]) for c in critics]
    taken = [q.gather(1, batch["action"].unsqueeze(1)).squeeze(1) for q in qs]
    critic_loss = 0.5 * sum(F.mse_loss(q, y) for q in taken)
    pi = torch.distributions.Categorical(logits=actor(batch["obs"]))
    min_q = torch.min(qs[0], qs[1]).detach()
    actor_loss = (pi.probs * (alpha * pi.logits - min_q)).sum(-1).mean()
    target_entropy = 0.98 * math.log(num_actions)
    alpha_loss = (log_alpha * (pi.entropy().detach() - target_entropy)).mean()
    grads = {
        "actor": grads_of(actor, actor_loss),
        "critic": twin([grads_of(c, critic_loss) for c in critics]),
        "log_alpha": torch.autograd.grad(alpha_loss, log_alpha)[0],
    }
    return critic_loss + actor_loss + alpha_loss, grads


@settings(max_examples=15)
@given(key=keys())
def test_discrete_sac_loss_and_grads_equal_a_torch_distributions_reference(key):
    k_nets, k_batch = random.split(key).unbind(0)
    actor_apply, critic_apply, params, target = make_nets(k_nets, discrete=True)
    batch = random_batch(k_batch, 32, discrete=True)
    expected_loss, expected_grads = reference_discrete_sac(params, target, batch)
    grads, metrics = torch.func.grad(discrete_sac_loss, argnums=2, has_aux=True)(
        actor_apply, critic_apply, params, target, batch
    )
    assert_trees_close(metrics["loss"], expected_loss.detach(), rtol=1e-5, atol=1e-5)
    assert_trees_close(grads, expected_grads, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("discrete", [False, True])
def test_a_fixed_alpha_equals_a_learned_one_at_the_same_value_and_gets_no_alpha_loss(discrete):
    actor_apply, critic_apply, params, target = make_nets(random.key(0), discrete)
    batch = random_batch(random.key(1), 16, discrete)
    loss_fn = discrete_sac_loss if discrete else sac_loss
    extra = () if discrete else (random.key(2),)
    grad = torch.func.grad(loss_fn, argnums=2, has_aux=True)
    learned, m_learned = grad(actor_apply, critic_apply, params, target, batch, *extra)
    fixed_params = {k: v for k, v in params.items() if k != "log_alpha"}
    fixed, m_fixed = grad(
        actor_apply, critic_apply, fixed_params, target, batch, *extra, alpha=math.exp(-0.7)
    )
    del learned["log_alpha"]
    assert_trees_close(fixed, learned, rtol=1e-5, atol=1e-6)
    assert_trees_close(m_fixed["alpha"], m_learned["alpha"])
    assert_trees_close(m_fixed["critic_loss"] + m_fixed["actor_loss"], m_fixed["loss"])


@given(discrete=st.booleans())
def test_vmapped_sac_grad_over_seeds_equals_the_python_loop(discrete):
    nets = [make_nets(k, discrete) for k in random.split(random.key(0), 3).unbind(0)]
    actor_apply, critic_apply = nets[0][0], nets[0][1]
    params, target = tree.stack([n[2] for n in nets]), tree.stack([n[3] for n in nets])
    batch = torch.func.vmap(lambda k: random_batch(k, 8, discrete))(random.split(random.key(1), 3))
    loss_keys = random.split(random.key(2), 3)

    def grad_fn(params, target, batch, key):
        if discrete:
            return torch.func.grad(discrete_sac_loss, argnums=2, has_aux=True)(
                actor_apply, critic_apply, params, target, batch
            )
        return torch.func.grad(sac_loss, argnums=2, has_aux=True)(
            actor_apply, critic_apply, params, target, batch, key
        )

    check_vmap(grad_fn, params, target, batch, loss_keys, rtol=1e-5, atol=1e-5)


def test_sac_loss_is_pure_same_key_same_result_and_inputs_untouched():
    actor_apply, critic_apply, params, target = make_nets(random.key(0))
    batch = random_batch(random.key(1), 8)
    before = tree.map(torch.clone, (params, target, batch))
    a = sac_loss(actor_apply, critic_apply, params, target, batch, random.key(3))
    b = sac_loss(actor_apply, critic_apply, params, target, batch, random.key(3))
    c = sac_loss(actor_apply, critic_apply, params, target, batch, random.key(4))
    assert_trees_close(a, b)
    assert not torch.equal(a[0], c[0])
    assert_trees_close((params, target, batch), before)


# ---- bad input -------------------------------------------------------------------------


def test_sac_loss_asks_for_log_alpha_or_a_fixed_alpha():
    actor_apply, critic_apply, params, target = make_nets(random.key(0))
    del params["log_alpha"]
    with pytest.raises(KeyError, match=r'params has no "log_alpha".*or pass alpha=0\.2'):
        sac_loss(
            actor_apply, critic_apply, params, target, random_batch(random.key(1), 4), random.key(2)
        )


def test_discrete_sac_loss_rejects_one_hot_actions():
    actor_apply, critic_apply, params, target = make_nets(random.key(0), discrete=True)
    batch = random_batch(random.key(1), 4, discrete=True)
    batch["action"] = F.one_hot(batch["action"], 4).float()
    with pytest.raises(ValueError, match=r"\[4, 4\] float32; expected \[4\] int64.*One-hot"):
        discrete_sac_loss(actor_apply, critic_apply, params, target, batch)


def test_sac_loss_names_a_batch_missing_next_obs():
    actor_apply, critic_apply, params, target = make_nets(random.key(0))
    batch = random_batch(random.key(1), 4)
    del batch["next_obs"]
    with pytest.raises(KeyError, match=r"sac_loss: batch is missing field 'next_obs'"):
        sac_loss(actor_apply, critic_apply, params, target, batch, random.key(2))


def test_discrete_sac_grad_compiles_as_one_graph():
    actor_apply, critic_apply, params, target = make_nets(random.key(0), discrete=True)
    batch = random_batch(random.key(1), 8, discrete=True)
    grad = torch.func.grad(discrete_sac_loss, argnums=2, has_aux=True)

    def step(params, target, batch):
        return grad(actor_apply, critic_apply, params, target, batch)

    compiled = torch.compile(step, backend="eager", fullgraph=True)
    assert_trees_close(
        compiled(params, target, batch), step(params, target, batch), rtol=1e-5, atol=1e-6
    )
