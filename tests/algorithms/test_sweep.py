"""Sweeps: one vmapped update over combinations x seeds is the separate runs it stands for."""

import dataclasses

import pytest
import torch

from fxrl import random, tree
from fxrl.algorithms import core, dqn, ppo, recurrent_ppo, sac, sweeps, td3
from fxrl.testing import assert_trees_close

SEEDS, UPDATES = 2, 3
OFF_POLICY = {"num_envs": 2, "num_steps": 4, "gradient_steps": 2, "buffer_size": 64,
              "batch_size": 8, "hidden": (16, 16)}  # fmt: skip
# name -> (module, config, sweep): two fields of two values each, tiny nets and budgets.
# Where a swept number enters only as a Python float would (float64 math, or a float32
# tensor with dims, which casts it to float32 first), the sweep is the separate runs bit
# for bit. Two kernels round differently with a tensor than with a Python number: torch's
# `scalar / tensor` is `tensor.reciprocal() * scalar` (clip_by_global_norm's
# max_norm / norm) and lerp with a tensor weight (soft_update's tau); SAC's Adam steps
# differ in the last bit too. One-ulp differences there, carried through 3 updates of
# Adam, measured up to 1.6e-5 relative: those cases allow 1e-4.
INEXACT = {"ppo_fixed_lr": 1e-4, "sac": 1e-4}
CASES = {
    "ppo": (
        ppo,
        ppo.Config(
            num_envs=4,
            num_steps=16,
            update_epochs=2,
            num_minibatches=2,
            hidden=(16, 16),
            total_steps=64 * UPDATES,
        ),
        {"lr": [2.5e-4, 3e-3], "ent_coef": [0.0, 0.05]},
    ),
    "ppo_fixed_lr": (
        ppo,
        ppo.Config(
            num_envs=4,
            num_steps=16,
            update_epochs=2,
            num_minibatches=2,
            hidden=(16, 16),
            anneal_lr=False,
            max_grad_norm=0.1,
        ),
        {"lr": [1e-3, 3e-3], "max_grad_norm": [0.1, 0.5]},
    ),
    "dqn": (
        dqn,
        dqn.Config(**OFF_POLICY, learning_starts=8, target_update_every=3, eps_decay_steps=16),
        {"lr": [1e-3, 1e-2], "gamma": [0.9, 0.99]},
    ),
    "sac": (
        sac,
        sac.Config(env="Pendulum-v1", **OFF_POLICY, learning_starts=8),
        {"critic_lr": [1e-3, 1e-2], "tau": [0.005, 0.1]},
    ),
    "td3_ou": (
        td3,
        td3.Config(
            env="MountainCarContinuous-v0", **OFF_POLICY, learning_starts=8, noise_type="ou"
        ),
        {"exploration_noise": [0.1, 0.5], "ou_theta": [0.05, 0.5]},
    ),
    "recurrent_ppo": (
        recurrent_ppo,
        recurrent_ppo.Config(
            num_envs=4,
            num_steps=8,
            update_epochs=2,
            num_minibatches=2,
            rnn_hidden=8,
            hidden=(8,),
            total_steps=32 * UPDATES,
        ),
        {"lr": [1e-3, 1e-2], "gae_lambda": [0.9, 0.95]},
    ),
}


def run(init, update, key):
    state, history = init(key), []
    for _ in range(UPDATES):
        state, metrics = update(state)
        history.append(metrics)
    return state, tree.stack(history)


