"""Network input planes and the moves target (design note 000, spec/design.md sections 1-2).

Input: float[18, 8, 16] planes [channel, x, y], y = 0 at the bottom. Channels come in groups of
three for red, yellow, blue: 0-2 viruses; 3-5 disconnected halves (top and bottom halves of a
vertical pill count as disconnected here); 6-8 left halves; 9-11 right halves; 12-14 all ones where
the pill's left colour is that colour; 15-17 the same for its right colour.

Positions are stored compactly as the board's cell codes uint8[8, 16] plus the pill's colours
uint8[2] (130 bytes, see `kernels` for the codes) and expanded to planes where they are used:
`planes` in numpy, `planes_torch` on any torch device.

Moves: float[4, 8, 16] [r, x, y], the probability of each move; for a same-colour pill planes r and
r + 2 hold the same values (the mass of a placement split equally between them). The JSON form is
4 flat lists of x, y, p triples (one per r).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import kernels as K
from .board import Board, Move, Pill

if TYPE_CHECKING:
    import torch

N_PLANES = 18
MOVES_SHAPE = (4, K.WIDTH, K.HEIGHT)
N_MOVES = 4 * K.WIDTH * K.HEIGHT  # 512 output slots


def _cell_planes() -> np.ndarray:
    """uint8[32, 12]: which of the 12 board planes each cell code sets."""
    table = np.zeros((32, 12), np.uint8)
    group = {K.VIRUS: 0, K.DISCONNECTED: 1, K.BOTTOM: 1, K.TOP: 1, K.LEFT: 2, K.RIGHT: 3}
    for shape, g in group.items():
        for colour in (K.RED, K.YELLOW, K.BLUE):
            table[shape << 2 | colour, 3 * g + colour - 1] = 1
    return table


CELL_PLANES = _cell_planes()


def planes(cells: np.ndarray, pills: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Expand positions to input planes.

    cells: uint8[..., 8, 16] cell codes; pills: uint8[..., 2] (left, right) colours.
    Returns dtype[..., 18, 8, 16].
    """
    cells, pills = np.asarray(cells), np.asarray(pills)
    board = np.moveaxis(CELL_PLANES[cells], -1, -3)  # [..., 12, 8, 16]
    colours = np.arange(1, 4, dtype=np.uint8)
    pill = (pills[..., :, None] == colours).reshape(*pills.shape[:-1], 6)  # [..., 6]
    out = np.empty((*cells.shape[:-2], N_PLANES, K.WIDTH, K.HEIGHT), dtype)
    out[..., :12, :, :] = board
    out[..., 12:, :, :] = pill[..., :, None, None]
    return out


def encode(board: Board, pill: Pill) -> np.ndarray:
    """float32[18, 8, 16] input planes of one position."""
    return planes(board.cells, np.array([pill.left, pill.right], np.uint8))


_TORCH_TABLES: dict = {}


def planes_torch(cells: torch.Tensor, pills: torch.Tensor, dtype=None) -> torch.Tensor:
    """Torch form of `planes` on the tensors' device (cells uint8[N, 8, 16], pills uint8[N, 2]).

    Returns float[N, 18, 8, 16] (dtype defaults to float32); positions stay compact until here.
    """
    import torch

    dtype = dtype or torch.float32
    key = (cells.device, dtype)
    if key not in _TORCH_TABLES:
        _TORCH_TABLES[key] = torch.as_tensor(CELL_PLANES, device=cells.device, dtype=dtype)
    board = _TORCH_TABLES[key][cells.long()].permute(0, 3, 1, 2)  # [N, 12, 8, 16]
    colours = torch.arange(1, 4, device=cells.device, dtype=pills.dtype)
    pill = (pills[:, :, None] == colours).reshape(-1, 6).to(dtype)  # [N, 6]
    n = cells.shape[0]
    return torch.cat([board, pill[:, :, None, None].expand(n, 6, K.WIDTH, K.HEIGHT)], dim=1)


# ------------------------------------------------------------------------------------------------
# Moves target


def symmetrize(moves: np.ndarray, same_colour: bool | np.ndarray) -> np.ndarray:
    """Split each same-colour placement's mass equally between r and r + 2.

    moves: float[..., 4, 8, 16]; same_colour: bool or bool[...]. Returns a new array.
    """
    moves = np.array(moves, dtype=np.float32)
    same = np.asarray(same_colour, bool)
    paired = (moves + np.roll(moves, 2, axis=-3)) / 2
    return np.where(same[..., None, None, None], paired, moves)


def dense_moves(sparse: list[list[float]]) -> np.ndarray:
    """The JSON form (4 lists of x, y, p triples) to float32[4, 8, 16]. Raises ValueError naming the
    rotation and triple at fault."""
    if not isinstance(sparse, list) or len(sparse) != 4:
        raise ValueError(f"moves must be a list of 4 lists (one per rotation), got {str(sparse)[:60]}")
    out = np.zeros(MOVES_SHAPE, np.float32)
    for r, flat in enumerate(sparse):
        if not isinstance(flat, list) or len(flat) % 3:
            raise ValueError(f"moves[{r}] must be a flat list of x, y, p triples, got length {len(flat)}")
        for i in range(0, len(flat), 3):
            x, y, p = flat[i : i + 3]
            if not (isinstance(x, int) and isinstance(y, int) and 0 <= x < K.WIDTH and 0 <= y < K.HEIGHT):
                raise ValueError(f"moves[{r}] triple {i // 3}: position ({x}, {y}) is off the board")
            if not isinstance(p, (int, float)) or not p >= 0:  # also rejects NaN
                raise ValueError(f"moves[{r}] triple {i // 3}: probability {p!r} is not a number >= 0")
            if out[r, x, y]:
                raise ValueError(f"moves[{r}] triple {i // 3}: position ({x}, {y}) given twice")
            out[r, x, y] = p
    return out


def sparse_moves(dense: np.ndarray, digits: int = 6) -> list[list[float]]:
    """float[4, 8, 16] to the JSON form, listing non-zero entries in (x, y) order, p rounded."""
    dense = np.asarray(dense)
    out = []
    for r in range(4):
        flat: list[float] = []
        for x, y in zip(*np.nonzero(dense[r])):
            flat += [int(x), int(y), round(float(dense[r, x, y]), digits)]
        out.append(flat)
    return out


def moves_from_dict(probabilities: dict[Move, float], pill: Pill) -> np.ndarray:
    """Dense moves from {Move: probability} over canonical moves (same-colour mass split)."""
    out = np.zeros(MOVES_SHAPE, np.float32)
    for (r, x, y), p in probabilities.items():
        out[r, x, y] += p
    return symmetrize(out, pill.same_colour)


def move_index(move: Move) -> int:
    """Flat index r * 128 + x * 16 + y of a move in the 512 output slots."""
    r, x, y = move
    return (r * K.WIDTH + x) * K.HEIGHT + y
