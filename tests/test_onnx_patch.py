"""fxrl._onnx_patch: to_onnx builds ONNX's registry once and lowers fxrl's programs call by
call instead of tracing them again; what it writes computes what the exporter's own path
writes."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fxrl import _onnx_patch, distributions, exploration, nn, random, specs, tree
from fxrl import transforms as T
from fxrl.envs import make
from fxrl.export import export, load_onnx, to_onnx

pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.skipif(not _onnx_patch.applies(), reason="torch's exporter differs")

registration = _onnx_patch._module("_registration")
decomp = _onnx_patch._module("_decomp")

CNN = nn.atari_dqn(num_actions=4, in_channels=1)
PREPROCESS = T.compose(T.to_tensor_image(), T.resize(84, 84, "nearest"), T.grayscale())
SCREEN = specs.Box(0, 255, shape=(60, 50, 3), dtype=torch.uint8)
ACTOR = nn.mlp(5, 4, hidden=(16,), activation="tanh")


def pixels_policy(params, pixels, key=None, mode="mode"):
    action, _ = exploration.q_value(CNN.apply(params, PREPROCESS(pixels)))
    if mode == "random":
        action = exploration.egreedy(key, action, specs.Discrete(4), 0.3)
    return action


def squashed_policy(params, obs, key=None, mode="mode"):
    loc, scale = distributions.normal_param_extractor(ACTOR.apply(params, obs))
    return distributions.draw(distributions.tanh_normal(loc, scale, low=-1.0, high=1.0), key, mode)


def _cartpole():
    env = make("CartPole-v1")
    state, _ = env.reset(random.key(0))
    return export(lambda params, s, a: env.step(s, a), {}, state, torch.tensor(1))


def _catch():
    """bsuite's Catch as make builds it (time limit, auto-reset), its frame too: a grid
    env, whose program holds an in-place ``detach_`` (autograd bookkeeping only)."""
    env = make("Catch-bsuite", max_steps=3)
    state, _ = env.reset(random.key(0))

    def step(params, state, action):
        new, ts = env.step(state, action)
        return new, ts, env.render(new)

    return export(step, {}, state, torch.tensor(2))


@pytest.fixture(scope="module")
def cases():
    return {
        "cartpole_step": _cartpole(),
        "catch_step_render": _catch(),
        "pixels_random": export(
            pixels_policy, CNN.init(random.key(1)), SCREEN.sample(random.key(2)), mode="random"
        ),
        "squashed_random": export(
            squashed_policy, ACTOR.init(random.key(3)), torch.ones(3, 5), mode="random"
        ),
    }


@pytest.fixture(scope="module")
def registry():
    return registration.ONNXRegistry.from_torchlib()


def _draw(exported, seed):
    """Inputs shaped as the program's, drawn from ``seed``: floats normal, ints over a
    wide range (keys), uint8 pixels over 0..255."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for meta in exported.meta["inputs"]:
        dtype = getattr(torch, meta["dtype"])
        shape = meta["shape"]
        if dtype.is_floating_point:
            out.append(torch.randn(shape, generator=gen).to(dtype))
        elif dtype == torch.bool:
            out.append(torch.randint(0, 2, shape, generator=gen).bool())
        elif dtype == torch.uint8:
            out.append(torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8))
        else:
            out.append(torch.randint(0, 2**40, shape, generator=gen).to(dtype))
    return out


def test_each_case_has_calls_to_lower_and_lowers_them_all(cases, registry):
    translated, decomposed = _onnx_patch._ops(registry)
    detach_ = torch.ops.aten.detach_.default
    assert any(n.target is detach_ for n in cases["catch_step_render"].program.graph.nodes)
    for name, exported in cases.items():
        before = [n.target for n in exported.program.graph.nodes if n.op == "call_function"]
        assert any(_onnx_patch._needs_lowering(t, translated, decomposed) for t in before), name
        lowered = _onnx_patch.lower(exported.program, registry)
        assert lowered is not None, name
        after = [n.target for n in lowered.graph.nodes if n.op == "call_function"]
        assert not any(_onnx_patch._needs_lowering(t, translated, decomposed) for t in after)


