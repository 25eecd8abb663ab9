"""fxrl.compile: pytrees in and out, pass-through leaves, static leaves, vmap, no recompiles."""

from __future__ import annotations

import functools

import pytest
import torch

import fxrl
from fxrl import envs, random, tree
from fxrl.compile import compile as fxrl_compile
from fxrl.testing import assert_trees_close

NUM_ENVS = 16


def _policy_step(env):
    def step(state, key):
        action = (random.bits(key, env.batch_shape) * 2) >> 32
        return env.step(state, action)

    return step


@pytest.fixture(scope="module")
def cartpole():
    """A batched CartPole step (auto-reset, a key stream per env), compiled once."""
    env = envs.batch(envs.make("CartPole-v1", episode_stats=False), NUM_ENVS)
    step = _policy_step(env)
    return env, step, fxrl_compile(step)


def test_compiled_batched_cartpole_follows_the_eager_steps_for_100_steps_with_one_program(cartpole):
    env, step, compiled = cartpole
    state = eager = env.reset(random.key(0))[0]
    keys = random.split(random.key(1), 100)
    for key in keys:
        state, ts = compiled(state, key)
        eager, eager_ts = step(eager, key)
        # float32 physics may differ by an ulp compiled; counts, flags and keys are exact
        assert_trees_close((state, ts), (eager, eager_ts), rtol=1e-5, atol=1e-6)
        eager = state  # compare one step at a time, so ulps do not compound
    assert len(compiled._programs) == 1  # the second call reused the first program


def test_compiled_step_returns_the_params_leaves_themselves_not_copies(cartpole):
    env, _, compiled = cartpole
    state = env.reset(random.key(0))[0]
    new, _ = compiled(state, random.key(1))
    assert new.params.gravity is state.params.gravity
    assert new.key_hi is state.key_hi


def test_vmap_of_a_compiled_function_equals_the_compiled_vmap_bit_for_bit():
    env = envs.make("CartPole-v1", episode_stats=False)
    step = _policy_step(env)
    states = torch.func.vmap(env.reset)(random.split(random.key(0), 8))[0]
    keys = random.split(random.key(1), 8)
    outer = torch.func.vmap(fxrl_compile(step))(states, keys)
    inner = fxrl_compile(torch.func.vmap(step))(states, keys)
    for a, b in zip(tree.leaves(outer), tree.leaves(inner), strict=True):
        assert torch.equal(a, b)
    assert_trees_close(outer, torch.func.vmap(step)(states, keys), rtol=1e-5, atol=1e-6)


def test_compiled_threefry_draws_are_bit_identical_to_eager():
    def draws(key):
        return {
            "bits": random.bits(key, (5,)),
            "uniform": random.uniform(key, (3,), -2.0, 2.0),
            "split": random.split(key, 3),
        }

    keys = random.split(random.key(3), 32)
    compiled = fxrl_compile(draws)
    for a, b in zip(tree.leaves(compiled(keys)), tree.leaves(draws(keys)), strict=True):
        assert torch.equal(a, b)


def test_non_tensor_leaves_are_static_and_a_new_value_compiles_a_new_program():
    compiled = fxrl_compile(lambda x, scale: {"y": x * scale, "same": x, "n": scale})
    x = torch.arange(4.0)
    out = compiled(x, 2.0)
    assert torch.equal(out["y"], x * 2.0) and out["same"] is x and out["n"] == 2.0
    assert torch.equal(compiled(x, 3.0)["y"], x * 3.0)
    assert len(compiled._programs) == 2


def test_watch_records_each_program_built_inside_it_for_every_open_block_and_none_reused():
    from fxrl.compile import watch

    compiled = fxrl_compile(lambda x, scale: x * scale + 1.0)
    x = torch.arange(4.0)
    with watch() as outer:
        compiled(x, 2.0)
        with watch() as inner:
            compiled(x, 5.0)  # a new static value: a second program
            compiled(x, 2.0)  # the first program again: nothing built
    with watch() as again:
        assert torch.equal(compiled(x, 5.0), x * 5.0 + 1.0)
    assert [r.name for r in outer] == ["<lambda>", "<lambda>"] and inner == outer[1:]
    assert again == [] and all(r.seconds > 0 for r in outer)


def test_a_repeated_output_comes_back_once_computed_and_twice_returned():
    compiled = fxrl_compile(lambda x: (x + 1, x + 1))
    a, b = compiled(torch.zeros(3))
    assert torch.equal(a, torch.ones(3)) and torch.equal(b, torch.ones(3))


