"""Scale-out on Ray (``pip install fxrl[ray]``): rollout workers as Ray actors.

``RayCollector`` is ``fxrl.collector`` over several Ray actors, each holding an env and the
policy and reading params from the object store; batches are exact under worker loss for
pure envs. ``import fxrl`` does not import this package (nor ray).
"""

try:
    import ray  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without ray
    raise ImportError(
        "fxrl.distributed needs Ray: pip install fxrl[ray] (or pip install 'ray>=2.40')."
    ) from e

from fxrl.distributed.collector import RayCollector, WorkerError

__all__ = ["RayCollector", "WorkerError"]
