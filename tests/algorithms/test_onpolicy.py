"""fxrl.algorithms.onpolicy against naive loops and torch.optim; the on-policy conventions."""

from __future__ import annotations

import inspect
import types

import pytest
import torch

from fxrl import envs, random, transforms, tree
from fxrl.algorithms import dqn, onpolicy, ppo, recurrent_ppo, sac, tasks, td3
from fxrl.run.config_io import config_from_json, config_to_json


def _naive_gae(reward, value, next_value, terminated, truncated, gamma, lmbda):
    """GAE as a reversed Python loop over time, one env at a time."""
    t_len, n = reward.shape
    adv = torch.zeros(t_len, n, dtype=torch.float64)
    for e in range(n):
        running = 0.0
        for t in reversed(range(t_len)):
            boot = 0.0 if terminated[t, e] else gamma * float(next_value[t, e])
            delta = float(reward[t, e]) + boot - float(value[t, e])
            cont = 0.0 if (terminated[t, e] or truncated[t, e]) else 1.0
            running = delta + gamma * lmbda * cont * running
            adv[t, e] = running
    return adv


def test_advantages_equal_a_naive_gae_loop_with_terminations_and_truncations():
    k = random.split(random.key(0), 4)
    t_len, n = 12, 3
    traj = {
        "reward": random.normal(k[0], (t_len, n), dtype=torch.float64),
        "value": random.normal(k[1], (t_len, n), dtype=torch.float64),
        "terminated": torch.zeros(t_len, n, dtype=torch.bool),
        "truncated": torch.zeros(t_len, n, dtype=torch.bool),
    }
    traj["terminated"][[2, 7], [0, 1]] = True
    traj["truncated"][[4, 9], [1, 2]] = True
    next_value = random.normal(k[2], (t_len, n), dtype=torch.float64)
    advantage, target = onpolicy.advantages(traj, next_value, {"gamma": 0.9, "gae_lambda": 0.8})
    want = _naive_gae(
        traj["reward"], traj["value"], next_value, traj["terminated"], traj["truncated"], 0.9, 0.8
    )
    torch.testing.assert_close(advantage, want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(target, want + traj["value"], rtol=1e-12, atol=1e-12)


def test_shuffled_minibatches_cover_each_sample_once_per_epoch_in_fresh_orders():
    key, index = onpolicy.shuffled_minibatches(random.key(1), 3, 24, 4)
    assert index.shape == (12, 6) and index.dtype == torch.int64
    epochs = index.reshape(3, 24)
    for e in range(3):
        assert torch.equal(epochs[e].sort().values, torch.arange(24))
    assert not torch.equal(epochs[0], epochs[1]) and not torch.equal(epochs[1], epochs[2])
    assert not torch.equal(key, random.key(1))


def test_annealed_lr_decays_linearly_per_update_to_zero():
    schedule = onpolicy.annealed_lr(0.01, grad_steps=4, updates=5)
    counts = torch.arange(0, 28)
    want = [0.01 * max(0.0, 1.0 - (c // 4) / 5) for c in range(28)]
    got = schedule(counts)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=0, atol=1e-15)


@pytest.mark.parametrize("anneal", [False, True])
def test_gradient_steps_equal_clip_grad_norm_then_torch_adam(anneal):
    cfg = types.SimpleNamespace(anneal_lr=anneal)
    hp = {"lr": 0.05, "max_grad_norm": 0.3}
    opt, lr_at = onpolicy.make_optimizer(cfg, hp, grad_steps=2, updates=3)
    k = random.split(random.key(2), 3)
    w0 = random.normal(k[0], (3, 4))
    x, y = random.normal(k[1], (8, 4)), random.normal(k[2], (8, 3))

    def loss_fn(params, batch):
        err = batch[0] @ params["w"].T - batch[1]
        return err.square().mean(), {"loss": err.square().mean().detach()}

    params, state = {"w": w0.clone()}, opt.init({"w": w0})
    ref = torch.nn.Parameter(w0.clone())
    torch_opt = torch.optim.Adam([ref], lr=0.05, eps=1e-5)
    for step in range(6):
        params, state, metrics = onpolicy.gradient_step(loss_fn, opt, params, state, (x, y))
        for group in torch_opt.param_groups:
            group["lr"] = 0.05 * max(0.0, 1.0 - (step // 2) / 3) if anneal else 0.05
        torch_opt.zero_grad()
        loss = (x @ ref.T - y).square().mean()
        torch.testing.assert_close(metrics["loss"], loss.detach())
        loss.backward()
        torch.nn.utils.clip_grad_norm_([ref], 0.3)
        torch_opt.step()
        torch.testing.assert_close(params["w"], ref.detach(), rtol=1e-5, atol=1e-6)
    assert float(lr_at(torch.tensor(2))) == pytest.approx(0.05 / 3 if anneal else 0.05)


@pytest.mark.parametrize("module", [ppo, recurrent_ppo])
def test_the_update_is_its_collect_pieces_around_the_env_step(module):
    """algo.update is update.collect's pieces (begin; act, the env's step, observe per step;
    finish): calling them by hand gives the update's numbers, bit for bit."""
    config = module.Config(num_envs=2, num_steps=4, update_epochs=1, num_minibatches=1)
    algo = module.make(config)
    state, hp, pieces = algo.init(random.key(4)), dict(algo.hyperparams), algo.update.collect
    benv = envs.batch(algo.env, config.num_envs)
    if module is recurrent_ppo:  # its envs are seen through the velocity mask
        benv = envs.batch(envs.transform(algo.env, transforms.select((0, 2))), config.num_envs)
    ctx, c = pieces.begin(hp, state)
    env_state, records = state.env_state, []
    for _ in range(pieces.num_steps):
        c, action, record = pieces.act(hp, ctx, c)
        env_state, ts = benv.step(env_state, action)
        c, seen = pieces.observe(hp, ctx, c, ts)
        records.append({**record, **seen})
    traj = tree.stack(records)
    by_hand, by_hand_metrics = pieces.finish(hp, state.replace(env_state=env_state), ctx, c, traj)
    new, metrics = algo.update(state)
    for x, y in zip(
        tree.leaves((new, metrics)), tree.leaves((by_hand, by_hand_metrics)), strict=True
    ):
        assert torch.equal(x, y) or (x.is_floating_point() and x.isnan().all() and y.isnan().all())


def test_on_policy_entry_points_share_one_shape():
    # one train for every algorithm (core.trainer), each module's under its own name
    want = inspect.signature(ppo.train)
    for module in (recurrent_ppo, dqn, sac, td3):
        assert str(inspect.signature(module.train)) == str(want)
        assert module.train.__module__ == module.__name__
    assert str(want) == (
        "(config: 'Any', key: 'Tensor', num_seeds: 'int' = 1, *, compile: 'bool | str' = "
        "True, callback: 'Callable[[int, dict], None] | None' = None) -> 'tuple[Any, dict]'"
    )
    assert inspect.signature(tasks.update_tasks).parameters["compile"].default is True


def test_recurrent_hidden_is_a_tuple_and_an_old_int_fails_in_one_line():
    config = recurrent_ppo.Config(hidden=(8, 6), rnn_hidden=4)
    algo = recurrent_ppo.make(config)
    net = algo.init(random.key(0)).params["net"]
    assert [layer["w"].shape[0] for layer in net["embed"]["layers"]] == [8, 6]
    assert [layer["w"].shape[0] for layer in net["actor"]["layers"]] == [8, 6, 2]
    with pytest.raises(ValueError, match=r"^recurrent_ppo.Config: hidden=64 .* write \(64,\)"):
        recurrent_ppo.Config(hidden=64)
    old = {**config_to_json(recurrent_ppo.Config()), "hidden": 32}  # a config.json before
    with pytest.raises(ValueError, match=r"hidden=32 is not allowed.*write \(32,\)") as e:
        config_from_json(recurrent_ppo.Config, old)
    assert "\n" not in str(e.value)
    again = config_from_json(recurrent_ppo.Config, config_to_json(config))
    assert again == config
