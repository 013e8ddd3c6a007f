"""Training examples: one per decision, their JSON Lines files, validation, and colour augmentation.

An example is the design note's array ``[board, pill, won, cleared, duration, moves]``
(spec/design.md section 1): the 128-letter board before the pill is placed, the pill in its
2-letter spawn form, ``won`` -1 (topped out) or +1 (cleared every virus, or stalemate), ``cleared``
the viruses cleared from this decision (included) to the end of the game, ``duration`` the pills
placed from this decision (included) to the end, and ``moves`` 4 flat lists of x, y, p triples, one
per clockwise rotation r (the sparse form of the float[4, 8, 16] target, see `encode`).

Validation (reading a file, `Example.from_json`, `Example.validate`, `write_examples`) rejects,
with a message that starts with the file and line (``examples.jsonl:17: moves[1] triple 2: ...``):
a line that is not JSON or not an array of 6; a bad board or pill string (the engine's messages,
which name the position and letter); ``won`` not -1 or 1; ``cleared`` / ``duration`` that are not
integers in 0..32767 (the compact in-memory set stores them as int16); a malformed moves list, a
position off the board or given twice, a probability that is negative or not finite; probability
mass on a move whose cells are occupied, or on a move that is not a legal placement of the pill
(`kernels.legal_masks_batch`, the engine's reachability); probabilities that do not sum to 1 within
``SUM_TOLERANCE`` (1e-3: 6-digit rounding of up to 512 entries stays well inside it); and, for a
same-colour pill, planes 0/2 or 1/3 that differ by more than ``SYMMETRY_TOLERANCE`` (1e-4).
Triples with p = 0 are allowed anywhere on the board (they carry no mass).

Files: JSON Lines (``*.jsonl``, or gzip ``*.jsonl.gz``), one example per line, written atomically,
with a sidecar ``*.meta.json`` (see `write_examples`) holding how they were made and a ``games``
table (seed, level, first line index, count) so loaders can split by game. `read_examples` either
raises at the first bad line (``on_error="raise"``, an `ExampleError`) or skips bad lines and
counts them in its `ReadReport` (``on_error="skip"``); nothing is dropped silently.

Colour augmentation (`permute_colours`, `COLOUR_PERMUTATIONS`): the rules only ever compare
colours for equality, so renaming the three colours of the board and pill keeps the legal moves
(placements do not depend on colour, and a same-colour pill stays same-colour), and the permuted
example is exactly the record of the permuted game (same moves, same clears, same outcome, with the
future pills renamed too). So the targets stay exact. What augmentation does *not* preserve is the
NES distribution of positions, because the NES level generator is not colour-symmetric. Counted
over every seed 2..65535 (128 pills each, 8.4 M pills):

- Pills: the left colour is uniform (red 33.4 %, yellow 33.4 %, blue 33.2 %) but the right colour
  is yellow 37.6 % against red and blue 31.2 % each: the three pairs with a yellow right half occur
  1.13x as often as uniform, the other six 0.93-0.94x. The sequence is not symmetric either: the
  chance that the next pill repeats the current pair is 0.148-0.151 when its right half is red,
  0.124-0.128 yellow, 0.098-0.101 blue (uniform would be 0.111). (The table index is a walk
  k = (k + ((s >> 8) & 15)) mod 9 whose steps are strongly correlated: the generator shifts its
  state one bit per draw, so consecutive steps share 3 of their 4 bits; table[k] takes its right
  colour from k mod 3, and k mod 3 = 0, yellow, is visited most.)
- Viruses: the wanted-colour pattern (yellow, random, blue, red) with table16 (6 red, 5 yellow,
  5 blue) and the blue -> red -> yellow fallback give nearly, not exactly, even colours: red 34.4 %,
  yellow 32.8 %, blue 32.8 % at level 0; red 33.0 %, yellow 33.5 %, blue 33.5 % at level 14; red
  33.6 %, yellow 33.3 %, blue 33.1 % at levels 20-24 (standard errors 0.01-0.05 %). Colour pairs
  of adjacent viruses are within about 4 % of symmetric.

So an augmented set teaches colour-equivariant play, which is right for the rules and for a search
that treats the next pill as uniform over the 9 pairs, but it removes what the NES colour biases
(mostly the right-half yellow excess of the pill list) could tell a network about likely positions.
It is an option (``load_examples(..., augment=True)``), off by default.
"""

from __future__ import annotations

import functools
import gzip
import itertools
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np

from drmario.engine import kernels as K
from drmario.engine.board import (
    ALL_PILLS,
    CODE_TO_LETTER,
    LETTER_TO_CODE,
    Board,
    Colour,
    FormatError,
    Pill,
    unpaired_halves,
)
from drmario.engine.game import GameRecord, Outcome
from drmario.learn.encode import (
    MOVES_SHAPE,
    N_MOVES,
    TRIPLE_OK,
    check_sparse_structure,
    check_triples,
    encode,
    numeric_values,
    sparse_moves,
    symmetrize,
    triple_message,
)

