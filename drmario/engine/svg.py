"""SVG pictures of boards (no plotting library needed: Jupyter shows ``_repr_svg_`` inline)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import NamedTuple

import numpy as np

from drmario.engine import kernels as K

# A pill is its (left, right) colours as spawned, a move (r, x, y): plain tuples, so that this module
# needs nothing above the kernels (`board` imports it for `Board._repr_svg_`).
PillLike = Sequence[int]
MoveLike = Sequence[int]

COLOURS = {K.RED: "#e8413a", K.YELLOW: "#f2c12e", K.BLUE: "#3b7be0"}
DARK = {K.RED: "#8c1d18", K.YELLOW: "#9a7410", K.BLUE: "#1b4590"}


def _heat(v: float) -> str:
    """Dark-to-green ramp for overlays in [0, 1] (0 matches an empty cell)."""
    v = float(np.clip(v, 0.0, 1.0))
    r, g, b = (int(round(a + (c - a) * v)) for a, c in ((34, 40), (34, 200), (40, 90)))
    return f"rgb({r},{g},{b})"


def _piece(out: list[str], px: float, py: float, size: float, colour: int, shape: int) -> None:
    """One virus or pill half in the size x size square at (px, py)."""
    fill, edge, m = COLOURS[colour], DARK[colour], size * 0.1
    style = f'fill="{fill}" stroke="{edge}"'
    if shape == K.VIRUS:
        cx, cy = px + size / 2, py + size / 2
        out.append(f'<circle cx="{cx}" cy="{cy}" r="{size * 0.38}" {style}/>')
        for dx in (-0.13, 0.13):  # eyes make viruses tell apart from pill halves at a glance
            out.append(f'<circle cx="{cx + dx * size}" cy="{cy - 0.06 * size}" r="{size * 0.07}" fill="#fff"/>')
        return
    rx = size * 0.3  # a loose half too: a rounded square, where a virus is round
    out.append(f'<rect x="{px + m}" y="{py + m}" width="{size - 2 * m}" height="{size - 2 * m}" rx="{rx}" {style}/>')
    # Square off the side facing the partner so a pill reads as one piece.
    h = size / 2
    joint = {
        K.LEFT: (px + h, py + m, h, size - 2 * m),
        K.RIGHT: (px, py + m, h, size - 2 * m),
        K.BOTTOM: (px + m, py, size - 2 * m, h),
        K.TOP: (px + m, py + h, size - 2 * m, h),
    }.get(shape)
    if joint is not None:
        jx, jy, jw, jh = joint
        out.append(f'<rect x="{jx}" y="{jy}" width="{jw}" height="{jh}" fill="{fill}"/>')


def _pill_pieces(pill: PillLike, r: int, x: int, y: int) -> list[tuple[int, int, int, int]]:
    """(x, y, colour, shape) of each half of pill locked at move (r, x, y), as the engine writes it.
    ValueError for a move off the bottle (the kernel writes unchecked)."""
    r, x, y = int(r), int(x), int(y)
    if not (0 <= r < 4 and 0 <= x < K.WIDTH - (r % 2 == 0) and 0 <= y < K.HEIGHT):
        raise ValueError(
            f"ghost move {(r, x, y)} (r, x, y) is off the bottle: x in 0..6 lying, 0..7 standing; y in 0..15"
        )
    scratch = np.zeros((K.WIDTH, K.HEIGHT), np.uint8)
    K.write_pill(scratch, int(pill[0]), int(pill[1]), r, x, y)
    return [
        (int(px), int(py), int(scratch[px, py]) & 3, int(scratch[px, py]) >> 2) for px, py in zip(*np.nonzero(scratch))
    ]


def _check_cells(cells: object) -> np.ndarray:
    """cells if it is an integer array [8, 16] of cell codes (empty, or a shape and a colour);
    ValueError naming the first bad one otherwise."""
    if not isinstance(cells, np.ndarray) or cells.dtype.kind not in "iu" or cells.shape != (K.WIDTH, K.HEIGHT):
        what = f"an array of {cells.dtype} {cells.shape}" if isinstance(cells, np.ndarray) else type(cells).__name__
        raise ValueError(f"board cells: expected an integer array [8, 16] of cell codes, got {what}")
    codes = cells.astype(np.int64)
    valid = (codes == K.EMPTY) | ((codes >= 0) & (codes & 3 != 0) & (codes >> 2 <= K.RIGHT))
    if not valid.all():
        x, y = np.argwhere(~valid)[0]
        raise ValueError(f"board cells: invalid cell code {cells[x, y]} at x={x}, y={y}")
    return cells


def board_string(cells: np.ndarray) -> str:
    """The maryodel board string of cells uint8[8, 16]: a cell's letter is 0x60 | code, 'd' when empty."""
    rows = _check_cells(cells).T[::-1]
    return np.where(rows == K.EMPTY, ord("d"), 0x60 | rows).astype(np.uint8).tobytes().decode("ascii")


