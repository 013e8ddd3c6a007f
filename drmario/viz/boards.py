"""Board pictures and move-probability heatmaps.

Moves arrays are float[4, 8, 16] [r, x, y] as in `drmario.engine.rules.MOVES_SHAPE`: r clockwise
quarter-turns from spawn, (x, y) the cell of the pill's bottom-left half, y = 0 at the bottom.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import numpy as np

from drmario.engine import kernels as K
from drmario.engine.board import Board, Move, Pill
from drmario.engine.game import Game
from drmario.engine.rules import MOVES_SHAPE, legal_mask, placement_mass
from drmario.engine.svg import _heat as heat_colour  # the overlay's ramp, so the scale matches the cells
from drmario.engine.svg import board_svg
from drmario.viz.views import HTMLView, SVGView

# How the pill lies after r clockwise quarter-turns (L, R: its left and right colours at spawn).
ORIENTATION = ("[L R]", "R under L", "[R L]", "L under R")

# ------------------------------------------------------------------------------------------------
# Boards

BoardLike = Board | Game | SVGView | str


def board_view(
    board: Board | Game,
    overlay: np.ndarray | None = None,
    pill: Pill | None = None,
    *,
    outline: np.ndarray | None = None,
    ghost: tuple[Pill, Move] | None = None,
    labels: dict[tuple[int, int], str] | None = None,
    cell: int = 18,
    title: str | None = None,
) -> SVGView:
    """A board picture shown inline (a Game shows its board and the pill to place).

    overlay: float[8, 16] in [0, 1] cell backgrounds; outline: bool[8, 16]; see `svg.board_svg`.
    """
    if isinstance(board, Game):
        if pill is None and not board.over:
            pill = board.pill
        board = board.board
    return SVGView(
        board_svg(
            board.cells, overlay=overlay, outline=outline, pill=pill, ghost=ghost, labels=labels, cell=cell, title=title
        )
    )


def _as_svg(item: BoardLike, cell: int) -> str:
    if isinstance(item, SVGView):
        return item.svg
    if isinstance(item, str):
        return item
    if isinstance(item, (Board, Game)):
        return board_view(item, cell=cell).svg
    raise TypeError(f"expected a Board, Game, SVGView or SVG text, got {type(item).__name__}")


def html_row(parts: Sequence[str], captions: Sequence[str | None] | None = None, title: str | None = None) -> str:
    """Pictures side by side (wrapping on narrow screens), bottoms aligned, captions below."""
    figs = []
    for i, part in enumerate(parts):
        cap = captions[i] if captions is not None and i < len(captions) else None
        cap_html = f'<figcaption style="font-size:12px;margin-top:2px">{escape(cap)}</figcaption>' if cap else ""
        figs.append(f'<figure style="margin:0;text-align:center">{part}{cap_html}</figure>')
    head = f'<div style="font-weight:bold;margin:2px 0 4px">{escape(title)}</div>' if title else ""
    body = "".join(figs)
    return f'<div>{head}<div style="display:flex;flex-wrap:wrap;gap:8px;align-items:flex-end">{body}</div></div>'


def board_row(
    boards: Sequence[BoardLike],
    captions: Sequence[str | None] | None = None,
    *,
    title: str | None = None,
    cell: int = 14,
) -> HTMLView:
    """Several boards (Board, Game, SVGView or SVG text) side by side in one HTML row."""
    if captions is not None and len(captions) != len(boards):
        raise ValueError(f"got {len(captions)} captions for {len(boards)} boards")
    svgs = [_as_svg(b, cell) for b in boards]
    return HTMLView(html_row(svgs, captions, title), svgs)


# ------------------------------------------------------------------------------------------------
# Move-probability heatmaps


def as_moves_array(moves: Any, what: str = "moves") -> np.ndarray:
    m = np.asarray(moves, dtype=np.float64)
    if m.shape == (4 * K.WIDTH * K.HEIGHT,):
        m = m.reshape(MOVES_SHAPE)
    if m.shape != MOVES_SHAPE:
        raise ValueError(f"{what} must be float[4, 8, 16] [r, x, y] (or float[512]), got shape {m.shape}")
    if not np.isfinite(m).all() or (m < 0).any():
        raise ValueError(f"{what} must be finite and >= 0 (probabilities or visit counts, not logits)")
    return m


def _legal(board: Board, pill: Pill, legal: np.ndarray | None) -> np.ndarray:
    if legal is None:
        return legal_mask(board, pill)
    legal = np.asarray(legal, dtype=bool)
    if legal.shape != MOVES_SHAPE:
        raise ValueError(f"legal must be bool[4, 8, 16] [r, x, y], got shape {legal.shape}")
    return legal


def _placement_mass(pill: Pill, m: np.ndarray) -> np.ndarray:
    """float[2 or 4, 8, 16]: a placement's mass; same-colour pills hold it split over r and r + 2."""
    return m[:2] + m[2:] if pill.same_colour else m


