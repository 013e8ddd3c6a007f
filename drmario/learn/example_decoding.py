"""Bulk decoding and validation of training examples into compact arrays (`Decoded`).

One implementation serves files (`example_files.decode_file`), single examples
(`examples.Example.from_json`, `Example.validate`) and writers (`examples.check_examples`):
`decode_rows` takes parsed JSON rows ``[board, pill, won, cleared, duration, moves]``, optionally
with a seventh element ``preview`` (the format of `examples`), and returns the valid ones as arrays
and, for each bad one, what is wrong with it.

It rejects: a row that is not an array of 6 or 7; a bad board, pill or preview string (the engine's
messages, which name the position and letter); ``won`` not -1 or 1; ``cleared`` / ``duration`` that
are not integers in 0..32767 (`MAX_COUNT`: the compact in-memory set stores them as int16); a
malformed moves list, a position off the board or given twice, a probability that is negative or not
finite; probability mass on a move whose cells are occupied, or on a move that is not a legal
placement of the pill (`kernels.legal_masks_batch`, the engine's reachability); probabilities that
do not sum to 1 within `SUM_TOLERANCE` (1e-3: 6-digit rounding of up to 512 entries stays well
inside it); and, for a same-colour pill, planes 0/2 or 1/3 that differ by more than
`SYMMETRY_TOLERANCE` (1e-4). Triples with p = 0 are allowed anywhere on the board (they carry no
mass).

The per-row type checks run in Python (JSON gives Python objects); everything after them runs on
arrays over all the rows at once, each step leaving out the rows an earlier one rejected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from drmario.engine import kernels as K
from drmario.engine.board import ALL_PILLS, CODE_TO_LETTER, LETTER_TO_CODE, Board, FormatError, Pill, unpaired_halves
from drmario.learn.encode import (
    MOVES_SHAPE,
    N_MOVES,
    TRIPLE_OK,
    check_sparse_structure,
    check_triples,
    numeric_values,
    plain_numbers,
    triple_message,
)

SUM_TOLERANCE = 1e-3
SYMMETRY_TOLERANCE = 1e-4
MAX_COUNT = int(np.iinfo(np.int16).max)  # cleared / duration are int16 in the compact set

# Board-dependent triple problems, after encode's TRIPLE_OK .. DUPLICATE.
OCCUPIED, ILLEGAL = 5, 6

_PILL_COLOURS = {p.to_string(): (int(p.left), int(p.right)) for p in ALL_PILLS}
_NO_PREVIEW = (0, 0)


@dataclass
class Decoded:
    """Validated examples in compact arrays. n = examples, T = moves entries with p > 0.

    - index int64[n]: where each example came from (its row in the list given to `decode_rows`;
      in a file, its position among the non-blank lines, i.e. the sidecar's line index)
    - cells uint8[n, 8, 16], pills uint8[n, 2], won int8[n], cleared and duration int16[n]
    - previews uint8[n, 2]: the preview's colours, (0, 0) where the example has none
    - row int64[T] (the example of each entry, ascending), slot int16[T] (r * 128 + x * 16 + y),
      prob float32[T] (as read, not renormalised)
    - legal_bits uint8[n, 64]: legal-move masks, np.packbits of bool[n, 512]

    `examples.decoded_examples` turns them into `Example` objects.
    """

    index: np.ndarray
    cells: np.ndarray
    pills: np.ndarray
    won: np.ndarray
    cleared: np.ndarray
    duration: np.ndarray
    row: np.ndarray
    slot: np.ndarray
    prob: np.ndarray
    legal_bits: np.ndarray
    previews: np.ndarray

    def __len__(self) -> int:
        return len(self.index)

    @classmethod
    def empty(cls) -> Decoded:
        return cls.concat([])

    @classmethod
    def concat(cls, parts: Sequence[Decoded]) -> Decoded:
        if not parts:
            return cls(
                np.zeros(0, np.int64),
                np.zeros((0, K.WIDTH, K.HEIGHT), np.uint8),
                np.zeros((0, 2), np.uint8),
                np.zeros(0, np.int8),
                np.zeros(0, np.int16),
                np.zeros(0, np.int16),
                np.zeros(0, np.int64),
                np.zeros(0, np.int16),
                np.zeros(0, np.float32),
                np.zeros((0, N_MOVES // 8), np.uint8),
                np.zeros((0, 2), np.uint8),
            )
        if len(parts) == 1:
            return parts[0]
        offsets = np.cumsum([0] + [len(p) for p in parts[:-1]])
        cat = {
            name: np.concatenate([getattr(p, name) for p in parts])
            for name in (
                "index",
                "cells",
                "pills",
                "won",
                "cleared",
                "duration",
                "slot",
                "prob",
                "legal_bits",
                "previews",
            )
        }
        cat["row"] = np.concatenate([p.row + off for p, off in zip(parts, offsets)])
        return cls(**cat)

    def dense_moves(self) -> np.ndarray:
        """float32[n, 4, 8, 16] moves targets."""
        out = np.zeros((len(self), N_MOVES), np.float32)
        out[self.row, self.slot.astype(np.int64)] = self.prob
        return out.reshape(len(self), *MOVES_SHAPE)


def pill_of(colours: np.ndarray) -> Pill:
    """The `Pill` of uint8[2] (left, right) colours."""
    return ALL_PILLS[3 * (int(colours[0]) - 1) + int(colours[1]) - 1]


def decode_rows(rows: Sequence[Any]) -> tuple[Decoded, dict[int, str]]:
    """Validate and decode parsed JSON examples in bulk.

    Returns (the valid rows as `Decoded`, with ``index`` their positions in rows; {position: what is
    wrong} for the others). One message per bad row: the first problem found, checking in this
    order: shape of the array, board length, pill, won, cleared, duration, shape of moves, board
    letters and pairs, move values, then the per-example sums and symmetry.
    """
    errors: dict[int, str] = {}
    gathered = _gather(rows, errors)
    m = len(gathered.keep)
    if m == 0:
        return Decoded.empty(), errors
    verdict = _Verdict(gathered.keep, errors)
    cells, bad_board = _cells_from_strings(gathered.texts)
    for k in np.flatnonzero(bad_board).tolist():
        verdict.reject(k, _board_error(gathered.texts[k]))
    pills = np.array(gathered.pills, np.uint8).reshape(m, 2)
    counts = np.array(gathered.lens, np.int64).reshape(m, 4)
    triples = _triples(_numeric_rows(gathered.values, counts, verdict), counts)
    legal = np.empty((m, *MOVES_SHAPE), np.uint8)
    K.legal_masks_batch(cells, pills, legal)
    legal_flat = legal.reshape(m, N_MOVES)
    _mark_placements(triples, cells, legal_flat)
    _reject_bad_triples(triples, cells, pills, verdict)
    _reject_bad_sums(triples, verdict)
    _reject_asymmetric(triples, pills, verdict)
    return _decoded(gathered, triples, cells, pills, legal_flat, verdict.alive), errors


# ------------------------------------------------------------------------------------------------
# The steps of decode_rows


@dataclass
class _Gathered:
    """The rows that passed the per-row type checks, flattened for the array checks."""

    keep: list[int] = field(default_factory=list)  # their positions in the rows given
    texts: list[str] = field(default_factory=list)  # board strings
    pills: list[tuple[int, int]] = field(default_factory=list)  # (left, right) colours
    previews: list[tuple[int, int]] = field(default_factory=list)  # the preview's, (0, 0) if unknown
    scalars: list[int] = field(default_factory=list)  # won, cleared, duration of each row, flat
    lens: list[int] = field(default_factory=list)  # the lengths of the 4 moves lists of each row, flat
    values: list = field(default_factory=list)  # every x, y, p of the kept rows, flat


class _Verdict:
    """Which of the m gathered rows are still valid, and the message of each one rejected."""

    def __init__(self, keep: list[int], errors: dict[int, str]) -> None:
        self.keep, self.errors = keep, errors
        self.alive = np.ones(len(keep), bool)

    def reject(self, k: int, message: str) -> None:
        """Reject gathered row k with message, unless an earlier check has rejected it already."""
        if self.alive[k]:
            self.alive[k] = False
            self.errors[self.keep[k]] = message


class _Triples(NamedTuple):
    """Every x, y, p triple of the gathered rows (T of them, in row, r, list order)."""

    row: np.ndarray  # int64[T] the gathered row
    r: np.ndarray  # int64[T] the rotation (which of the 4 lists)
    within: np.ndarray  # int64[T] the triple's index in its list
    x: np.ndarray  # float64[T], as read
    y: np.ndarray
    p: np.ndarray
    codes: np.ndarray  # int8[T] TRIPLE_OK or what is wrong (encode's codes, OCCUPIED, ILLEGAL)
    slots: np.ndarray  # int64[T] r * 128 + x * 16 + y (0 where the position is bad)


def _gather(rows: Sequence[Any], errors: dict[int, str]) -> _Gathered:
    """The per-row type checks (the hot loop of reading a file: plain Python, inlined); a row that
    fails gets the message of its first problem (`_row_error`)."""
    out = _Gathered()
    keep, texts, pills, scalars, lens, values = out.keep, out.texts, out.pills, out.scalars, out.lens, out.values
    previews = out.previews
    for i, obj in enumerate(rows):
        if type(obj) is list and (len(obj) == 6 or len(obj) == 7):
            board, pill, won, cleared, duration, moves = obj[:6]
            colours = _PILL_COLOURS.get(pill) if type(pill) is str else None
            preview = _NO_PREVIEW if len(obj) == 6 else _PILL_COLOURS.get(obj[6]) if type(obj[6]) is str else None
            if (
                type(board) is str
                and len(board) == K.WIDTH * K.HEIGHT
                and board.isascii()
                and colours is not None
                and preview is not None
                and type(won) is int
                and (won == 1 or won == -1)
                and type(cleared) is int
                and 0 <= cleared <= MAX_COUNT
                and type(duration) is int
                and 0 <= duration <= MAX_COUNT
                and type(moves) is list
                and len(moves) == 4
            ):
                m0, m1, m2, m3 = moves
                if type(m0) is list and type(m1) is list and type(m2) is list and type(m3) is list:
                    n0, n1, n2, n3 = len(m0), len(m1), len(m2), len(m3)
                    if not (n0 % 3 or n1 % 3 or n2 % 3 or n3 % 3):
                        keep.append(i)
                        texts.append(board)
                        pills.append(colours)
                        previews.append(preview)
                        scalars += (won, cleared, duration)
                        lens += (n0, n1, n2, n3)
                        values += m0
                        values += m1
                        values += m2
                        values += m3
                        continue
        errors[i] = _row_error(obj)
    return out


def _cells_from_strings(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """128-letter ASCII board strings -> (cells uint8[m, 8, 16], bad bool[m]); bad boards get zeros."""
    m = len(texts)
    raw = np.frombuffer("".join(texts).encode("ascii"), np.uint8).reshape(m, K.HEIGHT, K.WIDTH)
    codes = LETTER_TO_CODE[raw]
    bad = np.asarray((codes < 0).any(axis=(1, 2)))
    cells = np.ascontiguousarray(np.where(codes < 0, 0, codes).astype(np.uint8)[:, ::-1, :].transpose(0, 2, 1))
    bad |= unpaired_halves(cells).any(axis=(1, 2))
    cells[bad] = 0
    return cells, bad


def _numeric_rows(values: list, counts: np.ndarray, verdict: _Verdict) -> np.ndarray:
    """All move values as float64; rows holding a non-number are rejected and zero-filled."""
    array = plain_numbers(values)
    if array is not None:
        return array
    out = np.zeros(len(values), np.float64)  # error path: find the rows at fault
    flat = counts.ravel()
    ends = np.cumsum(flat)
    for j in range(len(flat)):
        k, rr = divmod(j, 4)
        start, end = int(ends[j] - flat[j]), int(ends[j])
        try:
            out[start:end] = numeric_values(values[start:end], rr)
        except ValueError as e:
            verdict.reject(k, str(e))
            out[start:end] = 0
    return out


def _triples(flat_values: np.ndarray, counts: np.ndarray) -> _Triples:
    """The triples of the rows' values, with the board-free checks (`encode.check_triples`) done."""
    m = len(counts)
    per_list = (counts // 3).ravel()
    t = flat_values.reshape(-1, 3)
    row = np.repeat(np.arange(m), per_list.reshape(m, 4).sum(axis=1))
    r = np.repeat(np.tile(np.arange(4), m), per_list)
    within = np.arange(len(t)) - np.repeat(np.cumsum(per_list) - per_list, per_list)
    x, y, p = t[:, 0], t[:, 1], t[:, 2]
    codes, slots = check_triples(row, r, x, y, p)
    return _Triples(row, r, within, x, y, p, codes, slots)


def _slot_cells(slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of the bottom-left cell of each slot."""
    return (slots // K.HEIGHT) % K.WIDTH, slots % K.HEIGHT


def _mark_placements(t: _Triples, cells: np.ndarray, legal_flat: np.ndarray) -> None:
    """The board-dependent checks: triples with mass on an occupied cell get OCCUPIED, those with
    mass on a move that is not legal ILLEGAL (in t.codes)."""
    m = len(cells)
    pad = np.zeros((m, K.WIDTH + 1, K.HEIGHT + 1), np.uint8)  # off-board right/top count as empty
    pad[:, : K.WIDTH, : K.HEIGHT] = cells
    xi, yi = _slot_cells(t.slots)
    vertical = t.r & 1
    first_cell = pad[t.row, xi, yi]
    second_cell = pad[t.row, xi + 1 - vertical, yi + vertical]
    mass = (t.codes == TRIPLE_OK) & (t.p > 0)
    occupied = mass & ((first_cell != K.EMPTY) | (second_cell != K.EMPTY))
    illegal = mass & ~occupied & (legal_flat[t.row, t.slots] == 0)
    t.codes[occupied] = OCCUPIED
    t.codes[illegal] = ILLEGAL


def _reject_bad_triples(t: _Triples, cells: np.ndarray, pills: np.ndarray, verdict: _Verdict) -> None:
    """Reject each live row with a bad triple, with the message of its first one."""
    t.codes[~verdict.alive[t.row]] = TRIPLE_OK  # those rows are reported already
    bad_triples = np.flatnonzero(t.codes)
    bad_rows, first = np.unique(t.row[bad_triples], return_index=True)
    xi, yi = _slot_cells(t.slots)
    for k, j in zip(bad_rows.tolist(), bad_triples[first].tolist()):
        code, r, i = int(t.codes[j]), int(t.r[j]), int(t.within[j])
        if code in (OCCUPIED, ILLEGAL):
            message = _placement_message(code, r, i, int(xi[j]), int(yi[j]), t.p[j], cells[k], pills[k])
        else:
            message = triple_message(code, r, i, t.x[j], t.y[j], t.p[j])
        verdict.reject(k, message)


def _reject_bad_sums(t: _Triples, verdict: _Verdict) -> None:
    """Reject the live rows whose probabilities do not sum to 1 (within SUM_TOLERANCE)."""
    total = np.bincount(t.row, weights=np.where(t.codes == TRIPLE_OK, t.p, 0.0), minlength=len(verdict.alive))
    for k in np.flatnonzero(verdict.alive & (np.abs(total - 1) > SUM_TOLERANCE)).tolist():
        verdict.reject(k, f"moves: probabilities sum to {total[k]:.6g}, not 1 (tolerance {SUM_TOLERANCE:g})")


def _reject_asymmetric(t: _Triples, pills: np.ndarray, verdict: _Verdict) -> None:
    """Reject the live rows of a same-colour pill whose planes r and r + 2 differ (beyond
    SYMMETRY_TOLERANCE): such a pill looks the same turned twice, so they are one move."""
    same = np.flatnonzero(verdict.alive & (pills[:, 0] == pills[:, 1]))
    if not len(same):
        return
    where_same = np.full(len(pills), -1)
    where_same[same] = np.arange(len(same))
    dense = np.zeros((len(same), N_MOVES), np.float32)
    pick = verdict.alive[t.row] & (t.p > 0) & (where_same[t.row] >= 0)
    dense[where_same[t.row[pick]], t.slots[pick]] = t.p[pick]
    half = N_MOVES // 2
    differ = np.abs(dense[:, :half] - dense[:, half:]) > SYMMETRY_TOLERANCE
    for s in np.flatnonzero(differ.any(axis=1)).tolist():
        k, q = int(same[s]), int(np.argmax(differ[s]))
        verdict.reject(
            k,
            f"moves: pill {pill_of(pills[k]).to_string()!r} has one colour, so planes {q // 128} and "
            f"{q // 128 + 2} must be equal, but at (x, y) = ({q // K.HEIGHT % K.WIDTH}, {q % K.HEIGHT}) "
            f"they hold {dense[s, q]:g} and {dense[s, q + half]:g}",
        )


def _decoded(
    gathered: _Gathered, t: _Triples, cells: np.ndarray, pills: np.ndarray, legal_flat: np.ndarray, alive: np.ndarray
) -> Decoded:
    """The rows still alive, compacted (their entries with p > 0 renumbered to the kept rows)."""
    good = np.flatnonzero(alive)
    entry = alive[t.row] & (t.p > 0)
    new_row = np.cumsum(alive) - 1
    scalars = np.array(gathered.scalars, np.int64).reshape(len(alive), 3)[good]
    return Decoded(
        index=np.array(gathered.keep, np.int64)[good],
        cells=cells[good],
        pills=pills[good],
        won=scalars[:, 0].astype(np.int8),
        cleared=scalars[:, 1].astype(np.int16),
        duration=scalars[:, 2].astype(np.int16),
        row=new_row[t.row[entry]],
        slot=t.slots[entry].astype(np.int16),
        prob=t.p[entry].astype(np.float32),
        legal_bits=np.packbits(legal_flat[good], axis=1),
        previews=np.array(gathered.previews, np.uint8).reshape(len(alive), 2)[good],
    )


# ------------------------------------------------------------------------------------------------
# Messages


def _row_error(obj: object) -> str:
    """What is wrong with a row that failed the fast type checks of `_gather` (first problem, in
    field order)."""
    if type(obj) is not list or len(obj) not in (6, 7):
        return _arity_error(obj)
    board, pill, won, cleared, duration, moves = obj[:6]
    if type(board) is not str or len(board) != K.WIDTH * K.HEIGHT or not board.isascii():
        return _board_error(board)
    if type(pill) is not str or pill not in _PILL_COLOURS:
        return _pill_error(pill)
    if type(won) is not int or won not in (-1, 1):
        return f"won must be -1 or 1, got {won!r}"
    if type(cleared) is not int or not 0 <= cleared <= MAX_COUNT:
        return _count_error("cleared", cleared)
    if type(duration) is not int or not 0 <= duration <= MAX_COUNT:
        return _count_error("duration", duration)
    problem = check_sparse_structure(moves)
    if problem is None and len(obj) == 7 and (type(obj[6]) is not str or obj[6] not in _PILL_COLOURS):
        problem = "preview: " + _pill_error(obj[6])
    return problem or "malformed example"


def _arity_error(obj: object) -> str:
    got = f"an array of {len(obj)}" if isinstance(obj, list) else f"a JSON {type(obj).__name__}"
    return f"expected an array of 6 or 7 [board, pill, won, cleared, duration, moves(, preview)], got {got}"


def _board_error(text: object) -> str:
    try:
        Board.from_string(text)  # type: ignore[arg-type]
    except FormatError as e:
        return str(e)
    return f"board: {text!r:.40} was rejected"  # not reached: callers pass boards the engine rejects


def _pill_error(text: object) -> str:
    try:
        Pill.from_string(text)  # type: ignore[arg-type]
    except FormatError as e:
        return str(e)
    return f"pill {text!r} was rejected"


def _count_error(name: str, value: object) -> str:
    return f"{name} must be an integer in 0..{MAX_COUNT}, got {value!r}"


def _placement_message(code: int, r: int, i: int, x: int, y: int, p: float, cells: np.ndarray, pill: np.ndarray) -> str:
    head = f"moves[{r}] triple {i}: move (r, x, y) = ({r}, {x}, {y}) has probability {float(p):g} but "
    if code == OCCUPIED:
        for cx, cy in ((x, y), (x + 1, y) if r % 2 == 0 else (x, y + 1)):
            if cx < K.WIDTH and cy < K.HEIGHT and cells[cx, cy] != K.EMPTY:
                return head + f"cell ({cx}, {cy}) is occupied ({chr(CODE_TO_LETTER[cells[cx, cy]])!r})"
    return head + f"it is not a legal placement of pill {pill_of(pill).to_string()!r} on this board"
