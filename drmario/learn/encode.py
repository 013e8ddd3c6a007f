"""Network input planes and the moves target (design note 000, plus the NES preview).

Input: float[P, 8, 16] planes [channel, x, y], y = 0 at the bottom, P = 24 (the default), the
design's 18, or 28. Channels come in groups of three for red, yellow, blue: 0-2 viruses; 3-5 disconnected
halves (top and bottom halves of a vertical pill count as disconnected here); 6-8 left halves; 9-11
right halves; 12-14 all ones where the pill's left colour is that colour; 15-17 the same for its
right colour; with 24 (or 28) planes, 18-20 and 21-23 the same for the left and right colour of the preview
(the next pill, which the NES shows). An unknown preview (colour 0, e.g. an example written without
one) leaves planes 18-23 at zero. With 28 planes, 24-27 [r] are the expert's one-ply preference among
the pill's placements (`expert.one_ply_planes_into`: 1 at its best-scored move, 1 / (1 + gap / 16) at
a move whose score is gap below it, 0 at illegal moves), so that a small network need not learn the
expert's board evaluation before it can learn where its teacher goes further (an option, as hand-made
features were in AlphaGo's input; they depend on the expert's weights file, `expert_weights.json`).
Measured on the CPU profile's 32x4 network: held-out agreement 52% -> 62%, but it then plays the
one-ply best move in 85% of positions and uses more pills; trained with the planes zeroed in half
its examples (`TrainConfig.expert_plane_dropout`) it keeps their wins at the 24 planes' pills. A
whole CPU-profile run with them made a stronger round 0 that later rounds did not improve on
significantly, and its search still used more pills than the expert (bench/README.md): off.

Positions are stored compactly as the board's cell codes uint8[8, 16] plus the pill's and the
preview's colours uint8[2] each (132 bytes, see `kernels` for the codes) and expanded to planes
where they are used: `planes` in numpy, `planes_torch` on any torch device.

Moves: float[4, 8, 16] [r, x, y], the probability of each move; for a same-colour pill planes r and
r + 2 hold the same values (the mass of a placement split equally between them). The JSON form is
4 flat lists of x, y, p triples (one per r).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from drmario.engine import kernels as K
from drmario.engine.board import Board, Move, Pill
from drmario.engine.rules import MOVES_SHAPE, N_MOVES, symmetrize
from drmario.search import expert

if TYPE_CHECKING:
    import torch

DESIGN_PLANES = 18  # the design note's planes: the board and the pill
N_PLANES = 24  # with the preview's 6 colour planes (the default)
EXPERT_PLANES = 28  # and the expert's one-ply preference of each move, 4 planes [r, x, y]
PLANE_COUNTS = (DESIGN_PLANES, N_PLANES, EXPERT_PLANES)


def _cell_planes() -> np.ndarray:
    """uint8[32, 12]: which of the 12 board planes each cell code sets."""
    table = np.zeros((32, 12), np.uint8)
    group = {K.VIRUS: 0, K.DISCONNECTED: 1, K.BOTTOM: 1, K.TOP: 1, K.LEFT: 2, K.RIGHT: 3}
    for shape, g in group.items():
        for colour in (K.RED, K.YELLOW, K.BLUE):
            table[shape << 2 | colour, 3 * g + colour - 1] = 1
    return table


CELL_PLANES = _cell_planes()


def _check_planes(n_planes: int) -> None:
    if n_planes not in PLANE_COUNTS:
        raise ValueError(
            f"n_planes must be {DESIGN_PLANES} (the design's), {N_PLANES} (with the preview) or {EXPERT_PLANES} (and "
            f"the expert's one-ply preference), got {n_planes!r}"
        )


def one_ply_planes(cells: np.ndarray, pills: np.ndarray) -> np.ndarray:
    """float32[..., 4, 8, 16]: the expert's one-ply preference among the pill's moves (planes 24-27).
    cells: uint8[..., 8, 16]; pills: uint8[..., 2]."""
    cells = np.asarray(cells, np.uint8)
    out = np.empty((int(np.prod(cells.shape[:-2])), *MOVES_SHAPE), np.float32)
    flat_pills = np.ascontiguousarray(pills, np.uint8).reshape(-1, 2)
    expert.one_ply_planes_into(
        cells.reshape(-1, K.WIDTH, K.HEIGHT), flat_pills, expert.load_weights(), expert.ONE_PLY_SCALE, out
    )
    return out.reshape(*cells.shape[:-2], *MOVES_SHAPE)


def planes(
    cells: np.ndarray,
    pills: np.ndarray,
    previews: np.ndarray | None = None,
    n_planes: int = N_PLANES,
    dtype: type = np.float32,
) -> np.ndarray:
    """Expand positions to input planes.

    cells: uint8[..., 8, 16] cell codes; pills, previews: uint8[..., 2] (left, right) colours, the
    preview 0 where unknown (None: unknown everywhere). Returns dtype[..., n_planes, 8, 16].
    """
    _check_planes(n_planes)
    cells, pills = np.asarray(cells), np.asarray(pills)
    colours = np.arange(1, 4, dtype=np.uint8)
    board = np.moveaxis(CELL_PLANES[cells], -1, -3)  # [..., 12, 8, 16]
    out = np.zeros((*cells.shape[:-2], n_planes, K.WIDTH, K.HEIGHT), dtype)
    out[..., :12, :, :] = board
    out[..., 12:18, :, :] = (pills[..., :, None] == colours).reshape(*pills.shape[:-1], 6)[..., None, None]
    if n_planes >= N_PLANES and previews is not None:
        previews = np.asarray(previews)
        out[..., 18:24, :, :] = (previews[..., :, None] == colours).reshape(*previews.shape[:-1], 6)[..., None, None]
    if n_planes == EXPERT_PLANES:
        out[..., 24:, :, :] = one_ply_planes(cells, pills)
    return out


def encode(board: Board, pill: Pill, preview: Pill | None = None, n_planes: int = N_PLANES) -> np.ndarray:
    """float32[n_planes, 8, 16] input planes of one position (preview None: unknown)."""
    next_colours = None if preview is None else np.array([preview.left, preview.right], np.uint8)
    return planes(board.cells, np.array([pill.left, pill.right], np.uint8), next_colours, n_planes)


_TORCH_TABLES: dict = {}


def planes_torch(
    cells: torch.Tensor,
    pills: torch.Tensor,
    previews: torch.Tensor | None = None,
    n_planes: int = N_PLANES,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Torch form of `planes` on the tensors' device (cells uint8[N, 8, 16], pills and previews
    uint8[N, 2]). Returns float[N, n_planes, 8, 16] (dtype defaults to float32); positions stay
    compact until here. On the CPU it uses the numpy lookup (`planes`); on other devices a gather
    from a cached table.
    """
    import torch

    dtype = dtype or torch.float32
    if cells.device.type == "cpu":  # numpy's table lookup is several times faster than torch's on CPU
        out = torch.from_numpy(
            planes(cells.numpy(), pills.numpy(), None if previews is None else previews.numpy(), n_planes)
        )
        return out if dtype == torch.float32 else out.to(dtype)
    return _planes_gather(cells, pills, previews, n_planes, dtype)


