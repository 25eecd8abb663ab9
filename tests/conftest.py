"""Test-wide settings: deterministic torch, one thread per xdist worker, hypothesis profiles.

Profiles: "ci" (the default under CI=true: fewer examples, no deadline, derandomized so a
CI run is reproducible), "dev" (the default otherwise), "thorough" (many examples).
Choose one with HYPOTHESIS_PROFILE=thorough.
"""

import os

import torch
from hypothesis import HealthCheck, settings

torch.use_deterministic_algorithms(True)
torch.set_default_dtype(torch.float32)
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two workers on two cores: more threads per worker only oversubscribes.
    torch.set_num_threads(1)

_common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", max_examples=30, derandomize=True, print_blob=True, **_common)
settings.register_profile("dev", max_examples=50, **_common)
settings.register_profile("thorough", max_examples=1000, **_common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# FXRL_COMPILE_LOG=path: one JSON line per test naming the programs fxrl.compile built during
# it (module fixtures included) and whether inductor's cache had them: what makes the suite
# long, test by test.
if os.environ.get("FXRL_COMPILE_LOG"):
    import json

    import pytest

    from fxrl.compile import watch

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        with watch() as built:
            yield
        if built:
            line = {
                "test": item.nodeid,
                "worker": os.environ.get("PYTEST_XDIST_WORKER"),
                "built": [[r.name, round(r.seconds, 2), r.from_cache] for r in built],
            }
            with open(os.environ["FXRL_COMPILE_LOG"], "a") as f:
                f.write(json.dumps(line) + "\n")
