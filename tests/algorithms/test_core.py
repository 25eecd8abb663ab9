"""Shared algorithm helpers: episode statistics, scan, config checks, batched, evaluate."""

import dataclasses
import math

import gymnasium
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import tree
from fxrl.algorithms import core
from fxrl.scan import scan


@given(
    data=st.lists(
        st.tuples(st.booleans(), st.floats(-500, 500, width=32), st.integers(1, 500)),
        min_size=1,
        max_size=40,
    )
)
def test_episode_metrics_equal_a_python_loop_over_finished_episodes(data):
    done = torch.tensor([d for d, _, _ in data])
    ret = torch.tensor([r for _, r, _ in data], dtype=torch.float32)
    length = torch.tensor([n for _, _, n in data])
    out = core.episode_metrics(done.reshape(-1, 1), ret.reshape(-1, 1), length.reshape(-1, 1))
    finished = [(r, n) for d, r, n in data if d]
    assert int(out["episodes"]) == len(finished)
    if finished:
        mean_ret = sum(float(torch.tensor(r, dtype=torch.float32)) for r, _ in finished)
        assert float(out["episode_return"]) == pytest.approx(mean_ret / len(finished), rel=1e-5)
        assert float(out["episode_length"]) == pytest.approx(
            sum(n for _, n in finished) / len(finished)
        )
    else:
        assert math.isnan(float(out["episode_return"]))


def test_episode_metrics_report_nan_not_zero_when_no_episode_ended():
    done = torch.zeros(8, 4, dtype=torch.bool)
    out = core.episode_metrics(done, torch.full((8, 4), 3.0), torch.full((8, 4), 3))
    assert int(out["episodes"]) == 0
    assert math.isnan(float(out["episode_return"])) and math.isnan(float(out["episode_length"]))
    assert out["episode_return"].dtype == torch.float32


def test_episode_metrics_run_under_vmap_and_compile():
    done = torch.tensor([[[True, False]], [[False, False]]])  # 2 seeds, T=1, B=2
    ret = torch.tensor([[[5.0, 1.0]], [[2.0, 2.0]]])
    f = torch.compile(torch.func.vmap(core.episode_metrics), backend="eager", fullgraph=True)
    out = f(done, ret, ret)
    assert out["episodes"].tolist() == [1, 0]
    assert out["episode_return"][0] == 5.0 and math.isnan(float(out["episode_return"][1]))


@tree.dataclass
class _Carry:
    x: torch.Tensor
    passthrough: torch.Tensor


def _body(c, x):
    new = c.x * 0.5 + x["u"]
    return _Carry(new, c.passthrough), {"y": new * 2}


def test_scan_compiled_equals_the_eager_python_loop_with_a_dataclass_carry():
    carry = _Carry(torch.ones(3), torch.zeros(3).expand(3))
    xs = {"u": torch.arange(12.0).reshape(4, 3)}
    eager_c, eager_y = scan(_body, carry, xs)
    f = torch.compile(lambda c, x: scan(_body, c, x), backend="aot_eager", fullgraph=True)
    comp_c, comp_y = f(carry, xs)
    torch.testing.assert_close(eager_c.x, comp_c.x, rtol=0, atol=0)
    torch.testing.assert_close(eager_y["y"], comp_y["y"], rtol=0, atol=0)
    assert eager_y["y"].shape == (4, 3)
    naive = torch.ones(3)
    for t in range(4):
        naive = naive * 0.5 + xs["u"][t]
    torch.testing.assert_close(eager_c.x, naive)


@dataclasses.dataclass(frozen=True)
class _Config:
    env: str = "CartPole-v1"
    num_envs: int = 4


def test_check_env_id_names_the_field_the_value_and_the_closest_id():
    with pytest.raises(ValueError, match=r"env='CartPol-v1'.*Did you mean 'CartPole-v1'"):
        core.check_env_id(_Config(env="CartPol-v1"))


def test_get_names_the_closest_algorithm_and_the_known_ones():
    from fxrl import algorithms

    assert algorithms.get("dqn").__name__ == "fxrl.algorithms.dqn"
    with pytest.raises(ValueError, match=r"^fxrl.algorithms.get: unknown algorithm 'ppp'\. "
                       r"Did you mean 'ppo'\? Expected one of: ppo, dqn, sac, td3, "
                       r"recurrent_ppo\.$"):  # fmt: skip
        algorithms.get("ppp")


