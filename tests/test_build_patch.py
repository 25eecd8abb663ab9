"""fxrl._build_patch: a C++-wrapper program's wrapper and kernels compile side by side, the
link after both, under inductor's lock; other builds run as inductor runs them."""

import threading

import pytest
import torch

import fxrl
from fxrl import _build_patch

pytestmark = pytest.mark.skipif(not _build_patch.applies(), reason="written for torch 2.13")

codecache = _build_patch._codecache()


class Builder:
    """A stand-in for inductor's CppBuilder: records when its build starts and ends,
    optionally waiting (up to 5 s) for another builder's build to be under way."""

    def __init__(self, name, log, tmp_path, wait_for=None, fails=False, built=False):
        self.name, self.log, self.wait_for, self.fails = name, log, wait_for, fails
        self.started = threading.Event()
        self.target = tmp_path / f"{name}.o"
        if built:
            self.target.write_text("built earlier")

    def get_target_file_path(self):
        return str(self.target)

    def build(self):
        self.log.append(("start", self.name))
        self.started.set()
        overlapped = self.wait_for is None or self.wait_for.started.wait(5)
        self.log.append(("end", self.name, overlapped))
        if self.fails:
            raise RuntimeError(f"g++ failed on {self.name}")
        self.target.write_text("built")


def triple(tmp_path, **kw):
    log = []
    wrapper = Builder("wrapper", log, tmp_path, fails=kw.get("wrapper_fails", False))
    kernels = Builder("kernels", log, tmp_path, wait_for=wrapper)
    wrapper.wait_for = kernels
    link = Builder("link", log, tmp_path)
    return log, (wrapper, kernels, link)


def test_the_wrapper_and_the_kernels_build_at_once_and_the_link_after_both(tmp_path):
    log, builders = triple(tmp_path)
    with _build_patch.patched():
        codecache._worker_compile_cpp(str(tmp_path / "lock"), builders)
    ends = {e[1]: e[2] for e in log if e[0] == "end"}
    # each saw the other under way: run one after the other, each would wait 5 s in vain
    assert ends == {"wrapper": True, "kernels": True, "link": True}
    assert log[-2:] == [("start", "link"), ("end", "link", True)]
    assert all(b.target.read_text() == "built" for b in builders)
    assert codecache._worker_compile_cpp is _build_patch._patch.saved["_worker_compile_cpp"]


def test_a_failed_wrapper_build_raises_and_nothing_is_linked(tmp_path):
    log, builders = triple(tmp_path, wrapper_fails=True)
    with _build_patch.patched(), pytest.raises(RuntimeError, match="g\\+\\+ failed on wrapper"):
        codecache._worker_compile_cpp(str(tmp_path / "lock"), builders)
    assert ("start", "link") not in log


def test_what_is_built_already_is_not_built_again(tmp_path):
    log = []
    wrapper = Builder("wrapper", log, tmp_path, built=True)
    kernels = Builder("kernels", log, tmp_path)
    link = Builder("link", log, tmp_path)
    with _build_patch.patched():
        codecache._worker_compile_cpp(str(tmp_path / "lock"), (wrapper, kernels, link))
    assert [e[1] for e in log if e[0] == "start"] == ["kernels", "link"]


def test_a_build_of_one_file_runs_as_inductor_runs_it(tmp_path):
    log = []
    one = Builder("one", log, tmp_path)
    with _build_patch.patched():
        codecache._worker_compile_cpp(str(tmp_path / "lock"), (one,))
    assert log == [("start", "one"), ("end", "one", True)]


def test_fxrl_compile_builds_a_cpp_wrapper_program_through_the_patch(monkeypatch):
    calls = []
    real = _build_patch.build_side_by_side

    def counted(lock_path, builders):
        calls.append(len(builders))
        return real(lock_path, builders)

    monkeypatch.setitem(_build_patch._patch.patches, "_worker_compile_cpp", counted)
    x = torch.linspace(-2.0, 2.0, 37)
    # inductor's caches off: the program is built here, not found from an earlier run
    f = fxrl.compile(
        lambda t: torch.tanh(t) * 0.5 + t.sum(), options={"force_disable_caches": True}
    )
    torch.testing.assert_close(f(x), torch.tanh(x) * 0.5 + x.sum())
    assert 3 in calls  # the wrapper, the kernels and the link


def test_a_compile_worker_without_the_patch_builds_one_file_with_inductors_function(
    tmp_path, monkeypatch
):
    # a compile worker process unpickles the build by name (this module's function) with
    # no patch applied there: a one-file build still goes to inductor's own function
    calls = []
    monkeypatch.setattr(_build_patch._patch, "saved", {})
    monkeypatch.setattr(codecache, "_worker_compile_cpp", lambda *a: calls.append(a))
    _build_patch.build_side_by_side(str(tmp_path / "lock"), ("one",))
    assert calls == [(str(tmp_path / "lock"), ("one",))]


@pytest.mark.parametrize("on", [False, True])
def test_kernels_o2_swaps_only_the_kernels_level_and_only_when_asked(on, monkeypatch):
    from torch._inductor import cpp_builder

    monkeypatch.setattr(_build_patch, "KERNELS_O2", on)
    inductors = cpp_builder._get_optimization_cflags
    with _build_patch.patched():
        kernels, _ = cpp_builder._get_optimization_cflags("g++", False)
        wrapper, _ = cpp_builder._get_optimization_cflags("g++", True)
    assert cpp_builder._get_optimization_cflags is inductors  # restored after the block
    assert wrapper == inductors("g++", True)[0]  # the wrapper's level as inductor sets it
    assert "O3" in inductors("g++", False)[0]
    if on:
        assert "O2" in kernels and "O3" not in kernels
        assert [f for f in kernels if f != "O2"] == [
            f for f in inductors("g++", False)[0] if f != "O3"
        ]
    else:
        assert kernels == inductors("g++", False)[0]
