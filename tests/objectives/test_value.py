"""fxrl.objectives value estimators against naive Python loops, identities and bad input."""

from functools import partial

import pytest
import torch
import value_reference as ref
from hypothesis import given
from hypothesis import strategies as st

from fxrl.objectives import gae, n_step, n_step_transitions, td0, td_lambda, vtrace

TIGHT = {"rtol": 1e-9, "atol": 1e-9}


def _discounts(traj, *names):
    return [ref.expanded(traj[n], traj["reward"]) for n in names]


@given(traj=ref.trajectories())
def test_gae_equals_a_naive_reverse_loop(traj):
    g, lam = _discounts(traj, "gamma", "lmbda")
    fields = [traj[k] for k in ("reward", "value", "next_value", "terminated", "truncated")]
    advantage, target = gae(*fields, gamma=traj["gamma"], lmbda=traj["lmbda"])
    want_adv, want_target = ref.per_env(ref.gae, *fields, g, lam)
    torch.testing.assert_close(advantage, want_adv, **TIGHT)
    torch.testing.assert_close(target, want_target, **TIGHT)


@given(traj=ref.trajectories())
def test_td_lambda_equals_a_naive_reverse_loop(traj):
    g, lam = _discounts(traj, "gamma", "lmbda")
    fields = [traj[k] for k in ("reward", "next_value", "terminated", "truncated")]
    got = td_lambda(*fields, gamma=traj["gamma"], lmbda=traj["lmbda"])
    (want,) = ref.per_env(ref.td_lambda, *fields, g, lam)
    torch.testing.assert_close(got, want, **TIGHT)


@given(traj=ref.trajectories())
def test_td0_is_reward_plus_discounted_next_value_unless_terminated(traj):
    got = td0(traj["reward"], traj["next_value"], traj["terminated"], gamma=traj["gamma"])
    (g,) = _discounts(traj, "gamma")
    (want,) = ref.per_env(
        lambda r, nv, term, g: [[r[t] + (0.0 if term[t] else g[t] * nv[t]) for t in range(len(r))]],
        traj["reward"],
        traj["next_value"],
        traj["terminated"],
        g,
    )
    torch.testing.assert_close(got, want, **TIGHT)


@given(traj=ref.trajectories(), n=st.integers(1, 12))
def test_n_step_equals_a_naive_loop_over_each_start(traj, n):
    (g,) = _discounts(traj, "gamma")
    fields = [traj[k] for k in ("reward", "next_value", "terminated", "truncated")]
    got = n_step(*fields, gamma=traj["gamma"], n=n)
    (want,) = ref.per_env(lambda *c: ref.n_step(*c, n), *fields, g)
    torch.testing.assert_close(got, want, **TIGHT)


@given(
    traj=ref.trajectories(),
    clips=st.tuples(*[st.sampled_from([0.5, 1.0, 2.0, float("inf")])] * 3),
)
def test_vtrace_equals_the_impala_sums(traj, clips):
    g, lam = _discounts(traj, "gamma", "lmbda")
    names = ("reward", "value", "next_value", "terminated", "truncated", "log_rho")
    fields = [traj[k] for k in names]
    clip_rho, clip_c, clip_pg = clips
    vs, pg = vtrace(
        *fields,
        gamma=traj["gamma"],
        lmbda=traj["lmbda"],
        clip_rho=clip_rho,
        clip_c=clip_c,
        clip_pg_rho=clip_pg,
    )
    naive = partial(ref.vtrace, clip_rho=clip_rho, clip_c=clip_c, clip_pg=clip_pg)
    want_vs, want_pg = ref.per_env(naive, *fields, g, lam)
    torch.testing.assert_close(vs, want_vs, **TIGHT)
    torch.testing.assert_close(pg, want_pg, **TIGHT)


@given(traj=ref.trajectories(), n=st.integers(1, 12))
def test_n_step_transitions_rebuild_n_step_and_point_inside_the_episode(traj, n):
    fields = [traj[k] for k in ("reward", "terminated", "truncated")]
    tr = n_step_transitions(*fields, gamma=traj["gamma"], n=n)
    horizon = traj["reward"].shape[0]
    start = torch.arange(horizon).view(-1, *[1] * (traj["reward"].dim() - 1))
    steps = tr.next_index - start + 1
    assert bool(((steps >= 1) & (steps <= n) & (tr.next_index < horizon)).all())
    if isinstance(traj["gamma"], float):
        torch.testing.assert_close(tr.discount, traj["gamma"] ** steps.double(), **TIGHT)
    nv = traj["next_value"]
    rebuilt = tr.reward + tr.discount * nv.gather(0, tr.next_index) * (~tr.terminated)
    want = n_step(traj["reward"], nv, *fields[1:], gamma=traj["gamma"], n=n)
    torch.testing.assert_close(rebuilt, want, **TIGHT)