def _planes_gather(
    cells: torch.Tensor, pills: torch.Tensor, previews: torch.Tensor | None, n_planes: int, dtype: torch.dtype
) -> torch.Tensor:
    """`planes_torch` on any device: a gather from the cell-code table (the GPU path)."""
    import torch

    _check_planes(n_planes)
    key = (cells.device, dtype)
    if key not in _TORCH_TABLES:
        _TORCH_TABLES[key] = torch.as_tensor(CELL_PLANES, device=cells.device, dtype=dtype)
    board = _TORCH_TABLES[key][cells.long()].permute(0, 3, 1, 2)  # [N, 12, 8, 16]
    colours = torch.arange(1, 4, device=cells.device, dtype=pills.dtype)
    n = cells.shape[0]
    parts = [pills] if n_planes == DESIGN_PLANES else [pills, previews if previews is not None else pills * 0]
    flags = torch.cat([(p[:, :, None] == colours).reshape(n, 6) for p in parts], dim=1).to(dtype)
    out = [board, flags[:, :, None, None].expand(n, flags.shape[1], K.WIDTH, K.HEIGHT)]
    if n_planes == EXPERT_PLANES:  # the expert's search runs on the CPU
        preference = one_ply_planes(cells.cpu().numpy(), pills.cpu().numpy())
        out.append(torch.from_numpy(preference).to(cells.device, dtype, non_blocking=True))
    return torch.cat(out, dim=1)


