"""Loss building blocks: hand-checked cases, torch.nn.functional / torch.distributions parity."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from fxrl import random
from fxrl.objectives import blocks
from fxrl.testing import assert_trees_close, keys


def test_huber_by_hand_is_quadratic_inside_delta_and_linear_outside():
    x = torch.tensor([0.5, -2.0, 1.0, 0.0])
    assert_trees_close(blocks.huber(x), torch.tensor([0.125, 1.5, 0.5, 0.0]))
    assert_trees_close(blocks.huber(x, delta=0.5), torch.tensor([0.125, 0.875, 0.375, 0.0]))


@given(key=keys(), delta=st.floats(0.1, 5.0))
def test_huber_equals_torch_huber_loss(key, delta):
    x = 3 * random.normal(key, (64,))
    expected = F.huber_loss(x, torch.zeros_like(x), reduction="none", delta=delta)
    assert_trees_close(blocks.huber(x, delta), expected)


def test_huber_with_delta_one_is_smooth_l1_and_its_gradient_is_the_clipped_error():
    x = torch.tensor([-3.0, -0.5, 0.25, 2.0], requires_grad=True)
    assert_trees_close(blocks.huber(x), F.smooth_l1_loss(x, torch.zeros(4), reduction="none"))
    (g,) = torch.autograd.grad(blocks.huber(x).sum(), x)
    assert_trees_close(g, torch.tensor([-1.0, -0.5, 0.25, 1.0]))


def test_l2_is_half_the_square():
    assert_trees_close(blocks.l2(torch.tensor([2.0, -1.0])), torch.tensor([2.0, 0.5]))


def test_select_picks_one_value_per_row_over_leading_dims():
    q = torch.arange(12.0).reshape(2, 3, 2)
    action = torch.tensor([[0, 1, 1], [1, 0, 0]])
    assert_trees_close(blocks.select(q, action), torch.tensor([[0.0, 3, 5], [7, 8, 10]]))


def test_bootstrap_discount_is_zero_where_terminated():
    terminated = torch.tensor([False, True])
    assert_trees_close(blocks.bootstrap_discount(terminated, 0.9), torch.tensor([0.9, 0.0]))


def test_q_learning_target_by_hand_and_double_q_selects_with_the_other_values():
    reward, discount = torch.tensor([1.0, -1.0]), torch.tensor([0.5, 0.0])
    next_q = torch.tensor([[1.0, 3.0], [2.0, 5.0]])
    assert_trees_close(
        blocks.q_learning_target(reward, discount, next_q), torch.tensor([2.5, -1.0])
    )
    select_with = torch.tensor([[9.0, 0.0], [0.0, 9.0]])
    assert_trees_close(
        blocks.q_learning_target(reward, discount, next_q, select_with), torch.tensor([1.5, -1.0])
    )


def test_clipped_surrogate_by_hand():
    ratio = torch.tensor([0.5, 1.5, 1.0, 0.5, 1.5])
    advantage = torch.tensor([1.0, 1.0, -1.0, -1.0, -1.0])
    # min(r A, clip(r) A): the pessimistic bound in each case.
    expected = torch.tensor([0.5, 1.2, -1.0, -0.8, -1.5])
    assert_trees_close(blocks.clipped_surrogate(ratio, advantage, 0.2), expected)


def test_clipped_value_loss_by_hand():
    value, old = torch.tensor([2.0, 0.0]), torch.tensor([1.0, 0.0])
    target = torch.tensor([3.0, 1.0])
    # row 0: v_clip = 1.1, max((2-3)^2, (1.1-3)^2) / 2 = 1.805; row 1: both 1 -> 0.5
    assert_trees_close(
        blocks.clipped_value_loss(value, old, target, 0.1), torch.tensor([1.805, 0.5])
    )


@given(key=keys())
def test_categorical_entropy_equals_torch_distributions(key):
    logits = 4 * random.normal(key, (5, 7))
    expected = torch.distributions.Categorical(logits=logits).entropy()
    assert_trees_close(blocks.categorical_entropy(logits), expected)


def test_entropy_of_fxrl_distributions_matches_torch_distributions():
    from fxrl import distributions

    loc, scale = torch.tensor([[0.0, 1.0]]), torch.tensor([[0.5, 2.0]])
    expected = torch.distributions.Normal(loc, scale).entropy().sum(-1)
    assert_trees_close(blocks.entropy(distributions.normal(loc, scale)), expected)


def test_normalize_gives_mean_zero_and_unit_std():
    x = random.normal(random.key(3), (100,)) * 5 + 2
    y = blocks.normalize(x)
    assert abs(y.mean().item()) < 1e-6
    assert abs(y.std().item() - 1) < 1e-6


@given(key=keys())
def test_smoothed_target_action_stays_within_noise_clip_and_bounds(key):
    action = torch.tensor([[0.0, 0.95], [-0.95, 0.3]]).expand(50, 2, 2)
    out = blocks.smoothed_target_action(action, key, 0.5, 0.2, -1.0, 1.0)
    assert ((out - action).abs() <= 0.2 + 1e-6).all()
    assert (out.abs() <= 1.0).all()
    again = blocks.smoothed_target_action(action, key, 0.5, 0.2, -1.0, 1.0)
    assert torch.equal(out, again)


def test_smoothed_target_action_noise_has_the_given_std_without_clipping():
    action = torch.zeros(20000, 1)
    out = blocks.smoothed_target_action(action, random.key(0), 0.3, 10.0, -10.0, 10.0)
    assert abs(out.std().item() - 0.3) < 0.01


def test_soft_update_is_polyak_averaging_and_leaves_inputs_alone():
    target = {"w": torch.tensor([0.0, 10.0]), "n": torch.tensor(3)}
    online = {"w": torch.tensor([1.0, 0.0]), "n": torch.tensor(7)}
    before = {k: v.clone() for k, v in target.items()}
    out = blocks.soft_update(target, online, 0.1)
    assert_trees_close(out, {"w": torch.tensor([0.1, 9.0]), "n": torch.tensor(7)})
    assert_trees_close(target, before)
    assert_trees_close(blocks.soft_update(target, online, 0.0)["w"], target["w"])
    assert_trees_close(blocks.soft_update(target, online, 1.0), online)


def test_soft_update_with_a_tau_per_seed_under_vmap():
    target, online = torch.zeros(3, 2), torch.ones(3, 2)
    tau = torch.tensor([0.0, 0.5, 1.0])
    out = torch.func.vmap(blocks.soft_update)(target, online, tau)
    assert_trees_close(out, torch.tensor([[0.0, 0.0], [0.5, 0.5], [1.0, 1.0]]))


def test_soft_update_rejects_tau_outside_unit_interval():
    with pytest.raises(ValueError, match=r"soft_update: tau must be in \[0, 1\], got 5"):
        blocks.soft_update({"w": torch.zeros(1)}, {"w": torch.zeros(1)}, 5)


def test_hard_update_copies_without_aliasing_and_checks_structure():
    online = {"a": torch.ones(2), "b": [torch.zeros(1)]}
    out = blocks.hard_update({"a": torch.zeros(2), "b": [torch.ones(1)]}, online)
    assert_trees_close(out, online)
    assert out["a"].data_ptr() != online["a"].data_ptr()
    with pytest.raises(ValueError):
        blocks.hard_update({"a": torch.zeros(2)}, online)


def test_max_entropy_of_uniform_categorical_is_log_n():
    assert math.isclose(
        blocks.categorical_entropy(torch.zeros(6)).item(), math.log(6), rel_tol=1e-6
    )
