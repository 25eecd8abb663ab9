"""fxrl.schedules: values, torch's closed forms, use under vmap."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import schedules
from fxrl.testing import assert_trees_close, check_vmap

steps = st.integers(0, 1000)


@given(
    step=steps,
    init=st.floats(-2, 2),
    end=st.floats(-2, 2),
    n=st.integers(1, 500),
    begin=st.integers(0, 50),
)
def test_linear_schedule_interpolates_then_holds(step, init, end, n, begin):
    frac = min(max((step - begin) / n, 0.0), 1.0)
    value = float(schedules.linear_schedule(init, end, n, begin)(step))
    assert value == pytest.approx(init + (end - init) * frac, abs=1e-12)


def test_linear_schedule_hits_its_ends():
    s = schedules.linear_schedule(1.0, 0.05, 100)
    assert float(s(0)) == 1.0
    assert float(s(100)) == 0.05
    assert float(s(10**6)) == 0.05


@given(step=st.integers(0, 200), alpha=st.floats(0.0, 0.5))
def test_cosine_decay_equals_torch_cosine_annealing_closed_form(step, alpha):
    init, t_max = 0.1, 150
    eta_min = alpha * init
    t = min(step, t_max)
    expected = eta_min + (init - eta_min) * (1 + math.cos(math.pi * t / t_max)) / 2
    assert float(schedules.cosine_decay_schedule(init, t_max, alpha)(step)) == pytest.approx(
        expected, abs=1e-12
    )


def test_cosine_decay_tracks_torch_cosine_annealing_lr():
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=20, eta_min=0.01)
    ours = schedules.cosine_decay_schedule(0.1, 20, alpha=0.1)
    for step in range(20):
        assert float(ours(step)) == pytest.approx(opt.param_groups[0]["lr"], abs=1e-9)
        opt.step()
        sched.step()


def test_warmup_cosine_rises_then_decays_to_the_end_value():
    s = schedules.warmup_cosine_decay_schedule(
        0.0, 1.0, warmup_steps=10, decay_steps=110, end_value=0.1
    )
    assert float(s(0)) == 0.0
    assert float(s(5)) == pytest.approx(0.5)
    assert float(s(10)) == pytest.approx(1.0)
    assert float(s(60)) == pytest.approx(0.1 + 0.9 * 0.5)
    assert float(s(110)) == pytest.approx(0.1)
    assert float(s(500)) == pytest.approx(0.1)


def test_join_schedules_switches_at_boundaries_with_shifted_counts():
    s = schedules.join_schedules(
        [schedules.constant_schedule(1.0), schedules.linear_schedule(2.0, 0.0, 10)], [5]
    )
    assert [float(s(i)) for i in (0, 4, 5, 10, 15)] == [1.0, 1.0, 2.0, 1.0, 0.0]


def test_schedules_take_tensors_and_vmap():
    counts = torch.arange(0, 40, 3)
    s = schedules.warmup_cosine_decay_schedule(0.0, 3e-4, 5, 30)
    out = check_vmap(s, counts)
    assert_trees_close(out, torch.stack([s(int(c)) for c in counts]))


def test_bad_step_counts_are_rejected():
    with pytest.raises(
        ValueError,
        match=r"linear_schedule: the number of steps must be a "
        r"positive int, got 0",
    ):
        schedules.linear_schedule(1.0, 0.0, 0)
    with pytest.raises(
        ValueError,
        match=r"decay_steps \(10\) is the total length and must "
        r"exceed warmup_steps \(10\)",
    ):
        schedules.warmup_cosine_decay_schedule(0.0, 1.0, 10, 10)
    with pytest.raises(ValueError, match=r"2 schedules need 1 boundaries, got 2"):
        schedules.join_schedules([schedules.constant_schedule(1.0)] * 2, [1, 2])