@given(traj=ref.trajectories())
def test_td_lambda_with_lambda_zero_is_td0_and_n_step_one_is_td0(traj):
    args = [traj[k] for k in ("reward", "next_value", "terminated", "truncated")]
    one_step = td0(*args[:3], gamma=traj["gamma"])
    torch.testing.assert_close(td_lambda(*args, gamma=traj["gamma"], lmbda=0.0), one_step)
    torch.testing.assert_close(n_step(*args, gamma=traj["gamma"], n=1), one_step)


@given(traj=ref.trajectories())
def test_td_lambda_with_lambda_one_is_n_step_over_the_whole_trajectory(traj):
    args = [traj[k] for k in ("reward", "next_value", "terminated", "truncated")]
    whole = n_step(*args, gamma=traj["gamma"], n=traj["reward"].shape[0])
    torch.testing.assert_close(td_lambda(*args, gamma=traj["gamma"], lmbda=1.0), whole, **TIGHT)


@given(traj=ref.trajectories())
def test_gae_target_is_td_lambda_when_values_agree_across_steps(traj):
    # value[t + 1] = V(next_obs[t]) inside an episode: GAE's target is the lambda-return.
    cut = traj["terminated"] | traj["truncated"]
    nv = traj["next_value"]
    value = torch.cat([traj["value"][:1], torch.where(cut[:-1], traj["value"][1:], nv[:-1])])
    flags = (traj["terminated"], traj["truncated"])
    _, target = gae(traj["reward"], value, nv, *flags, gamma=traj["gamma"], lmbda=traj["lmbda"])
    want = td_lambda(traj["reward"], nv, *flags, gamma=traj["gamma"], lmbda=traj["lmbda"])
    torch.testing.assert_close(target, want, **TIGHT)


def test_td_lambda_with_lambda_one_is_the_discounted_return():
    reward = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    next_value = torch.tensor([10.0, 20.0, 30.0, 40.0, 50.0])
    terminated = torch.tensor([False, True, False, False, False])
    truncated = torch.tensor([False, False, False, True, False])
    got = td_lambda(reward, next_value, terminated, truncated, gamma=0.5, lmbda=1.0)
    # episode 1 ends terminated at t=1; episode 2 truncated at t=3 (bootstrap 40); the
    # trajectory ends at t=4 (bootstrap 50).
    want = torch.tensor([1 + 0.5 * 2, 2.0, 3 + 0.5 * 4 + 0.25 * 40, 4 + 0.5 * 40, 5 + 0.5 * 50])
    torch.testing.assert_close(got, want)


def test_gae_with_a_gamma_per_env_equals_one_call_per_env():
    gen = torch.Generator().manual_seed(0)
    reward, value, next_value = torch.randn(3, 40, 4, generator=gen).unbind(0)
    terminated = torch.rand(40, 4, generator=gen) < 0.1
    truncated = torch.rand(40, 4, generator=gen) < 0.1
    gamma = torch.tensor([0.9, 0.99, 0.5, 1.0])
    args = (reward, value, next_value, terminated, truncated)
    advantage, _ = gae(*args, gamma=gamma, lmbda=0.95)
    for i in range(4):
        column = [x[:, i] for x in args]
        want, _ = gae(*column, gamma=float(gamma[i]), lmbda=0.95)
        torch.testing.assert_close(advantage[:, i], want)


def test_gae_in_float32_over_2048_steps_stays_within_1e_5_of_float64():
    gen = torch.Generator().manual_seed(1)
    reward, value, next_value = torch.randn(3, 2048, 8, generator=gen).unbind(0)
    terminated = torch.rand(2048, 8, generator=gen) < 0.002
    truncated = torch.zeros(2048, 8, dtype=torch.bool)
    args = (reward, value, next_value, terminated, truncated)
    adv32, _ = gae(*args, gamma=0.999, lmbda=0.99)
    adv64, _ = gae(
        *(x.double() if x.is_floating_point() else x for x in args), gamma=0.999, lmbda=0.99
    )
    scale = adv64.abs().max()
    assert float((adv32.double() - adv64).abs().max() / scale) < 1e-5


def test_value_estimators_do_not_mutate_their_inputs():
    gen = torch.Generator().manual_seed(2)
    fields = {k: torch.randn(6, 2, generator=gen) for k in ("reward", "value", "next_value")}
    fields["terminated"] = torch.tensor([[0, 1], [0, 0], [1, 0], [0, 0], [0, 1], [0, 0]]).bool()
    fields["truncated"] = torch.zeros(6, 2, dtype=torch.bool).index_fill(0, torch.tensor([3]), True)
    fields["log_rho"] = torch.randn(6, 2, generator=gen)
    before = {k: v.clone() for k, v in fields.items()}
    f = fields
    gae(
        f["reward"],
        f["value"],
        f["next_value"],
        f["terminated"],
        f["truncated"],
        gamma=0.9,
        lmbda=0.8,
    )
    vtrace(*f.values(), gamma=0.9)
    n_step(f["reward"], f["next_value"], f["terminated"], f["truncated"], gamma=0.9, n=3)
    for k, v in fields.items():
        assert torch.equal(v, before[k]), k