@pytest.mark.parametrize("name", list(CASES))
def test_a_sweep_equals_the_separate_runs_it_stands_for(name):
    module, config, sweep = CASES[name]
    key = random.key(7)
    state, metrics = run(*core.batched(module.make(config), SEEDS, False, sweep=sweep), key)
    combos = sweeps.combinations(sweep)
    assert tree.leaves(state)[0].shape[0] == len(combos) * SEEDS
    separate = []
    for c, combo in enumerate(combos):
        algo = module.make(dataclasses.replace(config, **combo))
        alone, alone_metrics = run(*core.batched(algo, SEEDS, False), key)
        agents = slice(c * SEEDS, (c + 1) * SEEDS)
        rtol = INEXACT.get(name, 0.0)
        atol = 1e-6 if rtol else 0.0
        assert_trees_close(tree.map(lambda x, a=agents: x[a], state), alone, rtol, atol)
        swept = tree.map(lambda x, a=agents: x[:, a], metrics)
        assert_trees_close(swept, alone_metrics, rtol, atol)
        separate.append(alone)
    # the swept values matter: the first and the last combination trained differently
    first, last = tree.leaves(separate[0].params), tree.leaves(separate[-1].params)
    assert any(not torch.equal(a, b) for a, b in zip(first, last, strict=True))


def test_agent_c_times_seeds_plus_s_starts_as_seed_s_of_a_run_without_the_sweep():
    module, config, sweep = CASES["ppo"]
    algo = module.make(config)
    key = random.key(3)
    init, _ = core.batched(algo, 3, False, sweep=sweep)
    plain, _ = core.batched(algo, 3, False)
    swept, alone = init(key), plain(key)
    for c in range(4):
        part = tree.map(lambda x, c=c: x[3 * c : 3 * (c + 1)], swept)
        assert_trees_close(part, alone, rtol=0, atol=0)
    one, _ = core.batched(algo, 1, False, sweep={"lr": [1e-3, 2e-3]})
    first = tree.map(lambda x: x[1], one(key))  # one seed: the run's key itself, unsplit
    assert_trees_close(first, algo.init(key), rtol=0, atol=0)


def test_combinations_vary_the_last_field_fastest_and_names_read_as_typed():
    sweep = {"lr": [1e-4, 3e-4], "ent_coef": [0, 0.01]}
    assert sweeps.combinations(sweep) == [
        {"lr": 1e-4, "ent_coef": 0}, {"lr": 1e-4, "ent_coef": 0.01},
        {"lr": 3e-4, "ent_coef": 0}, {"lr": 3e-4, "ent_coef": 0.01},
    ]  # fmt: skip
    assert sweeps.combination_names(sweep) == [
        "lr=0.0001,ent_coef=0", "lr=0.0001,ent_coef=0.01", "lr=0.0003,ent_coef=0",
        "lr=0.0003,ent_coef=0.01",
    ]  # fmt: skip
    # a value %g would round is written in full, so names stay distinct
    assert sweeps.combination_names({"gamma": [0.9999991, 0.9999992]}) == [
        "gamma=0.9999991", "gamma=0.9999992"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("module", "sweep", "message"),
    [
        (
            ppo,
            {"num_envs": [4, 8]},
            r"cannot sweep 'num_envs': it is structural .*Fields of "
            r"ppo.Config that can be swept: lr, gamma, gae_lambda, clip_eps, ent_coef, vf_coef, "
            r"max_grad_norm\.$",
        ),
        (ppo, {"lrr": [1e-3]}, r"'lrr': it is not a field of ppo.Config\. Did you mean 'lr'\?"),
        (dqn, {"max_grad_norm": [0.0, 10.0]}, r"'max_grad_norm': it is structural"),
        (sac, {"alpha_init": [0.1, 1.0]}, r"'alpha_init': it is structural.*init reads it"),
        (ppo, {"lr": ["fast"]}, r"sweep lr: expected a non-empty list of finite numbers"),
        (ppo, {"lr": []}, r"sweep lr: expected a non-empty list"),
        (ppo, {"lr": [1e-3, 1e-3]}, r"repeat one"),
        (ppo, {"lr": [1e-3, -1.0]}, r"ppo.Config: lr=-1.0 is not allowed; expected a positive"),
        (ppo, {}, r"sweep: expected \{field: \[values\]\}"),
        (recurrent_ppo, {"cell": ["gru"]}, r"'cell': it is structural"),
    ],
)
def test_a_bad_sweep_is_a_one_line_error_naming_what_can_be_swept(module, sweep, message):
    with pytest.raises(ValueError, match=message) as info:
        core.batched(module.make(module.Config()), 2, False, sweep=sweep)
    assert "\n" not in str(info.value)


