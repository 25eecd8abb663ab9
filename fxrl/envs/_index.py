"""Looking up rows of a small constant table by an index tensor, on the index's device."""

from __future__ import annotations

from torch import Tensor

__all__ = ["cells", "rows"]


def rows(table: Tensor, index: Tensor) -> Tensor:
    """``table[index]`` for an int64 ``index [...]``: ``[..., *table.shape[1:]]`` on the
    index's device (the table is moved there). Not ``table[index]``, which reads a 0-dim
    index on the host (a GPU sync per call), nor ``torch.take``, which vmap runs one
    element at a time."""
    out = table.to(index.device).index_select(0, index.reshape(-1))
    return out.reshape((*index.shape, *table.shape[1:]))


def cells(grid: Tensor, row: Tensor, col: Tensor) -> Tensor:
    """``grid[row, col]`` of a 2-D ``grid`` for index tensors of one shape, as ``rows``."""
    return rows(grid.reshape(-1), row * grid.shape[1] + col)
