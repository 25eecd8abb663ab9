"""`import fxrl` costs little more than `import torch`: no compiler stack at import time."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch._dynamo", "torch._inductor", "sympy", "gymnasium", "onnxruntime")

# `import fxrl.compile` users reach the module (its watch, Compiled...); fxrl.compile(fn)
# is the public call: the module is callable as its compile function
COMPILE_CHECKS = (
    "import torch; import fxrl.compile; import fxrl; "
    "assert fxrl.compile.watch and fxrl.compile.compile and fxrl.compile.Compiled; "
    "f = fxrl.compile(lambda x: x * 2); assert isinstance(f, fxrl.compile.Compiled); "
    "import inspect; assert list(inspect.signature(fxrl.compile).parameters) == "
    "['fn', 'options']; "
    "from fxrl import compile; assert compile is fxrl.compile; "
    "from fxrl.compile import compile as c; assert c is fxrl.compile.compile; "
    "assert fxrl.compile(options={'size_asserts': True})(lambda x: x).fn is not None"
)

# fxrl.scan(body, carry, xs) is the public call (jax.lax.scan's shape); the module holds
# it and scan_vjp, beside fxrl.compile
SCAN_CHECKS = (
    "import torch; import fxrl.scan; import fxrl; "
    "assert fxrl.scan.scan and fxrl.scan.scan_vjp; "
    "c, ys = fxrl.scan(lambda c, x: (c + x, {'c': c + x}), torch.zeros(()), torch.ones(4)); "
    "assert float(c) == 4.0 and ys['c'].tolist() == [1.0, 2.0, 3.0, 4.0]; "
    "import inspect; assert list(inspect.signature(fxrl.scan).parameters) == "
    "['body', 'carry', 'xs']; "
    "from fxrl import scan; assert scan is fxrl.scan; "
    "from fxrl.scan import scan as s; assert s is fxrl.scan.scan"
)


# Without ray, fxrl.distributed's import names the extra (ray is hidden from the import
# system: the check holds whether or not ray is installed)
RAY_MISSING_CHECKS = """
sys.modules["ray"] = None
try:
    import fxrl.distributed
except ImportError as e:
    assert str(e).endswith("pip install 'fxrl[ray]'"), e
else:
    raise AssertionError("fxrl.distributed imported without ray")
"""


def _loaded_after(statement: str, then: str = "pass") -> set[str]:
    """The modules loaded right after ``statement`` in a fresh interpreter, which then runs
    ``then`` (checks that need the same first import; a failing one fails the run)."""
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))\n{then}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


@pytest.fixture(scope="module")
def after_import_fxrl() -> set[str]:
    """One interpreter that starts with `import fxrl`: the modules it loaded, then the
    compile and the scan checks with `import fxrl` first and the missing-ray check (the
    tests below that need a fresh interpreter with `import fxrl` first share this one)."""
    return _loaded_after("import fxrl", f"{COMPILE_CHECKS}\n{SCAN_CHECKS}\n{RAY_MISSING_CHECKS}")


def test_import_fxrl_does_not_import_dynamo_inductor_sympy_gymnasium_or_onnxruntime(
    after_import_fxrl,
):
    assert "fxrl.envs.host" in after_import_fxrl  # the module that used to pull in dynamo
    assert [m for m in HEAVY if m in after_import_fxrl] == []


def test_import_fxrl_adds_only_fxrl_optree_and_standard_library_modules_to_import_torch(
    after_import_fxrl,
):
    extra = after_import_fxrl - _loaded_after("import torch")
    allowed = {"fxrl", "optree", *sys.stdlib_module_names}
    assert sorted(m for m in extra if m.split(".")[0] not in allowed) == []


def test_fxrl_compile_is_the_module_and_calling_it_compiles_whatever_was_imported_first(
    after_import_fxrl,
):
    # `import fxrl` first: run by the after_import_fxrl fixture (which fails on a failed check)
    for first in ("import fxrl.compile", "from fxrl.compile import compile"):
        subprocess.run([sys.executable, "-c", f"{first}; {COMPILE_CHECKS}"], check=True)


def test_fxrl_scan_is_the_module_and_calling_it_runs_the_loop_whatever_was_imported_first(
    after_import_fxrl,
):
    # `import fxrl` first: run by the after_import_fxrl fixture (which fails on a failed check)
    for first in ("import fxrl.scan", "from fxrl.scan import scan"):
        subprocess.run([sys.executable, "-c", f"{first}; {SCAN_CHECKS}"], check=True)


def test_importing_fxrl_does_not_import_ray_and_missing_ray_names_the_extra(after_import_fxrl):
    assert "ray" not in after_import_fxrl
    # the missing-ray message: checked in the after_import_fxrl fixture's interpreter
