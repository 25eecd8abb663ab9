"""fxrl._isa_patch: a vector-ISA library of inductor's that loaded in one process is not
probed by a subprocess again in the next; one that did not load is probed each time."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch._inductor.cpu_vec_isa import VecAVX2, VecISA

from fxrl import _isa_patch

pytestmark = pytest.mark.skipif(not _isa_patch.applies(), reason="written for torch 2.13")


@pytest.mark.parametrize("loads", [True, False])
def test_a_library_that_loaded_once_is_not_probed_again(tmp_path, monkeypatch, loads):
    calls = []

    def probe(isa, path):  # a stand-in for inductor's probe: counts its calls
        calls.append(path)
        return loads

    monkeypatch.setattr(VecISA, "_probe_load", probe)
    library = str(tmp_path / "isa.so")
    isa = VecAVX2()  # any ISA: the probe is a stand-in
    with _isa_patch.patched():
        answers = [isa._probe_load(library) for _ in range(3)]
    assert answers == [loads] * 3
    # loaded: probed once, a marker beside it; not loaded: probed every time, no marker
    assert len(calls) == (1 if loads else 3)
    assert os.path.isfile(library + _isa_patch.MARKER) == loads
    assert VecISA._probe_load is probe  # the class's own attribute is back after the block


def test_a_second_process_runs_no_probe_subprocess(tmp_path):
    # inductor's probe starts `python -c "... cdll.LoadLibrary(...)"`: counted in each of
    # two processes sharing one inductor cache, each compiling a small program. The checks
    # (g++ on each probe's library in the first) ran in fxrl's background thread.
    script = textwrap.dedent("""
        import subprocess, threading, torch, fxrl
        from torch._inductor.cpu_vec_isa import VecISA
        runs, threads = [], set()
        run = subprocess.run
        def counted(cmd, *a, **k):
            if "LoadLibrary" in " ".join(map(str, cmd)):
                runs.append(cmd)
            return run(cmd, *a, **k)
        subprocess.run = counted
        check = VecISA.check_build
        def named(self, code):
            threads.add(threading.current_thread().name)
            return check(self, code)
        VecISA.check_build = named
        out = fxrl.compile(lambda x: x * 2 + 1)(torch.arange(4.0))
        assert out.tolist() == [1.0, 3.0, 5.0, 7.0]
        assert threads == {"fxrl-isa-check"}, threads
        print("probes", len(runs))
    """)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    probes = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        probes.append(int(done.stdout.split("probes")[-1]))
    assert probes[0] > 0 and probes[1] == 0, probes
    assert torch.__version__.startswith(_isa_patch.PATCHED_TORCH)


def test_the_background_check_is_started_once_and_can_be_turned_off(monkeypatch):
    started = []

    class Recorded:  # a stand-in for threading.Thread: records what would start
        def __init__(self, target, name, daemon):
            self.name = name

        def start(self):
            started.append(self.name)

        def join(self):
            pass

    monkeypatch.setattr(_isa_patch.threading, "Thread", Recorded)
    monkeypatch.setattr(_isa_patch, "_started", None)
    monkeypatch.setattr(_isa_patch, "BACKGROUND", False)
    _isa_patch.check_in_background()
    assert started == [] and _isa_patch._started is None
    monkeypatch.setattr(_isa_patch, "BACKGROUND", True)
    for _ in range(3):
        _isa_patch.check_in_background()
    _isa_patch.wait()
    assert started == ["fxrl-isa-check"]