SUM_TOLERANCE = 1e-3
SYMMETRY_TOLERANCE = 1e-4
MAX_COUNT = np.iinfo(np.int16).max  # cleared / duration are int16 in the compact set
ERRORS_KEPT = 10  # how many error messages a ReadReport keeps
FORMAT = "drmario-examples"
FORMAT_VERSION = 1
OnError = Literal["raise", "skip"]

# Board-dependent triple problems, after encode's TRIPLE_OK .. DUPLICATE.
OCCUPIED, ILLEGAL = 5, 6

_PILL_COLOURS = {p.to_string(): (int(p.left), int(p.right)) for p in ALL_PILLS}


class ExampleError(FormatError):
    """A malformed training example. ``where`` is ``file:line`` (or a description), ``detail`` what
    is wrong; ``path`` and ``line`` (1-based) are set when it comes from a file."""

    def __init__(self, where: str, detail: str, path: str | None = None, line: int | None = None) -> None:
        super().__init__(f"{where}: {detail}")
        self.where, self.detail, self.path, self.line = where, detail, path, line


def won_target(outcome: Outcome | str, stalemate_won: int = 1) -> int:
    """The ``won`` target of a finished game: -1 for a top out, +1 for a win, ``stalemate_won``
    (default +1, the design's choice) for a stalemate."""
    if stalemate_won not in (-1, 1):
        raise ValueError(f"stalemate_won must be -1 or 1, got {stalemate_won!r}")
    outcome = Outcome(outcome)
    return stalemate_won if outcome is Outcome.STALEMATE else outcome.won_value


# ------------------------------------------------------------------------------------------------
# One example