# ------------------------------------------------------------------------------------------------
# Moves target


# What can be wrong with one x, y, p triple of the JSON moves form, in the order it is checked
# (`examples` adds the checks that need the board: an occupied cell, an illegal move).
TRIPLE_OK, NOT_INTEGER, OFF_BOARD, BAD_PROBABILITY, DUPLICATE = 0, 1, 2, 3, 4


def plain_numbers(values: list) -> np.ndarray | None:
    """float64[n] of values if every one is a Python int or float within int64, as JSON numbers
    parse; else None (the caller finds the culprit). A bool is its own type (numpy would read true
    as 1), and a nested list would make numpy raise."""
    if not set(map(type, values)) <= {int, float}:
        return None
    array = np.array(values) if values else np.zeros(0)
    return array.astype(np.float64) if array.dtype.kind in "iuf" else None  # (past int64: an object array)


def numeric_values(values: list, r: int) -> np.ndarray:
    """A flat JSON list of numbers as float64[n]; ValueError naming the first value that is not a
    number (a string, a list, null, a boolean). ``r`` is the rotation the list belongs to."""
    array = plain_numbers(values)
    if array is not None:
        return array
    for i, v in enumerate(values):  # error path only: find the culprit
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise ValueError(f"moves[{r}] triple {i // 3}: {v!r} is not a number")
        if isinstance(v, int) and abs(v) > 2**53:
            text = str(v)
            raise ValueError(f"moves[{r}] triple {i // 3}: {text[:20]}{'...' if len(text) > 20 else ''} is too large")
    return np.array(values, np.float64)