def _episode(t=5, batch=(4,)):
    shape = (t, *batch)
    return {
        "reward": torch.zeros(shape),
        "value": torch.zeros(shape),
        "next_value": torch.zeros(shape),
        "terminated": torch.zeros(shape, dtype=torch.bool),
        "truncated": torch.zeros(shape, dtype=torch.bool),
    }


def _gae(f, **kw):
    return gae(*f.values(), **{"gamma": 0.99, "lmbda": 0.95, **kw})


def test_gae_names_the_field_whose_shape_differs_and_both_shapes():
    f = _episode()
    f["value"] = torch.zeros(5, 4, 1)
    with pytest.raises(
        ValueError, match=r"gae: value has shape \[5, 4, 1\] but reward has \[5, 4\]"
    ):
        _gae(f)


def test_gae_rejects_float_flags_and_says_to_call_bool():
    f = _episode()
    f["terminated"] = torch.zeros(5, 4)
    with pytest.raises(
        TypeError, match=r"terminated has \[5, 4\] float32; expected a bool.*\.bool\(\)"
    ):
        _gae(f)


def test_td0_rejects_integer_rewards_and_says_to_call_float():
    f = _episode()
    reward = torch.zeros(5, 4, dtype=torch.int64)
    with pytest.raises(TypeError, match=r"td0: reward has \[5, 4\] int64; expected a floating"):
        td0(reward, f["next_value"], f["terminated"], gamma=0.9)


def test_value_estimators_reject_an_empty_trajectory_and_a_scalar():
    with pytest.raises(ValueError, match=r"empty trajectory \(T=0\)"):
        _gae(_episode(t=0))
    with pytest.raises(ValueError, match=r"reward is a scalar; expected time-major \[T, \*B\]"):
        td0(torch.tensor(1.0), torch.tensor(1.0), torch.tensor(False), gamma=0.9)


def test_gae_rejects_a_gamma_that_does_not_broadcast_and_out_of_range_floats():
    with pytest.raises(
        ValueError, match=r"gamma has shape \[3\], which does not broadcast to .*\[5, 4\]"
    ):
        _gae(_episode(), gamma=torch.full((3,), 0.9))
    with pytest.raises(ValueError, match=r"lmbda=1.5; expected a number in \[0, 1\]"):
        _gae(_episode(), lmbda=1.5)


def test_n_step_rejects_n_below_one():
    f = _episode()
    with pytest.raises(ValueError, match=r"n_step: n=0; expected a Python int >= 1"):
        n_step(f["reward"], f["next_value"], f["terminated"], f["truncated"], gamma=0.9, n=0)
    with pytest.raises(ValueError, match=r"n_step_transitions: n=2.0; expected a Python int"):
        n_step_transitions(f["reward"], f["terminated"], f["truncated"], gamma=0.9, n=2.0)


def test_a_float64_gamma_tensor_keeps_a_float32_trajectory_in_float32():
    f = _episode()
    gamma = torch.full((4,), 0.99, dtype=torch.float64)
    advantage, target = _gae(f, gamma=gamma)
    assert advantage.dtype == target.dtype == torch.float32
    nst = n_step_transitions(f["reward"], f["terminated"], f["truncated"], gamma=gamma, n=2)
    assert nst.discount.dtype == torch.float32


@pytest.mark.parametrize("horizon", [257, 1000])
def test_gae_and_vtrace_over_long_trajectories_equal_the_naive_loops(horizon):
    # Long enough for several doubling steps across the scan's chunks; rare episode ends.
    gen = torch.Generator().manual_seed(horizon)
    shape = (horizon, 3)
    reward, value, next_value, log_rho = torch.randn(4, *shape, generator=gen, dtype=torch.float64)
    flags = (torch.rand(shape, generator=gen) < 0.01, torch.rand(shape, generator=gen) < 0.005)
    g, lam = ref.expanded(0.999, reward), ref.expanded(0.97, reward)
    advantage, _ = gae(reward, value, next_value, *flags, gamma=0.999, lmbda=0.97)
    want, _ = ref.per_env(ref.gae, reward, value, next_value, *flags, g, lam)
    torch.testing.assert_close(advantage, want, **TIGHT)
    fields = (reward, value, next_value, *flags, log_rho)
    vs, _ = vtrace(*fields, gamma=0.999, lmbda=0.97, clip_c=1.5)
    naive = partial(ref.vtrace, clip_rho=1.0, clip_c=1.5, clip_pg=1.0)
    want_vs, _ = ref.per_env(naive, *fields, g, lam)
    torch.testing.assert_close(vs, want_vs, **TIGHT)
