"""Legal placements and place-and-resolve on `Board` values (rules.md sections 4-5)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from drmario.engine import kernels as K
from drmario.engine.board import Board, Move, Pill, as_board, as_move, as_pill, move_values

# Moves arrays (legal masks, move probabilities, training targets) are [r, x, y]: r clockwise
# quarter-turns from spawn, (x, y) the cell of the pill's bottom-left half. Flat: r * 128 + x * 16 + y.
MOVES_SHAPE = (4, K.WIDTH, K.HEIGHT)
N_MOVES = 4 * K.WIDTH * K.HEIGHT  # 512 slots


def legal_moves(board: Board, pill: Pill) -> list[Move]:
    """The legal moves of pill on board, sorted by (r, x, y); empty when a spawn cell is occupied.

    A same-colour pill gets one move per placement, with the canonical r in {0, 1}.
    """
    board, pill = as_board(board), as_pill(pill)
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    n = K.legal_moves_into(board.cells, int(pill.left), int(pill.right), moves)
    return [Move(*row) for row in moves[:n].tolist()]


def legal_mask(board: Board, pill: Pill) -> np.ndarray:
    """Legal moves as a bool[4, 8, 16] array [r, x, y]; for a same-colour pill the planes r and
    r + 2 are equal (the layout of the training targets)."""
    board, pill = as_board(board), as_pill(pill)
    mask = np.empty((4, K.WIDTH, K.HEIGHT), np.uint8)
    K.legal_mask_into(board.cells, int(pill.left), int(pill.right), mask)
    return mask.view(np.bool_)


def canonical(pill: Pill, move: Move) -> Move:
    """The canonical form of move: r mod 2 for a same-colour pill, move itself otherwise."""
    move = as_move(move)
    return Move(move.r % 2, move.x, move.y) if as_pill(pill).same_colour else move


def is_legal(board: Board, pill: Pill, move: Move) -> bool:
    """Whether move is a legal placement of pill on board (False out of the bottle; FormatError
    for a move that is not three integers)."""
    r, x, y = move_values(move)
    if not (0 <= r < 4 and 0 <= x < K.WIDTH and 0 <= y < K.HEIGHT):
        return False
    return bool(legal_mask(board, pill)[r, x, y])


@dataclass(frozen=True)
class PlaceResult:
    """What happened when a pill was locked and the board resolved."""

    viruses_cleared: int
    cells_cleared: int
    clear_rounds: int
    won: bool  # no virus left
    topped_out: bool  # not won, and a spawn cell is occupied: the next pill cannot enter


def place(board: Board, pill: Pill, move: Move) -> tuple[Board, PlaceResult]:
    """Lock pill at move and resolve every cascade. Raises ValueError for an illegal move."""
    board, pill, move = as_board(board), as_pill(pill), as_move(move)
    if not is_legal(board, pill, move):
        raise ValueError(f"illegal move {tuple(move)} (r, x, y) for pill {pill} ({pill.to_string()!r}) on {board!r}")
    cells = board.cells.copy()
    viruses, cleared, rounds = K.place_and_resolve(cells, int(pill.left), int(pill.right), *move)
    won = K.count_viruses(cells) == 0
    return Board._wrap(cells), PlaceResult(
        int(viruses), int(cleared), int(rounds), bool(won), bool(not won and K.spawn_blocked(cells))
    )


def symmetrize(moves: np.ndarray, same_colour: bool | np.ndarray) -> np.ndarray:
    """Split each same-colour placement's mass equally between r and r + 2.

    moves: finite float[..., 4, 8, 16]; same_colour: bool or bool[...]. Returns a new float32 array.
    """
    moves, same = _moves_of(moves, same_colour, "symmetrize")
    paired = (moves + np.roll(moves, 2, axis=-3)) / 2
    return np.where(same, paired, moves)


def placement_mass(moves: np.ndarray, same_colour: bool | np.ndarray) -> np.ndarray:
    """Each placement's mass in one slot, so that an argmax picks the most probable placement, not
    the largest half of one: for a same-colour pill planes r and r + 2 put the same colours on the
    same cells, so their masses are summed into plane r (r < 2) and planes 2 and 3 hold 0.

    moves: finite float[..., 4, 8, 16] (or a legal mask: then > 0 where a placement is legal);
    same_colour: bool or bool[...]. Returns a new float32 array.
    """
    out, same = _moves_of(moves, same_colour, "placement_mass")
    folded = out[..., :2, :, :] + out[..., 2:, :, :]
    out[..., :2, :, :] = np.where(same, folded, out[..., :2, :, :])
    out[..., 2:, :, :] = np.where(same, 0, out[..., 2:, :, :])
    return out


def _moves_of(moves: object, same_colour: object, caller: str) -> tuple[np.ndarray, np.ndarray]:
    """(moves as a new float32[..., 4, 8, 16], same_colour as bool[..., 1, 1, 1]); ValueError naming
    caller and what is wrong otherwise."""
    try:
        with np.errstate(over="ignore"):  # beyond float32's range becomes inf, refused below
            out = np.array(moves, dtype=np.float32)
        same = np.asarray(same_colour)
    except (TypeError, ValueError) as e:  # not numbers: name the argument, not numpy's conversion
        raise ValueError(f"{caller}: moves must be numbers [..., 4, 8, 16], same_colour bools: {e}") from e
    if not np.isfinite(out).all():
        raise ValueError(f"{caller}: moves must be finite numbers within float32's range")
    if out.shape[-3:] != MOVES_SHAPE:
        raise ValueError(f"{caller}: moves must have shape [..., 4, 8, 16], got {out.shape}")
    if same.dtype != np.bool_ or same.shape != out.shape[:-3][len(out.shape[:-3]) - same.ndim :]:
        raise ValueError(
            f"{caller}: same_colour must be a bool or bools of shape {out.shape[:-3]}, got {same.dtype} {same.shape}"
        )
    return out, same[..., None, None, None]


def move_index(move: Move) -> int:
    """Flat index r * 128 + x * 16 + y of a move in the 512 output slots."""
    r, x, y = as_move(move)
    return (r * K.WIDTH + x) * K.HEIGHT + y
