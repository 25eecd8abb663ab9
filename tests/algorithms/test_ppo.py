"""PPO: config errors, purity, vmapped seeds = separate runs, metrics, export, learning."""

import dataclasses
import math

import pytest
import torch

import fxrl
from fxrl import random, tree
from fxrl.algorithms import core, onpolicy, ppo

SMALL = {"num_envs": 4, "num_steps": 16, "update_epochs": 2, "num_minibatches": 2}


def test_config_defaults_are_purejaxrls_cartpole_settings():
    c = ppo.Config()
    assert (c.env, c.num_envs, c.num_steps, c.total_steps) == ("CartPole-v1", 4, 128, 500_000)
    assert (c.update_epochs, c.num_minibatches, c.lr, c.anneal_lr) == (4, 4, 2.5e-4, True)
    assert (c.gamma, c.gae_lambda, c.clip_eps, c.ent_coef, c.vf_coef) == (
        0.99,
        0.95,
        0.2,
        0.01,
        0.5,
    )
    assert (c.max_grad_norm, c.hidden, c.activation) == (0.5, (64, 64), "tanh")


def test_config_rejects_a_minibatch_count_that_does_not_divide_the_batch():
    with pytest.raises(ValueError, match=r"num_minibatches=3 .* divisor of num_envs \* num_steps"):
        ppo.Config(num_minibatches=3)


def test_config_names_the_closest_env_id_for_an_unknown_one():
    with pytest.raises(ValueError, match=r"env='CartPole-v0'.*Did you mean 'CartPole-v1'"):
        ppo.Config(env="CartPole-v0")


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [("num_envs", 0, "positive int"), ("gamma", 1.5, r"\[0, 1\]"), ("hidden", (), "non-empty")],
)
def test_config_rejects_bad_values_naming_field_value_and_what_is_allowed(field, value, allowed):
    pattern = rf"ppo\.Config: {field}=.* not allowed; expected .*{allowed}"
    with pytest.raises(ValueError, match=pattern):
        ppo.Config(**{field: value})


def test_make_rejects_something_that_is_not_a_config():
    with pytest.raises(TypeError, match=r"expected a ppo\.Config, got dict"):
        ppo.make({"env": "CartPole-v1"})


@pytest.fixture(scope="module")
def small():
    algo = ppo.make(ppo.Config(**SMALL))
    return algo, algo.init(random.key(0))


def test_update_does_not_mutate_its_input_state(small):
    algo, state = small
    before = tree.map(lambda x: x.clone(), state)
    algo.update(state)
    for a, b in zip(tree.leaves(before), tree.leaves(state), strict=True):
        assert torch.equal(a, b)


def test_metrics_follow_the_contract_and_count_steps(small):
    algo, state = small
    state, m = algo.update(state)
    for k in ("steps", "episodes", "episode_return", "episode_length", "loss", "entropy", "lr"):
        assert m[k].shape == (), k
    assert m["steps"].dtype == torch.int64 and int(m["steps"]) == 64 == algo.steps_per_update
    assert {"policy_loss", "value_loss", "approx_kl", "clip_fraction"} <= set(m)
    assert m["episode_return"].dtype == torch.float32
    state, m = algo.update(state)
    assert int(m["steps"]) == 128 and int(state.updates) == 2


def test_an_iteration_where_no_episode_ended_reports_nan_returns():
    # CartPole episodes last at least 8 steps: a 4-step rollout from reset ends none.
    algo = ppo.make(ppo.Config(num_steps=4, num_minibatches=1, update_epochs=1))
    _, m = algo.update(algo.init(random.key(1)))
    assert int(m["episodes"]) == 0 and math.isnan(float(m["episode_return"]))


