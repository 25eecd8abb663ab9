"""DQN: config errors, purity, vmapped seeds = separate runs, metrics, n-step, the target
schedule, prioritized replay, export to ONNX, and learning CartPole."""

import math

import pytest
import torch

from fxrl import buffers, envs, exploration, nn, objectives, optim, random, tree
from fxrl.algorithms import core, dqn
from fxrl.testing import assert_trees_close, check_export

# Tiny but complete: learning starts after the first update.
SMALL = {"num_envs": 2, "num_steps": 4, "gradient_steps": 2, "buffer_size": 64,
         "batch_size": 8, "learning_starts": 8, "hidden": (16,)}  # fmt: skip


def test_config_defaults_are_purejaxrls_cartpole_dqn():
    c = dqn.Config()
    assert (c.env, c.total_steps, c.num_envs, c.buffer_size, c.batch_size) == (
        "CartPole-v1", 500_000, 10, 10_000, 128)  # fmt: skip
    assert (c.lr, c.gamma, c.eps_start, c.eps_end, c.eps_decay_steps) == (
        2.5e-4, 0.99, 1.0, 0.05, 250_000)  # fmt: skip
    assert (c.learning_starts, c.tau, c.loss, c.hidden) == (10_000, 1.0, "mse", (120, 84))
    # one gradient step per 10 env steps, a hard copy every 500 env steps
    steps_per_grad = c.num_envs * c.num_steps / c.gradient_steps
    assert steps_per_grad == 10 and c.target_update_every * steps_per_grad == 500


def test_config_names_the_closest_env_id_for_an_unknown_one():
    with pytest.raises(ValueError, match=r"env='CartPol-v1'.*Did you mean 'CartPole-v1'"):
        dqn.Config(env="CartPol-v1")


def test_make_rejects_a_continuous_action_env_naming_the_field_and_the_fix():
    with pytest.raises(ValueError, match=r"dqn.Config: env='Pendulum-v1'.*Discrete.*sac or td3"):
        dqn.make(dqn.Config(env="Pendulum-v1"))


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [("batch_size", 0, "positive int"), ("tau", 0.0, r"\(0, 1\]"), ("loss", "l1", "huber"),
     ("eps_end", 2.0, r"\[0, 1\]"), ("learning_starts", -1, ">= 0")],
)  # fmt: skip
def test_config_rejects_bad_values_naming_field_value_and_what_is_allowed(field, value, allowed):
    with pytest.raises(
        ValueError, match=rf"dqn.Config: {field}=.* not allowed; expected .*{allowed}"
    ):
        dqn.Config(**{field: value})


def test_make_rejects_something_that_is_not_a_config():
    with pytest.raises(TypeError, match=r"expected a dqn\.Config, got dict"):
        dqn.make({"env": "CartPole-v1"})


@pytest.fixture(scope="module")
def small():
    algo = dqn.make(dqn.Config(**SMALL))
    return algo, algo.init(random.key(0))


def test_update_does_not_mutate_its_input_state_except_the_replay_storage(small):
    algo, state = small
    before = tree.map(lambda x: x.clone(), state)
    new, _ = algo.update(state)
    # the documented exception: add() writes the storage and episode starts in place
    unshared = lambda s: s.replace(buffer=s.buffer.replace(storage=(), episode_start=()))
    assert_trees_close(unshared(state), unshared(before), rtol=0, atol=0)
    assert not torch.equal(new.params["layers"][0]["w"], state.params["layers"][0]["w"])
    assert int(new.buffer.size) == 8 and int(state.buffer.size) == 0


def test_metrics_follow_the_contract_and_report_nan_before_learning_and_without_episodes():
    algo = dqn.make(dqn.Config(**{**SMALL, "num_steps": 1, "learning_starts": 100}))
    state, m = algo.update(algo.init(random.key(1)))
    assert m["steps"].dtype == torch.int64 and int(m["steps"]) == 2
    assert int(m["episodes"]) == 0  # no CartPole episode ends after one step
    assert math.isnan(float(m["episode_return"])) and math.isnan(float(m["episode_length"]))
    assert math.isnan(float(m["loss"])) and int(m["gradient_steps"]) == 0  # not learning yet
    assert float(m["epsilon"]) == 1.0
    assert tree.leaves(state.params)[0].equal(tree.leaves(algo.init(random.key(1)).params)[0])


