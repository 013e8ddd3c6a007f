"""Whole games: state, play, outcome (rules.md section 7), records and exact replay."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from enum import Enum

import numpy as np

from drmario.engine import kernels as K
from drmario.engine.board import Board, FormatError, Move, Pill, as_move, integer, move_values
from drmario.engine.level import Level, PillMode, PillSequence, new_level
from drmario.engine.rules import PlaceResult, canonical, legal_mask, legal_moves
from drmario.engine.svg import board_svg

DEFAULT_STALL_LIMIT = 20


class Outcome(str, Enum):
    WON = "won"
    TOPPED_OUT = "topped_out"
    STALEMATE = "stalemate"

    @property
    def won_value(self) -> int:
        """The training target `won`: -1 for a top out, +1 for a win or a stalemate (the design's
        default; see `examples.won_target` to count stalemates otherwise)."""
        return -1 if self is Outcome.TOPPED_OUT else 1


@dataclass(frozen=True)
class GameRecord:
    """Everything needed to replay a game exactly: where it started and every move."""

    seed: int
    level: int
    pill_mode: str = "nes"
    stall_limit: int | None = DEFAULT_STALL_LIMIT
    moves: tuple[Move, ...] = ()
    outcome: str | None = None  # None: the game was not finished
    viruses_cleared: int = 0
    pills_used: int = 0
    meta: dict = field(default_factory=dict)  # free-form: agent, search settings, timings

    def to_dict(self) -> dict:
        d = asdict(self)
        d["moves"] = [list(m) for m in self.moves]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> GameRecord:
        try:
            if not isinstance(d, dict):
                raise FormatError(f"expected a JSON object, got {type(d).__name__}")
            moves = tuple(as_move(m, f"move {i}") for i, m in enumerate(d["moves"]))
            return cls(
                seed=integer(d["seed"], "seed"),
                level=integer(d["level"], "level"),
                pill_mode=d.get("pill_mode", "nes"),
                stall_limit=d.get("stall_limit", DEFAULT_STALL_LIMIT),
                moves=moves,
                outcome=d.get("outcome"),
                viruses_cleared=integer(d.get("viruses_cleared", 0), "viruses_cleared"),
                pills_used=integer(d.get("pills_used", len(moves)), "pills_used"),
                meta=dict(d.get("meta", {})),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"game record: {e!r} in {d!r:.200}") from e

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> GameRecord:
        """A record from its JSON line; FormatError (a ValueError) for text that is not one."""
        if not isinstance(text, (str, bytes, bytearray)):
            raise FormatError(f"game record: expected a JSON line (str), got {type(text).__name__}")
        try:
            data = json.loads(text)
        except RecursionError:  # nesting deeper than the interpreter's stack
            raise FormatError(f"game record: JSON nested too deeply in {text!r:.80}") from None
        except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8
            raise FormatError(f"game record: not JSON ({e}) in {text!r:.80}") from e
        return cls.from_dict(data)

    def new_game(self) -> Game:
        return Game(self.seed, self.level, pill_mode=self.pill_mode, stall_limit=self.stall_limit)  # type: ignore[arg-type]  # (checked by PillSequence)

    def steps(self) -> Iterator[tuple[Game, Move, PlaceResult]]:
        """Replay move by move, yielding (game before the move, move, result). The game object is
        a fresh copy each time, so callers may keep it."""
        game = self.new_game()
        for i, move in enumerate(self.moves):
            before = game.copy()
            try:
                result = game.play(move)
            except ValueError as e:
                raise ValueError(f"game record seed={self.seed} level={self.level}: move {i}: {e}") from e
            yield before, move, result

    def replay(self) -> Game:
        """Replay every move and check that the outcome and counts match the record."""
        game = self.new_game()
        for i, move in enumerate(self.moves):
            try:
                game.play(move)
            except ValueError as e:
                raise ValueError(f"game record seed={self.seed} level={self.level}: move {i}: {e}") from e
        got = (game.outcome.value if game.outcome else None, game.viruses_cleared, game.pills_used)
        want = (self.outcome, self.viruses_cleared, self.pills_used)
        if got != want:
            raise ValueError(f"game record seed={self.seed} level={self.level}: replay gives {got}, record says {want}")
        return game


class Game:
    """One game of Dr. Mario from a (seed, level): the board, the pill to place, and the outcome.

    >>> game = Game(seed=1234, level=0)
    >>> result = game.play(game.legal_moves()[0])
    >>> game.pills_used
    1
    """

    def __init__(
        self,
        seed: int,
        level: int,
        *,
        pill_mode: PillMode = "nes",
        stall_limit: int | None = DEFAULT_STALL_LIMIT,
        _level: Level | None = None,
    ) -> None:
        if stall_limit is not None and (
            isinstance(stall_limit, bool) or not isinstance(stall_limit, int) or stall_limit < 1
        ):
            raise ValueError(f"stall_limit must be a positive integer or None, got {stall_limit!r}")
        if isinstance(seed, (bool, np.bool_)) or isinstance(level, (bool, np.bool_)):
            raise ValueError(f"seed and level must be integers, got seed={seed!r}, level={level!r}")
        if not isinstance(pill_mode, str):
            raise ValueError(f"pill_mode must be 'nes' or 'iid', got {pill_mode!r:.80}")
        self.start = _level if _level is not None else new_level(seed, level)
        self.pill_mode = pill_mode
        self.stall_limit = stall_limit
        self.pills = PillSequence(pill_mode, self.start)
        self._cells = self.start.board.cells.copy()
        self.pills_used = 0
        self.viruses_cleared = 0
        self.viruses_left = self.start.board.virus_count
        self.stall = 0  # consecutive pills that cleared no virus
        self.moves: list[Move] = []
        self.outcome: Outcome | None = None
        if K.spawn_blocked(self._cells):
            self.outcome = Outcome.TOPPED_OUT

    @property
    def seed(self) -> int:
        return self.start.seed

    @property
    def level(self) -> int:
        return self.start.level

    @property
    def board(self) -> Board:
        return Board._wrap(self._cells.copy())

    @property
    def pill(self) -> Pill:
        """The pill to place now."""
        return self.pills[self.pills_used]

    @property
    def next_pill(self) -> Pill:
        """The preview: the pill after this one (search agents must not look at it)."""
        return self.pills[self.pills_used + 1]

    @property
    def over(self) -> bool:
        return self.outcome is not None

    def legal_moves(self) -> list[Move]:
        return [] if self.over else legal_moves(self.board, self.pill)

    def legal_mask(self) -> np.ndarray:
        return legal_mask(self.board, self.pill)

    def play(self, move: Move) -> PlaceResult:
        """Place the current pill at move (any r for a same-colour pill) and resolve."""
        if self.outcome is not None:
            raise ValueError(f"game is over ({self.outcome.value}); no more moves")
        pill = self.pill
        r, x, y = move_values(move)  # FormatError unless three integers
        if not (0 <= r < 4 and 0 <= x < K.WIDTH and 0 <= y < K.HEIGHT) or not self.legal_mask()[r, x, y]:
            raise ValueError(
                f"illegal move {(r, x, y)} (r, x, y) for pill {pill.to_string()!r} at pill {self.pills_used}"
            )
        move = canonical(pill, Move(r, x, y))
        r, x, y = move
        viruses, cells, rounds = K.place_and_resolve(self._cells, int(pill.left), int(pill.right), r, x, y)
        self.moves.append(move)
        self.pills_used += 1
        self.viruses_cleared += int(viruses)
        self.viruses_left -= int(viruses)
        self.stall = 0 if viruses > 0 else self.stall + 1
        won = self.viruses_left == 0
        topped = not won and bool(K.spawn_blocked(self._cells))
        if won:
            self.outcome = Outcome.WON
        elif topped:
            self.outcome = Outcome.TOPPED_OUT
        elif self.stall_limit is not None and self.stall >= self.stall_limit:
            self.outcome = Outcome.STALEMATE
        return PlaceResult(int(viruses), int(cells), int(rounds), won, topped)

    def copy(self) -> Game:
        other = Game.__new__(Game)
        other.__dict__.update(self.__dict__)
        other._cells = self._cells.copy()
        other.moves = list(self.moves)
        return other

    def record(self, **meta) -> GameRecord:
        return GameRecord(
            seed=self.seed,
            level=self.level,
            pill_mode=self.pill_mode,
            stall_limit=self.stall_limit,
            moves=tuple(self.moves),
            outcome=self.outcome.value if self.outcome else None,
            viruses_cleared=self.viruses_cleared,
            pills_used=self.pills_used,
            meta=meta,
        )

    def __repr__(self) -> str:
        state = self.outcome.value if self.outcome else f"pill {self.pill}"
        return (
            f"<Game seed={self.seed} level={self.level} {self.pill_mode} pills_used={self.pills_used} "
            f"viruses_left={self.viruses_left} {state}>"
        )

    def _repr_svg_(self) -> str:
        return board_svg(self._cells, pill=None if self.over else self.pill)
