"""Device follows data: fxrl makes its tensors on the device of its inputs.

No GPU needed: ``device_checks.py`` runs every env id, every algorithm's init and update,
the buffers, optimizers, distributions, objectives and the rest twice, once with torch's
default device set to ``meta`` (CPU inputs), once with ``meta`` inputs (default device
CPU). A tensor made on the wrong device fails either way; see that file's docstring.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import device_checks
import pytest
import torch

TESTS = pathlib.Path(__file__).parent
ROOT = TESTS.parent

# Checks that read values on the host by design, so they cannot run on meta inputs:
# checked() compares each action with its spec, the collector counts finished episodes
# in Python, task_params checks the values it is given, evaluation plays episodes to
# their end.
READS_VALUES = {"env checked", "collector", "task params", "evaluation"}


@pytest.fixture(scope="module")
def meta_default() -> dict[str, str | None]:
    """Every check's result in a process whose default device was ``meta`` before fxrl was
    imported (constants made at import or by constructors are meta there too)."""
    code = (
        "import sys, torch; torch.set_default_device('meta'); "
        f"sys.path.insert(0, {str(TESTS)!r}); import device_checks; device_checks.main()"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_no_fxrl_function_makes_a_tensor_on_the_default_device(meta_default):
    failed = {
        name: why
        for name, why in meta_default.items()
        if why is not None and name not in device_checks.CANARIES
    }
    assert not failed, "\n".join(f"{name}: {why}" for name, why in failed.items())
    assert set(meta_default) == set(device_checks.CHECKS)


def test_the_meta_default_run_reports_each_kind_of_leak(meta_default):
    for name in device_checks.CANARIES:
        assert meta_default[name] is not None, name
    assert "on meta" in meta_default["canary: result on the default device"]


@pytest.fixture
def meta_inputs(monkeypatch):
    """Checks run here with their inputs on ``meta`` (the default device stays CPU)."""
    monkeypatch.setattr(device_checks, "DEVICE", torch.device("meta"))
    monkeypatch.setattr(device_checks, "LIGHT", True)


@pytest.mark.parametrize(
    "name", [n for n in device_checks.CHECKS if n not in READS_VALUES | set(device_checks.CANARIES)]
)
def test_fxrl_works_on_the_device_of_its_inputs(name, meta_inputs):
    assert device_checks.run([name]) == {name: None}


def test_the_meta_inputs_run_reports_each_kind_of_leak(meta_inputs):
    results = device_checks.run(list(device_checks.CANARIES))
    assert all(why is not None for why in results.values()), results
    assert "on cpu" in results["canary: result on the default device"]


def test_checks_that_read_values_do_so_and_are_left_out_of_the_meta_inputs_run(meta_inputs):
    """The exclusions are not stale: each of them does read a value (fails on meta)."""
    results = device_checks.run(sorted(READS_VALUES))
    for name, why in results.items():
        assert why is not None and "meta" in why, (name, why)
