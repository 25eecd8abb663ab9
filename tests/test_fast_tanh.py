"""fxrl._codegen_patch's tanh: inside fxrl.compile a vectorized float32 tanh is written with
exp and a polynomial near 0, within a few ulps of torch.tanh everywhere, NaN, infinities and
-0 kept; float64 keeps Sleef's; its programs carry their own cache tag (torch 2.13 only)."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import fxrl
from fxrl import _codegen_patch

pytestmark = pytest.mark.skipif(not _codegen_patch.applies(), reason="written for torch 2.13")

# 37: two or four full vectors (16 floats or 8 doubles with AVX-512, fewer otherwise) and a
# scalar tail, so both of a kernel's loops are checked; one program per dtype
N = 37
ULPS = 3  # measured at most 1.0 (float32) on 900k values of nine scales, informal


def _kernel_sources(monkeypatch):
    """Collect the C++ inductor writes to its cache while the test runs."""
    from torch._inductor import codecache

    sources = []
    write = codecache.write

    def spy(source_code, extension, *args, **kwargs):
        sources.append(source_code)
        return write(source_code, extension, *args, **kwargs)

    monkeypatch.setattr(codecache, "write", spy)
    return sources


@pytest.fixture(scope="module")
def programs():
    """The compiled tanh of [N] float32 and float64 vectors, built once for the module."""
    with torch._inductor.config.patch(fx_graph_cache=False):
        built = {
            dtype: fxrl.compile(lambda x: torch.tanh(x)) for dtype in (torch.float32, torch.float64)
        }
        for dtype, f in built.items():
            f(torch.zeros(N, dtype=dtype))  # compiled here, fresh
    return built


def assert_close_in_ulps(got, want):
    eps = torch.finfo(want.dtype).eps
    tiny = torch.finfo(want.dtype).smallest_normal
    assert torch.equal(got.isnan(), want.isnan())
    ok = want.isnan() | ((got - want).abs() <= ULPS * eps * want.abs() + tiny * eps)
    assert bool(ok.all()), (got[~ok], want[~ok])


floats32 = st.floats(width=32, allow_nan=True, allow_infinity=True)


@given(st.lists(floats32, min_size=N, max_size=N), st.sampled_from([torch.float32, torch.float64]))
def test_the_compiled_tanh_is_torch_tanh_to_a_few_ulps(programs, values, dtype):
    x = torch.tensor(values, dtype=dtype)
    assert_close_in_ulps(programs[dtype](x), torch.tanh(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_special_values_and_the_scale_of_the_arguments(programs, dtype):
    specials = [
        0.0,
        -0.0,
        math.inf,
        -math.inf,
        math.nan,
        1e-40,
        -1e-30,
        19.9,
        20.0,
        20.1,
        -20.5,
        44.0,
        90.0,
        -1e4,
    ]
    for scale in (1e-6, 1e-3, 0.1, 1.0, 3.0, 10.0, 30.0):
        x = torch.linspace(-scale, scale, N, dtype=dtype)
        assert_close_in_ulps(programs[dtype](x), torch.tanh(x))
    x = torch.tensor(specials + [0.5] * (N - len(specials)), dtype=dtype)
    y = programs[dtype](x)
    assert_close_in_ulps(y, torch.tanh(x))
    assert y[2] == 1 and y[3] == -1 and y[4].isnan()
    assert math.copysign(1.0, float(y[1])) == -1.0  # tanh(-0) is -0


def test_float32_kernels_use_exp_and_without_the_change_or_in_float64_sleefs_tanh(monkeypatch):
    x = torch.linspace(-3.0, 3.0, 40)
    for fast, written in ((True, ".exp()"), (False, ".tanh()")):
        monkeypatch.setattr(_codegen_patch, "FAST_TANH", fast)
        sources = _kernel_sources(monkeypatch)
        with torch._inductor.config.patch(fx_graph_cache=False):
            f = fxrl.compile(lambda t: torch.tanh(t) * 2.0)
            torch.testing.assert_close(f(x), torch.tanh(x) * 2.0)
        kernels = "\n".join(s for s in sources if "cpp_fused" in s)
        assert written in kernels
        assert (".tanh()" in kernels) is not fast
    monkeypatch.setattr(_codegen_patch, "FAST_TANH", True)
    sources = _kernel_sources(monkeypatch)
    with torch._inductor.config.patch(fx_graph_cache=False):
        f = fxrl.compile(lambda t: torch.tanh(t) * 2.0)
        torch.testing.assert_close(f(x.double()), torch.tanh(x.double()) * 2.0)
    assert ".tanh()" in "\n".join(s for s in sources if "cpp_fused" in s)


def test_programs_built_with_the_change_carry_their_own_cache_tag(monkeypatch):
    monkeypatch.setattr(_codegen_patch, "FAST_TANH", True)
    before = torch.compiler.config.cache_key_tag
    with _codegen_patch.patched():
        assert _codegen_patch.TANH_TAG in torch.compiler.config.cache_key_tag.split("|")
    assert torch.compiler.config.cache_key_tag == before
    with torch.compiler.config.patch(cache_key_tag="user"), _codegen_patch.patched():
        assert torch.compiler.config.cache_key_tag == f"user|{_codegen_patch.TANH_TAG}"
    monkeypatch.setattr(_codegen_patch, "FAST_TANH", False)
    with _codegen_patch.patched():
        assert torch.compiler.config.cache_key_tag == before
