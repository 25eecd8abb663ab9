"""Grid helpers shared by the bsuite and misc envs: one-hot cells and palette images.

Everything is shape-static tensor code (comparisons against ``arange``, palette lookups,
``expand`` + ``reshape`` for upscaling), so it vmaps, compiles and exports.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["cell_mask", "palette_image"]


def cell_mask(row: Tensor, col: Tensor, rows: int, cols: int) -> Tensor:
    """Bool [..., rows, cols]: True at (``row``, ``col``) (out-of-grid indices: all False).

    Args:
      row, col: int64 [...].
    """
    r = torch.arange(rows, device=row.device)
    c = torch.arange(cols, device=col.device)
    return (r == row[..., None])[..., :, None] & (c == col[..., None])[..., None, :]


def palette_image(cells: Tensor, palette: list[tuple[int, int, int]], scale: int) -> Tensor:
    """uint8 [..., H * scale, W * scale, 3]: each cell index of ``cells`` [..., H, W] drawn
    as a ``scale`` x ``scale`` square of its ``palette`` color."""
    colors = torch.tensor(palette, dtype=torch.uint8, device=cells.device)
    img = colors[cells]  # [..., H, W, 3]
    *batch, h, w, _ = img.shape
    img = img[..., :, None, :, None, :].expand(*batch, h, scale, w, scale, 3)
    return img.reshape(*batch, h * scale, w * scale, 3)