def test_an_algorithm_whose_update_takes_no_hyperparameters_cannot_be_swept():
    algo = ppo.make(ppo.Config())._replace(hyperparams={})  # as a user's own algorithm
    with pytest.raises(ValueError, match=r"ppo.Config has no sweepable fields") as info:
        core.batched(algo, 2, False, sweep={"lr": [1e-3, 1e-2]})
    assert "\n" not in str(info.value)


def test_update_takes_hyperparameters_as_an_argument_and_refuses_an_unknown_name():
    # hyperparameters are data: the Config's numbers unless given, a tensor or a number
    module, config, _ = CASES["ppo"]
    algo, key = module.make(config), random.key(1)
    plain, _ = algo.update(algo.init(key))
    same, _ = algo.update(algo.init(key), {"ent_coef": config.ent_coef})
    assert_trees_close(plain, same, rtol=0, atol=0)
    other = module.make(dataclasses.replace(config, ent_coef=0.3, lr=1e-2))
    want, want_metrics = other.update(other.init(key))
    given = {"ent_coef": torch.tensor(0.3, dtype=torch.float64), "lr": 1e-2}
    got, got_metrics = algo.update(algo.init(key), given)
    assert_trees_close(got, want, rtol=0, atol=0)
    assert_trees_close(got_metrics, want_metrics, rtol=0, atol=0)
    assert set(algo.hyperparams) == set(ppo.HYPERPARAMS)
    with pytest.raises(ValueError, match=r"'ent' is not a hyperparameter of ppo.Config\.") as e:
        algo.update(algo.init(key), {"ent": 0.1})
    assert "\n" not in str(e.value)


@pytest.fixture(scope="module", params=["ppo", "dqn", "td3_ou"])
def compiled_sweep(request):
    # one compile per algorithm (30-70 s on 2 idle cores): the whole vmapped sweep
    # update as one program, loops rolled (TD3 with OU noise stands for SAC too: the
    # off-policy skeleton they share is what the program is made of)
    module, config, sweep = CASES[request.param]
    algo = module.make(config)
    key = random.key(7)
    compiled = run(*core.batched(algo, SEEDS, True, sweep=sweep), key)
    eager = run(*core.batched(algo, SEEDS, False, sweep=sweep), key)
    return request.param, compiled, eager


def test_a_compiled_sweep_is_the_eager_sweep(compiled_sweep):
    # inductor fuses and reorders float32 math, so not bit for bit: after 3 updates the
    # states measured at most 1.2e-7 (PPO) and 2.4e-7 (DQN) apart; checked to the
    # tolerance of the inexact eager cases (INEXACT: rtol 1e-4, atol 1e-6)
    name, (state, metrics), (eager_state, eager_metrics) = compiled_sweep
    assert_trees_close(state, eager_state, 1e-4, 1e-6)
    assert_trees_close(metrics, eager_metrics, 1e-4, 1e-6)
    # the swept numbers are inputs of the program, not one combination's baked in
    first = tree.leaves(tree.index(state.params, 0))
    last = tree.leaves(tree.index(state.params, -1))
    assert any(not torch.equal(a, b) for a, b in zip(first, last, strict=True))
    if name == "ppo":  # the annealed lr of the first update is each agent's swept lr
        lrs = [c["lr"] for c in sweeps.combinations(CASES["ppo"][2]) for _ in range(SEEDS)]
        torch.testing.assert_close(metrics["lr"][0], torch.tensor(lrs))


def test_a_sweep_under_a_torch_compile_backend_is_refused_in_one_line():
    module, config, sweep = CASES["ppo"]
    with pytest.raises(ValueError, match=r"a sweep compiles with compile=True") as info:
        core.batched(module.make(config), SEEDS, "aot_eager", sweep=sweep)
    assert "\n" not in str(info.value)
