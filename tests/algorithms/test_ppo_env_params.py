"""PPO's ``env_params`` (forwarded to ``fxrl.envs.make``) and its MLP on non-flat
observations (MinAtar's [10, 10, C], flattened as PureJaxRL's wrapper does)."""

import dataclasses
import math

import pytest
import torch

from fxrl import envs, random, tree
from fxrl.algorithms import core, ppo

SMALL = {"num_envs": 4, "num_steps": 8, "update_epochs": 2, "num_minibatches": 2}
# gymnax's MinAtar: no sticky actions, the minimal action set
GYMNAX = {"sticky_action_prob": 0.0, "minimal_action_set": True}


def _update(config: ppo.Config, seed: int = 0):
    algo = ppo.make(config)
    return algo, algo.update(algo.init(random.key(seed)))


def _same(a, b) -> bool:
    # bit for bit; NaN (no finished episode yet) equals NaN
    pairs = zip(tree.leaves(a), tree.leaves(b), strict=True)
    return all(
        x.shape == y.shape and bool(((x == y) | (x.isnan() & y.isnan())).all()) for x, y in pairs
    )


def test_env_params_reach_the_env_and_the_default_values_change_nothing():
    default = ppo.make(ppo.Config(**SMALL)).env.default_params
    plain = _update(ppo.Config(**SMALL))[1]
    # the default value given explicitly: bit-identical update
    same = _update(ppo.Config(**SMALL, env_params={"length": float(default.length)}))[1]
    assert _same(plain, same)
    # another value: the env (and so the rollout) differs
    algo, other = _update(ppo.Config(**SMALL, env_params={"length": 0.25}))
    assert float(algo.env.default_params.length) == 0.25
    assert not _same(plain[0].env_state, other[0].env_state)


def test_env_params_as_a_dict_or_pairs_in_any_order_make_equal_hashable_configs():
    a = ppo.Config(
        env="Breakout-MinAtar", env_params={"sticky_action_prob": 0.0, "minimal_action_set": True}
    )
    b = ppo.Config(
        env="Breakout-MinAtar",
        env_params=[["minimal_action_set", True], ["sticky_action_prob", 0.0]],
    )
    c = ppo.Config(env="Breakout-MinAtar", env_params=(("minimal_action_set", True),))
    assert a == b and hash(a) == hash(b) and len({a, b, c}) == 2 and a != c
    assert a.env_params == {"sticky_action_prob": 0.0, "minimal_action_set": True}  # as given
    assert dataclasses.replace(a, lr=1e-3) != a
    assert ppo.make(a).env.default_params == ppo.make(b).env.default_params


def test_an_unknown_env_param_is_a_one_line_error_naming_the_known_ones():
    # the Config only checks env_params' shape (building no env); make, which builds the env,
    # checks the names
    config = ppo.Config(env="Breakout-MinAtar", env_params={"sticky_prob": 0.0})
    with pytest.raises(
        ValueError,
        match=r"unknown Breakout-MinAtar param 'sticky_prob'.*"
        r"Did you mean 'sticky_action_prob'.*minimal_action_set",
    ) as e:
        ppo.make(config)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"env_params=.*expected a dict or \(name, value\) pairs"):
        ppo.Config(env_params=("length",))


def test_tuned_minatar_settings_are_purejaxrls():
    c = ppo.Config.tuned("SpaceInvaders-MinAtar")
    assert (c.num_envs, c.num_steps, c.update_epochs, c.num_minibatches) == (64, 128, 4, 8)
    assert (c.lr, c.anneal_lr, c.activation, c.hidden, c.total_steps) == (
        5e-3,
        True,
        "relu",
        (64, 64),
        10_000_000,
    )
    assert (c.gamma, c.gae_lambda, c.clip_eps, c.ent_coef, c.vf_coef, c.max_grad_norm) == (
        0.99,
        0.95,
        0.2,
        0.01,
        0.5,
        0.5,
    )
    assert not c.shared


def test_a_minatar_update_runs_eager():
    config = ppo.Config(env="Breakout-MinAtar", **SMALL, env_params=GYMNAX)
    algo, (state, metrics) = _update(config, seed=3)
    assert int(state.steps) == 4 * 8 and torch.isfinite(metrics["loss"])
    # the weights moved, and the rollout ran in the game (its env state advanced)
    before = algo.init(random.key(3))
    assert not _same(before.params, state.params)
    assert not _same(before.env_state, state.env_state)


def test_minatar_observations_are_flattened_for_the_mlp():
    config = ppo.Config(env="Breakout-MinAtar", **SMALL, env_params=GYMNAX)
    algo = ppo.make(config)
    assert algo.env.action_spec.n == 3  # the minimal action set reached the env
    state = algo.init(random.key(1))
    shape = tuple(algo.env.observation_spec.shape)
    assert state.obs.shape == (4, *shape) and len(shape) == 3
    actor = state.params["net"]["actor"]
    first = tree.leaves(actor)
    assert any(
        w.shape[-2:] == (math.prod(shape), 64) or w.shape[:2] == (64, math.prod(shape))
        for w in first
    )
    # the policy on [10, 10, C] equals the policy on the observation flattened by hand,
    # through the same network built for a flat Box of prod(shape) inputs
    flat = ppo.network(config, (math.prod(shape),), 3)
    nested = ppo.network(config, shape, 3)
    head_nested, value_nested = nested.apply(state.params["net"], state.obs)
    head_flat, value_flat = flat.apply(state.params["net"], state.obs.reshape(4, -1))
    assert torch.equal(head_nested, head_flat) and torch.equal(value_nested, value_flat)