def move_share(pill: Pill, m: np.ndarray, move: Move) -> float:
    """The fraction of the array's mass on move (both planes of a same-colour placement)."""
    total = m.sum()
    if total <= 0:
        return 0.0
    r, x, y = move
    return float(_placement_mass(pill, m)[r % 2 if pill.same_colour else r, x, y] / total)


def top_moves(
    board: Board, pill: Pill, moves: np.ndarray, legal: np.ndarray | None = None, n: int = 3
) -> list[tuple[Move, float]]:
    """The n legal moves with the most mass, best first, as (move, fraction of the array's total).

    moves: float[4, 8, 16] probabilities (or visit counts); legal: bool[4, 8, 16] (default
    `rules.legal_mask`). Moves with no mass are left out. A same-colour placement is counted once,
    with its canonical r in {0, 1} and the mass of both planes.
    """
    m = as_moves_array(moves)
    legal = _legal(board, pill, legal)
    total = m.sum()
    mass = _placement_mass(pill, m)
    ok = (legal[:2] | legal[2:]) if pill.same_colour else legal
    mass = np.where(ok, mass, 0.0)
    out = []
    for i in np.argsort(-mass, axis=None, kind="stable")[: max(n, 0)]:
        r, x, y = np.unravel_index(i, mass.shape)
        if mass[r, x, y] <= 0:
            break
        out.append((Move(int(r), int(x), int(y)), float(mass[r, x, y] / total)))
    return out


def _heatmap_parts(
    board: Board,
    pill: Pill,
    moves: Any,
    legal: np.ndarray | None,
    top: int,
    chosen: Move | None,
    cell: int,
) -> tuple[list[str], str, str]:
    """The 4 rotation boards of a heatmap, its caption line and its colour scale (as the numbers
    say: a same-colour placement's shade is both of its planes' mass)."""
    m = as_moves_array(moves)
    legal = _legal(board, pill, legal)
    shown = np.concatenate([_placement_mass(pill, m)] * 2) if pill.same_colour else m
    peak, total = shown.max(), m.sum()
    overlay = shown / peak if peak > 0 else shown
    best = top_moves(board, pill, m, legal, top)
    labels: list[dict[tuple[int, int], str]] = [{} for _ in range(4)]
    for k, (mv, _) in enumerate(best, 1):
        labels[mv.r][(mv.x, mv.y)] = str(k)
    paired = pill.same_colour and np.allclose(m[:2], m[2:])
    svgs = []
    for r in range(4):
        name = f"r={r} (= r={r - 2})" if paired and r >= 2 else f"r={r} {ORIENTATION[r]}"
        shows_chosen = chosen is not None and (chosen[0] % 2 == r % 2 if pill.same_colour else chosen[0] == r)
        svgs.append(
            board_svg(
                board.cells,
                overlay=overlay[r],
                outline=legal[r],
                pill=pill,
                pill_r=r,
                ghost=(pill, Move(r, chosen[1], chosen[2])) if shows_chosen and chosen is not None else None,
                labels=labels[r],
                cell=cell,
                title=name,
                coordinates=True,  # the caption gives moves as (r, x, y)
            )
        )
    if total <= 0:
        notes = ["all moves have zero mass"]
    else:
        notes = [f"{k}. r={mv.r} x={mv.x} y={mv.y} {p:.1%}" for k, (mv, p) in enumerate(best, 1)]
        illegal = m[~legal].sum() / total
        if illegal >= 5e-4:
            notes.append(f"illegal moves hold {illegal:.1%}")
    if chosen is not None:
        notes.append(f"chosen r={chosen[0]} x={chosen[1]} y={chosen[2]} {move_share(pill, m, Move(*chosen)):.1%}")
    if paired:
        notes.append("same-colour pill: planes r and r+2 are equal, one placement; shades and numbers add both")
    elif pill.same_colour:
        notes.append("same-colour pill, yet planes r and r+2 differ (not symmetrised); shades and numbers add both")
    caption = f"pill {pill} · " + " · ".join(notes)
    if total <= 0:
        return svgs, caption, ""  # no mass: nothing to scale
    scale = colour_scale(float(peak / total), min(320, 4 * (8 * cell + 16)))
    return svgs, caption, f'<div style="margin:2px 0">{scale}</div>'


