"""Training examples: one per decision, validation, examples from games, and colour augmentation.

An example is the design note's array ``[board, pill, won, cleared, duration, moves]``
(design note 000), optionally followed by a seventh element, ``preview``:

- ``board``: the 128-letter board before the pill is placed; ``pill``: the pill in its 2-letter
  spawn form;
- ``won``: -1 (topped out) or +1 (cleared every virus, or stalemate); ``cleared``: the viruses
  cleared from this decision (included) to the end of the game; ``duration``: the pills placed from
  this decision (included) to the end;
- ``moves``: 4 flat lists of x, y, p triples, one per clockwise rotation r (the sparse form of the
  float[4, 8, 16] target, see `encode`);
- ``preview`` (optional): the next pill, which the NES shows while this one is placed, in the same
  2-letter spawn form. The kit writes it; a 6-element example (the design's form) reads with the
  preview unknown, and its preview input planes stay zero.

Validation (reading a file, `Example.from_json`, `Example.validate`, `example_files.write_examples`)
is `example_decoding.decode_rows` (its docstring lists the rules); an `ExampleError` names where
the example came from, e.g. ``examples.jsonl:17: moves[1] triple 2: ...``. Files of examples (JSON
Lines with a sidecar) are `example_files`.

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

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from drmario.engine.board import Board, Colour, FormatError, Pill
from drmario.engine.game import GameRecord, Outcome
from drmario.learn.encode import MOVES_SHAPE, N_PLANES, encode, sparse_moves, symmetrize
from drmario.learn.example_decoding import Decoded, decode_rows, pill_of


def json_error(error: ValueError | RecursionError, text: str | bytes) -> str:
    """What is wrong with one line of JSON, placed in the line: json's own position counts lines
    and would call the end of a line cut short "line 2 column 1"."""
    if not isinstance(error, json.JSONDecodeError):  # e.g. bytes that are not UTF-8
        return f"invalid JSON: {error}"
    if isinstance(text, bytes):  # json's positions count characters
        text = text.decode("utf-8", "replace")
    end = len(text.rstrip())
    where = "at the end of the line (cut short?)" if error.pos >= end else f"at column {error.pos + 1}"
    return f"invalid JSON: {error.msg} {where}"


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
    preview: Pill | None = None  # the next pill (the NES preview); None: unknown

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
        if self.preview is not None and not isinstance(self.preview, Pill):
            raise TypeError(f"Example's preview must be a Pill or None, got {type(self.preview).__name__}")

    def to_json(self) -> list:
        """The design note's array ``[board, pill, won, cleared, duration, moves]`` (p rounded to 6
        digits), with ``preview`` as a seventh element when it is known."""
        row = [
            self.board.to_string(),
            self.pill.to_string(),
            int(self.won),
            int(self.cleared),
            int(self.duration),
            sparse_moves(self.moves),
        ]
        return row if self.preview is None else [*row, self.preview.to_string()]

    def to_line(self) -> str:
        """One JSON Lines line (no newline)."""
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, obj: Any, where: str = "<example>") -> Example:
        """Parse and validate the JSON array (or its text). Raises `ExampleError` naming ``where``."""
        if isinstance(obj, (str, bytes)):
            try:
                obj = json.loads(obj)
            except (ValueError, RecursionError) as e:
                raise ExampleError(where, json_error(e, obj)) from None
        decoded, errors = decode_rows([obj])
        if errors:
            raise ExampleError(where, errors[0])
        return decoded_examples(decoded)[0]

    def validate(self, where: str = "<example>") -> None:
        """Raise `ExampleError` if this example breaks a rule of the format (module docstring)."""
        check_examples([self], lambda i: where)

    def planes(self, n_planes: int = N_PLANES) -> np.ndarray:
        """float32[n_planes, 8, 16] network input."""
        return encode(self.board, self.pill, self.preview, n_planes)

    def _raw_row(self) -> list:
        """The JSON array with full-precision probabilities (for validation, no rounding)."""
        r, x, y = np.nonzero(self.moves)  # C order: by r
        triples = np.empty((len(r), 3), object)
        triples[:, 0], triples[:, 1], triples[:, 2] = x.tolist(), y.tolist(), self.moves[r, x, y].tolist()
        bounds = np.searchsorted(r, np.arange(5))
        flat = [triples[bounds[k] : bounds[k + 1]].ravel().tolist() for k in range(4)]
        row = [self.board.to_string(), self.pill.to_string(), self.won, self.cleared, self.duration, flat]
        return row if self.preview is None else [*row, self.preview.to_string()]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Example):
            return NotImplemented
        return (
            self.board == other.board
            and self.pill == other.pill
            and (self.won, self.cleared, self.duration) == (other.won, other.cleared, other.duration)
            and self.preview == other.preview
            and np.array_equal(self.moves, other.moves)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Example(board={self.board!r}, pill={self.pill!r}, won={self.won}, cleared={self.cleared}, "
            f"duration={self.duration}, moves=<{int(np.count_nonzero(self.moves))} non-zero>, preview={self.preview!r})"
        )


def decoded_examples(decoded: Decoded) -> list[Example]:
    """`Example` objects of decoded examples (`example_decoding.Decoded`), in order."""
    dense = decoded.dense_moves()
    return [
        Example(
            Board._wrap(decoded.cells[k].copy()),
            pill_of(decoded.pills[k]),
            int(decoded.won[k]),
            int(decoded.cleared[k]),
            int(decoded.duration[k]),
            dense[k],
            pill_of(decoded.previews[k]) if decoded.previews[k, 0] else None,
        )
        for k in range(len(decoded))
    ]


def check_examples(examples: Sequence[Example], where: Callable[[int], str]) -> Decoded:
    """Validate Example objects in bulk; raise `ExampleError` (at ``where(i)``) for the first bad one.
    Returns them decoded (compact arrays)."""
    decoded, errors = decode_rows([ex._raw_row() for ex in examples])
    if errors:
        i = min(errors)
        raise ExampleError(where(i), errors[i])
    return decoded


# ------------------------------------------------------------------------------------------------
# Examples from games


def game_examples(record: GameRecord, targets: Sequence[np.ndarray | None], *, stalemate_won: int = 1) -> list[Example]:
    """One example per decision of a finished game, except the decisions whose target is None.

    targets[i]: float[4, 8, 16], the moves target of decision i (same-colour pills are symmetrized
    here), or None: no example for it (a fast search under playout cap randomisation). won comes
    from the outcome (`won_target`), cleared and duration count from the decision (included) to the
    end; the preview is the game's next pill at each decision. Raises ValueError for an unfinished
    game, a wrong number of targets, a record that does not replay to its outcome, or a target that
    breaks the format.
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
    final = steps[-1][0].copy() if n else record.new_game()  # (a copy: steps[-1][0] is the last example's)
    if n:
        record.play_move(final, n - 1)
    ended = final.outcome.value if final.outcome else "unfinished"
    if ended != record.outcome or int(viruses.sum()) != record.viruses_cleared:
        raise ValueError(
            f"{where}: replay ends {ended} with {int(viruses.sum())} viruses cleared, but the record says "
            f"{record.outcome} with {record.viruses_cleared}"
        )
    kept = [i for i in range(n) if targets[i] is not None]
    examples = []
    for i in kept:
        game = steps[i][0]
        target = symmetrize(np.asarray(targets[i], np.float32), game.pill.same_colour)
        examples.append(Example(game.board, game.pill, won, int(cleared[i]), n - i, target, game.next_pill))
    check_examples(examples, lambda j: f"{where}: decision {kept[j]}")
    return examples


# ------------------------------------------------------------------------------------------------
# Colour augmentation

# The 6 renamings of (red, yellow, blue), identity first: perm[c - 1] is the new colour of colour c.
COLOUR_PERMUTATIONS: tuple[tuple[Colour, Colour, Colour], ...] = tuple(
    (a, b, c) for a, b, c in itertools.permutations((Colour.RED, Colour.YELLOW, Colour.BLUE))
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
    """The example with colours renamed by perm (``perm[c - 1]`` replaces colour c) on the board, the
    pill and the preview; won, cleared, duration and moves are unchanged (positions and legality do not depend
    on colour). See the module docstring for what this does to the data distribution."""
    table = colour_table(perm)

    def rename(pill: Pill) -> Pill:
        return Pill(Colour(int(perm[pill.left - 1])), Colour(int(perm[pill.right - 1])))

    return Example(
        Board._wrap(table[example.board.cells]),
        rename(example.pill),
        example.won,
        example.cleared,
        example.duration,
        example.moves,
        None if example.preview is None else rename(example.preview),
    )