def test_compile_rejects_an_unhashable_static_leaf_and_an_argument_requiring_grad():
    compiled = fxrl_compile(lambda x, s: x)
    with pytest.raises(TypeError, match="neither a tensor nor hashable"):
        compiled(torch.zeros(2), {1, 2})
    with pytest.raises(TypeError, match=r"requires grad.*torch.func.grad"):
        compiled(torch.zeros(2, requires_grad=True), 1)
    with pytest.raises(TypeError, match="expected a function, got int"):
        fxrl_compile(3)


def test_a_checked_env_compiles_and_still_rejects_a_wrong_action_shape():
    env = envs.checked(envs.make("CartPole-v1", episode_stats=False))
    compiled = fxrl_compile(env.step)
    state = env.reset(random.key(0))[0]
    new, ts = compiled(state, torch.tensor(1))
    assert_trees_close((new, ts), env.step(state, torch.tensor(1)), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="action has shape"):
        compiled(state, torch.tensor([1, 0]))


def test_the_program_cache_is_bounded_and_drops_the_least_recently_used(monkeypatch):
    fc = fxrl.compile  # the module (callable: fxrl.compile(fn) compiles fn)
    monkeypatch.setattr(fc, "MAX_PROGRAMS", 2)
    f = fc.compile(lambda x: x * 2 + 1)
    a, b, c = torch.ones(2), torch.ones(3), torch.ones(4)
    f(a), f(b), f(a)  # a is now the most recently used
    torch.testing.assert_close(f(c), c * 2 + 1)  # a third shape evicts b, not a
    shapes = [sig[1][0][0] for sig in f._programs]
    assert shapes == [torch.Size([2]), torch.Size([4])]


def test_trace_shows_a_scan_as_one_rolled_loop_node():
    from fxrl.scan import scan

    def cumulative(xs):
        return scan(lambda c, x: (c + x, {"c": c + x}), torch.zeros(3), xs)

    for length in (4, 64):
        gm = fxrl.trace(cumulative, torch.ones(length, 3))
        loops = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.scan]
        assert len(loops) == 1
    xs = torch.arange(12.0).reshape(4, 3)
    carry, ys = fxrl.compile(cumulative)(xs)
    torch.testing.assert_close(ys["c"], xs.cumsum(0))
    torch.testing.assert_close(carry, xs.sum(0))


def test_one_tensor_passed_as_two_leaves_is_still_two_inputs():
    # traced with z for both arguments, the program must not merge them into one input
    f = fxrl_compile(lambda a, b: {"out": a + 10 * b, "view": a[1:] - b[:-1]})
    z = torch.zeros(3)
    torch.testing.assert_close(f(z, z)["out"], z)
    ones = torch.ones(3)
    out = f(ones, torch.zeros(3))
    torch.testing.assert_close(out["out"], ones)
    torch.testing.assert_close(out["view"], torch.ones(2))
    base = torch.arange(6.0)
    torch.testing.assert_close(f(base[:3], base[3:])["out"], base[:3] + 10 * base[3:])


def test_a_loop_body_reading_traced_tensors_through_its_closure_stays_one_rolled_loop():
    from fxrl.scan import scan

    def f(w, xs, state):
        # the body reads w and a pytree of the inputs through its closure (and a nested
        # function's closure): the loop takes them as extra inputs and stays rolled
        scale = lambda: state["scale"] * 2

        def body(c, x):
            return c + x * w * scale(), {"c": c + x * w * scale()}

        return scan(body, torch.zeros(3), xs)

    w, xs = torch.tensor([1.0, 2.0, 3.0]), torch.arange(12.0).reshape(4, 3)
    state = {"scale": torch.tensor(0.5)}
    gm = fxrl.trace(f, w, xs, state)
    assert len([n for n in gm.graph.nodes if n.target is torch.ops.higher_order.scan]) == 1
    carry, ys = fxrl_compile(f)(w, xs, state)
    torch.testing.assert_close(ys["c"], (xs * w).cumsum(0))
    torch.testing.assert_close(carry, (xs * w).sum(0))
    ws = torch.stack([w, 2 * w])  # vmapped over w: the lifted input is batched
    carry, ys = fxrl_compile(torch.func.vmap(f, in_dims=(0, None, None)))(ws, xs, state)
    torch.testing.assert_close(ys["c"][1], 2 * (xs * w).cumsum(0))


