"""`import fxrl` costs little more than `import torch`: no compiler stack at import time."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch._dynamo", "torch._inductor", "sympy", "gymnasium", "onnxruntime")


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_fxrl_does_not_import_dynamo_inductor_sympy_gymnasium_or_onnxruntime():
    loaded = _loaded_after("import fxrl")
    assert "fxrl.envs.host" in loaded  # the module that used to pull in torch._dynamo
    assert [m for m in HEAVY if m in loaded] == []


def test_import_fxrl_adds_only_fxrl_optree_and_standard_library_modules_to_import_torch():
    extra = _loaded_after("import fxrl") - _loaded_after("import torch")
    allowed = {"fxrl", "optree", *sys.stdlib_module_names}
    assert sorted(m for m in extra if m.split(".")[0] not in allowed) == []
