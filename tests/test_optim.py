"""fxrl.optim: trajectories equal torch.optim's, vmap over an ensemble equals a loop."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import optim, random, tree
from fxrl.testing import assert_trees_close, check_vmap, keys

STEPS = 25


def problem(key, dtype=torch.float32):
    """Params and a sequence of gradients drawn from a key (the same for fxrl and torch)."""
    k_w, k_b, k_g = random.split(key, 3).unbind(0)
    params = {"w": random.normal(k_w, (3, 4), dtype), "b": random.normal(k_b, (4,), dtype)}
    grads = [
        tree.map(lambda p, k=k: random.normal(k, p.shape, dtype) * 2.0, params)
        for k in random.split(k_g, STEPS).unbind(0)
    ]
    # Some exact zeros, where Adam's and RMSprop's denominators rely on eps.
    grads[3] = tree.map(torch.zeros_like, grads[3])
    return params, grads


def torch_trajectory(make_opt, params, grads, lrs=None):
    tensors = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    opt = make_opt(list(tensors.values()))
    out = []
    for i, g in enumerate(grads):
        if lrs is not None:
            for group in opt.param_groups:
                group["lr"] = lrs[i]
        for k, t in tensors.items():
            t.grad = g[k].clone()
        opt.step()
        out.append({k: t.detach().clone() for k, t in tensors.items()})
    return out


def fxrl_trajectory(opt, params, grads):
    state = opt.init(params)
    out = []
    for g in grads:
        updates, state = opt.update(g, state, params)
        params = optim.apply_updates(params, updates)
        out.append(params)
    return out


CASES = {
    "sgd": (lambda: optim.sgd(0.1), lambda p: torch.optim.SGD(p, 0.1)),
    "sgd_default_lr": (lambda: optim.sgd(), lambda p: torch.optim.SGD(p)),
    "sgd_momentum_wd": (
        lambda: optim.sgd(0.05, momentum=0.9, weight_decay=0.1),
        lambda p: torch.optim.SGD(p, 0.05, momentum=0.9, weight_decay=0.1),
    ),
    "sgd_dampening": (
        lambda: optim.sgd(0.05, momentum=0.8, dampening=0.3),
        lambda p: torch.optim.SGD(p, 0.05, momentum=0.8, dampening=0.3),
    ),
    "sgd_nesterov": (
        lambda: optim.sgd(0.05, momentum=0.9, nesterov=True),
        lambda p: torch.optim.SGD(p, 0.05, momentum=0.9, nesterov=True),
    ),
    "adam": (lambda: optim.adam(1e-2), lambda p: torch.optim.Adam(p, 1e-2)),
    "adam_defaults": (lambda: optim.adam(), lambda p: torch.optim.Adam(p)),
    "adam_wd_amsgrad": (
        lambda: optim.adam(3e-2, 0.8, 0.99, 1e-6, 0.1, amsgrad=True),
        lambda p: torch.optim.Adam(p, 3e-2, (0.8, 0.99), 1e-6, 0.1, amsgrad=True),
    ),
    "adamw": (lambda: optim.adamw(1e-2), lambda p: torch.optim.AdamW(p, 1e-2)),
    "adamw_wd": (
        lambda: optim.adamw(3e-2, weight_decay=0.3),
        lambda p: torch.optim.AdamW(p, 3e-2, weight_decay=0.3),
    ),
    "rmsprop": (lambda: optim.rmsprop(1e-2), lambda p: torch.optim.RMSprop(p, 1e-2)),
    "rmsprop_all": (
        lambda: optim.rmsprop(1e-2, 0.9, 1e-6, 0.1, 0.5, centered=True),
        lambda p: torch.optim.RMSprop(p, 1e-2, 0.9, 1e-6, 0.1, 0.5, centered=True),
    ),
}


# float64 checks the update rules to 1e-12. In float32 the trajectories agree to 1e-6
# (absolute plus relative): torch fuses some steps into one kernel (addcdiv, add with
# alpha), an (init, update) chain rounds between them, so the last bits drift by a few ulps.
TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-6}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", sorted(CASES))
def test_trajectory_equals_torch_optim(name, dtype):
    make, make_torch = CASES[name]
    params, grads = problem(random.key(0), dtype)
    tol = TOLERANCE[dtype]
    assert_trees_close(
        fxrl_trajectory(make(), params, grads),
        torch_trajectory(make_torch, params, grads),
        rtol=tol,
        atol=tol,
    )


@given(
    key=keys(),
    lr=st.floats(1e-4, 0.1),
    b1=st.floats(0.0, 0.99),
    b2=st.floats(0.5, 0.9999),
    eps=st.sampled_from([1e-8, 1e-6, 1e-3]),
    weight_decay=st.floats(0.0, 0.5),
    decoupled=st.booleans(),
)
def test_adam_equals_torch_for_any_hyperparameters(key, lr, b1, b2, eps, weight_decay, decoupled):
    params, grads = problem(key, torch.float64)
    ours = (optim.adamw if decoupled else optim.adam)(lr, b1, b2, eps, weight_decay)
    torch_cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    assert_trees_close(
        fxrl_trajectory(ours, params, grads[:8]),
        torch_trajectory(
            lambda p: torch_cls(p, lr, (b1, b2), eps, weight_decay), params, grads[:8]
        ),
        rtol=1e-12,
        atol=1e-12,
    )


def test_clip_by_global_norm_equals_clip_grad_norm():
    _, grads = problem(random.key(1))
    for max_norm in (0.5, 1e3):
        clipped, _ = optim.clip_by_global_norm(max_norm).update(grads[0], optim.EmptyState())
        tensors = [torch.zeros_like(g, requires_grad=True) for g in tree.leaves(grads[0])]
        for t, g in zip(tensors, tree.leaves(grads[0]), strict=True):
            t.grad = g.clone()
        torch.nn.utils.clip_grad_norm_(tensors, max_norm)
        assert_trees_close(tree.leaves(clipped), [t.grad for t in tensors])


def test_chain_of_clipping_and_adam_equals_torch_clip_then_step():
    params, grads = problem(random.key(2))

    def clipped_torch(p):
        class Clipped(torch.optim.Adam):
            def step(self):
                torch.nn.utils.clip_grad_norm_(p, 1.0)
                super().step()

        return Clipped(p, 1e-2)

    ours = optim.chain(optim.clip_by_global_norm(1.0), optim.adam(1e-2))
    assert_trees_close(
        fxrl_trajectory(ours, params, grads),
        torch_trajectory(clipped_torch, params, grads),
        rtol=1e-6,
        atol=1e-6,
    )


def test_schedule_learning_rate_equals_torch_with_lr_set_before_each_step():
    params, grads = problem(random.key(3), torch.float64)
    schedule = optim.warmup_cosine_decay_schedule(0.0, 0.05, 5, STEPS, 1e-3)
    lrs = [float(schedule(i)) for i in range(STEPS)]
    for ours, theirs in [
        (optim.adam(schedule), torch.optim.Adam),
        (optim.sgd(schedule, momentum=0.9), lambda p: torch.optim.SGD(p, momentum=0.9)),
        (optim.rmsprop(schedule), torch.optim.RMSprop),
    ]:
        assert_trees_close(
            fxrl_trajectory(ours, params, grads),
            torch_trajectory(theirs, params, grads, lrs),
            rtol=1e-12,
            atol=1e-12,
        )


def test_a_tensor_learning_rate_steps_as_its_number_and_vmaps_over_learning_rates():
    # a swept learning rate is a [] tensor (float64 or float32): the same steps as the
    # Python float, bit for bit; vmapped over several, each member steps at its own
    params, grads = problem(random.key(6))
    for name in ("adam", "sgd", "rmsprop", "adamw"):
        make = getattr(optim, name)
        want = fxrl_trajectory(make(0.01), params, grads)
        for dtype in (torch.float64, torch.float32):
            got = fxrl_trajectory(make(torch.tensor(0.01, dtype=dtype)), params, grads)
            assert_trees_close(got, want, rtol=0, atol=0)
    lrs = torch.tensor([0.01, 0.2], dtype=torch.float64)
    swept = torch.func.vmap(lambda lr: fxrl_trajectory(optim.adam(lr), params, grads))(lrs)
    for i, lr in enumerate((0.01, 0.2)):
        alone = fxrl_trajectory(optim.adam(lr), params, grads)
        assert_trees_close(tree.map(lambda x, i=i: x[i], swept), alone, rtol=0, atol=0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmapped_update_of_an_ensemble_equals_a_loop(name):
    opt = CASES[name][0]()
    params = torch.func.vmap(lambda k: problem(k)[0])(random.split(random.key(4), 4))
    grads = tree.map(lambda p: p * -0.5 + 0.1, params)
    state = check_vmap(opt.init, params)
    for _ in range(2):  # the second update reads a non-trivial state
        _, state = check_vmap(opt.update, grads, state, params)


def test_one_vmapped_call_updates_32_members_each_as_alone():
    opt = optim.adam(optim.linear_schedule(1e-2, 1e-3, 10))
    params = torch.func.vmap(lambda k: problem(k)[0])(random.split(random.key(5), 32))
    grads = [tree.map(lambda p, s=s: torch.sin(p * s), params) for s in (1.0, 2.0, 3.0)]

    def run(p, gs):
        state = opt.init(p)
        for g in gs:
            u, state = opt.update(g, state, p)
            p = optim.apply_updates(p, u)
        return p

    check_vmap(run, params, grads)


def test_update_is_pure():
    params, grads = problem(random.key(6))
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.adamw(1e-2))
    state = opt.init(params)
    copies = tree.map(torch.clone, (params, grads[0], state))
    first = opt.update(grads[0], state, params)
    assert_trees_close((params, grads[0], state), copies)
    assert_trees_close(opt.update(grads[0], state, params), first)


def test_bad_inputs_give_clear_errors():
    params, grads = problem(random.key(7))
    opt = optim.adamw(1e-3)
    with pytest.raises(
        ValueError,
        match=r"add_decayed_weights: this transformation reads the "
        r"params; call update\(grads, state, params\)",
    ):
        opt.update(grads[0], opt.init(params))
    with pytest.raises(ValueError, match=r"chain: state has 2 entries for 3 transformations"):
        optim.chain(optim.scale(1.0), optim.scale(1.0), optim.scale(1.0)).update(
            grads[0], (optim.EmptyState(), optim.EmptyState())
        )
    with pytest.raises(ValueError, match=r"nesterov needs momentum > 0"):
        optim.sgd(0.1, nesterov=True)
    with pytest.raises(ValueError, match=r"adam: learning_rate must be >= 0"):
        optim.adam(-1.0)
    with pytest.raises(ValueError, match=r"adam: b1 must be in \[0, 1\), got 1.0"):
        optim.adam(1e-3, 1.0)
    with pytest.raises(ValueError, match=r"adam: b2 must be in \[0, 1\), got -0.5"):
        optim.adamw(1e-3, 0.9, -0.5)
    with pytest.raises(ValueError, match=r"tree 1 does not match tree 0"):
        optim.adam().update({"w": grads[0]["w"]}, optim.adam().init(params), params)


def test_update_with_a_schedule_compiles_as_one_graph_and_equals_eager():
    params, grads = problem(random.key(8))
    opt = optim.chain(
        optim.clip_by_global_norm(1.0), optim.adamw(optim.linear_schedule(1e-2, 0, 9))
    )
    state = opt.init(params)
    compiled = torch.compile(opt.update, backend="aot_eager", fullgraph=True)
    assert_trees_close(compiled(grads[0], state, params), opt.update(grads[0], state, params))


def test_vmapped_init_returns_contiguous_state_so_a_compiled_update_does_not_recompile():
    from fxrl import nn

    params = torch.func.vmap(nn.mlp(4, 2).init)(random.split(random.key(0), 4))
    for opt in (optim.adam(1e-3), optim.sgd(1e-2, momentum=0.9)):
        state = torch.func.vmap(opt.init)(params)
        for leaf in tree.leaves(state):
            assert leaf.is_contiguous() and 0 not in leaf.stride(), leaf.stride()


@given(
    base=st.one_of(st.just(0.0), st.floats(1e-6, 0.999999)),
    count=st.integers(1, 10**7),
)
def test_adams_bias_power_is_pow_to_float64_rounding(base, count):
    from fxrl.optim import _power

    ours = _power(base, torch.tensor(count))
    assert ours.dtype == torch.float64 and ours.shape == ()
    # |count * log(base)| float64 ulps of the exponent, at most: relative 1e-15 * that
    expected = base**count
    tol = 4e-16 * max(1.0, abs(count * math.log(base)) if base > 0 else 1.0)
    assert abs(float(ours) - expected) <= tol * expected + 1e-300
