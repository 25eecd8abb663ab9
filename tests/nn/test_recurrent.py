"""fxrl.nn.lstm / gru: equal torch.nn.LSTM / GRU, step by step, with episode resets."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import nn, random, tree
from fxrl.testing import assert_trees_close, check_vmap

TORCH = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}
MODELS = {"lstm": nn.lstm, "gru": nn.gru}


def torch_rnn(kind, seed, input_size, hidden, layers):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return TORCH[kind](input_size, hidden, layers)


def params_from(module):
    return {
        "layers": [
            {
                n: getattr(module, f"{t}_l{i}").detach().clone()
                for n, t in (
                    ("w_ih", "weight_ih"),
                    ("w_hh", "weight_hh"),
                    ("b_ih", "bias_ih"),
                    ("b_hh", "bias_hh"),
                )
            }
            for i in range(module.num_layers)
        ]
    }


def to_torch_carry(kind, carry):
    """fxrl carries are [B, L, H]; torch's are [L, B, H]."""
    if kind == "lstm":
        return carry.h.transpose(0, 1).contiguous(), carry.c.transpose(0, 1).contiguous()
    return carry.transpose(0, 1).contiguous()


def from_torch_carry(kind, carry):
    if kind == "lstm":
        return nn.LSTMCarry(carry[0].transpose(0, 1), carry[1].transpose(0, 1))
    return carry.transpose(0, 1)


def random_carry(kind, key, batch, layers, hidden):
    k_h, k_c = random.split(key).unbind(0)
    h = random.normal(k_h, (batch, layers, hidden))
    return nn.LSTMCarry(h, random.normal(k_c, (batch, layers, hidden))) if kind == "lstm" else h


sizes = dict(
    seed=st.integers(0, 2**31),
    steps=st.integers(1, 6),
    batch=st.integers(1, 3),
    input_size=st.integers(1, 4),
    hidden=st.integers(1, 5),
    layers=st.integers(1, 3),
)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@given(**sizes)
def test_sequence_equals_torch_with_copied_weights(
    kind, seed, steps, batch, input_size, hidden, layers
):
    module = torch_rnn(kind, seed, input_size, hidden, layers)
    model = MODELS[kind](input_size, hidden, layers)
    xs = random.normal(random.key(seed), (steps, batch, input_size))
    carry = random_carry(kind, random.key(seed + 1), batch, layers, hidden)
    ys, out = model.apply(params_from(module), xs, carry)
    ys_t, out_t = module(xs, to_torch_carry(kind, carry))
    assert_trees_close(ys, ys_t.detach())
    assert_trees_close(out, tree.map(torch.Tensor.detach, from_torch_carry(kind, out_t)))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@given(**sizes)
def test_step_by_step_equals_the_whole_sequence(
    kind, seed, steps, batch, input_size, hidden, layers
):
    model = MODELS[kind](input_size, hidden, layers)
    params = model.init(random.key(seed))
    xs = random.normal(random.key(seed + 1), (steps, batch, input_size))
    is_init = random.bernoulli(random.key(seed + 2), 0.3, (steps, batch))
    ys, final = model.apply(params, xs, None, is_init)
    carry, outs = model.initial_carry((batch,)), []
    for t in range(steps):
        y, carry = model.step(params, xs[t], carry, is_init[t])
        outs.append(y)
    assert_trees_close(torch.stack(outs), ys)
    assert_trees_close(carry, final)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@given(
    seed=st.integers(0, 2**31),
    steps=st.integers(1, 8),
    batch=st.integers(1, 3),
    layers=st.integers(1, 2),
)
def test_is_init_resets_equal_running_each_episode_by_hand_in_torch(
    kind, seed, steps, batch, layers
):
    module = torch_rnn(kind, seed, 3, 4, layers)
    model = MODELS[kind](3, 4, layers)
    xs = random.normal(random.key(seed), (steps, batch, 3))
    is_init = random.bernoulli(random.key(seed + 1), 0.35, (steps, batch))
    carry = random_carry(kind, random.key(seed + 2), batch, layers, 4)
    ys, final = model.apply(params_from(module), xs, carry, is_init)
    for b in range(batch):
        # Cut this env's sequence at its episode starts; each new episode starts from zeros.
        starts = [0] + [t for t in range(1, steps) if is_init[t, b]]
        state = to_torch_carry(kind, tree.index(carry, slice(b, b + 1)))
        for i, (t0, t1) in enumerate(zip(starts, [*starts[1:], steps], strict=True)):
            if i > 0 or is_init[0, b]:
                state = tree.map(torch.zeros_like, state)
            y, state = module(xs[t0:t1, b : b + 1], state)
            assert_trees_close(ys[t0:t1, b : b + 1], y.detach())
        expected = tree.index(from_torch_carry(kind, state), 0)
        assert_trees_close(tree.index(final, b), tree.map(torch.Tensor.detach, expected))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_vmap_over_an_ensemble_and_over_envs_equals_loops(kind):
    model = MODELS[kind](3, 4, 2)
    params = torch.func.vmap(model.init)(random.split(random.key(0), 3))
    xs = random.normal(random.key(1), (5, 2, 3))
    is_init = random.bernoulli(random.key(2), 0.3, (5, 2))
    check_vmap(lambda p: model.apply(p, xs, None, is_init), params)
    # Per-env carries batched on their leading dim, as a vmapped rollout holds them.
    one = tree.index(params, 0)
    carry = random_carry(kind, random.key(3), 2, 2, 4)
    check_vmap(lambda x, c, i: model.step(one, x, c, i), xs[0], carry, is_init[0])