@dataclass(frozen=True, eq=False)
class Example:
    """One decision: the position, the three scalar targets and the moves target.

    ``moves`` is float32[4, 8, 16] [r, x, y] (dense; for a same-colour pill planes r and r + 2 are
    equal). Construction only checks types and shapes; `validate` checks everything.
    """

    board: Board
    pill: Pill
    won: int
    cleared: int
    duration: int
    moves: np.ndarray

    def __post_init__(self) -> None:
        for name in ("won", "cleared", "duration"):  # numpy integers -> int (validation wants JSON types)
            value = getattr(self, name)
            if isinstance(value, np.integer):
                object.__setattr__(self, name, int(value))
        moves = np.array(self.moves, np.float32)
        if moves.shape != MOVES_SHAPE:
            raise ValueError(f"moves must have shape {MOVES_SHAPE}, got {moves.shape}")
        moves.flags.writeable = False
        object.__setattr__(self, "moves", moves)
        if not isinstance(self.board, Board) or not isinstance(self.pill, Pill):
            raise TypeError("Example needs a Board and a Pill")

    def to_json(self) -> list:
        """The design note's array ``[board, pill, won, cleared, duration, moves]`` (p rounded to 6
        digits)."""
        return [
            self.board.to_string(),
            self.pill.to_string(),
            int(self.won),
            int(self.cleared),
            int(self.duration),
            sparse_moves(self.moves),
        ]

    def to_line(self) -> str:
        """One JSON Lines line (no newline)."""
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, obj: Any, where: str = "<example>") -> Example:
        """Parse and validate the JSON array (or its text). Raises `ExampleError` naming ``where``."""
        if isinstance(obj, (str, bytes)):
            try:
                obj = json.loads(obj)
            except ValueError as e:
                raise ExampleError(where, f"invalid JSON: {e}") from None
        decoded, errors = decode_rows([obj])
        if errors:
            raise ExampleError(where, errors[0])
        return decoded.examples()[0]

    def validate(self, where: str = "<example>") -> None:
        """Raise `ExampleError` if this example breaks a rule of the format (module docstring)."""
        check_examples([self], lambda i: where)

    def planes(self) -> np.ndarray:
        """float32[18, 8, 16] network input."""
        return encode(self.board, self.pill)

    def _raw_row(self) -> list:
        """The JSON array with full-precision probabilities (for validation, no rounding)."""
        r, x, y = np.nonzero(self.moves)  # C order: by r
        triples = np.empty((len(r), 3), object)
        triples[:, 0], triples[:, 1], triples[:, 2] = x.tolist(), y.tolist(), self.moves[r, x, y].tolist()
        bounds = np.searchsorted(r, np.arange(5))
        flat = [triples[bounds[k] : bounds[k + 1]].ravel().tolist() for k in range(4)]
        return [self.board.to_string(), self.pill.to_string(), self.won, self.cleared, self.duration, flat]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Example):
            return NotImplemented
        return (
            self.board == other.board
            and self.pill == other.pill
            and (self.won, self.cleared, self.duration) == (other.won, other.cleared, other.duration)
            and np.array_equal(self.moves, other.moves)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Example(board={self.board!r}, pill={self.pill!r}, won={self.won}, cleared={self.cleared}, "
            f"duration={self.duration}, moves=<{int(np.count_nonzero(self.moves))} non-zero>)"
        )


# ------------------------------------------------------------------------------------------------
# Bulk decoding and validation (one implementation for files, single examples and writers)


@dataclass
class Decoded:
    """Validated examples in compact arrays. n = examples, T = moves entries with p > 0.

    - index int64[n]: where each example came from (its row in the list given to `decode_rows`;
      in a file, its position among the non-blank lines, i.e. the sidecar's line index)
    - cells uint8[n, 8, 16], pills uint8[n, 2], won int8[n], cleared and duration int16[n]
    - row int64[T] (the example of each entry, ascending), slot int16[T] (r * 128 + x * 16 + y),
      prob float32[T] (as read, not renormalised)
    - legal_bits uint8[n, 64]: legal-move masks, np.packbits of bool[n, 512]
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
            )
        if len(parts) == 1:
            return parts[0]
        offsets = np.cumsum([0] + [len(p) for p in parts[:-1]])
        cat = {
            name: np.concatenate([getattr(p, name) for p in parts])
            for name in ("index", "cells", "pills", "won", "cleared", "duration", "slot", "prob", "legal_bits")
        }
        cat["row"] = np.concatenate([p.row + off for p, off in zip(parts, offsets)])
        return cls(**cat)

    def dense_moves(self) -> np.ndarray:
        """float32[n, 4, 8, 16] moves targets."""
        out = np.zeros((len(self), N_MOVES), np.float32)
        out[self.row, self.slot.astype(np.int64)] = self.prob
        return out.reshape(len(self), *MOVES_SHAPE)

    def examples(self) -> list[Example]:
        dense = self.dense_moves()
        return [
            Example(
                Board._wrap(self.cells[k].copy()),
                ALL_PILLS[3 * (int(self.pills[k, 0]) - 1) + int(self.pills[k, 1]) - 1],
                int(self.won[k]),
                int(self.cleared[k]),
                int(self.duration[k]),
                dense[k],
            )
            for k in range(len(self))
        ]


def _arity_error(obj: object) -> str:
    got = f"an array of {len(obj)}" if isinstance(obj, list) else f"a JSON {type(obj).__name__}"
    return f"expected an array of 6 [board, pill, won, cleared, duration, moves], got {got}"


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


def _cells_from_strings(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """128-letter ASCII board strings -> (cells uint8[m, 8, 16], bad bool[m]); bad boards get zeros."""
    m = len(texts)
    raw = np.frombuffer("".join(texts).encode("ascii"), np.uint8).reshape(m, K.HEIGHT, K.WIDTH)
    codes = LETTER_TO_CODE[raw]
    bad = (codes < 0).any(axis=(1, 2))
    cells = np.ascontiguousarray(np.where(codes < 0, 0, codes).astype(np.uint8)[:, ::-1, :].transpose(0, 2, 1))
    bad |= unpaired_halves(cells).any(axis=(1, 2))
    cells[bad] = 0
    return cells, bad


def _row_error(obj: object) -> str:
    """What is wrong with a row that failed the fast type checks of `decode_rows` (first problem,
    in field order)."""
    if type(obj) is not list or len(obj) != 6:
        return _arity_error(obj)
    board, pill, won, cleared, duration, moves = obj
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
    return check_sparse_structure(moves) or "malformed example"


def decode_rows(rows: Sequence[Any]) -> tuple[Decoded, dict[int, str]]:
    """Validate and decode parsed JSON examples in bulk.

    Returns (the valid rows as `Decoded`, with ``index`` their positions in rows; {position: what is
    wrong} for the others). One message per bad row: the first problem found, checking in this
    order: shape of the array, board length, pill, won, cleared, duration, shape of moves, board
    letters and pairs, move values, then the per-example sums and symmetry.
    """
    errors: dict[int, str] = {}
    keep: list[int] = []
    texts: list[str] = []
    pills: list[tuple[int, int]] = []
    scalars: list[int] = []
    lens: list[int] = []
    values: list = []  # every x, y, p of the kept rows, flat
    for i, obj in enumerate(rows):  # per-row type checks: JSON gives Python objects
        if type(obj) is list and len(obj) == 6:
            board, pill, won, cleared, duration, moves = obj
            colours = _PILL_COLOURS.get(pill) if type(pill) is str else None
            if (
                type(board) is str
                and len(board) == K.WIDTH * K.HEIGHT
                and board.isascii()
                and colours is not None
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
                        scalars += (won, cleared, duration)
                        lens += (n0, n1, n2, n3)
                        values += m0
                        values += m1
                        values += m2
                        values += m3
                        continue
        errors[i] = _row_error(obj)

    m = len(keep)
    if m == 0:
        return Decoded.empty(), errors
    cells, bad_board = _cells_from_strings(texts)
    alive = ~bad_board
    for k in np.flatnonzero(bad_board):
        errors[keep[k]] = _board_error(texts[k])
    pill_array = np.array(pills, np.uint8).reshape(m, 2)
    counts = np.array(lens, np.int64).reshape(m, 4)
    flat_values = _numeric_rows(values, counts, alive, keep, errors)

    # Triples: T = all x, y, p triples of the kept rows, in row, r, list order.
    per_list = (counts // 3).ravel()
    t = flat_values.reshape(-1, 3)
    row = np.repeat(np.arange(m), per_list.reshape(m, 4).sum(axis=1))
    r = np.repeat(np.tile(np.arange(4), m), per_list)
    within = np.arange(len(t)) - np.repeat(np.cumsum(per_list) - per_list, per_list)
    x, y, p = t[:, 0], t[:, 1], t[:, 2]
    codes, slots = check_triples(row, r, x, y, p)

    # Board-dependent checks: mass on an occupied cell, mass on an illegal move.
    pad = np.zeros((m, K.WIDTH + 1, K.HEIGHT + 1), np.uint8)  # off-board right/top count as empty
    pad[:, : K.WIDTH, : K.HEIGHT] = cells
    xi, yi, vertical = (slots // K.HEIGHT) % K.WIDTH, slots % K.HEIGHT, r & 1
    first_cell = pad[row, xi, yi]
    second_cell = pad[row, xi + 1 - vertical, yi + vertical]
    mass = (codes == TRIPLE_OK) & (p > 0)
    occupied = mass & ((first_cell != K.EMPTY) | (second_cell != K.EMPTY))
    legal = np.empty((m, *MOVES_SHAPE), np.uint8)
    K.legal_masks_batch(cells, pill_array, legal)
    legal_flat = legal.reshape(m, N_MOVES)
    illegal = mass & ~occupied & (legal_flat[row, slots] == 0)
    codes[occupied] = OCCUPIED
    codes[illegal] = ILLEGAL
    codes[~alive[row]] = TRIPLE_OK  # those rows are reported already
    bad_triples = np.flatnonzero(codes)
    bad_rows, first = np.unique(row[bad_triples], return_index=True)
    for k, j in zip(bad_rows.tolist(), bad_triples[first].tolist()):
        alive[k] = False
        code = int(codes[j])
        if code in (OCCUPIED, ILLEGAL):
            errors[keep[k]] = _placement_message(
                code, int(r[j]), int(within[j]), int(xi[j]), int(yi[j]), p[j], cells[k], pill_array[k]
            )
        else:
            errors[keep[k]] = triple_message(code, int(r[j]), int(within[j]), x[j], y[j], p[j])

    # Per-example checks: the probabilities sum to 1; same-colour planes r and r + 2 agree.
    total = np.bincount(row, weights=np.where(codes == TRIPLE_OK, p, 0.0), minlength=m)
    for k in np.flatnonzero(alive & (np.abs(total - 1) > SUM_TOLERANCE)).tolist():
        alive[k] = False
        errors[keep[k]] = f"moves: probabilities sum to {total[k]:.6g}, not 1 (tolerance {SUM_TOLERANCE:g})"
    entry = alive[row] & (p > 0)
    same = np.flatnonzero(alive & (pill_array[:, 0] == pill_array[:, 1]))
    if len(same):
        where_same = np.full(m, -1)
        where_same[same] = np.arange(len(same))
        dense = np.zeros((len(same), N_MOVES), np.float32)
        pick = entry & (where_same[row] >= 0)
        dense[where_same[row[pick]], slots[pick]] = p[pick]
        half = N_MOVES // 2
        differ = np.abs(dense[:, :half] - dense[:, half:]) > SYMMETRY_TOLERANCE
        for s in np.flatnonzero(differ.any(axis=1)).tolist():
            k, q = int(same[s]), int(np.argmax(differ[s]))
            alive[k] = False
            errors[keep[k]] = (
                f"moves: pill {ALL_PILLS[3 * (int(pill_array[k, 0]) - 1) + int(pill_array[k, 1]) - 1].to_string()!r} "
                f"has one colour, so planes {q // 128} and {q // 128 + 2} must be equal, but at (x, y) = "
                f"({q // K.HEIGHT % K.WIDTH}, {q % K.HEIGHT}) they hold {dense[s, q]:g} and {dense[s, q + half]:g}"
            )

    good = np.flatnonzero(alive)
    entry = alive[row] & (p > 0)
    new_row = np.cumsum(alive) - 1
    scalar_array = np.array(scalars, np.int64).reshape(m, 3)[good]
    return Decoded(
        index=np.array(keep, np.int64)[good],
        cells=cells[good],
        pills=pill_array[good],
        won=scalar_array[:, 0].astype(np.int8),
        cleared=scalar_array[:, 1].astype(np.int16),
        duration=scalar_array[:, 2].astype(np.int16),
        row=new_row[row[entry]],
        slot=slots[entry].astype(np.int16),
        prob=p[entry].astype(np.float32),
        legal_bits=np.packbits(legal_flat[good], axis=1),
    ), errors


def _numeric_rows(values: list, counts: np.ndarray, alive: np.ndarray, keep: list[int], errors: dict) -> np.ndarray:
    """All move values as float64; rows holding a non-number are reported and zero-filled."""
    array = np.array(values) if values else np.zeros(0)
    if array.ndim == 1 and array.dtype.kind in "iuf":
        return array.astype(np.float64)
    out = np.zeros(len(values), np.float64)  # error path: find the rows at fault
    ends = np.cumsum(counts.ravel())
    for k in range(len(counts)):
        for rr in range(4):
            j = 4 * k + rr
            start, end = int(ends[j] - counts.ravel()[j]), int(ends[j])
            try:
                out[start:end] = numeric_values(values[start:end], rr)
            except ValueError as e:
                if alive[k]:
                    errors[keep[k]] = str(e)
                alive[k] = False
                out[start:end] = 0
    return out


def _placement_message(code: int, r: int, i: int, x: int, y: int, p: float, cells: np.ndarray, pill: np.ndarray) -> str:
    head = f"moves[{r}] triple {i}: move (r, x, y) = ({r}, {x}, {y}) has probability {float(p):g} but "
    if code == OCCUPIED:
        for cx, cy in ((x, y), (x + 1, y) if r % 2 == 0 else (x, y + 1)):
            if cx < K.WIDTH and cy < K.HEIGHT and cells[cx, cy] != K.EMPTY:
                return head + f"cell ({cx}, {cy}) is occupied ({chr(CODE_TO_LETTER[cells[cx, cy]])!r})"
    pill_text = ALL_PILLS[3 * (int(pill[0]) - 1) + int(pill[1]) - 1].to_string()
    return head + f"it is not a legal placement of pill {pill_text!r} on this board"


def check_examples(examples: Sequence[Example], where: Callable[[int], str]) -> Decoded:
    """Validate Example objects in bulk; raise `ExampleError` (at ``where(i)``) for the first bad one.
    Returns them decoded (compact arrays)."""
    decoded, errors = decode_rows([ex._raw_row() for ex in examples])
    if errors:
        i = min(errors)
        raise ExampleError(where(i), errors[i])
    return decoded


# ------------------------------------------------------------------------------------------------
# Files


@dataclass
class ReadReport:
    """What reading one example file did. ``errors`` keeps the first `ERRORS_KEPT` problems as
    ``file:line: what`` messages; ``error_lines`` their 1-based line numbers."""

    path: str
    on_error: str
    lines: int = 0  # non-blank lines read (examples and bad lines)
    examples: int = 0  # examples kept
    skipped: int = 0  # bad lines skipped (on_error="skip")
    blank: int = 0  # blank lines (not data; ignored)
    errors: list[str] = field(default_factory=list)
    error_lines: list[int] = field(default_factory=list)
    games: int | None = None  # set by the dataset loader
    games_from: str = ""  # "sidecar" or "duration countdown" (dataset loader)
    cached: bool = False  # decoded from the .cache.npz (dataset loader)
    warnings: list[str] = field(default_factory=list)

    def add_error(self, where: str, line: int, detail: str) -> None:
        self.skipped += 1
        if len(self.errors) < ERRORS_KEPT:
            self.errors.append(f"{where}: {detail}")
            self.error_lines.append(line)

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict) -> ReadReport:
        return cls(**d)

    def __str__(self) -> str:
        parts = [f"{self.path}: {self.examples:,} examples from {self.lines:,} lines"]
        if self.games is not None:
            parts.append(f"{self.games:,} games (from {self.games_from})")
        parts.append(f"on_error={self.on_error!r}: {self.skipped:,} bad lines skipped")
        if self.cached:
            parts.append("decoded from cache")
        text = ", ".join(parts)
        for line in self.errors:
            text += f"\n  {line}"
        if self.skipped > len(self.errors):
            text += f"\n  ... and {self.skipped - len(self.errors):,} more"
        for w in self.warnings:
            text += f"\n  warning: {w}"
        return text


def sidecar_path(path: str | os.PathLike) -> Path:
    """The sidecar of an example file: ``x.jsonl`` or ``x.jsonl.gz`` -> ``x.meta.json``."""
    path = Path(path)
    for suffix in (".jsonl.gz", ".jsonl"):
        if path.name.endswith(suffix):
            return path.with_name(path.name[: -len(suffix)] + ".meta.json")
    raise ValueError(f"{path}: example files are named *.jsonl or *.jsonl.gz")


def read_sidecar(path: str | os.PathLike) -> dict | None:
    """The sidecar of example file path as a dict, or None if there is none."""
    side = sidecar_path(path)
    if not side.exists():
        return None
    try:
        return json.loads(side.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{side}: cannot read the sidecar: {e}") from e


@functools.lru_cache(maxsize=1)
def code_version() -> dict:
    """``{"code_version", "git_commit", "git_dirty"}`` of this package (git fields None when the
    package is not in a git checkout)."""
    from drmario import __version__

    info: dict = {"code_version": __version__, "git_commit": None, "git_dirty": None}
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return info
    try:
        git = ["git", "-C", str(root)]
        commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if commit.returncode == 0:
            info["git_commit"] = commit.stdout.strip()
            status = subprocess.run(
                [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10
            )
            info["git_dirty"] = bool(status.stdout.strip()) if status.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def infer_games(duration: np.ndarray, lines: np.ndarray | None = None) -> np.ndarray:
    """Game index (int64[n], from 0) of each example from the duration countdown: a game starts
    where duration is not the previous example's duration minus the line gap (1 for consecutive
    lines). Examples of one game written in order count down to 1, so this finds the boundaries
    of whole games; it cannot split two games whose durations happen to continue each other
    (impossible when each game ends at duration 1 and the next starts at >= 1)."""
    duration = np.asarray(duration, np.int64)
    lines = np.arange(len(duration)) if lines is None else np.asarray(lines, np.int64)
    starts = np.ones(len(duration), bool)
    starts[1:] = duration[1:] != duration[:-1] - (lines[1:] - lines[:-1])
    return np.cumsum(starts) - 1


def _atomic_temp(folder: Path, name: str):
    """A temporary file next to the target (same file system, so os.replace is atomic)."""
    return tempfile.NamedTemporaryFile("wb", dir=folder, prefix=f".{name}.", suffix=".tmp", delete=False)


def replace_readable(tmp: str | os.PathLike, target: str | os.PathLike) -> None:
    """Rename tmp over target with the permissions a new file gets (temporary files are 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, target)