def test_episode_metrics_are_the_means_of_the_episodes_that_ended():
    algo = dqn.make(dqn.Config(**{**SMALL, "num_steps": 60, "gradient_steps": 1}))
    state = algo.init(random.key(2))
    _, m = algo.update(state)
    # the same rollout by hand: random actions (epsilon 1) from the same keys
    _, k_roll, _ = random.split(state.key, 3).unbind(-2)
    benv, env_state, lengths = envs.batch(algo.env, 2), state.env_state, []
    for _ in range(60):
        k_roll, k_act = random.split(k_roll).unbind(-2)
        _, k_rand = random.split(k_act).unbind(-2)
        env_state, ts = benv.step(env_state, algo.env.action_spec.sample(k_rand, (2,)))
        done = ts.terminated | ts.truncated
        lengths += ts.info["episode_length"][done].tolist()
    assert int(m["episodes"]) == len(lengths) > 0
    assert float(m["episode_length"]) == pytest.approx(sum(lengths) / len(lengths))
    assert float(m["episode_return"]) == pytest.approx(sum(lengths) / len(lengths))


def test_vmapped_seeds_equal_separate_runs_with_the_same_keys():
    algo = dqn.make(dqn.Config(**SMALL))
    keys = random.split(random.key(3), 3)
    states = torch.func.vmap(algo.init)(keys)  # vmap's randomness="error" stays silent
    for _ in range(3):
        states, metrics = torch.func.vmap(algo.update)(states)
    for i in range(3):
        state = algo.init(keys[i])
        for _ in range(3):
            state, m = algo.update(state)
        assert_trees_close(tree.index(states.params, i), state.params, rtol=1e-5, atol=1e-6)
        assert torch.equal(
            tree.index(states.buffer.storage, i)["action"], state.buffer.storage["action"]
        )
        assert float(metrics["loss"][i]) == pytest.approx(float(m["loss"]), rel=1e-5)


def test_n_step_transitions_in_the_buffer_match_a_python_loop():
    n, gamma, T = 3, 0.9, 30
    cfg = {**SMALL, "num_steps": T, "gamma": gamma, "buffer_size": 2 * T}
    one, _ = dqn.make(dqn.Config(**cfg)).update(dqn.make(dqn.Config(**cfg)).init(random.key(4)))
    algo = dqn.make(dqn.Config(**cfg, n_step=n))
    multi, _ = algo.update(algo.init(random.key(4)))  # same keys: the same rollout
    raw = {k: v.view(T, 2, *v.shape[1:]) for k, v in one.buffer.storage.items()}
    got = {k: v.view(T, 2, *v.shape[1:]) for k, v in multi.buffer.storage.items()}
    assert raw["terminated"].any()  # episodes end inside the rollout (no truncation at 30)
    for e in range(2):
        for t in range(T):
            ret, disc, term, nxt = 0.0, 1.0, False, None
            for u in range(t, min(t + n, T)):
                ret, disc = ret + disc * float(raw["reward"][u, e]), disc * gamma
                term, nxt = bool(raw["terminated"][u, e]), raw["next_obs"][u, e]
                if term:
                    break
            assert float(got["reward"][t, e]) == pytest.approx(ret)
            assert float(got["discount"][t, e]) == pytest.approx(disc)
            assert bool(got["terminated"][t, e]) == term
            assert torch.equal(got["next_obs"][t, e], nxt)
            assert torch.equal(got["obs"][t, e], raw["obs"][t, e])


