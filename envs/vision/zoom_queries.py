"""Zoom queries: a large noisy canvas, a question about it, and a zoom tool; some questions need the zoom, some not.

A small analogue of high-resolution visual question answering (HR-Bench), where a model sees a downsampled image and
may call a pixel operation (crop and zoom) to look closer. Every canvas (``CANVAS x CANVAS`` RGB, values in
``[0, 1]``) holds three things, each asked about by one query kind:

* ``colour`` (coarse): the canvas's background tint, ``r``, ``g`` or ``b``; visible at any resolution.
* ``count`` (coarse): how many large dark squares (``SQUARE`` pixels a side, 1 to 4) lie on the canvas; each spans
  several pixels of the encoder's view.
* ``digit`` (fine): the digit ``0``-``9`` of a small glyph (a 3x5 font at twice its size, black on a white patch);
  the patch is visible in the encoder's view, but the glyph's strokes are averaged away by the downsampling, so
  reading it needs a zoom into the patch's cell.

The policy sees the canvas through :func:`global_view` (area-resampled to ``VIEW x VIEW``). The zoom tool
(:func:`zoom`) takes one of ``GRID x GRID`` cells, :func:`cell_box`, and returns that box resampled to the same
``VIEW x VIEW``; with the defaults a cell is exactly ``VIEW`` pixels wide, so the crop is at full resolution. Whether a
query needs the zoom is known by construction (:attr:`ZoomQuery.needs_zoom`: the ``digit`` kind), which the metrics
use; the training signal never sees it.

A response is text: an optional tool call ``<zoom X Y>`` (cell column ``X`` and row ``Y``, ``0..GRID-1``) followed
by one answer character. :func:`verify` scores the answer (1 or 0) whatever the call; a malformed response scores 0.

Plain numpy; randomness only from the generator passed in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

#: Canvas side in pixels.
CANVAS = 64
#: Side of the encoder's input (the global view and every zoomed crop), in pixels.
VIEW = 16
#: Zoom cells per canvas side; a cell is ``CANVAS // GRID`` pixels wide.
GRID = 4
#: Side of a large square (``count`` queries), pixels.
SQUARE = 11
#: Query kinds; ``digit`` is the one that needs the zoom.
KINDS = ("colour", "count", "digit")
FINE_KINDS = frozenset({"digit"})
#: Background tints of ``colour`` queries (RGB of the noiseless background).
TINTS: dict[str, tuple[float, float, float]] = {
    "r": (0.62, 0.3, 0.3),
    "g": (0.3, 0.62, 0.3),
    "b": (0.3, 0.3, 0.62),
}
#: Every answer character: the digits (``digit`` and ``count``) and the tints.
ANSWERS = "0123456789" + "".join(TINTS)
#: Per-pixel, per-channel Gaussian noise of the canvas (standard deviation).
NOISE = 0.12
#: 3x5 bitmaps of the digits (rows top to bottom, ``#`` = ink).
FONT: dict[str, tuple[str, ...]] = {
    "0": ("###", "#.#", "#.#", "#.#", "###"),
    "1": (".#.", "##.", ".#.", ".#.", "###"),
    "2": ("###", "..#", "###", "#..", "###"),
    "3": ("###", "..#", ".##", "..#", "###"),
    "4": ("#.#", "#.#", "###", "..#", "..#"),
    "5": ("###", "#..", "###", "..#", "###"),
    "6": ("###", "#..", "###", "#.#", "###"),
    "7": ("###", "..#", ".#.", ".#.", ".#."),
    "8": ("###", "#.#", "###", "#.#", "###"),
    "9": ("###", "#.#", "###", "..#", "###"),
}
#: Glyph magnification (pixels per font pixel) and the white patch around it (pixels of margin).
GLYPH_SCALE = 2
GLYPH_MARGIN = 2

_CALL = re.compile(r"^<zoom (\d+) (\d+)>")


@dataclass(frozen=True, eq=False)
class ZoomQuery:
    """One image and one question about it.

    Attributes:
        image: ``(3, CANVAS, CANVAS)`` float32 canvas, values in ``[0, 1]``.
        kind: One of :data:`KINDS`.
        answer: The right answer character (one of :data:`ANSWERS`).
        glyph_cell: ``(x, y)`` of the zoom cell holding the glyph (column, row).
        key: A name unique within its query set (the statistics key of a prompt).
    """

    image: np.ndarray
    kind: str
    answer: str
    glyph_cell: tuple[int, int]
    key: str

    @property
    def needs_zoom(self) -> bool:
        """Whether the answer needs detail the global view averages away (known by construction: the fine kinds)."""
        return self.kind in FINE_KINDS


def glyph(digit: str, scale: int = GLYPH_SCALE) -> np.ndarray:
    """The ink mask of ``digit``, ``(5 * scale, 3 * scale)`` bool."""
    if digit not in FONT:
        raise ValueError(f"digit must be one of {''.join(FONT)}, got {digit!r}")
    rows = np.array([[c == "#" for c in row] for row in FONT[digit]], dtype=bool)
    return np.kron(rows, np.ones((scale, scale), dtype=bool))


def cell_box(x: int, y: int, canvas: int = CANVAS, grid: int = GRID) -> tuple[float, float, float, float]:
    """The zoom box of cell ``(x, y)``: ``(left, top, width, height)`` in canvas pixels.

    Raises:
        ValueError: ``x`` or ``y`` outside ``0..grid-1``.
    """
    if not (0 <= x < grid and 0 <= y < grid):
        raise ValueError(f"zoom cell ({x}, {y}) is outside the {grid}x{grid} grid")
    side = canvas / grid
    return (x * side, y * side, side, side)


def _axis_weights(start: float, length: float, size: int, extent: int) -> np.ndarray:
    """``(size, extent)`` area weights: output pixel ``i`` covers ``[start + i*length/size, start + (i+1)*length/size)``
    of the source axis, and averages the source pixels by how much of each it covers."""
    edges = start + np.arange(size + 1) * (length / size)
    lo, hi = edges[:-1, None], edges[1:, None]
    pixels = np.arange(extent)[None, :]
    overlap = np.clip(np.minimum(hi, pixels + 1) - np.maximum(lo, pixels), 0.0, None)
    return overlap / overlap.sum(axis=1, keepdims=True)


def resample(image: np.ndarray, box: tuple[float, float, float, float], size: int = VIEW) -> np.ndarray:
    """Area resampling of ``box`` of ``image`` to ``size x size``: each output pixel is the mean of the source area
    it covers (partly covered source pixels weighted by the covered fraction).

    Downsampling by a whole factor is block averaging; upsampling repeats pixels (nearest neighbour at whole factors).

    Args:
        image: ``(C, H, W)`` array.
        box: ``(left, top, width, height)`` in source pixels; must lie inside the image and have positive size.
        size: Output side.

    Returns:
        ``(C, size, size)`` float32.

    Raises:
        ValueError: An empty box or one reaching outside the image.
    """
    left, top, width, height = (float(v) for v in box)
    _, rows, cols = image.shape
    if width <= 0 or height <= 0 or left < 0 or top < 0 or left + width > cols or top + height > rows:
        raise ValueError(f"zoom box {box} is empty or outside the {cols}x{rows} image")
    wy = _axis_weights(top, height, size, rows)
    wx = _axis_weights(left, width, size, cols)
    return (wy @ np.asarray(image, dtype=np.float64) @ wx.T).astype(np.float32)


def global_view(image: np.ndarray, size: int = VIEW) -> np.ndarray:
    """The whole canvas resampled to the encoder's ``(C, size, size)``."""
    _, rows, cols = image.shape
    return resample(image, (0, 0, cols, rows), size)