def colour_scale(peak_share: float, width: int = 240, steps: int = 24) -> str:
    """An SVG legend strip for a heatmap's cell shading: the colour ramp from an empty cell (0) to the
    most probable entry, with its numbers as shares of the array's total mass (0, half the peak, the
    peak). Its root element has ``class="colour-scale"``."""
    if not 0.0 <= peak_share <= 1.0:
        raise ValueError(f"peak_share must be a share in [0, 1], got {peak_share}")
    left, bar_w, h = 6, width - 12, 10
    out = [
        f'<svg class="colour-scale" xmlns="http://www.w3.org/2000/svg" width="{width}" height="40" '
        f'viewBox="0 0 {width} 40" font-family="sans-serif">',
        f'<text x="{left}" y="10" font-size="10" fill="#555">cell colour: share of the mass on that move</text>',
    ]
    for i in range(steps):  # discrete steps, not a gradient: no element ids to clash between pictures
        v = (i + 0.5) / steps
        x = left + i * bar_w / steps
        out.append(f'<rect x="{x:.2f}" y="14" width="{bar_w / steps + 0.3:.2f}" height="{h}" fill="{heat_colour(v)}"/>')
    out.append(f'<rect x="{left}" y="14" width="{bar_w}" height="{h}" fill="none" stroke="#888"/>')
    for v, anchor in ((0.0, "start"), (0.5, "middle"), (1.0, "end")):
        x = left + v * bar_w
        out.append(f'<line x1="{x}" y1="{14 + h}" x2="{x}" y2="{17 + h}" stroke="#888"/>')
        out.append(
            f'<text class="tick" x="{x}" y="{h + 28}" font-size="10" fill="#555" text-anchor="{anchor}">'
            f"{v * peak_share:.1%}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def move_heatmap(
    board: Board,
    pill: Pill,
    moves: np.ndarray,
    legal: np.ndarray | None = None,
    top: int = 3,
    title: str | None = None,
    *,
    chosen: Move | None = None,
    cell: int = 14,
) -> HTMLView:
    """Move probabilities as 4 small boards, one per rotation r = 0..3.

    moves: float[4, 8, 16] [r, x, y] probabilities (or visit counts), drawn on the cell of the
    pill's bottom-left half, shaded relative to the largest entry. legal: bool[4, 8, 16], outlined
    (default `rules.legal_mask`). The top legal moves are numbered 1..top on their cells and listed
    below with their share of the mass; chosen (e.g. the move played) is drawn as a ghost pill.
    Each board shows the pill turned as in its plane above the bottle. A colour scale below gives
    the shading's numbers (shares of the total mass).
    """
    svgs, caption, scale = _heatmap_parts(board, pill, moves, legal, top, chosen, cell)
    html = html_row(svgs, title=title) + scale
    html += f'<div style="font-size:12px;margin:2px 0 6px">{escape(caption)}</div>'
    return HTMLView(f"<div>{html}</div>", svgs)


def compare_heatmaps(
    board: Board,
    pill: Pill,
    named_moves: Mapping[str, np.ndarray],
    legal: np.ndarray | None = None,
    top: int = 3,
    *,
    chosen: Move | None = None,
    cell: int = 12,
) -> HTMLView:
    """Several heatmaps of one position side by side, e.g. {"network": p, "search": pi}.

    Each value is float[4, 8, 16], shown with its own colour scale. For each after the first, the
    caption gives its overlap with the first (the sum over placements of the smaller share: 1 for
    equal distributions, 0 for disjoint; a same-colour pill's planes r and r + 2 are one placement).
    """
    if not named_moves:
        raise ValueError("compare_heatmaps needs at least one moves array")
    legal = _legal(board, pill, legal)
    arrays = {name: as_moves_array(m, f"moves {name!r}") for name, m in named_moves.items()}
    first_name, first = next(iter(arrays.items()))
    blocks, svgs = [], []
    for name, m in arrays.items():
        parts, caption, scale = _heatmap_parts(board, pill, m, legal, top, chosen, cell)
        if m is not first and m.sum() > 0 and first.sum() > 0:
            a, b = (placement_mass(x, pill.same_colour) for x in (m, first))
            overlap = np.minimum(a / a.sum(), b / b.sum()).sum()
            caption += f" · overlap with {first_name} {overlap:.2f}"
        svgs += parts
        blocks.append(
            f"<div>{html_row(parts, title=name)}{scale}"
            f'<div style="font-size:12px;margin:2px 0 6px;max-width:{4 * (8 * cell + 16)}px">{escape(caption)}</div>'
            "</div>"
        )
    return HTMLView(f'<div style="display:flex;flex-wrap:wrap;gap:24px">{"".join(blocks)}</div>', svgs)