def test_target_moves_only_every_target_update_every_gradient_steps():
    q = nn.mlp(4, 2, (8,), "relu")
    opt = optim.adam(1e-2)
    learn = dqn.make_learner(q.apply, opt, batch_size=4, target_update_every=3, tau=1.0)
    params = q.init(random.key(5))
    example = {"obs": torch.zeros(4), "action": torch.tensor(0), "reward": torch.tensor(1.0),
               "next_obs": torch.zeros(4), "terminated": torch.tensor(False)}  # fmt: skip
    buf = buffers.add(buffers.init(example, 16), {
        "obs": random.normal(random.key(6), (16, 4)), "action": torch.arange(16) % 2,
        "reward": torch.ones(16), "next_obs": random.normal(random.key(7), (16, 4)),
        "terminated": torch.zeros(16, dtype=torch.bool)})  # fmt: skip
    target, opt_state, count = params, opt.init(params), torch.tensor(0)
    for i, key in enumerate(random.split(random.key(8), 6).unbind(0)):
        old_target = target
        params, target, opt_state, count, buf, m = learn(params, target, opt_state, count, buf, key)
        if (i + 1) % 3 == 0:
            assert_trees_close(target, params, rtol=0, atol=0)
        else:
            assert_trees_close(target, old_target, rtol=0, atol=0)
        assert int(count) == i + 1 and torch.isfinite(m["loss"])


def test_learner_step_equals_dqn_loss_and_adam_by_hand():
    q = nn.mlp(4, 3, (8,), "relu")
    opt = optim.adam(1e-3)
    learn = dqn.make_learner(q.apply, opt, batch_size=5, gamma=0.97, double=True, tau=0.1)
    params, target = q.init(random.key(9)), q.init(random.key(10))
    example = {"obs": torch.zeros(4), "action": torch.tensor(0), "reward": torch.tensor(0.0),
               "next_obs": torch.zeros(4), "terminated": torch.tensor(False)}  # fmt: skip
    buf = buffers.add(buffers.init(example, 8), {
        "obs": random.normal(random.key(11), (8, 4)), "action": torch.arange(8) % 3,
        "reward": random.normal(random.key(12), (8,)),
        "next_obs": random.normal(random.key(13), (8, 4)),
        "terminated": torch.arange(8) % 4 == 0})  # fmt: skip
    key = random.key(14)
    out = learn(params, target, opt.init(params), torch.tensor(0), buf, key)
    batch, _ = buffers.sample(buf, key, 5)
    # by hand: torch.optim.Adam on the same loss, target moved by Polyak averaging
    leaves = [x.clone().requires_grad_() for x in tree.leaves(params)]
    p = tree.unflatten(tree.structure(params), leaves)
    loss, _ = objectives.dqn_loss(q.apply, p, target, batch, gamma=0.97, double=True)
    adam = torch.optim.Adam(leaves, lr=1e-3)
    loss.backward()
    adam.step()
    assert_trees_close(out[0], p, rtol=1e-6, atol=1e-7)
    polyak = tree.map(lambda t, o: t + 0.1 * (o - t), target, out[0])
    assert_trees_close(out[1], polyak, rtol=1e-6, atol=1e-7)


def test_prioritized_replay_updates_priorities_and_double_dqn_runs():
    algo = dqn.make(dqn.Config(**SMALL, prioritized=True, double=True, n_step=2))
    state = algo.init(random.key(15))
    for _ in range(2):
        state, m = algo.update(state)
    assert torch.isfinite(m["loss"]) and int(m["gradient_steps"]) == 4
    leaves = state.buffer.sums[-1][: int(state.buffer.size)]
    assert leaves.unique().numel() > 1  # no longer all the initial max priority
    assert float(state.buffer.max_priority) > 1.0 or leaves.min() < leaves.max()


def test_greedy_policy_exports_to_onnx_and_picks_the_same_actions(small, tmp_path):
    algo, state = small
    obs = algo.env.observation_spec.zeros((3,))
    check = check_export(algo.policy, state.params, obs, spec=algo.env.observation_spec,
                         targets=("onnx",), max_examples=5, directory=tmp_path)  # fmt: skip
    assert check.onnx_path.exists()


