"""fxrl.collector: batches of transitions from pure and host envs."""

import pytest
import torch

from fxrl import envs, exploration, nn, random, specs, tree
from fxrl.collector import collector
from fxrl.testing import assert_trees_close


def _random_policy(params, obs, key):
    return random.randint(key, obs.shape[:-1], 0, 2)


def _constant_policy(params, obs, key):
    return torch.full(obs.shape[:-1], int(params), dtype=torch.int64)


def _per_env(batch, n):
    """[frames, ...] -> [n, T, ...]: frame t * n + i is step t of env i."""
    return tree.map(lambda x: x.reshape(-1, n, *x.shape[1:]).movedim(0, 1), batch)


def test_frame_counts_and_the_number_of_batches():
    env = envs.gym("CartPole-v1", num_envs=4)
    c = collector(env, _random_policy, None, random.key(0), frames_per_batch=48, total_frames=100)
    out = list(c)
    assert len(out) == 3  # ceil(100 / 48) whole batches
    for i, (batch, stats) in enumerate(out):
        assert batch["obs"].shape == (48, 4) and batch["action"].shape == (48,)
        assert batch["reward"].shape == batch["terminated"].shape == batch["traj_id"].shape == (48,)
        assert stats["frames"] == 48 * (i + 1)
    steps, _ = next(iter(collector(env, _random_policy, None, random.key(0), 48, flat=False)))
    assert steps["obs"].shape == (12, 4, 4)


def test_flat_batches_of_a_two_dim_batch_env_are_its_unflat_batches_reshaped():
    env = envs.batch(envs.batch(envs.make("CartPole-v1"), 3), 2)  # batch_shape (2, 3)
    flat, _ = next(collector(env, _random_policy, None, random.key(0), 24))
    steps, _ = next(collector(env, _random_policy, None, random.key(0), 24, flat=False))
    assert steps["obs"].shape == (4, 2, 3, 4) and flat["obs"].shape == (24, 4)
    for name, x in steps.items():
        if isinstance(x, torch.Tensor):  # frame t * 6 + i is step t of env i (row-major)
            assert torch.equal(flat[name], x.reshape(24, *x.shape[3:])), name


def test_trajectory_ids_change_exactly_after_episode_ends_and_are_never_reused():
    n = 4
    env = envs.batch(envs.make("CartPole-v1"), n)
    c = collector(env, _random_policy, None, random.key(1), frames_per_batch=n * 40)
    batches = [next(c)[0] for _ in range(2)]
    per_env = _per_env(tree.concat(batches), n)
    done = per_env["terminated"] | per_env["truncated"]
    ids = per_env["traj_id"]
    assert torch.equal(ids[:, 0], torch.arange(n))
    assert torch.equal(ids[:, 1:] != ids[:, :-1], done[:, :-1])
    assert done.any()
    spans = {}
    for i in range(n):
        for j in ids[i].tolist():
            spans.setdefault(j, set()).add(i)
    assert all(len(envs_) == 1 for envs_ in spans.values())  # one env per trajectory
    assert sorted(spans) == list(range(len(spans)))  # ids 0, 1, 2, ... in order of birth


def test_auto_reset_boundaries_next_obs_is_final_and_obs_starts_the_next_episode():
    env = envs.gym("CartPole-v1", num_envs=2)
    batch, _ = next(collector(env, _random_policy, None, random.key(2), frames_per_batch=200))
    b = _per_env(batch, 2)
    done = (b["terminated"] | b["truncated"])[:, :-1]
    follows = b["obs"][:, 1:]
    prev_next = b["next_obs"][:, :-1]
    assert torch.equal(follows[~done], prev_next[~done])  # inside an episode: continuous
    assert done.sum() >= 2
    final, first = prev_next[done], follows[done]
    assert ((final[:, 0].abs() > 2.4) | (final[:, 2].abs() > 0.2094)).all()  # terminal states
    assert (first.abs() <= 0.05).all()  # gymnasium's reset draws from U(-0.05, 0.05)