def test_default_init_is_torch_uniform_bound_and_shapes_match_torch():
    params = nn.lstm(3, 16, 2).init(random.key(0))
    module = torch_rnn("lstm", 0, 3, 16, 2)
    assert tree.map(lambda x: x.shape, params) == tree.map(lambda x: x.shape, params_from(module))
    w = torch.cat([x.flatten() for x in tree.leaves(params)])
    assert float(w.abs().max()) <= 0.25
    assert float(w.abs().max()) > 0.24


def test_lstm_exports_and_the_exported_step_equals_eager():
    model = nn.lstm(3, 4, 2)
    params = model.init(random.key(0))
    x, carry = random.normal(random.key(1), (2, 3)), model.initial_carry((2,))
    is_init = torch.tensor([True, False])

    class Step(torch.nn.Module):
        def forward(self, x, h, c, is_init):
            return model.step(params, x, nn.LSTMCarry(h, c), is_init)

    program = torch.export.export(Step(), (x, carry.h, carry.c, is_init))
    assert_trees_close(
        program.module()(x, carry.h, carry.c, is_init), model.step(params, x, carry, is_init)
    )


# ------------------------------------------------------------------------------- bad input


def test_carry_with_torch_layout_is_rejected_with_the_expected_shape():
    model = nn.gru(3, 4, 2)
    with pytest.raises(
        ValueError,
        match=r"carry has shape \[2, 5, 4\]; expected \[5, 2, 4\] = "
        r"\[\*B, num_layers, hidden\]",
    ):
        model.apply(model.init(random.key(0)), torch.zeros(7, 5, 3), torch.zeros(2, 5, 4))


def test_is_init_must_be_bool_with_one_flag_per_step_and_env():
    model = nn.lstm(3, 4)
    with pytest.raises(ValueError, match=r"is_init has shape \[7\] bool; expected bool \[7, 5\]"):
        model.apply(
            model.init(random.key(0)), torch.zeros(7, 5, 3), None, torch.zeros(7, dtype=torch.bool)
        )


def test_input_width_mismatch_names_the_layer():
    model = nn.lstm(3, 4)
    with pytest.raises(
        ValueError,
        match=r"lstm at params path 'layers_0': input has shape "
        r"\[7, 5, 2\] but w_ih has shape \[16, 3\]",
    ):
        model.apply(model.init(random.key(0)), torch.zeros(7, 5, 2))


def test_a_single_step_passed_to_apply_is_rejected_with_a_hint():
    model = nn.gru(3, 4)
    with pytest.raises(ValueError, match=r"expected a sequence \[T, \*B, features\] \(use step"):
        model.apply(model.init(random.key(0)), torch.zeros(3))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cells_compile_as_one_graph_and_equal_eager(kind):
    model = MODELS[kind](3, 4, 2)
    params = model.init(random.key(0))
    xs = random.normal(random.key(1), (4, 2, 3))
    is_init = torch.tensor([[True, False], [False, False], [False, True], [False, False]])
    compiled = torch.compile(model.apply, backend="aot_eager", fullgraph=True)
    assert_trees_close(compiled(params, xs, None, is_init), model.apply(params, xs, None, is_init))