def test_make_learner_trains_on_a_host_env_through_the_collector():
    from fxrl.collector import collector

    env = envs.gym("CartPole-v1", num_envs=2)
    q, opt = nn.mlp(4, 2, (16,), "relu"), optim.adam(1e-3)
    learn = dqn.make_learner(q.apply, opt, batch_size=16, loss="mse", tau=0.01)
    params = q.init(random.key(16))
    state = [params, params, opt.init(params), torch.tensor(0)]
    example = {"obs": torch.zeros(4), "action": torch.tensor(0), "reward": torch.tensor(0.0),
               "next_obs": torch.zeros(4), "terminated": torch.tensor(False)}  # fmt: skip
    buf = buffers.init(example, 256)

    def act(params, obs, key):  # obs [2, 4] -> action [2]
        greedy, _ = exploration.q_value(q.apply(params, obs))
        return exploration.egreedy(key, greedy, env.action_spec, 0.1)

    batches = collector(env, act, lambda: state[0], random.key(17), 32, total_frames=128,
                        learning_starts=32)  # fmt: skip
    for i, (batch, _) in enumerate(batches):
        buf = buffers.add(buf, {k: batch[k] for k in example})
        *state, buf, m = learn(*state, buf, random.key(100 + i))
    assert int(buf.size) == 128 and int(state[3]) == 4 and torch.isfinite(m["loss"])
    assert not torch.equal(state[0]["layers"][0]["w"], params["layers"][0]["w"])


# The learning test's settings: ~500 updates of 32 env steps and 8 gradient steps. The
# compiled-vs-eager test compiles this program and the learning test trains through it.
LEARN = dqn.Config(total_steps=16_000, num_envs=4, num_steps=8, gradient_steps=8,
                   learning_starts=1_000, eps_decay_steps=6_000, lr=1e-3, batch_size=64,
                   target_update_every=100, hidden=(64, 64))  # fmt: skip


@pytest.fixture(scope="module")
def learner():
    """``(algo, init, update)``: LEARN's update for two seeds, one fxrl.compile program."""
    algo = dqn.make(LEARN)
    return (algo, *core.batched(algo, 2, compile=True))


def test_the_update_traces_its_rollout_and_gradient_steps_as_two_rolled_loops():
    # the rollout and the gradient steps stay rolled loops even though their bodies read
    # the params, epsilon and the replay buffer through closures (lifted into the loops'
    # inputs)
    import fxrl

    algo = dqn.make(dqn.Config(**{**SMALL, "learning_starts": 0}))
    gm = fxrl.trace(algo.update, algo.init(random.key(0)))
    assert len([n for n in gm.graph.nodes if n.target is torch.ops.higher_order.scan]) == 2


def test_the_update_compiles_as_one_program_equal_to_eager(learner):
    # fxrl.compile(vmap(update)): past learning_starts (32 updates of 32 steps), one more
    # update compiled and eager from the same state
    algo, init, update = learner
    _, eager = core.batched(algo, 2, compile=False)
    states = init(random.key(5))
    for _ in range(32):
        states, _ = update(states)
    assert len(update._programs) == 1
    a, ma = update(tree.map(torch.clone, states))
    b, mb = eager(tree.map(torch.clone, states))
    assert (a.gradient_steps == states.gradient_steps + 8).all()  # this update learned
    assert_trees_close(a.params, b.params, rtol=1e-4, atol=1e-5)
    assert_trees_close(a.buffer, b.buffer)
    torch.testing.assert_close(ma["loss"], mb["loss"], rtol=1e-4, atol=1e-5)


def test_dqn_learns_cartpole_greedy_return_clearly_above_random(learner):
    # two seeds, 16k env steps each through the compiled update, judged by each seed's
    # greedy policy over 5 episodes of gymnasium's CartPole-v1: a random policy averages
    # ~22 and an untrained greedy one ~9
    algo, init, update = learner
    state = init(random.key(0))
    for _ in range(LEARN.total_steps // algo.steps_per_update):
        state, metrics = update(state)
    assert (metrics["steps"] == 16_000).all()
    returns = [core.evaluate(algo, tree.index(state.params, i), 5, seed=0) for i in range(2)]
    assert all(float(r.mean()) > 100 for r in returns), returns


@pytest.mark.parametrize("mode, key", [("random", None), ("sample", random.key(0))])
def test_policy_refuses_a_random_action_without_a_key_and_an_unknown_mode(small, mode, key):
    algo, state = small
    obs = algo.env.observation_spec.zeros((3,))
    with pytest.raises(ValueError, match=rf"dqn policy: mode='{mode}'.*'random' with a key") as e:
        algo.policy(state.params, obs, key, mode=mode)
    assert "\n" not in str(e.value)
    greedy = algo.policy(state.params, obs)
    noisy = algo.policy(state.params, obs, random.key(1), mode="random")
    assert greedy.shape == noisy.shape == (3,)
