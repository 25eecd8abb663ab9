"""Rasterising shapes in pure torch, for ``env.render(state)``.

A frame is built from masks over a grid of pixel coordinates, each painted with
``torch.where``: no drawing library, no Python branching on values, so a render
function made of these helpers vmaps, compiles with ``fxrl.compile`` and exports.

Coordinates are those of gymnasium's classic-control screens before their final
vertical flip: ``x`` counts columns from the left, ``y`` counts rows from the bottom,
both in whole pixels (pixel ``(row, col)`` of an ``[H, W, 3]`` image sits at
``x = col``, ``y = H - 1 - row``). Shape arguments may be Python numbers or tensors of
any batch shape ``[*B]``; masks then come out ``[*B, H, W]``, so an elementwise env can
render a whole batch of states without ``vmap``::

    x, y = draw.grid(400, 600)
    image = draw.canvas(400, 600)                                   # white
    image = draw.paint(image, draw.circle(x, y, cx, 100.0, 5.0), (129, 132, 203))
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = [
    "BLACK",
    "WHITE",
    "blend",
    "canvas",
    "circle",
    "curve",
    "grid",
    "paint",
    "polygon",
    "rotate",
    "segment",
]

Color = tuple[int, int, int]
Number = Tensor | float

WHITE: Color = (255, 255, 255)
BLACK: Color = (0, 0, 0)


def _px(v: Number) -> Number:
    """A coordinate made to broadcast against [H, W] grids: [*B] -> [*B, 1, 1]."""
    if isinstance(v, Tensor):
        return v.to(torch.float32)[..., None, None]
    return float(v)


def grid(
    height: int, width: int, device: torch.device | str | None = None
) -> tuple[Tensor, Tensor]:
    """Pixel coordinates ``(x, y)``, each float32 [height, width]: ``x`` the column,
    ``y`` the row counted from the bottom (y points up, as in gymnasium's drawings)."""
    if not (isinstance(height, int) and isinstance(width, int) and height > 0 and width > 0):
        raise ValueError(
            f"draw.grid: height and width must be positive ints, got {height!r}, {width!r}."
        )
    cols = torch.arange(width, dtype=torch.float32, device=device)
    rows = torch.arange(height - 1, -1, -1, dtype=torch.float32, device=device)
    y, x = torch.meshgrid(rows, cols, indexing="ij")
    return x, y


def canvas(
    height: int, width: int, color: Color = WHITE, device: torch.device | str | None = None
) -> Tensor:
    """A uint8 [height, width, 3] image of one color (white by default)."""
    return _color(color, device).expand(height, width, 3).contiguous()


def _color(color: Color, device: torch.device | str | None) -> Tensor:
    if len(color) != 3 or not all(isinstance(c, int) and 0 <= c <= 255 for c in color):
        raise ValueError(f"draw: a color is three ints in [0, 255], got {color!r}.")
    return torch.tensor(color, dtype=torch.uint8, device=device)


def paint(image: Tensor, mask: Tensor, color: Color) -> Tensor:
    """``image`` [..., H, W, 3] with the pixels where ``mask`` [..., H, W] is true set to
    ``color``; batch dims broadcast, so painting a batched mask on one canvas gives a
    batch of images."""
    return torch.where(mask[..., None], _color(color, image.device), image)


def rotate(px: Number, py: Number, angle: Number) -> tuple[Number, Number]:
    """The point ``(px, py)`` turned counterclockwise by ``angle`` radians about the origin
    (pygame's ``Vector2.rotate_rad`` in y-up coordinates)."""
    if not isinstance(angle, Tensor):  # a number: no tensor on the default device
        angle = torch.tensor(angle, dtype=torch.float32, device=_device(px, py))
    angle = angle.to(torch.float32)
    cos, sin = torch.cos(angle), torch.sin(angle)
    return px * cos - py * sin, px * sin + py * cos


def _device(*xs: Number) -> torch.device | None:
    """The device of the first tensor among ``xs`` (None: all numbers)."""
    return next((x.device for x in xs if isinstance(x, Tensor)), None)


def polygon(x: Tensor, y: Tensor, vertices: Sequence[tuple[Number, Number]]) -> Tensor:
    """Pixels inside a convex polygon (edges included), vertices in either winding order.

    A pixel is inside when it lies on the same side of every edge: the cross products of
    each edge with the vector to the pixel are all >= 0 or all <= 0.
    """
    if len(vertices) < 3:
        raise ValueError(f"draw.polygon: needs at least 3 vertices, got {len(vertices)}.")
    points = [(_px(vx), _px(vy)) for vx, vy in vertices]
    left = right = None
    for (x0, y0), (x1, y1) in zip(points, points[1:] + points[:1], strict=True):
        cross = (x1 - x0) * (y - y0) - (y1 - y0) * (x - x0)
        left = cross >= 0 if left is None else left & (cross >= 0)
        right = cross <= 0 if right is None else right & (cross <= 0)
    return left | right


def circle(x: Tensor, y: Tensor, cx: Number, cy: Number, radius: Number) -> Tensor:
    """Pixels whose centre lies within ``radius + 0.5`` of ``(cx, cy)`` (a filled disc as
    the midpoint-circle rasteriser draws it)."""
    dx, dy, r = x - _px(cx), y - _px(cy), _px(radius)
    return dx * dx + dy * dy <= (r + 0.5) * (r + 0.5)


def segment(
    x: Tensor, y: Tensor, x0: Number, y0: Number, x1: Number, y1: Number, width: Number = 1.0
) -> Tensor:
    """Pixels within ``width / 2`` of the segment from ``(x0, y0)`` to ``(x1, y1)``: a line
    of that thickness with round ends."""
    x0, y0, x1, y1 = _px(x0), _px(y0), _px(x1), _px(y1)
    ex, ey = x1 - x0, y1 - y0
    length2 = ex * ex + ey * ey
    length2 = length2.clamp_min(1e-12) if isinstance(length2, Tensor) else max(length2, 1e-12)
    s = (((x - x0) * ex + (y - y0) * ey) / length2).clamp(0.0, 1.0)
    dx, dy = x - x0 - s * ex, y - y0 - s * ey
    half = _px(width) * 0.5
    return dx * dx + dy * dy <= half * half


def curve(y: Tensor, height: Tensor, slope: Tensor) -> Tensor:
    """Coverage in [0, 1] of each pixel by the graph of a function of ``x``, drawn as an
    antialiased line one pixel wide (Wu's line: the two pixels straddling the line in
    each column, or in each row where it is steep, share its intensity). ``height`` and
    ``slope`` are the function's value and derivative at each pixel's ``x``, tensors that
    broadcast against ``y``. Paint it with ``blend``."""
    return (1.0 - (y - height).abs() / slope.abs().clamp_min(1.0)).clamp(0.0, 1.0)


def blend(image: Tensor, alpha: Tensor, color: Color) -> Tensor:
    """``image`` [..., H, W, 3] mixed towards ``color`` by ``alpha`` [..., H, W] in [0, 1]
    (0 leaves a pixel, 1 paints it), rounded to uint8."""
    target = _color(color, image.device).to(torch.float32)
    mixed = image.to(torch.float32) + alpha[..., None] * (target - image.to(torch.float32))
    return mixed.round().to(torch.uint8)
