"""Testing tools that are part of the product: users test their own code with them.

Hypothesis strategies (``keys``, ``from_spec``, ``all_specs``, ``tensors``, ``trees``),
``assert_trees_close`` and ``check_vmap``. Needs the ``testing`` extra (hypothesis).
"""

from fxrl.testing.checks import assert_trees_close, check_vmap
from fxrl.testing.strategies import all_specs, from_spec, keys, tensors, trees

__all__ = ["all_specs", "assert_trees_close", "check_vmap", "from_spec", "keys", "tensors", "trees"]