def test_frames_before_learning_starts_act_with_random_actions_from_the_spec():
    env = envs.gym("Pendulum-v1")
    calls = []

    def policy(params, obs, key):
        calls.append(1)
        return torch.zeros(1)

    c = collector(env, policy, None, random.key(3), frames_per_batch=50, learning_starts=60)
    (b0, s0), (b1, s1), (b2, s2) = next(c), next(c), next(c)
    assert s0["random"] and s1["random"] and not s2["random"]  # batches starting before 60
    assert len(calls) == 50
    for b in (b0, b1):
        assert bool(env.action_spec.contains(b["action"])) and b["action"].shape == (50, 1)
        assert b["action"].abs().min() > 0 and b["action"].std() > 0.5
    assert torch.equal(b2["action"], torch.zeros(50, 1))


def test_params_are_replaced_between_batches_by_update_send_or_a_provider():
    env = envs.gym("CartPole-v1")
    c = collector(env, _constant_policy, 0, random.key(4), frames_per_batch=16)
    assert (next(c)[0]["action"] == 0).all()
    c.update(1)
    assert (next(c)[0]["action"] == 1).all()
    assert (c.send(0)[0]["action"] == 0).all()
    current = {"params": 1}
    c = collector(env, _constant_policy, lambda: current["params"], random.key(4), 16)
    assert (next(c)[0]["action"] == 1).all()
    current["params"] = 0
    assert (next(c)[0]["action"] == 0).all()


def test_policy_extras_and_episode_statistics():
    env = envs.batch(envs.make("CartPole-v1"), 2)

    def policy(params, obs, key):
        logits = torch.zeros(*obs.shape[:-1], 2)
        action = random.categorical(key, logits)
        return action, {"log_prob": logits.log_softmax(-1)[..., 0], "value": obs.sum(-1)}

    batch, stats = next(collector(env, policy, None, random.key(5), frames_per_batch=120))
    assert batch["extras"]["log_prob"].shape == (120,) and batch["extras"]["value"].shape == (120,)
    done = batch["terminated"] | batch["truncated"]
    assert len(stats["episode_return"]) == int(done.sum()) >= 2
    # The first batch holds whole episodes: stats are their sums, in frame order.
    ids = batch["traj_id"]
    ended = ids[done].tolist()
    assert stats["episode_length"].tolist() == [int((ids == j).sum()) for j in ended]
    returns = [float(batch["reward"][ids == j].sum()) for j in ended]
    assert stats["episode_return"].tolist() == returns


def test_the_same_key_gives_the_same_batches_for_pure_envs():
    env = envs.batch(envs.make("CartPole-v1"), 3)
    a = next(collector(env, _random_policy, None, random.key(6), 30))[0]
    b = next(collector(env, _random_policy, None, random.key(6), 30))[0]
    assert all(torch.equal(x, y) for x, y in zip(tree.leaves(a), tree.leaves(b), strict=True))


def test_async_host_envs_collect_the_same_batches_as_sync_ones():
    out = []
    for asynchronous in (False, True):
        with envs.gym("CartPole-v1", num_envs=2, asynchronous=asynchronous) as env:
            out.append(next(collector(env, _random_policy, None, random.key(7), 60))[0])
    assert all(torch.equal(x, y) for x, y in zip(*map(tree.leaves, out), strict=True))


def test_collector_rejects_uneven_batches_and_envs_that_do_not_reset():
    with pytest.raises(
        ValueError,
        match=r"frames_per_batch=50 is not a multiple of the 4 envs.*Use frames_per_batch=52",
    ):
        collector(envs.gym("CartPole-v1", num_envs=4), _random_policy, None, random.key(0), 50)
    with pytest.raises(ValueError, match=r"fxrl.envs.auto_reset\(env\)"):
        collector(
            envs.make("CartPole-v1", auto_reset=False), _random_policy, None, random.key(0), 10
        )
    assert isinstance(envs.gym("CartPole-v1").action_spec, specs.Discrete)


def test_the_collector_is_also_fxrl_rollout_collector():
    import fxrl.collector
    import fxrl.rollout

    assert fxrl.rollout.collector is fxrl.collector.collector