def test_a_vmapped_loop_carries_the_vmapped_dims_first_and_permutes_nothing():
    # Under vmap, fxrl.scan takes each vmap level off outside the loop with its dim in
    # front (torch's own rule for the scan operator moves it last, and the body then
    # permutes its values back and forth every iteration, 152 permutes in the 8-seed PPO
    # update's minibatch loop); the values are unchanged.
    from fxrl.scan import scan

    def f(w, c, xs, k, loop_ys=True):
        def inner(c2, i):
            return c2 * 0.5 + k.sum(), {"z": c2.sum() * k}

        def body(c, x):
            h = torch.tanh(x @ w + c)  # w through the closure: a batched extra input
            c2, ys2 = scan(inner, c, 3)  # a loop in the loop
            y = {"h": h, "k": k + x.sum(), "one": torch.ones(2)}
            return h + c2.mean(), {**y, "z": ys2["z"]} if loop_ys else y

        return scan(body, c, xs)

    g = torch.manual_seed(0)
    w, c = torch.randn(4, 5, 3, 2, generator=g), torch.randn(2, 5, generator=g)
    xs, k = torch.randn(6, 4, 3, generator=g), torch.randn(2, 3, generator=g)
    # seeds of w at dim 2, xs at 2 and k at 1 (inner level), of w at 3 and c at 0 (outer)
    for loop_ys in (True, False):
        fn = torch.func.vmap(
            torch.func.vmap(functools.partial(f, loop_ys=loop_ys), in_dims=(2, None, 2, 1)),
            in_dims=(3, 0, None, None),
        )
        gm = fxrl.trace(fn, w, c, xs, k)
        leaves = [x.contiguous() for x in (w, c, xs, k)]
        traced = tree.unflatten(tree.structure(fn(w, c, xs, k)), list(gm(*leaves)))
        assert_trees_close(traced, fn(w, c, xs, k), rtol=1e-6, atol=1e-6)
    tops = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.scan]
    assert len(tops) == 1
    _, init, loop_xs, extra = tops[0].args
    assert [tuple(a.meta["val"].shape) for a in init] == [(2, 3, 5)]  # [outer, inner, 5]
    assert [tuple(a.meta["val"].shape) for a in loop_xs] == [(6, 3, 4)]  # [T, inner, 4]
    assert (2, 3, 4, 5) in [tuple(a.meta["val"].shape) for a in extra]  # w: seeds first
    permutes = {torch.ops.aten.permute.default, torch.ops.aten.transpose.int}
    assert not [a for a in init if a.target in permutes]  # (w and xs: once, outside)
    body = getattr(gm, tops[0].args[0].target)
    inner = [n for n in body.graph.nodes if n.target is torch.ops.higher_order.scan]
    assert len(inner) == 1
    # (a loop's stacked ys have the loop's dim before the seeds': returned by the outer
    # body as a y of its own, they are permuted once there, so loop_ys=False here)
    for graph in (body, getattr(body, inner[0].args[0].target)):
        assert not [n for n in graph.graph.nodes if n.target in permutes], graph.code


def test_a_carry_the_loop_body_hands_back_unchanged_becomes_a_read_only_input():
    # Params carried through a rollout were copied every step (a loop's outputs may not
    # alias its inputs): fxrl.compile makes each unchanged carry an extra input of the
    # loop instead, its final value the initial one, in nested loops too.
    from fxrl.compile import _hoist_unchanged_carries
    from fxrl.scan import scan

    def f(p, q, xs):
        def inner(c, x):
            a, b = c
            return (a, b + x * a.sum()), {"a": a * 1.0}

        def body(c, x):
            p_, q_, unread, acc = c
            (_, b2), ys = scan(inner, (p_, acc), x)
            return (p_, q_, unread, b2 + q_), {"y": ys["a"].sum() + b2, "p": p_}

        return scan(body, (p, q, torch.zeros(3), torch.zeros(())), xs)

    def carries(gm):
        loops = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.scan]
        inner = [getattr(gm, n.args[0].target) for n in loops]
        return [len(n.args[1]) for n in loops] + [c for g in inner for c in carries(g)]

    g = torch.manual_seed(0)
    p, q, xs = torch.randn(3, generator=g), torch.randn((), generator=g), torch.randn(5, 4)
    gm = fxrl.trace(f, p, q, xs)
    assert carries(gm) == [4, 2]
    _hoist_unchanged_carries(gm)
    assert carries(gm) == [1, 1]  # acc, and the inner loop's b
    traced = tree.unflatten(tree.structure(f(p, q, xs)), list(gm(p, q, xs)))
    assert_trees_close(traced, f(p, q, xs), rtol=0, atol=0)
    assert_trees_close(fxrl_compile(f)(p, q, xs), f(p, q, xs), rtol=1e-5, atol=1e-6)
    vf = torch.func.vmap(f)
    ps, qs, xss = torch.randn(2, 3), torch.randn(2), torch.randn(2, 5, 4)
    assert_trees_close(fxrl_compile(vf)(ps, qs, xss), vf(ps, qs, xss), rtol=1e-5, atol=1e-6)
