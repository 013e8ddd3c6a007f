"""The board, pill and move types, and the maryodel text formats (rules.md sections 1-3)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

import numpy as np

from drmario.engine import kernels as K
from drmario.engine.svg import board_svg

BOARD_LETTERS = K.WIDTH * K.HEIGHT


class Colour(IntEnum):
    """A cell's colour, as the kernels number it (0 is an empty cell)."""

    RED = K.RED
    YELLOW = K.YELLOW
    BLUE = K.BLUE

    @property
    def letter(self) -> str:
        """The colour's letter for people (r, y or b; the maryodel letters are others: RULES.md)."""
        return "ryb"[self - 1]


class Shape(IntEnum):
    """What a coloured cell holds: a virus, a lone half (its other half cleared), or the bottom or top
    half of a vertical pill, or the left or right half of a horizontal one."""

    VIRUS = K.VIRUS
    DISCONNECTED = K.DISCONNECTED
    BOTTOM = K.BOTTOM
    TOP = K.TOP
    LEFT = K.LEFT
    RIGHT = K.RIGHT


def _letter_tables() -> tuple[np.ndarray, np.ndarray]:
    to_code = np.full(256, -1, np.int16)
    to_letter = np.full(32, ord("?"), np.uint8)
    for shape in Shape:
        for colour in Colour:
            code = shape << 2 | colour
            to_code[0x60 | code] = code
            to_letter[code] = 0x60 | code
    to_code[ord("d")] = K.EMPTY
    to_letter[K.EMPTY] = ord("d")
    return to_code, to_letter


LETTER_TO_CODE, CODE_TO_LETTER = _letter_tables()


class FormatError(ValueError):
    """A board, pill or move that does not follow the maryodel formats; the message says where."""


