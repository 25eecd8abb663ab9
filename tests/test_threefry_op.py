"""fxrl._threefry_op: the cipher as one op inside fxrl.compile's programs gives the plain
ops' bits (eager kernel, inductor's lowering, vmapped with batched and unbatched words)
in far fewer graph nodes."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import fxrl
from fxrl import _threefry_op, random

INT32 = st.integers(-(2**31), 2**31 - 1)


def _words(seed: int, *shapes: tuple[int, ...]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(-(2**31), 2**31 - 1, s, dtype=torch.int32, generator=g) for s in shapes]


def _cipher(k0, k1, x0, x1):
    y0, y1 = random.threefry2x32_int32(k0, k1, x0, x1)
    return y0, y1, y0 ^ y1  # a consumer of both words, as draws have


@given(st.lists(INT32, min_size=4, max_size=4))
def test_the_ops_eager_kernel_packs_the_plain_ciphers_words(words):
    k0, k1, x0, x1 = (torch.tensor([w], dtype=torch.int32) for w in words)
    want = _threefry_op.plain(k0, k1, x0, x1)
    got = _threefry_op.unpack(torch.ops.fxrl.threefry2x32(k0, k1, x0, x1))
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.fixture(scope="module")
def compiled():
    return fxrl.compile(_cipher)


@pytest.mark.parametrize(
    "shapes", [((), (), (37,), (37,)), ((5, 1), (5, 1), (1, 19), (19,)), ((8,),) * 4]
)
def test_inductors_lowering_gives_the_plain_ciphers_bits(compiled, shapes):
    words = _words(len(shapes[2]), *shapes)
    got, want = compiled(*words), _cipher(*words)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("in_dims", [(0, 0, None, None), (None, None, 0, 0), (0, None, None, 1)])
def test_vmapped_words_batched_or_not_give_the_plain_ciphers_bits(in_dims):
    shapes = [(3, 11) if d == 0 else (11, 3) if d == 1 else (11,) for d in in_dims]
    words = _words(7, *shapes)
    fn = torch.vmap(_cipher, in_dims=in_dims)
    got = fxrl.compile(fn)(*words)
    want = fn(*words)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    # and the vmap rule itself, under fxrl.compile's trace: one op node
    graph = fxrl.trace(fn, *words)
    ops = [n.target for n in graph.graph.nodes if n.op == "call_function"]
    assert ops.count(torch.ops.fxrl.threefry2x32.default) == 1


def test_the_trace_holds_one_op_instead_of_the_rounds(monkeypatch):
    words = _words(1, (16,), (16,), (16,), (16,))

    def bit_ops(graph):
        names = ("bitwise", "shift")
        return sum(1 for n in graph.graph.nodes if any(s in str(n.target) for s in names))

    with_op = fxrl.trace(_cipher, *words)
    monkeypatch.setattr(_threefry_op, "ENABLED", False)
    plain = fxrl.trace(_cipher, *words)
    assert bit_ops(plain) > 20 * 4  # the rounds' shifts, masks, ors and xors
    assert bit_ops(with_op) <= 2  # the words unpacked (and the test's own xor)


def test_outside_fxrl_compile_the_cipher_is_plain_ops():
    words = _words(2, (4,), (4,), (4,), (4,))
    graph = torch.fx.experimental.proxy_tensor.make_fx(_cipher)(*words)
    targets = {n.target for n in graph.graph.nodes if n.op == "call_function"}
    assert torch.ops.fxrl.threefry2x32.default not in targets


def test_torch_compile_sees_the_op_and_torch_export_the_plain_ops():
    words = _words(3, (8,), (8,), (8,), (8,))
    graphs = []

    def capture(gm, example_inputs):  # a torch.compile backend: keeps dynamo's graph
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    got = torch.compile(_cipher, backend=capture, fullgraph=True)(*words)
    assert all(torch.equal(a, b) for a, b in zip(got, _cipher(*words), strict=True))
    (graph,) = graphs
    targets = [n.target for n in graph.graph.nodes if n.op == "call_function"]
    op = (torch.ops.fxrl.threefry2x32, torch.ops.fxrl.threefry2x32.default)
    assert sum(t in op for t in targets) == 1
    assert len(targets) <= 5, targets  # the op, the words unpacked, the test's xor: no rounds

    class Cipher(torch.nn.Module):
        def forward(self, *w):
            return _cipher(*w)

    exported = torch.export.export(Cipher(), tuple(words))
    targets = {n.target for n in exported.graph.nodes if n.op == "call_function"}
    assert torch.ops.fxrl.threefry2x32.default not in targets  # ONNX has no such op
    assert sum("shift" in str(n.target) for n in exported.graph.nodes) >= 20 * 2  # the rounds