def test_check_positive_names_the_field_and_what_is_allowed():
    with pytest.raises(ValueError, match=r"_Config: num_envs=0 is not allowed; expected a pos"):
        core.check_positive(_Config(num_envs=0), "num_envs")


def test_batched_rejects_a_bad_seed_count():
    with pytest.raises(ValueError, match="num_seeds must be a positive int"):
        core.batched(None, 0)


def _constant_algo(action: int) -> core.Algorithm:
    from fxrl import envs

    cfg = _Config()
    return core.Algorithm(
        init=None,
        update=None,
        policy=lambda params, obs, key=None, mode="mode": torch.tensor(action),
        config=cfg,
        env=envs.make(cfg.env),
        steps_per_update=1,
    )


def test_evaluate_plays_in_gymnasiums_own_env_with_seeds_in_order():
    returns = core.evaluate(_constant_algo(1), None, episodes=3, seed=5)
    expected = []
    for s in range(5, 8):
        env = gymnasium.make("CartPole-v1")
        env.reset(seed=s)
        total, done = 0.0, False
        while not done:
            _, r, term, trunc, _ = env.step(1)
            total, done = total + r, term or trunc
        expected.append(total)
    assert returns.tolist() == expected


def test_evaluate_in_the_pure_env_gives_an_episode_return_per_episode():
    returns = core.evaluate(_constant_algo(0), None, episodes=2, gymnasium=False)
    assert returns.shape == (2,) and bool((returns > 0).all()) and bool((returns < 30).all())


# ------------------------------------------------------------------------------ whole training

_TINY_PPO = {"num_envs": 2, "num_steps": 4, "update_epochs": 1, "num_minibatches": 1,
             "hidden": (8,), "total_steps": 48}  # fmt: skip


def test_train_k_updates_per_call_is_k_single_updates_and_streams_every_metric():
    from fxrl import random
    from fxrl.algorithms import ppo

    algo = ppo.make(ppo.Config(**_TINY_PPO))  # 48 steps: 6 updates of 8
    seen: list[int] = []
    one, m_one = core.train(algo, random.key(2), 2, compile=False)
    three, m_three = core.train(algo, random.key(2), 2, compile=False, updates_per_call=3,
                                callback=lambda i, m: seen.append(i))  # fmt: skip
    assert seen == list(range(6)) and m_three["steps"].shape == (6, 2)
    for a, b in zip(tree.leaves((three, m_three)), tree.leaves((one, m_one)), strict=True):
        assert torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                                     and torch.equal(a.nan_to_num(), b.nan_to_num()))  # fmt: skip


@pytest.mark.slow  # one compile of 3 updates x 2 seeds with every loop rolled
def test_whole_training_compiles_k_updates_as_one_program_equal_to_k_eager_updates():
    from fxrl import random
    from fxrl.algorithms import ppo
    from fxrl.testing import assert_trees_close

    algo = ppo.make(ppo.Config(**_TINY_PPO))
    init, train_k = core.whole_training(algo, 3, num_seeds=2)
    _, update = core.batched(algo, 2, compile=False)
    state = init(random.key(4))
    compiled, metrics = train_k(tree.map(torch.clone, state))
    assert len(train_k._programs) == 1 and metrics["steps"].shape == (3, 2)
    eager, history = state, []
    for _ in range(3):
        eager, m = update(eager)
        history.append(m)
    assert_trees_close(compiled, eager, rtol=1e-4, atol=1e-5)
    assert_trees_close(metrics, tree.stack(history), rtol=1e-4, atol=1e-5)


def test_whole_training_refuses_an_update_that_writes_a_replay_buffer_in_place():
    from fxrl.algorithms import dqn

    with pytest.raises(ValueError, match=r"dqn's update writes its replay buffer in place") as e:
        core.whole_training(dqn.make(dqn.Config()), 4)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"updates_per_call": 0}, "updates_per_call must be a positive int, got 0"),
        ({"updates_per_call": 4}, "num_updates=6 is not a multiple of updates_per_call=4"),
    ],
)
def test_train_names_a_bad_updates_per_call(kwargs, message):
    from fxrl import random
    from fxrl.algorithms import ppo

    with pytest.raises(ValueError, match=message):
        core.train(ppo.make(ppo.Config(**_TINY_PPO)), random.key(0), compile=False, **kwargs)