def check_triples(
    group: np.ndarray, r: np.ndarray, x: np.ndarray, y: np.ndarray, p: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised checks of move triples (the board-free ones).

    group: int[T] (which example each triple belongs to); r: int[T] rotation; x, y, p: float64[T].
    Returns (codes int8[T] with TRIPLE_OK .. DUPLICATE, slots int64[T] = r * 128 + x * 16 + y, 0
    where the position is bad). A duplicate is a later triple at the same (r, x, y) of one group.
    """
    with np.errstate(invalid="ignore"):
        integral = np.isfinite(x) & np.isfinite(y) & (x == np.floor(x)) & (y == np.floor(y))
        on_board = integral & (x >= 0) & (x < K.WIDTH) & (y >= 0) & (y < K.HEIGHT)
        good_p = np.isfinite(p) & (p >= 0)
    xi = np.where(on_board, x, 0).astype(np.int64)
    yi = np.where(on_board, y, 0).astype(np.int64)
    slots = np.where(on_board, (np.asarray(r, np.int64) * K.WIDTH + xi) * K.HEIGHT + yi, 0)
    key = np.where(on_board, np.asarray(group, np.int64) * N_MOVES + slots, -1 - np.arange(len(x)))
    order = np.argsort(key, kind="stable")  # equal keys keep triple order: the later one is the duplicate
    duplicate = np.zeros(len(x), bool)
    duplicate[order[1:][key[order[1:]] == key[order[:-1]]]] = True
    codes = np.select(
        [~integral, ~on_board, ~good_p, duplicate], [NOT_INTEGER, OFF_BOARD, BAD_PROBABILITY, DUPLICATE], TRIPLE_OK
    ).astype(np.int8)
    return codes, slots


def _number(v: float) -> str:
    return str(int(v)) if np.isfinite(v) and v == int(v) and abs(v) < 2**53 else repr(float(v))


def triple_message(code: int, r: int, i: int, x: float, y: float, p: float) -> str:
    """The error message for a triple code from `check_triples`."""
    where = f"moves[{r}] triple {i}: "
    if code == NOT_INTEGER:
        return where + f"position ({_number(x)}, {_number(y)}) is not a pair of integers"
    if code == OFF_BOARD:
        return where + f"position ({_number(x)}, {_number(y)}) is off the board (x 0..7, y 0..15)"
    if code == BAD_PROBABILITY:
        return where + f"probability {float(p)!r} is not a number >= 0"
    if code == DUPLICATE:
        return where + f"position ({_number(x)}, {_number(y)}) given twice"
    raise ValueError(f"unknown triple code {code}")


def check_sparse_structure(sparse: object) -> str | None:
    """None if sparse has the JSON moves shape (a list of 4 lists whose lengths are multiples of
    3), else what is wrong."""
    if not isinstance(sparse, list) or len(sparse) != 4:
        shown = f"a list of {len(sparse)}" if isinstance(sparse, list) else type(sparse).__name__
        return f"moves must be a list of 4 lists (one per rotation), got {shown}"
    for r, flat in enumerate(sparse):
        if not isinstance(flat, list):
            return f"moves[{r}] must be a flat list of x, y, p triples, got {type(flat).__name__}"
        if len(flat) % 3:
            return f"moves[{r}] must be a flat list of x, y, p triples, got length {len(flat)}"
    return None


def dense_moves(sparse: list[list[float]]) -> np.ndarray:
    """The JSON form (4 lists of x, y, p triples) to float32[4, 8, 16]. Raises ValueError naming the
    rotation and triple at fault (positions must be integers on the board, p a number >= 0, no
    position twice; a position may be written 3 or 3.0)."""
    problem = check_sparse_structure(sparse)
    if problem:
        raise ValueError(problem)
    triples = [numeric_values(flat, r).reshape(-1, 3) for r, flat in enumerate(sparse)]
    counts = [len(t) for t in triples]
    t = np.concatenate(triples)
    r = np.repeat(np.arange(4), counts)
    codes, slots = check_triples(np.zeros(len(t), np.int64), r, t[:, 0], t[:, 1], t[:, 2])
    if codes.any():
        j = int(np.argmax(codes != TRIPLE_OK))
        i = j - sum(counts[: r[j]])
        raise ValueError(triple_message(int(codes[j]), int(r[j]), i, *t[j]))
    out = np.zeros(N_MOVES, np.float32)
    out[slots] = t[:, 2]
    return out.reshape(MOVES_SHAPE)


def sparse_moves(dense: np.ndarray, digits: int = 6) -> list[list[float]]:
    """float[4, 8, 16] to the JSON form, listing the non-zero entries of each rotation in (x, y)
    order, p rounded to `digits` significant digits (so a legal move's small mass, e.g. round 0's
    floor, is written, not rounded to 0)."""
    dense = np.asarray(dense)
    if dense.shape != MOVES_SHAPE:
        raise ValueError(f"moves must have shape {MOVES_SHAPE}, got {dense.shape}")
    r, x, y = np.nonzero(dense)  # C order: by r, then x, then y
    v = dense[r, x, y].astype(np.float64)
    scale = 10.0 ** (digits - 1 - np.floor(np.log10(np.abs(v))))  # (an integer over a power of 10: JSON's
    p = np.round(v * scale) / scale  # shortest form of it is the rounded decimal)
    triples = np.empty((len(r), 3), object)  # ints stay ints, so JSON writes 3 not 3.0
    triples[:, 0], triples[:, 1], triples[:, 2] = x.tolist(), y.tolist(), p.tolist()
    bounds = np.searchsorted(r, np.arange(5))
    return [triples[bounds[k] : bounds[k + 1]].ravel().tolist() for k in range(4)]


def moves_from_dict(probabilities: dict[Move, float], pill: Pill) -> np.ndarray:
    """Dense moves from {Move: probability} over canonical moves (same-colour mass split)."""
    out = np.zeros(MOVES_SHAPE, np.float32)
    for (r, x, y), p in probabilities.items():
        out[r, x, y] += p
    return symmetrize(out, pill.same_colour)
