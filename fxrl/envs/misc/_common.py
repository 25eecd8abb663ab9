"""Pieces shared by the misc envs: gymnax's time feature, one-hot actions, bar images."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["arm_colors", "bars_image", "one_hot", "time_feature"]


def time_feature(t: Tensor, normalize: Tensor, dtype: torch.dtype, lo=-1.0, hi=1.0, t_max=100):
    """gymnax's ``time_normalization``: ``(hi - lo) * t / t_max + lo`` if ``normalize``,
    else ``t`` itself."""
    scaled = (hi - lo) * t.double() / t_max + lo
    return torch.where(normalize, scaled, t.double()).to(dtype)


def one_hot(index: Tensor, n: int, dtype: torch.dtype) -> Tensor:
    """[..., n] one-hot of int64 ``index`` [...] (comparisons: vmaps and exports)."""
    return (torch.arange(n, device=index.device) == index[..., None]).to(dtype)


def bars_image(heights: Tensor, colors: Tensor, height: int = 64, width: int = 32) -> Tensor:
    """uint8 [height, width * k, 3]: k vertical bars on white, bar i filled from the bottom
    to ``heights[..., i]`` in [0, 1] with ``colors[..., i, :]`` (uint8 [..., k, 3])."""
    k = heights.shape[-1]
    level = (height - torch.arange(height, device=heights.device)).double() / height  # [H]
    filled = level[:, None] <= heights.double()[..., None, :]  # [..., H, k]
    filled = (
        filled[..., :, :, None].expand(*filled.shape, width).reshape(*filled.shape[:-1], k * width)
    )
    per_col = colors[..., :, None, :].expand(*colors.shape[:-1], width, 3)
    per_col = per_col.reshape(*colors.shape[:-2], k * width, 3)  # [..., k * W, 3]
    white = torch.full_like(per_col, 255)
    return torch.where(filled[..., None], per_col[..., None, :, :], white[..., None, :, :])


def arm_colors(last_action: Tensor, paid: Tensor) -> Tensor:
    """uint8 [..., 2, 3]: the last-pulled arm green (paid) or red, the other gray."""
    gray = torch.tensor([150, 150, 150], dtype=torch.uint8, device=paid.device)
    green = torch.tensor([40, 170, 60], dtype=torch.uint8, device=paid.device)
    red = torch.tensor([210, 50, 50], dtype=torch.uint8, device=paid.device)
    hit = torch.where(paid[..., None], green, red)
    pulled = (torch.arange(2, device=paid.device) == last_action[..., None])[..., None]
    return torch.where(pulled, hit[..., None, :], gray)
