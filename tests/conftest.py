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