def write_examples(
    path: str | os.PathLike,
    examples: Iterable[Example],
    meta: dict,
    *,
    games: Sequence[dict] | None = None,
    validate: bool = True,
) -> Path:
    """Write examples as JSON Lines (gzip if path ends in ``.gz``) and the sidecar, atomically.

    meta: JSON-serialisable description of how the examples were made (seed, levels, search
    settings, ...); ``code_version``, ``git_commit``, ``git_dirty`` and ``created`` (UTC) are added
    unless given. games: one dict per game in file order with ``seed``, ``level`` and ``count``
    (and any other JSON fields, e.g. ``outcome``); ``first`` (0-based line index) is filled in. If
    games is None they are inferred from the duration countdown (`infer_games`), with seed and
    level null. Each example is validated first (``validate``). Returns the path written.

    Both files are written to temporary files in the same folder, then renamed over the targets
    (sidecar first), so a reader never sees a half-written file.
    """
    path = Path(path)
    side = sidecar_path(path)
    meta = {**code_version(), "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), **meta}
    json.dumps(meta, allow_nan=False)  # fail early on a meta that is not JSON (TypeError, ValueError)
    durations: list[np.ndarray] = []
    count = 0
    data_tmp = _atomic_temp(path.parent, path.name)
    try:
        with data_tmp:
            gz = path.name.endswith(".gz")
            out = gzip.GzipFile(filename="", mode="wb", fileobj=data_tmp, mtime=0) if gz else None
            sink = out or data_tmp
            it = iter(examples)
            while chunk := list(itertools.islice(it, 2048)):
                if validate:
                    check_examples(chunk, lambda i, base=count: f"{path}: example {base + i}")
                sink.write("".join(ex.to_line() + "\n" for ex in chunk).encode())
                durations.append(np.array([ex.duration for ex in chunk], np.int64))
                count += len(chunk)
            if out is not None:
                out.close()
            data_tmp.flush()
            os.fsync(data_tmp.fileno())
        table = _games_table(games, np.concatenate(durations) if durations else np.zeros(0, np.int64), path)
        sidecar = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "file": path.name,
            "examples": count,
            "meta": meta,
            "games": table,
        }
        head = json.dumps({k: v for k, v in sidecar.items() if k != "games"}, indent=1)
        games_text = ",\n".join("  " + json.dumps(g, allow_nan=False) for g in table)  # one line per game
        text = head[:-2] + ',\n "games": [\n' + games_text + ("\n" if table else "") + " ]\n}\n"
        side_tmp = _atomic_temp(side.parent, side.name)
        try:
            with side_tmp:
                side_tmp.write(text.encode())
            replace_readable(side_tmp.name, side)
        except BaseException:
            Path(side_tmp.name).unlink(missing_ok=True)
            raise
        replace_readable(data_tmp.name, path)
    except BaseException:
        Path(data_tmp.name).unlink(missing_ok=True)
        raise
    return path


