"""Image transforms: HWC uint8 screens to CHW floats, resizing, grayscale."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from fxrl import specs
from fxrl._errors import unknown
from fxrl.transforms.base import Transform, as_box, bounds

__all__ = ["grayscale", "resize", "to_tensor_image"]


class ToTensorImage(Transform):
    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype

    def __call__(self, obs: Tensor, state: Any = None) -> Tensor:
        x = obs.movedim(-1, -3).to(self.dtype)
        return x / 255.0 if obs.dtype == torch.uint8 else x

    def observation_spec(self, spec: Any) -> specs.Box:
        spec = as_box("to_tensor_image", spec)
        if len(spec.shape) < 3:
            raise ValueError(f"to_tensor_image: expects [..., H, W, C] images, got {spec!r}.")
        h, w, c = spec.shape[-3:]
        low, high = (0.0, 1.0) if spec.dtype == torch.uint8 else bounds(spec)
        return specs.Box(low, high, (*spec.shape[:-3], c, h, w), dtype=self.dtype)

    def __repr__(self) -> str:
        return "to_tensor_image()"


def to_tensor_image(dtype: torch.dtype = torch.float32) -> Transform:
    """HWC images to CHW: ``[..., H, W, C]`` uint8 -> ``[..., C, H, W]`` float in [0, 1]."""
    return ToTensorImage(dtype)


class Resize(Transform):
    def __init__(self, height: int, width: int, mode: str) -> None:
        modes = ("nearest", "nearest-exact", "bilinear")
        if mode not in modes:
            raise ValueError(unknown(mode, modes, "mode", where="resize"))
        self.size, self.mode = (height, width), mode

    def __call__(self, obs: Tensor, state: Any = None) -> Tensor:
        if obs.ndim < 3:
            raise ValueError(f"resize: expects [..., C, H, W] images, got shape {list(obs.shape)}.")
        flat = obs.reshape(-1, *obs.shape[-3:])
        extra = {"align_corners": False} if self.mode == "bilinear" else {}
        out = F.interpolate(flat, size=self.size, mode=self.mode, **extra)
        return out.reshape(*obs.shape[:-2], *self.size)

    def observation_spec(self, spec: Any) -> specs.Box:
        spec = as_box("resize", spec)
        low, high = bounds(spec)
        return specs.Box(low, high, (*spec.shape[:-2], *self.size), dtype=spec.dtype)

    def __repr__(self) -> str:
        return f"resize({self.size[0]}, {self.size[1]}, {self.mode!r})"


def resize(height: int, width: int | str | None = None, mode: str = "nearest") -> Transform:
    """Resize ``[..., C, H, W]`` images to ``[..., C, height, width]``.

    ``resize(84)`` and ``resize(84, "bilinear")`` make square images; ``resize(84, 110,
    "nearest")`` any size. ``mode``: "nearest" (torch's and OpenCV's INTER_NEAREST: source
    index floor(i * scale)), "nearest-exact" (pixel centres) or "bilinear"
    (align_corners=False, no antialias).
    """
    if isinstance(width, str):  # resize(84, "nearest"): a square of side 84
        width, mode = None, width
    return Resize(height, height if width is None else width, mode)


class Grayscale(Transform):
    def __call__(self, obs: Tensor, state: Any = None) -> Tensor:
        if obs.ndim < 3 or obs.shape[-3] != 3:
            raise ValueError(
                f"grayscale: expects [..., 3, H, W] RGB images, got shape "
                f"{list(obs.shape)}. Apply to_tensor_image() first for HWC pixels."
            )
        x = obs if obs.dtype.is_floating_point else obs.float()
        r, g, b = x.unbind(-3)
        return (0.2989 * r + 0.587 * g + 0.114 * b).unsqueeze(-3).to(obs.dtype)

    def observation_spec(self, spec: Any) -> specs.Box:
        spec = as_box("grayscale", spec)
        low, high = bounds(spec)
        return specs.Box(low, high, (*spec.shape[:-3], 1, *spec.shape[-2:]), dtype=spec.dtype)


def grayscale() -> Transform:
    """RGB ``[..., 3, H, W]`` to luma ``[..., 1, H, W]`` with ITU-R 601-2 weights
    (0.2989, 0.587, 0.114) as torchvision; integer images are truncated like torchvision's."""
    return Grayscale()