# The game whose compiled program test_cpp_loop_plan's question is asked of too: is the
# rolled-loop plan inductor's own loop code, bit for bit, on a real program (PPO's whole
# update: a rollout through MinAtar, GAE, minibatch epochs; nested rolled loops with
# matmuls, Threefry and an optimizer)? Built twice, with and without the plan, one compile
# serves both questions.
PLANNED_GAME = "Breakout-MinAtar"


def _two_updates(game: str):
    """``(algo, states, (a, ma), (a2, ma2))``: core.batched's compiled update for two seeds,
    called on the fresh states and again on its own output (the second call runs the
    program the first built)."""
    algo = ppo.make(ppo.Config(env=game, **SMALL, env_params=GYMNAX))
    init, update = core.batched(algo, 2, compile=True)
    states = init(random.key(2))
    first = update(states)
    return algo, states, first, update(first[0])


@pytest.fixture(scope="module")
def compiled_minatar():
    """``get(game) -> {"run": _two_updates(game), "sources": wrapper sources or None,
    "inductors": (the run without the plan, its sources) or None}``, each game built once.
    PLANNED_GAME, where fxrl's C++ wrapper fixes apply, is built with inductor's FX graph
    cache off (so its wrapper is generated here), with the plan (the default) and without."""
    from fxrl import _cpp_wrapper_patch

    built: dict = {}

    def get(game: str) -> dict:
        if game not in built:
            if game == PLANNED_GAME and _cpp_wrapper_patch.applies():
                from test_cpp_loop_plan import build

                run, sources = build(lambda: _two_updates(game), True)
                built[game] = {"run": run, "sources": sources,
                               "inductors": build(lambda: _two_updates(game), False)}  # fmt: skip
            else:
                built[game] = {"run": _two_updates(game), "sources": None, "inductors": None}
        return built[game]

    return get


@pytest.mark.slow  # inductor on the MinAtar update: about 2 minutes on 2 cores
@pytest.mark.parametrize("game", ["Breakout-MinAtar", "SpaceInvaders-MinAtar"])
def test_a_minatar_update_runs_eager_and_compiled_alike(compiled_minatar, game):
    # Space Invaders read a module-level tensor in its step, which failed inductor's
    # compile of the rollout loop ("scan might be aliasing the input or the output")
    algo, states, (a, ma), _ = compiled_minatar(game)["run"]
    b, mb = torch.func.vmap(algo.update)(states)
    assert int(a.steps[0]) == 4 * 8
    for x, y in zip(tree.leaves(a), tree.leaves(b), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ma["loss"], mb["loss"], rtol=1e-4, atol=1e-5)
    assert torch.isfinite(ma["loss"]).all()


@pytest.mark.slow  # the same program built a second time, without the plan
def test_a_planned_ppo_update_is_inductors_bit_for_bit(compiled_minatar):
    # moved here from test_cpp_loop_plan (which checks the plan on small loops): two
    # seeds, two updates each (the second fed the first's output), planned and not
    from fxrl import _cpp_wrapper_patch

    if not _cpp_wrapper_patch.applies():
        pytest.skip("the plan is part of the torch 2.13 C++ wrapper fixes")
    from test_cpp_loop_plan import ALLOC, assert_bitwise_equal, loops

    built = compiled_minatar(PLANNED_GAME)
    planned, planned_src = built["run"][2:], built["sources"]
    inductors, inductors_src = built["inductors"]
    assert_bitwise_equal(planned, inductors[2:])
    assert any("_hoisted" in s for s in planned_src)
    assert not any("_hoisted" in s for s in inductors_src)
    in_loops = [sum(x.count(ALLOC) for x in loops(s)) for s in (planned_src + inductors_src)]
    half = len(planned_src)
    # PPO's loops (rollout, permutations, gradient steps) allocate nothing once planned
    assert sum(in_loops[:half]) == 0 < sum(in_loops[half:])


def test_the_cli_flags_pass_env_params(capsys, tmp_path):
    from fxrl.cli import main
    from fxrl.run import train_flags

    config, _ = train_flags.parse(
        ppo,
        "ppo",
        [
            "--env",
            "Breakout-MinAtar",
            "--env-params",
            "sticky_action_prob",
            "0",
            "minimal_action_set",
            "True",
        ],
    )
    assert dict(config.env_params) == {"minimal_action_set": True, "sticky_action_prob": 0}
    assert config.num_envs == 64  # the tuned MinAtar settings
    assert ppo.make(config).env.action_spec.n == 3 != envs.make("Breakout-MinAtar").action_spec.n
    # an unknown env param: make (which builds the env) refuses it before any run starts
    argv = ["--env", "Breakout-MinAtar", "--env-params", "sticky_prob", "0"]
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "ppo", "--out", str(tmp_path / "r"), *argv])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err and not (tmp_path / "r").exists()
    assert err.startswith("fxrl train: error: ppo.Config.env_params: unknown Breakout-MinAtar")