def _games_table(games: Sequence[dict] | None, duration: np.ndarray, path: Path) -> list[dict]:
    if games is None:
        index = infer_games(duration)
        counts = np.bincount(index) if len(index) else np.zeros(0, np.int64)
        games = [{"seed": None, "level": None, "count": int(c)} for c in counts]
    table, first = [], 0
    for g in games:
        entry = dict(g)
        if not isinstance(entry.get("count"), (int, np.integer)) or entry["count"] < 0:
            raise ValueError(f"{path}: games entry {len(table)} needs a count >= 0, got {entry.get('count')!r}")
        if entry.setdefault("first", first) != first:
            raise ValueError(f"{path}: games entry {len(table)} says first={entry['first']}, expected {first}")
        seed, level, n = entry.pop("seed", None), entry.pop("level", None), entry.pop("count")
        entry = {"seed": seed, "level": level, "first": first, "count": n, **entry}
        table.append({k: (int(v) if isinstance(v, np.integer) else v) for k, v in entry.items()})
        first += int(n)
    if first != len(duration):
        raise ValueError(f"{path}: the games table counts {first} examples, but {len(duration)} were given")
    return table


def write_games(
    path: str | os.PathLike, games: Iterable[tuple[GameRecord, Sequence[Example]]], meta: dict, **kwargs: Any
) -> Path:
    """Write the examples of whole games (pairs of a record and its examples, e.g. from
    `game_examples`) with a games table taken from the records (seed, level, pill mode, outcome)."""
    table: list[dict] = []

    def flatten() -> Iterable[Example]:
        for record, examples in games:
            table.append(
                {
                    "seed": record.seed,
                    "level": record.level,
                    "pill_mode": record.pill_mode,
                    "outcome": record.outcome,
                    "count": len(examples),
                }
            )
            yield from examples

    # table fills while the examples stream out; write_examples reads it after the last one
    return write_examples(path, flatten(), meta, games=table, **kwargs)


