"""fxrl.scan.scan_vjp: backpropagation through time over a rolled loop equals autograd through
the unrolled Python loop (GRU and LSTM cells, resets inside the sequence); traced inside
another loop, the program does not grow with the length. Compiled and vmapped (a loop in
a loop, lowered by inductor) it is checked against eager through recurrent PPO's update
(tests/algorithms/test_recurrent_ppo.py), which is built on it."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fxrl import nn, random, tree
from fxrl.compile import trace
from fxrl.scan import scan, scan_vjp
from fxrl.testing import assert_trees_close

MODELS = {"lstm": nn.lstm, "gru": nn.gru}


def _step_body(model):
    """``body(params, carry, (x, is_init)) -> (carry, y)``: one step of the model."""

    def body(params, carry, x):
        y, carry = model.step(params, x[0], carry, x[1])
        return carry, y

    return body


def _problem(kind, seed, length, batch, n_in, hidden, layers, reset_p=0.3):
    model = MODELS[kind](n_in, hidden, layers)
    k = random.split(random.key(seed), 6).unbind(0)
    params = model.init(k[0])
    xs = random.normal(k[1], (length, batch, n_in))
    is_init = random.uniform(k[2], (length, batch)) < reset_p
    carry = tree.map(lambda z: random.normal(k[3], z.shape), model.initial_carry((batch,)))
    w_y = random.normal(k[4], (length, batch, hidden))
    w_c = tree.map(lambda z: random.normal(k[5], z.shape), carry)
    return model, params, carry, xs, is_init, w_y, w_c


def _reference_grads(model, params, carry, xs, is_init, w_y, w_c):
    """autograd (torch.func.grad) through model.apply's unrolled Python loop."""

    def loss(p, c, x):
        ys, c_out = model.apply(p, x, c, is_init)
        terms = [(w * v).sum() for w, v in zip(tree.leaves(w_c), tree.leaves(c_out), strict=True)]
        return (w_y * ys).sum() + sum(terms)

    return torch.func.grad(loss, argnums=(0, 1, 2))(params, carry, xs)


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["gru", "lstm"]),
    seed=st.integers(0, 2**16),
    length=st.integers(1, 12),
    batch=st.integers(1, 3),
    n_in=st.integers(1, 4),
    hidden=st.integers(1, 5),
    layers=st.integers(1, 2),
)
def test_gradients_equal_autograd_through_the_unrolled_loop(
    kind, seed, length, batch, n_in, hidden, layers
):
    model, params, carry, xs, is_init, w_y, w_c = _problem(
        kind, seed, length, batch, n_in, hidden, layers
    )
    final, ys, vjp_fn = scan_vjp(_step_body(model), params, carry, (xs, is_init))
    ref_ys, ref_final = model.apply(params, xs, carry, is_init)
    assert_trees_close(ys, ref_ys, rtol=1e-6, atol=1e-6)
    assert_trees_close(final, ref_final, rtol=1e-6, atol=1e-6)
    d_params, d_carry, (d_xs, d_init) = vjp_fn(w_c, w_y)
    ref = _reference_grads(model, params, carry, xs, is_init, w_y, w_c)
    assert d_init is None  # the reset flags are not differentiable
    assert_trees_close(d_params, ref[0], rtol=1e-5, atol=1e-5)
    assert_trees_close(d_carry, ref[1], rtol=1e-5, atol=1e-5)
    assert_trees_close(d_xs, ref[2], rtol=1e-5, atol=1e-5)


def test_a_reset_cuts_the_gradient_to_the_steps_before_it():
    # The carry's gradient stops at a reset: with is_init at step 3, the loss on steps 3..
    # does not reach the initial carry or the inputs of steps 0..2.
    model, params, carry, xs, _, w_y, _ = _problem("gru", 1, 6, 2, 3, 4, 1)
    is_init = torch.zeros(6, 2, dtype=torch.bool)
    is_init[3] = True
    w_y = torch.cat([torch.zeros_like(w_y[:3]), w_y[3:]])
    _, _, vjp_fn = scan_vjp(_step_body(model), params, carry, (xs, is_init))
    _, d_carry, (d_xs, _) = vjp_fn(None, w_y)
    assert float(d_carry.abs().max()) == 0.0
    assert float(d_xs[:3].abs().max()) == 0.0
    assert float(d_xs[3:].abs().max()) > 0.0


def _minibatch_grads(kind, length):
    """A gradient step's shape: an outer loop over minibatches, each differentiating a loss
    through the sequence (``scan_vjp``'s two loops inside the outer loop's body)."""
    model = MODELS[kind](3, 4)
    body = _step_body(model)

    def run(params, carry, xs, is_init, w):
        def minibatch(acc, mb):
            c0, x, init, w_mb = mb
            _, ys, vjp_fn = scan_vjp(body, params, c0, (x, init))
            g, _, _ = vjp_fn(None, w_mb)
            loss = (w_mb * ys).sum()
            return tree.map(torch.add, acc, g), {"loss": loss}

        zeros = tree.map(torch.zeros_like, params)
        return scan(minibatch, zeros, (carry, xs, is_init, w))

    def inputs(seed):
        k = random.split(random.key(seed), 5).unbind(0)
        n_mb, b = 2, 3
        carry = tree.map(lambda z: random.normal(k[0], z.shape), model.initial_carry((n_mb, b)))
        return (
            model.init(k[1]),
            carry,
            random.normal(k[2], (n_mb, length, b, 3)),
            random.uniform(k[3], (n_mb, length, b)) < 0.2,
            random.normal(k[4], (n_mb, length, b, 4)),
        )

    return run, inputs


def test_the_loops_stay_rolled_whatever_the_length():
    # Two lengths, the same traced program: one outer loop holding the forward and the
    # reverse loop (three scan nodes), and the same number of ops in every graph.
    def shape(length):
        run, inputs = _minibatch_grads("gru", length)
        gm = trace(run, *inputs(0))
        graphs = [m for _, m in gm.named_modules() if isinstance(m, torch.fx.GraphModule)]
        scans = sum(n.target is torch.ops.higher_order.scan for g in graphs for n in g.graph.nodes)
        return scans, [len(g.graph.nodes) for g in graphs]

    short, long = shape(4), shape(64)
    assert short[0] == 3
    assert short == long


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_project_then_cell_is_a_step(kind):
    # The split recurrent PPO's loop runs (input projections of all steps at once, the
    # recurrence in the loop) gives model.step's numbers, resets included. To float32
    # rounding, not bit for bit: one [T*B, in] matmul and T [B, in] ones are different
    # BLAS calls, blocked differently on some CPUs (equal on a Xeon, not on an AMD EPYC).
    model, params, carry, xs, is_init, _, _ = _problem(kind, 3, 5, 3, 2, 4, 1, reset_p=0.5)
    gx = model.project(params, xs)
    c_step, c_cell = carry, carry
    for t in range(5):
        y_step, c_step = model.step(params, xs[t], c_step, is_init[t])
        y_cell, c_cell = model.cell(params, gx[t], c_cell, is_init[t])
        assert_trees_close(y_cell, y_step, rtol=1e-6, atol=1e-6)
        assert_trees_close(c_cell, c_step, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match=r"gru.cell: only a one-layer model .*num_layers=2"):
        two = nn.gru(2, 4, 2)
        two.cell(two.init(random.key(0)), gx[0], two.initial_carry((3,)))