def test_vmapped_training_of_3_seeds_equals_3_separate_trainings():
    algo = ppo.make(ppo.Config(**SMALL))
    keys = random.split(random.key(7), 3)
    states = torch.func.vmap(algo.init)(keys)
    update = torch.func.vmap(algo.update)
    for _ in range(2):
        states, metrics = update(states)
    for i in range(3):
        state = algo.init(keys[i])
        for _ in range(2):
            state, m = algo.update(state)
        for a, b in zip(tree.leaves(state), tree.leaves(tree.index(states, i)), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(m["loss"], metrics["loss"][i], rtol=1e-5, atol=1e-6)


def test_batched_init_gives_a_leading_seed_dim_and_train_stacks_metrics():
    algo = ppo.make(ppo.Config(**SMALL))
    state, metrics = core.train(algo, random.key(0), 2, compile=False, num_updates=2)
    assert state.steps.tolist() == [128, 128] and state.obs.shape == (2, 4, 4)
    assert metrics["loss"].shape == (2, 2) and metrics["steps"][:, 0].tolist() == [64, 128]


def test_continuous_actions_on_pendulum_use_a_gaussian_clipped_into_the_spec():
    algo = ppo.make(ppo.Config(env="Pendulum-v1", shared=True, normalize_obs=True, **SMALL))
    state, m = algo.update(algo.init(random.key(0)))
    assert set(state.params) == {"net", "obs_norm"} and "log_std" in state.params["net"]
    assert math.isfinite(float(m["loss"]))
    obs = torch.randn(64, 3) * 5
    action = algo.policy(state.params, obs, random.key(1), mode="random")
    assert action.shape == (64, 1) and float(action.abs().max()) <= 2.0


def test_policy_exports_to_onnx_and_onnx_runtime_picks_the_same_actions(small, tmp_path):
    from fxrl import export

    algo, state = small
    obs = random.normal(random.key(3), (32, 4))
    program = export.export(algo.policy, state.params, obs, dynamic_batch=True)
    path = export.to_onnx(program, tmp_path / "ppo.onnx")
    onnx_policy = export.load_onnx(path)
    eager = algo.policy(state.params, obs, mode="mode")
    assert torch.equal(torch.as_tensor(onnx_policy(obs.numpy())), eager)


def _assert_same_states(a, b):
    for x, y in zip(tree.leaves(a), tree.leaves(b), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def test_one_compiled_program_rolls_its_loops_whatever_their_length():
    # fxrl.compile traces the whole update once; fxrl.scan keeps each loop one rolled
    # loop (torch's scan operator), so the loop bodies are traced once whatever num_steps.
    def graph(num_steps: int) -> tuple[list[int], int]:
        algo = ppo.make(ppo.Config(**{**SMALL, "num_steps": num_steps}))
        gm = fxrl.trace(algo.update, algo.init(random.key(0)))
        loops = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.scan]
        bodies = [len(getattr(gm, n.args[0].target).graph.nodes) for n in loops]
        return bodies, len(gm.graph.nodes)

    (short, short_top), (long, long_top) = graph(16), graph(128)
    assert len(short) == 3  # rollout, permutations, gradient steps
    assert short == long
    # outside the loops only GAE's chunked scan grows (with log2 of the length); an
    # unrolled rollout would add a whole body per step
    assert long_top - short_top < short[0], (short_top, long_top, short)


@pytest.mark.slow  # dynamo traces vmap(grad(...)) of every piece: minutes on 2 cores
def test_batched_compiles_the_pieces_and_agrees_with_eager():
    algo = ppo.make(ppo.Config(**SMALL))
    init, update = core.batched(algo, 2, compile="eager")  # graph capture, no codegen
    states = init(random.key(4))
    a, _ = update(states)
    b, _ = torch.func.vmap(algo.update)(states)
    _assert_same_states(a, b)


# The learning test's settings (16 envs x 64 steps, 40 updates): the compiled-vs-eager
# test compiles this program for two seeds and the learning test trains through it.
LEARN = ppo.Config(num_envs=16, num_steps=64, total_steps=40_960, lr=1e-3)


@pytest.fixture(scope="module")
def learner():
    """``(algo, init, update)``: LEARN's update for two seeds, one fxrl.compile program."""
    algo = ppo.make(LEARN)
    return (algo, *core.batched(algo, 2, compile=True))


def test_the_default_compiled_update_through_fxrl_compile_agrees_with_eager(learner):
    # What ppo.train and `fxrl train` run: the whole vmapped update one fxrl.compile
    # program (inductor). Floats may differ in the last bits (fused kernels): a tolerance.
    algo, init, update = learner
    states = init(random.key(5))
    a, ma = update(states)
    b, mb = torch.func.vmap(algo.update)(states)
    _assert_same_states(a, b)
    torch.testing.assert_close(ma["loss"], mb["loss"], rtol=1e-4, atol=1e-5)
    again, _ = update(a)  # fed its own output: runs the program compiled above
    assert tree.structure(again) == tree.structure(a)
    assert len(update._programs) == 1


def test_a_config_differing_only_in_hyperparameters_loads_the_program_from_the_cache(learner):
    # The Config's hyperparameters are inputs of the compiled update, not constants baked
    # into it: other lr, ent_coef and gamma trace LEARN's graph, whose program inductor's
    # on-disk cache holds, and the loaded program computes with the new numbers. (That a
    # program taking them as tensors computes what the eager update does with the
    # Config's floats is the compiled-vs-eager test above.)
    _, init, update = learner
    states = init(random.key(5))
    learn, learn_metrics = update(states)  # LEARN's program (built by the test above)
    other = ppo.make(dataclasses.replace(LEARN, lr=3e-4, ent_coef=0.05, gamma=0.95))
    other_init, other_update = core.batched(other, 2, compile=True)
    with fxrl.compile.watch() as built:
        a, ma = other_update(other_init(random.key(5)))
    assert [(r.name, r.from_cache) for r in built] == [("update", True)]
    # the first update's annealed lr is each Config's own, not LEARN's baked in
    torch.testing.assert_close(ma["lr"], torch.full_like(ma["lr"], 3e-4), rtol=0, atol=0)
    torch.testing.assert_close(learn_metrics["lr"], torch.full_like(ma["lr"], 1e-3))
    assert not torch.equal(ma["loss"], learn_metrics["loss"])
    pairs = zip(tree.leaves(a.params), tree.leaves(learn.params), strict=True)
    assert all(not torch.equal(x, y) for x, y in pairs)  # every param learnt differently


def test_ppo_learns_cartpole_on_a_short_budget(learner):
    # two seeds, 40 updates through the compiled update, judged by each seed's greedy
    # policy over 5 episodes of gymnasium's CartPole-v1 (a random policy averages ~22)
    algo, init, update = learner
    state = init(random.key(0))
    for _ in range(LEARN.total_steps // algo.steps_per_update):
        state, _ = update(state)
    returns = [core.evaluate(algo, tree.index(state.params, i), 5) for i in range(2)]
    assert all(float(r.mean()) > 100 for r in returns), returns


def _rollout_with_ends(seed: int, t_len: int = 7, n: int = 5):
    """A [T, N] rollout of 3-d observations whose episodes end at random (terminated or
    truncated, at most one truncation per env): ``final_x[t]`` is the next step's
    observation unless the episode ended, then a final observation of its own."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(t_len + 1, n, 3, generator=g)
    finals = torch.randn(t_len, n, 3, generator=g)
    terminated = torch.rand(t_len, n, generator=g) < 0.25
    truncated = torch.zeros(t_len, n, dtype=torch.bool)
    cut_at = torch.randint(0, t_len + 3, (n,), generator=g)  # >= T: this env is not cut
    for e in range(n):
        if cut_at[e] < t_len:
            truncated[cut_at[e], e] = True
    ended = (terminated | truncated).unsqueeze(-1)
    final_x = torch.where(ended, finals, obs[1:])
    return obs, final_x, terminated, truncated


def _elementwise_value(x):
    """A value network of [..., 3] observations whose every output is a function of its own
    row alone, computed by elementwise ops (no reduction, no matmul)."""
    return 0.5 * x[..., 0] - x[..., 1] + 2.0 * x[..., 2]


@pytest.mark.parametrize("seed", range(12))
def test_rollout_next_values_are_the_networks_values_of_the_reached_observations(seed):
    # the reference: the network run on every step's reached observation, as a pure update
    # does; the rollout's own values must give the same advantages. The value network is
    # elementwise, so each observation's value has the same bits in a batch of any size (a
    # matmul's need not: a Xeon's BLAS rounded rows of a 10-row and a 35-row batch apart)
    calls = []

    def apply_value(x):
        calls.append(x.shape[0])
        return _elementwise_value(x)

    obs, final_x, terminated, truncated = _rollout_with_ends(seed)
    traj = {"final_x": final_x, "value": apply_value(obs[:-1]), "terminated": terminated,
            "truncated": truncated, "reward": torch.ones(terminated.shape)}  # fmt: skip
    want = apply_value(final_x)
    calls.clear()
    got = ppo._rollout_next_values(apply_value, traj)
    assert calls == [2 * 5]  # the last step's and one per env, not T x N observations
    kept = ~terminated  # a terminated step bootstraps nothing: its next value is not read
    torch.testing.assert_close(got[kept], want[kept], rtol=0, atol=0)
    hp = {"gamma": 0.99, "gae_lambda": 0.95}
    pairs = zip(
        onpolicy.advantages(traj, got, hp), onpolicy.advantages(traj, want, hp), strict=True
    )
    for a, b in pairs:
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_rollout_next_values_run_under_vmap_over_seeds():
    rollouts = [_rollout_with_ends(s) for s in (3, 4)]
    traj = {
        "final_x": torch.stack([r[1] for r in rollouts]),
        "value": torch.stack([_elementwise_value(r[0][:-1]) for r in rollouts]),
        "terminated": torch.stack([r[2] for r in rollouts]),
        "truncated": torch.stack([r[3] for r in rollouts]),
    }
    value = _elementwise_value
    got = torch.vmap(lambda t: ppo._rollout_next_values(value, t))(traj)
    for s in range(2):
        one = ppo._rollout_next_values(value, tree.map(lambda x, s=s: x[s], traj))
        torch.testing.assert_close(got[s], one, rtol=0, atol=0)


def test_ale_episode_steps_is_ales_frame_limit_at_the_host_frameskip():
    import inspect

    from fxrl.algorithms import host

    frames = inspect.signature(fxrl.envs.atari).parameters["max_num_frames_per_episode"].default
    assert frames // host.ALE_SETTINGS["frameskip"] == ppo.ALE_EPISODE_STEPS


def test_an_atari_update_with_channels_last_frames_equals_the_channels_first_one(monkeypatch):
    pytest.importorskip("ale_py")
    from fxrl.algorithms import host

    config = ppo.Config.tuned("ale:Breakout", num_envs=2, num_steps=8, total_steps=32,
                              num_minibatches=2, update_epochs=1)  # fmt: skip
    runs = []
    for last in (False, True):
        monkeypatch.setattr(ppo, "_FRAMES_LAST", last)
        init, update = host.batched(ppo.make(config), 1, compile=False)
        state, metrics = update(init(random.key(3)))
        runs.append((state, metrics))
    (first, m_first), (last, m_last) = runs
    assert torch.equal(first.env_state.actions, last.env_state.actions)
    # float rounding only: the layouts pick other conv kernels (as compiled vs eager)
    torch.testing.assert_close(last.params, first.params, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(m_last["loss"], m_first["loss"], rtol=1e-5, atol=1e-6)
    assert not torch.equal(
        last.params["net"]["dense"]["w"], init(random.key(3)).params["net"]["dense"]["w"]
    )