# ------------------------------------------------------------------ policy state


def _recurrent_policy(core, greedy=False):
    """``policy(params, obs, carry, is_init, key) -> ((action, extras), carry)``: a
    recurrent core reset by ``is_init``, a linear head; greedy or sampled."""
    head = nn.linear(8, 2)

    def init(key):
        k_core, k_head = random.split(key).unbind(0)
        return {"core": core.init(k_core), "head": head.init(k_head)}

    def policy(params, obs, carry, is_init, key):
        y, carry = core.step(params["core"], obs, carry, is_init)
        logits = head.apply(params["head"], y)
        action = logits.argmax(-1) if greedy else random.categorical(key, logits)
        return (action, {"logits": logits}), carry

    return init, policy


def test_recurrent_carries_on_a_host_env_follow_the_pure_updates_reset_rule():
    # recurrent_ppo's pure update: is_init is True at the start, then the previous step's
    # done; the cell resets the carry where it is set. An LSTM (its carry is a 2-tuple).
    n, t_len = 3, 40
    core = nn.lstm(4, 8)
    init, policy = _recurrent_policy(core)
    params = init(random.key(0))
    with envs.gym("CartPole-v1", num_envs=n) as env:
        c = collector(env, policy, params, random.key(1), n * t_len, flat=False,
                      policy_state=core.initial_carry((n,)))  # fmt: skip
        b = tree.concat([next(c)[0], next(c)[0]])  # two batches: the carry goes across
    carry, is_init = core.initial_carry((n,)), torch.ones(n, dtype=torch.bool)
    for t in range(2 * t_len):
        assert torch.equal(b["is_init"][t], is_init), t
        assert_trees_close(tree.index(b["policy_state"], t), carry)
        _, carry = core.step(params["core"], b["obs"][t], carry, is_init)
        assert_trees_close(tree.index(b["next_policy_state"], t), carry)
        # where an episode starts, the carry before does not matter: as from zeros
        _, fresh = core.step(params["core"], b["obs"][t], core.initial_carry((n,)))
        assert_trees_close(tree.where(is_init, fresh, carry), carry)
        is_init = b["terminated"][t] | b["truncated"][t]
    assert int(b["is_init"][1:].sum()) >= 4  # episodes ended mid-batch: resets were used
    assert b["extras"]["logits"].shape == (2 * t_len, n, 2)
    assert_trees_close(c.policy_state, carry)
    assert torch.equal(c.is_init, is_init)


CARTPOLE_FIELDS = ("x", "x_dot", "theta", "theta_dot")


@pytest.mark.parametrize(("seed", "starts"), [(2, 4), (6, 20)])  # long episodes; many
def test_recurrent_carries_on_gymnasium_cartpole_equal_the_pure_twins_where_the_envs_agree(
    seed, starts
):
    # The pure path: fxrl's CartPole (float64) stepped by hand with the same greedy GRU
    # policy, is_init = the previous step's done. Gymnasium's resets draw from its own
    # RNG, so each episode of the twin starts from gymnasium's first observation; within
    # an episode the two envs agree, and so must actions, dones and carries.
    from fxrl.envs.cartpole import CartPole

    n, t_len = 2, 120
    core = nn.gru(4, 8)
    init, policy = _recurrent_policy(core, greedy=True)
    params = init(random.key(seed))
    with envs.gym("CartPole-v1", num_envs=n) as env:
        c = collector(env, policy, params, random.key(3), n * t_len, flat=False,
                      policy_state=core.initial_carry((n,)))  # fmt: skip
        b, _ = next(c)
    twin = CartPole(torch.float64)
    state, _ = twin.reset(random.split(random.key(0), n))
    carry, is_init = core.initial_carry((n,)), torch.ones(n, dtype=torch.bool)
    for t in range(t_len):
        start = {f: torch.where(is_init, b["obs"][t, :, j].double(), getattr(state, f))
                 for j, f in enumerate(CARTPOLE_FIELDS)}  # fmt: skip
        state = state.replace(**start)
        obs = twin.observe(state).float()
        torch.testing.assert_close(obs, b["obs"][t], rtol=0, atol=1e-5)
        (action, _), new_carry = policy(params, obs, carry, is_init, None)
        assert torch.equal(b["is_init"][t], is_init), t
        assert_trees_close(b["policy_state"][t], carry, rtol=0, atol=1e-5)
        assert_trees_close(b["next_policy_state"][t], new_carry, rtol=0, atol=1e-5)
        assert torch.equal(b["action"][t], action), t
        state, ts = twin.step(state, action)
        assert torch.equal(ts.terminated, b["terminated"][t]), t
        carry, is_init = new_carry, ts.terminated | b["truncated"][t]
    assert int(b["is_init"].sum()) >= starts  # episodes that began in the batch


