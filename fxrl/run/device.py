"""Where a run trains: ``--device cpu|cuda|cuda:N|mps``, checked before anything is written.

Every fxrl function makes its tensors on the device of its inputs, so a run moves by
making its key there (``fxrl.random.key(seed, device=...)``): ``init`` then builds the
TrainState on that device and every update stays on it. Checkpoints are written from the
CPU and load onto the device of the state they are read into, so a run trained on a GPU
is evaluated and exported on any machine.
"""

from __future__ import annotations

import torch

__all__ = ["resolve"]

_KNOWN = "cpu, cuda, cuda:N (a GPU index) or mps"


def resolve(device: str | torch.device | None) -> torch.device:
    """``device`` as a ``torch.device`` that exists on this machine.

    Args:
      device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, a ``torch.device``, or
        ``None`` for torch's default device (``torch.set_default_device``; the CPU unless
        set).
    Raises:
      ValueError: one line naming the device and why it cannot be used here (not a
        device name; CUDA or MPS not available; a GPU index out of range).
    """
    if device is None:
        return torch.get_default_device()
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device {device!r} is not a device; expected {_KNOWN}.") from None
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            why = (
                "this torch was built without CUDA"
                if torch.version.cuda is None
                else "torch sees no GPU"
            )
            raise ValueError(
                f"device {str(dev)!r}: CUDA is not available here ({why}; torch "
                f"{torch.__version__}); use --device cpu."
            )
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise ValueError(
                f"device {str(dev)!r}: this machine has {count} GPU(s), cuda:0 to cuda:{count - 1}."
            )
        return torch.device("cuda", torch.cuda.current_device() if dev.index is None else dev.index)
    if dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError("device 'mps': MPS is not available here; use --device cpu.")
        return dev
    raise ValueError(f"device {str(dev)!r}: fxrl runs train on {_KNOWN}.")
