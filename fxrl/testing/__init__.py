"""Testing tools that are part of the product: users test their own code with them.

Hypothesis strategies (``keys``, ``from_spec``, ``all_specs``, ``tensors``, ``trees``),
``assert_trees_close``, ``check_vmap``, ``check_env`` and ``check_export``. Needs the
``testing`` extra (hypothesis).
"""

from fxrl._optional import require

require("hypothesis", "fxrl.testing")

from fxrl.testing.checks import assert_trees_close, check_vmap  # noqa: E402
from fxrl.testing.envs import check_env  # noqa: E402
from fxrl.testing.export import ExportCheck, check_export  # noqa: E402
from fxrl.testing.strategies import all_specs, from_spec, keys, tensors, trees  # noqa: E402

__all__ = [
    "ExportCheck",
    "all_specs",
    "assert_trees_close",
    "check_env",
    "check_export",
    "check_vmap",
    "from_spec",
    "keys",
    "tensors",
    "trees",
]
