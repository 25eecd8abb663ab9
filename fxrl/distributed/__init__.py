"""Scale-out on Ray (``pip install 'fxrl[ray]'``): rollout workers as Ray actors.

``RayCollector`` is ``fxrl.collector`` over several Ray actors, each holding an env and the
policy and reading params from the object store; batches are exact under worker loss for
pure envs. ``import fxrl`` does not import this package (nor ray).
"""

from fxrl._optional import require

require("ray", "fxrl.distributed")

from fxrl.distributed.collector import RayCollector, WorkerError  # noqa: E402

__all__ = ["RayCollector", "WorkerError"]
