"""Value estimators and losses as pure functions over tensors and pytrees.

Value estimators (``fxrl.objectives.value``) take time-major ``[T, *B]`` trajectory fields;
losses (``fxrl.objectives.losses``) return ``(loss, metrics)`` and are built from the small
public blocks in ``fxrl.objectives.blocks``.
"""

from fxrl.objectives.blocks import *  # noqa: F403
from fxrl.objectives.blocks import __all__ as _blocks_all
from fxrl.objectives.losses import *  # noqa: F403
from fxrl.objectives.losses import __all__ as _losses_all
from fxrl.objectives.value import *  # noqa: F403
from fxrl.objectives.value import __all__ as _value_all

__all__ = [*_value_all, *_losses_all, *_blocks_all]