def zoom(image: np.ndarray, x: int, y: int, size: int = VIEW, grid: int = GRID) -> np.ndarray:
    """The zoom tool: cell ``(x, y)`` of the ``grid x grid`` partition resampled to ``(C, size, size)``."""
    _, rows, cols = image.shape
    if rows != cols:
        raise ValueError(f"the zoom grid needs a square canvas, got {cols}x{rows}")
    return resample(image, cell_box(x, y, cols, grid), size)


def make_query(rng: np.random.Generator, kind: str, key: str = "") -> ZoomQuery:
    """Draw one canvas and ask ``kind`` about it.

    Layout: the glyph's patch and up to four squares each get their own cell (drawn without replacement), at a random
    offset inside it; the tint and the digit are uniform, the square count uniform in 1..4.
    """
    if kind not in KINDS:
        raise ValueError(f"query kind must be one of {list(KINDS)}, got {kind!r}")
    side = CANVAS // GRID
    tint = str(rng.choice(list(TINTS)))
    image = np.empty((3, CANVAS, CANVAS), dtype=np.float64)
    image[:] = np.asarray(TINTS[tint])[:, None, None]
    cells = rng.permutation(GRID * GRID)
    count = int(rng.integers(1, 5))
    for cell in cells[1 : 1 + count]:
        cx, cy = int(cell % GRID) * side, int(cell // GRID) * side
        ox, oy = rng.integers(0, side - SQUARE + 1, size=2)
        image[:, cy + oy : cy + oy + SQUARE, cx + ox : cx + ox + SQUARE] = 0.05
    digit = str(rng.integers(0, 10))
    ink = glyph(digit)
    patch_h, patch_w = ink.shape[0] + 2 * GLYPH_MARGIN, ink.shape[1] + 2 * GLYPH_MARGIN
    gx, gy = int(cells[0] % GRID), int(cells[0] // GRID)
    px = gx * side + int(rng.integers(0, side - patch_w + 1))
    py = gy * side + int(rng.integers(0, side - patch_h + 1))
    image[:, py : py + patch_h, px : px + patch_w] = 0.95
    region = image[
        :, py + GLYPH_MARGIN : py + GLYPH_MARGIN + ink.shape[0], px + GLYPH_MARGIN : px + patch_w - GLYPH_MARGIN
    ]
    region[:, ink] = 0.05
    image += rng.normal(0.0, NOISE, size=image.shape)
    answer = {"colour": tint, "count": str(count), "digit": digit}[kind]
    return ZoomQuery(np.clip(image, 0.0, 1.0).astype(np.float32), kind, answer, (gx, gy), key)


def make_query_set(n: int, seed: int, fine_share: float = 0.3) -> list[ZoomQuery]:
    """``n`` queries: each ``digit`` with probability ``fine_share``, otherwise ``colour`` or ``count`` equally.

    Raises:
        ValueError: ``n < 1`` or ``fine_share`` outside ``[0, 1]``.
    """
    if n < 1:
        raise ValueError(f"a query set needs n >= 1, got {n}")
    if not 0.0 <= fine_share <= 1.0:
        raise ValueError(f"fine_share must be in [0, 1], got {fine_share}")
    rng = np.random.default_rng(seed)
    out: list[ZoomQuery] = []
    for i in range(n):
        kind = "digit" if rng.random() < fine_share else str(rng.choice(["colour", "count"]))
        out.append(make_query(rng, kind, key=f"{seed}:{i}"))
    return out


def zoom_call(x: int, y: int) -> str:
    """The text of a tool call on cell ``(x, y)``."""
    return f"<zoom {x} {y}>"


def parse_response(text: str, grid: int = GRID) -> tuple[tuple[int, int] | None, str | None]:
    """Split a response into its tool call and its answer.

    Returns:
        ``(cell, answer)``: the zoomed cell or ``None`` without a call, and the answer character, or ``None`` for a
        malformed response (anything but at most one in-grid call followed by exactly one answer character).
    """
    cell: tuple[int, int] | None = None
    match = _CALL.match(text)
    if match:
        cell = (int(match.group(1)), int(match.group(2)))
        if not (0 <= cell[0] < grid and 0 <= cell[1] < grid):
            return cell, None
        text = text[match.end() :]
    if len(text) != 1 or text not in ANSWERS:
        return cell, None
    return cell, text


def verify(query: ZoomQuery, text: str) -> float:
    """1.0 when the response's answer is right (with or without a tool call), else 0.0 (malformed included)."""
    _, answer = parse_response(text)
    return 1.0 if answer is not None and answer == query.answer else 0.0


def tool_calls(text: str) -> int:
    """Number of zoom calls in a response."""
    return text.count("<zoom ")