def integer(value: object, what: str) -> int:
    """value as a Python int; FormatError naming `what` unless it is an int or a numpy integer
    (bools and floats are refused, even whole-number ones: a move or a cell is counted, not measured)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise FormatError(f"{what} must be an integer, got {value!r} ({type(value).__name__})")
    return int(value)


def _position(i: int) -> str:
    return f"position {i} (x={i % K.WIDTH}, y={K.HEIGHT - 1 - i // K.WIDTH})"


def _string_index(x: int, y: int) -> int:
    return K.WIDTH * (K.HEIGHT - 1 - y) + x


# A half of each shape needs its partner next to it: (shape, dx, dy, partner, where).
_PAIRS = (
    (K.LEFT, 1, 0, K.RIGHT, "to its right"),
    (K.RIGHT, -1, 0, K.LEFT, "to its left"),
    (K.BOTTOM, 0, 1, K.TOP, "above it"),
    (K.TOP, 0, -1, K.BOTTOM, "below it"),
)


def unpaired_halves(cells: np.ndarray) -> np.ndarray:
    """bool[..., 8, 16]: the pill halves of boards cells uint8[..., 8, 16] whose partner is missing."""
    if not isinstance(cells, np.ndarray) or cells.dtype.kind not in "iu" or cells.shape[-2:] != (K.WIDTH, K.HEIGHT):
        what = f"an array of {cells.dtype} {cells.shape}" if isinstance(cells, np.ndarray) else type(cells).__name__
        raise FormatError(f"board cells: expected an integer array [..., 8, 16] of cell codes, got {what}")
    shape = np.where(cells == K.EMPTY, np.int8(-1), (cells >> 2).astype(np.int8))  # -1: no uint8 (numpy 2.5)
    pad = np.full((*cells.shape[:-2], K.WIDTH + 2, K.HEIGHT + 2), -1, np.int8)
    pad[..., 1:-1, 1:-1] = shape
    bad = np.zeros(cells.shape, bool)
    for half, dx, dy, partner, _ in _PAIRS:
        neighbour = pad[..., 1 + dx : 1 + dx + K.WIDTH, 1 + dy : 1 + dy + K.HEIGHT]
        bad |= (shape == half) & (neighbour != partner)
    return bad


def _check_pairs(cells: np.ndarray, text: str | None) -> None:
    """Raise FormatError at the first half whose partner is missing (in board-string order)."""
    bad = unpaired_halves(cells)
    if not bad.any():
        return
    i = min(_string_index(int(x), int(y)) for x, y in zip(*np.nonzero(bad)))
    x, y = i % K.WIDTH, K.HEIGHT - 1 - i // K.WIDTH
    _, _, _, partner, where = next(p for p in _PAIRS if p[0] == cells[x, y] >> 2)
    half = Shape(cells[x, y] >> 2).name.lower()
    letter = f" {text[i]!r}" if text is not None else ""
    raise FormatError(f"board: {half} half{letter} at {_position(i)} has no {Shape(partner).name.lower()} half {where}")


class Board:
    """An 8x16 Dr. Mario bottle. Immutable; ``cells`` is a read-only uint8[8, 16] array [x, y].

    >>> Board.from_string("d" * 56 + "c" + "d" * 24 + "a" + "d" * 6 + "bb" + "d" * 38).virus_count
    4
    """

    __slots__ = ("_cells", "_hash")
    _cells: np.ndarray
    _hash: int | None

    def __init__(self, cells: np.ndarray) -> None:
        try:
            codes = np.asarray(cells)
        except (ValueError, TypeError) as e:  # e.g. ragged nested lists
            raise FormatError(f"board: cells must be an (8, 16) array of cell codes: {e}") from e
        # Integers only: a cast to uint8 would turn NaN into 0 and -1 into 255 without an error.
        if codes.dtype.kind not in "iu":
            raise FormatError(f"board: cells must be integer cell codes, got an array of {codes.dtype}")
        if codes.shape != (K.WIDTH, K.HEIGHT):
            raise FormatError(f"board: cells must have shape (8, 16), got {codes.shape}")
        bad = np.argwhere((codes < 0) | (codes >= 32))
        if not len(bad):
            bad = np.argwhere(CODE_TO_LETTER[codes] == ord("?"))
        if len(bad):
            x, y = bad[0]
            raise FormatError(f"board: invalid cell code {codes[x, y]} at x={x}, y={y}")
        cells = codes.astype(np.uint8)  # a copy: the board owns its cells
        _check_pairs(cells, None)
        self._set(cells)

    def _set(self, cells: np.ndarray) -> None:
        cells.flags.writeable = False
        self._cells = cells
        self._hash = None

    @classmethod
    def _wrap(cls, cells: np.ndarray) -> Board:
        """Trusted constructor for engine output (no validation, takes ownership of cells)."""
        board = cls.__new__(cls)
        board._set(cells)
        return board

    @classmethod
    def empty(cls) -> Board:
        return cls._wrap(np.zeros((K.WIDTH, K.HEIGHT), np.uint8))

    @classmethod
    def from_string(cls, text: str) -> Board:
        """Parse a 128-letter maryodel board string (top row first, each row left to right)."""
        if not isinstance(text, str):
            raise FormatError(f"board: expected a string, got {type(text).__name__}")
        if len(text) != BOARD_LETTERS:
            raise FormatError(f"board: expected {BOARD_LETTERS} letters, got {len(text)}")
        raw = np.frombuffer(text.encode("latin-1", errors="replace"), np.uint8)
        codes = LETTER_TO_CODE[raw] if raw.size == BOARD_LETTERS else np.full(BOARD_LETTERS, -1)
        if (codes < 0).any():
            i = int(np.argmax(codes < 0))
            raise FormatError(f"board: invalid letter {text[i]!r} at {_position(i)}")
        cells = codes.astype(np.uint8).reshape(K.HEIGHT, K.WIDTH)[::-1].T.copy()
        _check_pairs(cells, text)
        return cls._wrap(cells)

    def to_string(self) -> str:
        return CODE_TO_LETTER[self._cells.T[::-1]].tobytes().decode("ascii")

    @property
    def cells(self) -> np.ndarray:
        return self._cells

    def __getitem__(self, xy: tuple[int, int]) -> str:
        """The maryodel letter of cell (x, y)."""
        if not isinstance(xy, tuple) or len(xy) != 2:
            raise FormatError(f"board[x, y]: expected a cell (x, y), got {xy!r}")
        x, y = integer(xy[0], "board[x, y]: x"), integer(xy[1], "board[x, y]: y")
        if not (0 <= x < K.WIDTH and 0 <= y < K.HEIGHT):  # no negative indices from the far side
            raise FormatError(f"board[x, y]: ({x}, {y}) is outside the bottle (x 0..7, y 0..15)")
        return chr(CODE_TO_LETTER[self._cells[x, y]])

    @property
    def virus_count(self) -> int:
        return int(K.count_viruses(self._cells))

    def copy(self) -> Board:
        return Board._wrap(self._cells.copy())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Board) and np.array_equal(self._cells, other._cells)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._cells.tobytes())
        return self._hash

    def __repr__(self) -> str:
        return f"Board.from_string({self.to_string()!r})"

    def __str__(self) -> str:
        """A grid, top row first: viruses R Y B, pill halves r y b ('-' joins the halves of a
        horizontal pill; the SVG picture also shows vertical pairs), '.' empty."""
        rows = []
        for y in range(K.HEIGHT - 1, -1, -1):
            line = []
            for x in range(K.WIDTH):
                c = int(self._cells[x, y])
                if c == K.EMPTY:
                    glyph = "."
                else:
                    letter = "ryb"[(c & 3) - 1]
                    glyph = letter.upper() if c >> 2 == K.VIRUS else letter
                line.append(glyph + ("-" if c != K.EMPTY and c >> 2 == K.LEFT else " "))
            rows.append(f"{y:2d} |" + "".join(line)[:-1] + "|")
        rows.append("    " + " ".join(str(x) for x in range(K.WIDTH)))
        return "\n".join(rows)

    def _repr_svg_(self) -> str:
        return board_svg(self._cells)


class Pill(NamedTuple):
    """A pill's two colours as spawned: ``left`` at (3, 15), ``right`` at (4, 15)."""

    left: Colour
    right: Colour

    @classmethod
    def from_string(cls, text: str) -> Pill:
        """Parse a spawn-form pill string: a left-half letter (q r s) then a right-half one (u v w)."""
        if not isinstance(text, str) or len(text) != 2:
            raise FormatError(f"pill: expected 2 letters, got {text!r}")
        codes = [int(LETTER_TO_CODE[ord(letter)]) if ord(letter) < 256 else -1 for letter in text]
        halves = []
        for i, (letter, code, shape) in enumerate(zip(text, codes, (K.LEFT, K.RIGHT))):
            if code <= 0 or code >> 2 != shape:
                expected = "qrs (left half)" if shape == K.LEFT else "uvw (right half)"
                hint = "a pill to place is given in its horizontal spawn form"
                if all(c in "ryb" for c in text):  # the colour letters pills print with
                    spelt = cls(*(Colour("ryb".index(c) + 1) for c in text)).to_string()
                    hint = f"the pill that prints as {text!r} is {spelt!r} in maryodel letters"
                elif min(codes) > 0 and [c >> 2 for c in codes] == [K.BOTTOM, K.TOP]:
                    hint = f"{text!r} is a vertical pill (bottom, top), which has no spawn order; {hint}"
                raise FormatError(f"pill {text!r}: letter {i} is {letter!r}, expected one of {expected}; {hint}")
            halves.append(Colour(code & 3))
        return cls(*halves)

    @classmethod
    def from_number(cls, index: int) -> Pill:
        """The pill with index ``3 * (left - 1) + (right - 1)`` (0..8, colours in order r, y, b)."""
        if not 0 <= integer(index, "pill index") < 9:
            raise FormatError(f"pill index must be in 0..8, got {index!r}")
        return cls(Colour(index // 3 + 1), Colour(index % 3 + 1))

    def _colours(self) -> tuple[int, int] | None:
        """(left, right) as ints 1..3, or None for a Pill made with other values (a NamedTuple
        takes anything: `as_pill` is where a pill is checked)."""
        try:
            left, right = (integer(c, "colour") for c in self)
        except FormatError:
            return None
        return (left, right) if 1 <= left <= 3 and 1 <= right <= 3 else None

    def _valid(self, what: str) -> tuple[int, int]:
        colours = self._colours()
        if colours is None:
            raise FormatError(f"{what}: {self!r} is not a pill: colours must be 1 (red), 2 (yellow) or 3 (blue)")
        return colours

    @property
    def number(self) -> int:
        left, right = self._valid("pill number")
        return 3 * (left - 1) + (right - 1)

    @property
    def same_colour(self) -> bool:
        return self.left == self.right

    def to_string(self) -> str:
        left, right = self._valid("pill string")
        return chr(0x60 | K.LEFT << 2 | left) + chr(0x60 | K.RIGHT << 2 | right)

    def __repr__(self) -> str:  # never fails: error messages show pills that are not valid
        if self._colours() is None:
            return f"Pill(left={self.left!r:.40}, right={self.right!r:.40})"
        return f"Pill.from_string({self.to_string()!r})"

    def __str__(self) -> str:
        colours = self._colours()
        return repr(self) if colours is None else "ryb"[colours[0] - 1] + "ryb"[colours[1] - 1]


ALL_PILLS: tuple[Pill, ...] = tuple(Pill.from_number(i) for i in range(9))


class Move(NamedTuple):
    """A final resting placement: ``r`` clockwise quarter-turns from spawn, and the cell (x, y) of
    the pill's bottom-left half."""

    r: int
    x: int
    y: int


MOVE_RANGES = (("r", 4), ("x", K.WIDTH), ("y", K.HEIGHT))


def move_values(move: object, name: str = "move") -> tuple[int, int, int]:
    """The three integers of a move (a `Move`, a tuple, a list or a 1-D integer array), not
    range-checked; FormatError naming `name` for anything else (wrong length, bools, floats)."""
    if isinstance(move, np.ndarray):
        if move.ndim != 1:
            raise FormatError(f"{name}: expected three integers (r, x, y), got an array of shape {move.shape}")
        move = list(move)
    if not isinstance(move, (tuple, list)):
        raise FormatError(f"{name}: expected three integers (r, x, y), got {move!r:.80} ({type(move).__name__})")
    if len(move) != 3:
        raise FormatError(f"{name}: expected three integers (r, x, y), got {len(move)} values: {move!r:.80}")
    r, x, y = (integer(v, f"{name}: {part}") for v, (part, _) in zip(move, MOVE_RANGES))
    return r, x, y


def as_move(move: object, name: str = "move") -> Move:
    """move as a `Move` of Python ints with r in 0..3, x in 0..7, y in 0..15 (`move_values`);
    FormatError naming `name` otherwise. (Legality on a board is `rules.is_legal`.)"""
    values = move_values(move, name)
    for v, (part, bound) in zip(values, MOVE_RANGES):
        if not 0 <= v < bound:
            raise FormatError(f"{name} {values} (r, x, y): illegal move, {part} must be in 0..{bound - 1}")
    return Move(*values)


def as_pill(pill: object, name: str = "pill") -> Pill:
    """pill as one of `ALL_PILLS`: a `Pill`, a pair of colours (1 red, 2 yellow, 3 blue) or a
    spawn-form pill string (``"qw"``); FormatError naming `name` otherwise."""
    if isinstance(pill, str):
        return Pill.from_string(pill)
    if not isinstance(pill, (tuple, list)) or len(pill) != 2:
        raise FormatError(f"{name}: expected a Pill (two colours), got {pill!r:.80} ({type(pill).__name__})")
    left, right = (integer(c, f"{name}: {side} colour") for c, side in zip(pill, ("left", "right")))
    if not (1 <= left <= 3 and 1 <= right <= 3):
        raise FormatError(f"{name}: colours must be 1 (red), 2 (yellow) or 3 (blue), got ({left}, {right})")
    return ALL_PILLS[3 * (left - 1) + (right - 1)]


def as_board(board: object, name: str = "board") -> Board:
    """board if it is a `Board`; FormatError naming `name` otherwise (`Board.from_string` parses text)."""
    if not isinstance(board, Board):
        raise FormatError(
            f"{name}: expected a Board (Board.from_string parses a board string), got {type(board).__name__}"
        )
    return board


@dataclass(frozen=True)
class PlacedCell:
    x: int
    y: int
    colour: Colour
    shape: Shape


def move_cells(pill: Pill, move: Move) -> tuple[PlacedCell, ...]:
    """The cells a pill occupies when locked at move (one cell if a vertical top half is at y=16)."""
    r, x, y = as_move(move)
    left, right = as_pill(pill)
    if r % 2 == 0:
        a, b = (left, right) if r == 0 else (right, left)
        return (PlacedCell(x, y, a, Shape.LEFT), PlacedCell(x + 1, y, b, Shape.RIGHT))
    bottom, top = (right, left) if r == 1 else (left, right)
    if y + 1 >= K.HEIGHT:
        return (PlacedCell(x, y, bottom, Shape.DISCONNECTED),)
    return (PlacedCell(x, y, bottom, Shape.BOTTOM), PlacedCell(x, y + 1, top, Shape.TOP))