@pytest.fixture(scope="module")
def both(cases, registry):
    """Per case, (fxrl's lowering, the exporter's decomposition) as callable modules."""
    translated, _ = _onnx_patch._ops(registry)
    table = decomp.create_onnx_friendly_decomposition_table(set(translated))
    return {
        name: (
            _onnx_patch.lower(e.program, registry).module(),
            e.program.run_decompositions(table).module(),
        )
        for name, e in cases.items()
    }


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_a_lowered_program_computes_what_the_exporters_decomposition_gives(both, cases, seed):
    for name, exported in cases.items():
        ours, theirs = both[name]
        args = _draw(exported, seed)
        a, b = tree.leaves(ours(*args)), tree.leaves(theirs(*args))
        assert len(a) == len(b), name
        for x, y in zip(a, b, strict=True):
            assert x.dtype == y.dtype and torch.equal(x, y), name


def test_to_onnx_writes_a_model_computing_what_the_exporters_own_path_writes(
    cases, tmp_path, monkeypatch
):
    # One case end to end (the grid env: the most calls lowered, the detach_, a frame);
    # the property test above compares every case's lowered program with the exporter's.
    exported = cases["catch_step_render"]
    before = dict(_onnx_patch.counts)
    fast = load_onnx(to_onnx(exported, tmp_path / "fast.onnx"), threads=1)
    assert _onnx_patch.counts["lowered"] == before["lowered"] + 1
    monkeypatch.setattr(_onnx_patch, "applies", lambda: False)
    slow = load_onnx(to_onnx(exported, tmp_path / "slow.onnx"), threads=1)
    assert _onnx_patch.counts == {**before, "lowered": before["lowered"] + 1}  # none more
    for seed in range(20):
        args = [a.numpy() for a in _draw(exported, seed)]
        feeds = dict(zip(exported.input_names, args, strict=True))
        a, b = fast.run_flat(feeds), slow.run_flat(feeds)
        assert len(a) == len(b) == len(exported.output_names)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_to_onnx_leaves_the_callers_program_as_it_was(cases, tmp_path):
    exported = cases["squashed_random"]
    code, signature = exported.program.graph_module.code, str(exported.program.graph_signature)
    args = _draw(exported, 0)
    expected = tree.leaves(exported.program.module()(*args))
    to_onnx(exported, tmp_path / "policy.onnx")
    assert exported.program.graph_module.code == code
    assert str(exported.program.graph_signature) == signature
    for x, y in zip(tree.leaves(exported.program.module()(*args)), expected, strict=True):
        assert torch.equal(x, y)


def test_a_dynamic_batch_lowers_where_no_replaced_call_sees_the_symbolic_batch(tmp_path, registry):
    # mode="mode": the calls to lower (the tanh_normal's clamp...) see only parameters
    # and fixed sizes; mode="random": the draws' dtype conversions take batch-shaped
    # tensors, and the exporter's own path runs.
    params = ACTOR.init(random.key(4))
    obs = torch.linspace(-2, 2, 7 * 5).reshape(7, 5)
    key = random.key(5)
    for mode, path in (("mode", "lowered"), ("random", "exporter")):
        exported = export(squashed_policy, params, torch.ones(3, 5), dynamic_batch=True, mode=mode)
        assert (_onnx_patch.lower(exported.program, registry) is None) == (path == "exporter")
        before = dict(_onnx_patch.counts)
        onnx = load_onnx(to_onnx(exported, tmp_path / f"{mode}.onnx"), threads=1)
        assert _onnx_patch.counts[path] == before[path] + 1
        args = (obs,) if mode == "mode" else (obs, key)
        np.testing.assert_allclose(
            onnx(*[a.numpy() for a in args]), exported(*args).numpy(), rtol=1e-5, atol=1e-6
        )


def test_the_registry_is_built_once_and_each_export_gets_its_own_copy(monkeypatch):
    built = []
    original = _onnx_patch._registry_patch.saved.get("from_torchlib")
    _onnx_patch._registries.clear()
    with _onnx_patch.applied():
        original = _onnx_patch._registry_patch.saved["from_torchlib"]
        monkeypatch.setitem(
            _onnx_patch._registry_patch.saved,
            "from_torchlib",
            lambda **kw: built.append(kw) or original(**kw),
        )
        a = registration.ONNXRegistry.from_torchlib()
        b = registration.ONNXRegistry().from_torchlib(opset_version=a.opset_version)
        c = registration.ONNXRegistry.from_torchlib()
    assert len(built) == 2  # one per opset key (None, and the number): not one per call
    assert a is not c and a.functions is not c.functions
    op = "aten::add.Tensor"
    assert a.functions[op] is not c.functions[op]
    a.functions[op].clear()  # what registering into a copy would do
    assert c.functions[op] and b.functions[op]
    # outside the block the class's own method is back
    assert registration.ONNXRegistry.from_torchlib.__func__ is original.__func__