def _ou_policy(spec, n, theta=0.2, sigma=0.5):
    """OU noise around a zero action, reset where ``is_init``; the step's key in extras."""

    def policy(params, obs, noise, is_init, key):
        action, noise = exploration.ornstein_uhlenbeck(
            key, torch.zeros(n, 1), noise, spec, is_init=is_init, theta=theta, sigma=sigma, dt=1.0
        )
        return (action, {"key": key.expand(n, 2)}), noise

    return policy


def test_ou_noise_on_a_host_env_equals_td3s_pure_rule_and_moves_on_in_random_frames():
    # td3's pure update draws OU noise without is_init and zeroes it where an episode
    # ended; the collector's policy resets it with is_init instead: the same noise.
    n, t_len = 2, 30
    with envs.gym("Pendulum-v1", num_envs=n, max_episode_steps=7) as env:
        spec = env.action_spec
        c = collector(env, _ou_policy(spec, n), None, random.key(4), n * t_len, flat=False,
                      learning_starts=n * t_len,
                      policy_state=exploration.ou_init(spec, (n,)))  # fmt: skip
        (b0, s0), (b1, s1) = next(c), next(c)
    assert s0["random"] and not s1["random"]
    # the random batch: spec actions, yet the noise moves on step by step and restarts
    assert "extras" not in b0 and (b0["action"].abs() > 0.5).any()
    moved = b0["next_policy_state"].noise
    assert torch.equal(b0["policy_state"].noise[1:], moved[:-1])
    assert (moved != 0).all()
    assert torch.equal(b0["is_init"][1:], (b0["truncated"] | b0["terminated"])[:-1])
    # the policy's batch against td3's rule, from the noise the random batch left
    done = b0["truncated"][-1] | b0["terminated"][-1]
    x = exploration.OUState(torch.where(done[:, None], 0.0, moved[-1]))
    for t in range(t_len):
        key = b1["extras"]["key"][t, 0]
        action, x = exploration.ornstein_uhlenbeck(
            key, torch.zeros(n, 1), x, spec, theta=0.2, sigma=0.5, dt=1.0
        )
        assert torch.equal(b1["next_policy_state"].noise[t], x.noise), t
        assert torch.equal(b1["action"][t], action), t
        done = b1["terminated"][t] | b1["truncated"][t]
        x = tree.where(done, tree.map(torch.zeros_like, x), x)  # td3's pure update
    assert int(b1["is_init"].sum()) >= 2 * n  # restarts at steps 7, 14, ... of each env


def test_policy_state_errors_name_the_expected_shape_and_return_value():
    env = envs.batch(envs.make("CartPole-v1"), 3)
    match = r"policy_state has a leaf \[2, 8\]; expected tensors \[3, \.\.\.\]"
    with pytest.raises(ValueError, match=match):
        collector(env, _random_policy, None, random.key(0), 30, policy_state=torch.zeros(2, 8))

    def forgets_the_state(params, obs, state, is_init, key):
        return _random_policy(params, obs, key)

    c = collector(env, forgets_the_state, None, random.key(0), 30, policy_state=torch.zeros(3, 8))
    with pytest.raises(TypeError, match=r"must return \(action, policy_state\)"):
        next(c)
