"""fxrl._direct: inductor on fxrl's own decomposed trace, skipping AOTAutograd's passes."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import fxrl
from fxrl import _direct, envs, random
from fxrl.compile import _OPTS, _trace

pytestmark = pytest.mark.skipif(not _direct.applies([]), reason="written for torch 2.13")


def _graph(fn, *args):
    import optree

    leaves, spec = optree.tree_flatten(args, **_OPTS)
    gm, _, _ = _trace(fn, spec, leaves, decompose=True)
    return gm


def _mutations(gm):
    return [
        str(node.target)
        for g in _direct._graphs(gm)
        for node in g.graph.nodes
        if node.op == "call_function"
        and isinstance(node.target, torch._ops.OpOverload)
        and node.target._schema.is_mutable
    ]


def fresh_writes(x):
    y = x * 2
    y.add_(1)
    z = y.clone()
    z.masked_fill_(z > 3, 0.0)
    return y, z


def buffer_write(buf, i, v):
    buf.index_put_((i,), v)
    return buf.sum()


def view_write(x):
    y = x * 2
    y[0].add_(1)  # through a view: refused
    return y


@given(st.lists(st.floats(-4, 4, width=32), min_size=1, max_size=6))
def test_in_place_ops_on_fresh_tensors_become_out_of_place_with_the_same_values(values):
    x = torch.tensor(values)
    gm = _graph(fresh_writes, x)
    assert _mutations(gm)  # the trace keeps the in-place ops ...
    assert _direct.functionalize(gm)
    assert _mutations(gm) == []  # ... the rewrite leaves none
    for got, want in zip(gm(x), fresh_writes(x.clone()), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_a_write_of_an_input_is_copied_into_it_at_the_end():
    buf, i, v = torch.zeros(5), torch.tensor([1, 3]), torch.tensor([2.0, 4.0])
    gm = _graph(buffer_write, buf, i, v)
    assert _direct.functionalize(gm)
    assert _mutations(gm) == ["aten.copy_.default"]  # the input's last value, written back
    out = gm(buf, i, v)
    assert buf.tolist() == [0.0, 2.0, 0.0, 4.0, 0.0] and float(out[0]) == 6.0


def test_a_write_through_a_view_is_refused():
    gm = _graph(view_write, torch.ones(3, 2))
    assert not _direct.functionalize(gm)


@pytest.fixture
def spy(monkeypatch):
    calls = []
    real = _direct.compile_forward

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(_direct, "compile_forward", counted)
    return calls


def test_fxrl_compile_takes_the_direct_path_and_writes_an_input_as_eager_does(spy):
    buf, eager = torch.zeros(5), torch.zeros(5)
    i, v = torch.tensor([0, 4]), torch.tensor([1.5, -2.0])
    total = fxrl.compile(buffer_write)(buf, i, v)
    assert spy == [1]
    want = buffer_write(eager, i, v)
    assert torch.equal(buf, eager) and torch.equal(total, want)


def test_a_refused_graph_compiles_through_aot_autograd_to_the_eager_values(spy):
    x = torch.arange(6.0).reshape(3, 2)
    got = fxrl.compile(view_write)(x)
    assert spy == []
    assert torch.equal(got, view_write(x))


def test_the_direct_and_aot_programs_of_a_batched_env_step_agree_bit_for_bit(monkeypatch, spy):
    batch = envs.batch(envs.make("CartPole-v1"), 16)
    state = batch.reset(random.key(3))[0]
    action = batch.env.action_spec.sample(random.key(4), 16)
    direct = fxrl.compile(batch.step)(state, action)
    assert spy == [1]
    monkeypatch.setattr(_direct, "ENABLED", False)
    aot = fxrl.compile(batch.step)(state, action)
    assert spy == [1]
    flat_d, flat_a = torch.utils._pytree.tree_leaves(direct), torch.utils._pytree.tree_leaves(aot)
    assert len(flat_d) == len(flat_a)
    for d, a in zip(flat_d, flat_a, strict=True):
        assert torch.equal(d, a)


def test_readers_of_the_written_tensor_after_the_write_read_the_new_value():
    # a graph written by hand, whose readers after the write name the tensor written
    # rather than the write's result (make_fx names the result)
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    y = graph.call_function(torch.ops.aten.mul.Tensor, (x, 2.0))
    before = graph.call_function(torch.ops.aten.neg.default, (y,))
    graph.call_function(torch.ops.aten.add_.Tensor, (y, 1.0))
    after = graph.call_function(torch.ops.aten.neg.default, (y,))
    graph.output((before, after, y))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    x = torch.tensor([1.0, -3.0])
    want = gm(x)
    assert _direct.functionalize(gm)
    assert _mutations(gm) == []
    for got, w in zip(gm(x), want, strict=True):
        assert torch.equal(got, w)
    assert want[0].tolist() == [-2.0, 6.0] and want[1].tolist() == [-3.0, 5.0]


def test_a_graph_inductor_refuses_on_the_direct_path_takes_aot_autograds(monkeypatch):
    def refuse(*args):
        raise RuntimeError("inductor cannot lower this graph as it stands")

    monkeypatch.setattr(_direct, "compile_forward", refuse)
    x = torch.arange(4.0)
    got = fxrl.compile(lambda t: fresh_writes(t)[1] * 3)(x)
    assert torch.equal(got, fresh_writes(x)[1] * 3)


def test_the_path_is_for_cpu_inputs_that_need_no_grad():
    assert _direct.applies([torch.zeros(2), 3, None])
    assert not _direct.applies([torch.zeros(2), torch.zeros(2, device="meta")])
    assert not _direct.applies([torch.zeros(2, requires_grad=True)])


def test_a_program_loaded_after_a_failed_direct_attempt_is_reported_from_the_cache(
    monkeypatch,
):
    from torch._dynamo.utils import counters

    from fxrl.compile import watch

    def f(t):
        return (t * 5 - 1).cos()

    x = torch.linspace(0, 1, 7)
    monkeypatch.setattr(_direct, "ENABLED", False)
    fxrl.compile(f)(x)  # AOTAutograd's path stores the program in the cache
    monkeypatch.setattr(_direct, "ENABLED", True)

    def miss_then_fail(*args):
        counters["inductor"]["fxgraph_cache_miss"] += 1  # as a lookup that found nothing
        raise RuntimeError("inductor cannot lower this graph as it stands")

    monkeypatch.setattr(_direct, "compile_forward", miss_then_fail)
    with watch() as built:
        got = fxrl.compile(f)(x)
    assert [r.from_cache for r in built] == [True]
    torch.testing.assert_close(got, f(x), rtol=1e-6, atol=1e-6)  # float rounding: cos vectorized
