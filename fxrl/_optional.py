"""Optional dependencies: import one, or fail in one line that names the extra installing it.

    gymnasium = require("gymnasium", "fxrl eval --gymnasium")
    # without gymnasium: MissingExtra: fxrl eval --gymnasium needs gymnasium, which is not
    # installed: pip install 'fxrl[gym]'

``pip install fxrl`` brings what ``import fxrl``, the pure envs, the algorithms and
``fxrl train|resume|eval|plot`` need; everything else is an extra of pyproject.toml.
fxrl imports an optional package only through ``require`` (tests/test_optional.py reads
every import statement to check it), so a missing one always says which extra to install.
A package imported by a whole sub-package (hypothesis by ``fxrl.testing``, Ray by
``fxrl.distributed``) is required once, in that package's ``__init__``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRAS", "MissingExtra", "require"]

# top-level module -> (the distribution pip installs, the fxrl extra that brings it)
EXTRAS: dict[str, tuple[str, str]] = {
    "gymnasium": ("gymnasium", "gym"),
    "ale_py": ("ale-py", "atari"),
    "onnx": ("onnx", "export"),
    "onnxruntime": ("onnxruntime", "export"),
    "onnxscript": ("onnxscript", "export"),
    "onnx_ir": ("onnxscript", "export"),  # onnxscript's IR package, installed with it
    "hypothesis": ("hypothesis", "testing"),
    "tensorboard": ("tensorboard", "tensorboard"),
    "wandb": ("wandb", "wandb"),
    "ray": ("ray", "ray"),
    "imageio": ("imageio", "video"),
    "imageio_ffmpeg": ("imageio-ffmpeg", "video"),
    "stable_baselines3": ("stable-baselines3", "sb3"),
}


class MissingExtra(ModuleNotFoundError):
    """An optional package is not installed; the message names the extra to install."""


def missing(module: str, what: str, extra: str | None = None) -> MissingExtra:
    """The one-line error for ``what`` needing the uninstalled optional ``module``."""
    top = module.split(".")[0]
    dist, own = EXTRAS[top]
    return MissingExtra(
        f"{what} needs {dist}, which is not installed: pip install 'fxrl[{extra or own}]'",
        name=top,
    )


def require(module: str, what: str, extra: str | None = None) -> ModuleType:
    """Import ``module`` (an optional package or one of its submodules).

    Args:
      module: dotted module name whose top-level package is a key of ``EXTRAS``.
      what: the function or command that needs it, as a user called it.
      extra: the extra to name when it is not the package's own (``demo``, which brings
        gymnasium and ONNX Runtime together); it must list the package.
    Returns:
      The module.
    Raises:
      MissingExtra: the package is not installed (an ImportError raised inside an
        installed package, a broken install, propagates as it is).
    """
    top = module.split(".")[0]
    if top not in EXTRAS:
        raise KeyError(f"require: {top!r} is not an optional package of fxrl: {', '.join(EXTRAS)}")
    try:
        importlib.import_module(top)
    except ImportError as e:
        if e.name == top:
            raise missing(module, what, extra) from e
        raise
    return importlib.import_module(module)