def _open_binary(path: str | os.PathLike):
    raw = open(path, "rb")  # noqa: SIM115 (closed by the caller)
    stream = gzip.GzipFile(fileobj=raw, mode="rb") if os.fspath(path).endswith(".gz") else raw
    return raw, stream


def decode_file(
    path: str | os.PathLike,
    on_error: OnError = "raise",
    *,
    chunk_lines: int = 4096,
    progress: Callable[[int], None] | None = None,
) -> tuple[Decoded, ReadReport]:
    """Read and validate one example file in chunks (compact arrays, no Example objects).

    ``Decoded.index`` holds each example's position among the file's non-blank lines (0-based: the
    line index of the sidecar's games table). on_error="raise" raises `ExampleError` at the first
    bad line; "skip" leaves bad lines out and counts them in the report. A gzip stream that ends
    early is an error at the first line that could not be read (in "skip" mode the lines before it
    are kept). progress, if given, is called with the number of (compressed) bytes read after
    each chunk.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    name = os.fspath(path)
    report = ReadReport(path=name, on_error=on_error)
    parts: list[Decoded] = []
    raw, stream = _open_binary(path)
    with raw, stream:
        base, done, failure = 0, 0, None  # base: physical lines before this chunk
        while failure is None:
            lines: list[bytes] = []
            try:
                for line in stream:
                    lines.append(line)
                    if len(lines) == chunk_lines:
                        break
            except (OSError, EOFError) as e:  # a truncated or corrupt gzip stream
                failure = e
            if not lines and failure is None:
                break
            rows, row_lines, row_ordinals, errors = [], [], [], {}
            for j, line in enumerate(lines):
                if line.isspace():
                    report.blank += 1
                    continue
                report.lines += 1
                try:
                    rows.append(json.loads(line))
                except ValueError as e:  # also bad UTF-8
                    errors[base + j] = f"invalid JSON: {e}"
                else:
                    row_lines.append(base + j)
                    row_ordinals.append(report.lines - 1)
            decoded, row_errors = decode_rows(rows)
            decoded.index = np.array(row_ordinals, np.int64)[decoded.index]
            errors.update({row_lines[i]: msg for i, msg in row_errors.items()})
            if failure is not None:
                errors[base + len(lines)] = f"cannot read line {base + len(lines) + 1} or later: {failure}"
                report.warnings.append(f"{name}: the data after line {base + len(lines)} could not be read")
            if errors:
                first = min(errors)
                if on_error == "raise":
                    raise ExampleError(f"{name}:{first + 1}", errors[first], name, first + 1)
                for line_index in sorted(errors):
                    report.add_error(f"{name}:{line_index + 1}", line_index + 1, errors[line_index])
            parts.append(decoded)
            base += len(lines)
            if progress is not None:
                position = raw.tell()
                progress(position - done)
                done = position
    decoded = Decoded.concat(parts)
    report.examples = len(decoded)
    return decoded, report


def read_examples(path: str | os.PathLike, on_error: OnError = "raise") -> tuple[list[Example], ReadReport]:
    """Read an example file (JSON Lines, gzip by the ``.gz`` suffix) into Example objects.

    Returns (examples, report). on_error="raise" stops at the first bad line with an `ExampleError`
    naming file and line; "skip" leaves bad lines out, and the report counts them and keeps the
    first few messages. (For training, `dataset.load_examples` reads into compact arrays instead.)
    """
    decoded, report = decode_file(path, on_error)
    return decoded.examples(), report


# ------------------------------------------------------------------------------------------------
# Examples from games


def game_examples(record: GameRecord, targets: Sequence[np.ndarray], *, stalemate_won: int = 1) -> list[Example]:
    """One example per decision of a finished game.

    targets[i]: float[4, 8, 16], the moves target of decision i (same-colour pills are symmetrized
    here). won comes from the outcome (`won_target`), cleared and duration count from the decision
    (included) to the end. Raises ValueError for an unfinished game, a wrong number of targets, a
    record that does not replay to its outcome, or a target that breaks the format.
    """
    where = f"game seed={record.seed} level={record.level}"
    if record.outcome is None:
        raise ValueError(f"{where}: the game is not finished (no outcome), so won/cleared/duration are unknown")
    n = len(record.moves)
    if len(targets) != n:
        raise ValueError(f"{where}: {len(targets)} targets for {n} decisions")
    won = won_target(record.outcome, stalemate_won)
    steps = list(record.steps())
    viruses = np.array([result.viruses_cleared for _, _, result in steps], np.int64)
    cleared = np.cumsum(viruses[::-1])[::-1]
    if n:
        last = steps[-1][2]
        ended = "won" if last.won else "topped_out" if last.topped_out else "stalemate"
        if ended != record.outcome or int(viruses.sum()) != record.viruses_cleared:
            raise ValueError(
                f"{where}: replay ends {ended} with {int(viruses.sum())} viruses cleared, but the record says "
                f"{record.outcome} with {record.viruses_cleared}"
            )
    examples = [
        Example(
            game.board,
            game.pill,
            won,
            int(cleared[i]),
            n - i,
            symmetrize(np.asarray(targets[i], np.float32), game.pill.same_colour),
        )
        for i, (game, _, _) in enumerate(steps)
    ]
    check_examples(examples, lambda i: f"{where}: decision {i}")
    return examples


# ------------------------------------------------------------------------------------------------
# Colour augmentation

# The 6 renamings of (red, yellow, blue), identity first: perm[c - 1] is the new colour of colour c.
COLOUR_PERMUTATIONS: tuple[tuple[Colour, Colour, Colour], ...] = tuple(
    itertools.permutations((Colour.RED, Colour.YELLOW, Colour.BLUE))
)


def colour_table(perm: Sequence[int]) -> np.ndarray:
    """uint8[32] cell-code lookup that renames colours by perm (shapes kept, empty stays empty)."""
    if sorted(int(c) for c in perm) != [1, 2, 3]:
        raise ValueError(f"a colour permutation must list red, yellow, blue once each, got {perm!r}")
    table = np.arange(32, dtype=np.uint8)
    codes = np.arange(32)
    coloured = (codes & 3) != 0
    new_colour = np.array([0, *map(int, perm)], np.uint8)[codes & 3]
    table[coloured] = ((codes & ~3) | new_colour)[coloured]
    return table


def permute_colours(example: Example, perm: Sequence[int]) -> Example:
    """The example with colours renamed by perm (``perm[c - 1]`` replaces colour c) on the board and
    the pill; won, cleared, duration and moves are unchanged (positions and legality do not depend
    on colour). See the module docstring for what this does to the data distribution."""
    table = colour_table(perm)
    pill = Pill(Colour(int(perm[example.pill.left - 1])), Colour(int(perm[example.pill.right - 1])))
    return Example(
        Board._wrap(table[example.board.cells]),
        pill,
        example.won,
        example.cleared,
        example.duration,
        example.moves,
    )
