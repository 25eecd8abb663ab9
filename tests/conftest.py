"""Test-wide settings: deterministic torch, one thread per xdist worker, hypothesis profiles.

Profiles: "ci" (the default under CI=true: fewer examples, no deadline, derandomized so a
CI run is reproducible), "dev" (the default otherwise), "thorough" (many examples).
Choose one with HYPOTHESIS_PROFILE=thorough.
"""

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

torch.use_deterministic_algorithms(True)
torch.set_default_dtype(torch.float32)
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two workers on two cores: more threads per worker only oversubscribes.
    torch.set_num_threads(1)
_THREADS = torch.get_num_threads()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Each test, its fixtures included, starts with the thread count set above. An `fxrl`
    command run in this process (``fxrl.cli.main``, as several tests do) sets torch's own
    (``--threads``, else up to 4), which once stayed for every later test of the worker:
    eager code ran oversubscribed, and programs compiled after it were built for that
    many threads. ``fxrl.cli.main`` now gives the count back; other code that sets it
    (``fxrl.run.demo.main``, ``fxrl.run.tour``) is run by tests too."""
    if torch.get_num_threads() != _THREADS:
        torch.set_num_threads(_THREADS)


_common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", max_examples=30, derandomize=True, print_blob=True, **_common)
settings.register_profile("dev", max_examples=50, **_common)
settings.register_profile("thorough", max_examples=1000, **_common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# FXRL_COMPILE_LOG=path: one JSON line per test naming the programs fxrl.compile built during
# it (module fixtures included) and whether inductor's cache had them: what makes the suite
# long, test by test. FXRL_TEST_CPU_LOG=path: one JSON line per test with its wall seconds
# and the CPU seconds its worker process and the subprocesses it waited for spent (a test
# whose CPU is far below its wall leaves a core idle: waiting on a browser, Ray, a network).
if os.environ.get("FXRL_COMPILE_LOG") or os.environ.get("FXRL_TEST_CPU_LOG"):
    import contextlib
    import json
    import resource
    import time

    from fxrl.compile import watch

    def _cpu(who: int) -> float:
        r = resource.getrusage(who)
        return r.ru_utime + r.ru_stime

    def _log(variable: str, line: dict) -> None:
        line = {"test": line.pop("test"), "worker": os.environ.get("PYTEST_XDIST_WORKER"), **line}
        with open(os.environ[variable], "a") as f:
            f.write(json.dumps(line) + "\n")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        wall, own = time.perf_counter(), _cpu(resource.RUSAGE_SELF)
        kids = _cpu(resource.RUSAGE_CHILDREN)
        watching = watch() if os.environ.get("FXRL_COMPILE_LOG") else contextlib.nullcontext([])
        with watching as built:
            yield
        if built:
            built = [[r.name, round(r.seconds, 2), r.from_cache] for r in built]
            _log("FXRL_COMPILE_LOG", {"test": item.nodeid, "built": built})
        if os.environ.get("FXRL_TEST_CPU_LOG"):
            _log(
                "FXRL_TEST_CPU_LOG",
                {
                    "test": item.nodeid,
                    "wall": round(time.perf_counter() - wall, 2),
                    "cpu": round(_cpu(resource.RUSAGE_SELF) - own, 2),
                    "children_cpu": round(_cpu(resource.RUSAGE_CHILDREN) - kids, 2),
                },
            )