def board_svg(
    cells: np.ndarray,
    *,
    overlay: np.ndarray | None = None,
    outline: np.ndarray | None = None,
    pill: PillLike | None = None,
    ghost: tuple[PillLike, MoveLike] | None = None,
    labels: dict[tuple[int, int], str] | None = None,
    cell: int = 18,
    title: str | None = None,
    pill_r: int | None = None,
    coordinates: bool = False,
) -> str:
    """An SVG picture of a board, cells uint8[8, 16] (`Board.cells`).

    overlay: float[8, 16] in [0, 1], drawn as cell backgrounds (e.g. move probabilities).
    outline: bool[8, 16], cells to outline (e.g. where a legal move's bottom-left half may go).
    pill: drawn above the bottle as the pill to place, in its spawn form; with ``pill_r`` turned
    that many clockwise quarter-turns instead, in a strip two cells high whatever r is (so the four
    rotation boards of a heatmap line up).
    ghost: a (pill, move) drawn translucent. labels: small text per cell, e.g. {(x, y): "1"}.
    coordinates: the column numbers x below the bottle and the row numbers y (0 at the bottom) left
    of it, for reading moves written as (r, x, y).

    The root element carries ``data-board`` (the maryodel board string) so a picture can be traced
    back to its board; outlines, labels and the ghost carry a ``class`` for the same reason.
    """
    _check_cells(cells)
    strip = 4 if pill is None else (cell + 8 if pill_r is None else 2 * cell + 8)
    frame = _Frame(cell, 4, strip + (16 if title else 0), max(10, round(0.9 * cell)) if coordinates else 0)
    out = _open_svg(frame, cells, title)
    _draw_grid(out, frame, overlay)
    if coordinates:
        _draw_coordinates(out, frame)
    for x, y in zip(*np.nonzero(cells)):
        c = int(cells[x, y])
        _piece(out, *frame.xy(int(x), int(y)), cell, c & 3, c >> 2)
    if outline is not None:
        _draw_outline(out, frame, outline)
    if ghost is not None:
        out.append('<g class="ghost" opacity="0.55">')  # one opacity for the group: no darker overlaps
        for x, y, colour, shape in _pill_pieces(ghost[0], *ghost[1]):
            _piece(out, *frame.xy(x, y), cell, colour, shape)
        out.append("</g>")
    _draw_labels(out, frame, labels or {})
    if pill is not None:
        _draw_pill(out, frame, pill, pill_r)
    out.append("</svg>")
    return "".join(out)


class _Frame(NamedTuple):
    """Where a board picture's cells lie: cell size, padding, the height above the bottle, and the
    room for coordinates left of it and below it."""

    cell: int
    pad: int
    top: int
    axes: int = 0

    @property
    def width(self) -> int:
        return K.WIDTH * self.cell + 2 * self.pad + self.axes

    @property
    def height(self) -> int:
        return K.HEIGHT * self.cell + self.top + self.pad + self.axes

    def xy(self, x: float, y: float) -> tuple[float, float]:
        """The top-left corner of board cell (x, y) (y counts up from the bottom row)."""
        return self.pad + self.axes + x * self.cell, self.top + (K.HEIGHT - 1 - y) * self.cell


def _open_svg(frame: _Frame, cells: np.ndarray, title: str | None) -> list[str]:
    """The root element (with ``data-board``), the background and the title."""
    w, h = frame.width, frame.height
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        f'font-family="sans-serif" data-board="{board_string(cells)}">',
        f'<rect width="{w}" height="{h}" fill="#1c1c24" rx="4"/>',
    ]
    if title:
        text = escape(str(title))
        size = min(11.0, round(1.75 * w / len(str(title)), 1))  # a long title on a small board: smaller, not cut
        out.append(f'<text x="{w / 2}" y="13" font-size="{size:g}" fill="#ddd" text-anchor="middle">{text}</text>')
    return out


def _draw_grid(out: list[str], frame: _Frame, overlay: np.ndarray | None) -> None:
    """The empty bottle: one square per cell, coloured by overlay[x, y] if given."""
    cell = frame.cell
    for x in range(K.WIDTH):
        for y in range(K.HEIGHT):
            px, py = frame.xy(x, y)
            fill = _heat(overlay[x, y]) if overlay is not None else "#22222a"
            out.append(f'<rect x="{px}" y="{py}" width="{cell}" height="{cell}" fill="{fill}" stroke="#2e2e38"/>')


def _draw_coordinates(out: list[str], frame: _Frame) -> None:
    """x under each column, y left of each row."""
    cell = frame.cell
    size = max(7, round(0.55 * cell))
    style = f'class="coordinate" font-size="{size}" fill="#aaa" text-anchor'
    below = frame.top + K.HEIGHT * cell + frame.axes - 2
    for x in range(K.WIDTH):
        out.append(f'<text {style}="middle" x="{frame.xy(x, 0)[0] + cell / 2}" y="{below}">{x}</text>')
    for y in range(K.HEIGHT):
        left, top = frame.xy(0, y)
        out.append(f'<text {style}="end" x="{left - 2}" y="{top + (cell + size) / 2 - 1}">{y}</text>')


def _draw_outline(out: list[str], frame: _Frame, outline: np.ndarray) -> None:
    cell = frame.cell
    for x, y in zip(*np.nonzero(outline)):
        px, py = frame.xy(int(x), int(y))
        out.append(
            f'<rect class="outline" x="{px + 1}" y="{py + 1}" width="{cell - 2}" height="{cell - 2}" '
            'fill="none" stroke="#9fe" stroke-width="1" stroke-dasharray="2,2"/>'
        )


def _draw_labels(out: list[str], frame: _Frame, labels: dict[tuple[int, int], str]) -> None:
    cell = frame.cell
    for (x, y), text in labels.items():
        px, py = frame.xy(x, y)
        out.append(
            f'<text class="label" x="{px + cell / 2}" y="{py + cell * 0.7}" font-size="{cell * 0.55}" fill="#fff" '
            f'stroke="#000" stroke-width="{cell * 0.04}" paint-order="stroke" text-anchor="middle" '
            f'font-weight="bold">{escape(str(text))}</text>'
        )


def _draw_pill(out: list[str], frame: _Frame, pill: PillLike, pill_r: int | None) -> None:
    """The pill to place, above the bottle: in its spawn form, or turned pill_r quarter-turns."""
    cell, top, left = frame.cell, frame.top, frame.xy(0, 0)[0]
    if pill_r is None:
        py = top - cell - 4
        for i, colour in enumerate(pill):
            px = left + (K.SPAWN_X + i) * cell
            out.append(
                f'<rect x="{px + 1}" y="{py}" width="{cell - 2}" height="{cell - 2}" rx="{cell * 0.3}" '
                f'fill="{COLOURS[int(colour)]}" stroke="{DARK[int(colour)]}"/>'
            )
        return
    # The turned pill's cells, as if placed with its bottom-left half at the spawn cell.
    for x, y, colour, shape in _pill_pieces(pill, pill_r % 4, 0, 0):
        _piece(out, left + (K.SPAWN_X + x) * cell, top - 4 - (y + 1) * cell, cell, colour, shape)
