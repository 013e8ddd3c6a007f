"""Whole games: state, play, outcome (rules.md section 7), records and exact replay."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from drmario.engine import kernels as K
from drmario.engine import nes_timing as NT
from drmario.engine import timing as T
from drmario.engine.board import Board, FormatError, Move, Pill, as_move, integer, move_values
from drmario.engine.level import (
    Level,
    PillMode,
    PillSequence,
    check_pill_mode,
    check_seed_level,
    new_level,
    virus_count,
)
from drmario.engine.nes_timing import Speed, Timing
from drmario.engine.rules import PlaceResult, canonical, legal_mask, legal_moves
from drmario.engine.svg import board_svg

DEFAULT_STALL_LIMIT = 20


class Outcome(str, Enum):
    """How a game ended (rules.md section 7); a game still running has none."""

    WON = "won"
    TOPPED_OUT = "topped_out"
    STALEMATE = "stalemate"

    @property
    def won_value(self) -> int:
        """The training target `won`: -1 for a top out, +1 for a win or a stalemate (the design's
        default; see `examples.won_target` to count stalemates otherwise)."""
        return -1 if self is Outcome.TOPPED_OUT else 1


def check_stall_limit(stall_limit: object) -> None:
    """ValueError unless stall_limit is a positive integer or None (no stalemate rule)."""
    if stall_limit is not None and (
        isinstance(stall_limit, bool) or not isinstance(stall_limit, int) or stall_limit < 1
    ):
        raise ValueError(f"stall_limit must be a positive integer or null (None), got {stall_limit!r:.80}")


@dataclass(frozen=True)
class GameRecord:
    """Everything needed to replay a game exactly: where it started, its timing and every move.

    ``timing`` "free" (the default) or "nes" with its ``speed``; under "nes", ``frames`` is the
    game's frame count (`Game.frames`). A free-timing record's JSON has none of the three (as
    before they existed), and a record without them reads as free timing.
    """

    seed: int
    level: int
    pill_mode: str = "nes"
    stall_limit: int | None = DEFAULT_STALL_LIMIT
    moves: tuple[Move, ...] = ()
    outcome: str | None = None  # None: the game was not finished
    viruses_cleared: int = 0
    pills_used: int = 0
    meta: dict = field(default_factory=dict)  # free-form: agent, search settings, timings
    timing: str = "free"
    speed: str | None = None  # "low", "med" or "hi" under nes timing, else None
    frames: int | None = None  # under nes timing: Game.frames at the record's end

    @property
    def cleared_share(self) -> float:
        """The share of its level's viruses the game cleared (1.0: won)."""
        return self.viruses_cleared / virus_count(self.level)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["moves"] = [list(m) for m in self.moves]
        if self.timing == "free":
            for key in ("timing", "speed", "frames"):
                del d[key]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> GameRecord:
        try:
            if not isinstance(d, dict):
                raise FormatError(f"expected a JSON object, got {type(d).__name__}")
            moves = tuple(as_move(m, f"move {i}") for i, m in enumerate(d["moves"]))
            record = cls(
                seed=integer(d["seed"], "seed"),
                level=integer(d["level"], "level"),
                pill_mode=d.get("pill_mode", "nes"),
                stall_limit=d.get("stall_limit", DEFAULT_STALL_LIMIT),
                moves=moves,
                outcome=d.get("outcome"),
                viruses_cleared=integer(d.get("viruses_cleared", 0), "viruses_cleared"),
                pills_used=integer(d.get("pills_used", len(moves)), "pills_used"),
                meta=dict(d.get("meta", {})),
                timing=d.get("timing", "free"),
                speed=d.get("speed"),
                frames=None if d.get("frames") is None else integer(d["frames"], "frames"),
            )
            record._check_words()
            return record
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"game record: {e!r} in {d!r:.200}") from e

    def _check_words(self) -> None:
        """ValueError for a field the readers of records would misread (an unknown outcome would
        count as a game but as neither a win nor a loss)."""
        outcomes = [o.value for o in Outcome]
        if self.outcome is not None and self.outcome not in outcomes:
            raise ValueError(f"outcome must be one of {outcomes} or null, got {self.outcome!r:.80}")
        check_seed_level(self.seed, self.level)  # here, not where a replay fails later without the record
        check_pill_mode(self.pill_mode)
        check_stall_limit(self.stall_limit)
        if self.timing == "free":
            if self.speed is not None:
                raise ValueError(f"speed {self.speed!r:.80} given under free timing")
            if self.frames is not None:  # to_dict would drop it without a word
                raise ValueError(f"frames {self.frames!r:.80} given under free timing")
        else:
            NT.check_timing(self.timing, self.speed)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> GameRecord:
        """A record from its JSON line; ValueError for text that is not one (FormatError where it is
        not JSON)."""
        if not isinstance(text, (str, bytes, bytearray)):
            raise FormatError(f"game record: expected a JSON line (str), got {type(text).__name__}")
        try:
            data = json.loads(text)
        except RecursionError:  # nesting deeper than the interpreter's stack
            raise FormatError(f"game record: JSON nested too deeply in {text!r:.80}") from None
        except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8
            raise FormatError(f"game record: not JSON ({e}) in {text!r:.80}") from e
        return cls.from_dict(data)

    @classmethod
    def read_file(cls, path: str | os.PathLike) -> list[GameRecord]:
        """The game records of a JSON Lines file (blank lines skipped); ValueError naming path:line
        of the first line that is not a record."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path: expected a str or path, got {type(path).__name__}")
        records = []
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        records.append(cls.from_json(line))
                    except ValueError as e:
                        raise ValueError(f"{path}:{n}: {e}") from e
        return records

    def new_game(self) -> Game:
        return Game(
            self.seed,
            self.level,
            pill_mode=self.pill_mode,  # type: ignore[arg-type]  # (checked by PillSequence)
            stall_limit=self.stall_limit,
            timing=self.timing,  # type: ignore[arg-type]  # (checked by Game)
            speed=self.speed or "med",  # type: ignore[arg-type]
        )

    def steps(self) -> Iterator[tuple[Game, Move, PlaceResult]]:
        """Replay move by move, yielding (game before the move, move, result). The game object is
        a fresh copy each time, so callers may keep it."""
        game = self.new_game()
        for i, move in enumerate(self.moves):
            before = game.copy()
            yield before, move, self.play_move(game, i)

    def play_move(self, game: Game, i: int) -> PlaceResult:
        """Play the record's move i on game (replaying it from `new_game`); ValueError naming the
        record and the move when the move is not legal there."""
        try:
            return game.play(self.moves[i])
        except ValueError as e:
            raise ValueError(f"game record seed={self.seed} level={self.level}: move {i}: {e}") from e

    def replay(self) -> Game:
        """Replay every move and check that the outcome and counts match the record."""
        game = self.new_game()
        for i in range(len(self.moves)):
            self.play_move(game, i)
        got: tuple = (game.outcome.value if game.outcome else None, game.viruses_cleared, game.pills_used)
        want: tuple = (self.outcome, self.viruses_cleared, self.pills_used)
        if self.timing != "free" and self.frames is not None:
            got, want = (*got, game.frames), (*want, self.frames)
        if got != want:
            raise ValueError(f"game record seed={self.seed} level={self.level}: replay gives {got}, record says {want}")
        return game


class Game:
    """One game of Dr. Mario from a (seed, level): the board, the pill to place, and the outcome.

    ``timing``: "free" (the default): a pill may lock anywhere some path of moves reaches, whatever
    the gravity (rules section 4). "nes": only where a player with a standard controller can at the
    game's real speed (`timing.reachable` at `speed_index` and `parity`, from ``speed`` "low",
    "med" or "hi" and the pills placed so far), and the game counts its frames (`frames`; each
    placement's fewest frames plus the ROM's clear, drop and throw animations: `nes_timing`, whose
    docstring says what is approximate), from which the parity of each pill's first frame follows.

    >>> game = Game(seed=1234, level=0)
    >>> result = game.play(game.legal_moves()[0])
    >>> game.pills_used
    1
    >>> timed = Game(seed=1234, level=0, timing="nes", speed="hi")
    >>> timed.speed_index, timed.parity, timed.frames
    (31, 1, 0)
    """

    def __init__(
        self,
        seed: int,
        level: int,
        *,
        pill_mode: PillMode = "nes",
        stall_limit: int | None = DEFAULT_STALL_LIMIT,
        timing: Timing = "free",
        speed: Speed = "med",
        _level: Level | None = None,
    ) -> None:
        check_stall_limit(stall_limit)
        if isinstance(seed, (bool, np.bool_)) or isinstance(level, (bool, np.bool_)):
            raise ValueError(f"seed and level must be integers, got seed={seed!r}, level={level!r}")
        check_pill_mode(pill_mode)
        NT.check_timing(timing, speed)
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
        self.timing: Timing = timing
        self.speed: Speed = speed
        self.first_frame = NT.FIRST_FRAME  # nes timing: the absolute frame of the pill's frame 1
        self.frames = 0  # nes timing: frames from the first pill's frame 1 to now (`frames`)
        if K.spawn_blocked(self._cells):
            self.outcome = Outcome.TOPPED_OUT

    @property
    def seed(self) -> int:
        return self.start.seed

    @property
    def level(self) -> int:
        return self.start.level

    @property
    def cleared_share(self) -> float:
        """The share of its level's viruses cleared so far, as its record's (`GameRecord.cleared_share`)."""
        return self.viruses_cleared / virus_count(self.level)

    @property
    def board(self) -> Board:
        return Board._wrap(self._cells.copy())

    @property
    def pill(self) -> Pill:
        """The pill to place now."""
        return self.pills[self.pills_used]

    @property
    def next_pill(self) -> Pill:
        """The preview: the pill after this one, which the player sees (rules.md: the NES shows it)."""
        return self.pills[self.pills_used + 1]

    @property
    def over(self) -> bool:
        return self.outcome is not None

    @property
    def timed(self) -> bool:
        """True under NES timing."""
        return self.timing == "nes"

    @property
    def speed_index(self) -> int:
        """The ROM's speed index for the pill to place (`timing.speed_index`: the speed setting plus
        one speed-up per 10 pills); the game's speed setting is used even under free timing."""
        return T.speed_index(self.speed, self.level, self.pills_used)

    @property
    def parity(self) -> int:
        """The frame counter's parity on the pill's first frame (nes timing; 1 under free timing)."""
        return self.first_frame & 1

    def reachable(self) -> dict[Move, T.Reach]:
        """`timing.reachable` for the pill to place at the game's speed index and parity (under
        either timing; empty when the game is over)."""
        if self.over:
            return {}
        return T.reachable(self.board, self.pill, self.speed_index, self.parity)

    def legal_moves(self) -> list[Move]:
        """The moves the pill may make: under nes timing the reachable ones, in `legal_moves` order."""
        if self.over:
            return []
        moves = legal_moves(self.board, self.pill)
        if self.timed:
            reach = self.reachable()
            moves = [m for m in moves if m in reach]
        return moves

    def legal_mask(self) -> np.ndarray:
        """bool[4, 8, 16] of the legal moves (for a same-colour pill, planes r and r + 2 alike)."""
        if not self.timed:
            return legal_mask(self.board, self.pill)
        mask = np.zeros((4, K.WIDTH, K.HEIGHT), np.bool_)
        for r, x, y in self.reachable():
            mask[r, x, y] = True
            if self.pill.same_colour:
                mask[r + 2, x, y] = True
        return mask

    def play(self, move: Move) -> PlaceResult:
        """Place the current pill at move (any r for a same-colour pill) and resolve."""
        if self.outcome is not None:
            raise ValueError(f"game is over ({self.outcome.value}); no more moves")
        pill = self.pill
        r, x, y = move_values(move)  # FormatError unless three integers
        if not (0 <= r < 4 and 0 <= x < K.WIDTH and 0 <= y < K.HEIGHT) or not self.legal_mask()[r, x, y]:
            raise ValueError(
                f"illegal move {(r, x, y)} (r, x, y) for pill {pill} ({pill.to_string()!r}) at pill {self.pills_used}"
            )
        move = canonical(pill, Move(r, x, y))
        r, x, y = move
        if self.timed:
            reach = self.reachable()[move]
            rounds_out = np.zeros((NT.MAX_ROUNDS, 3), np.int64)
            viruses, cells, rounds = NT.place_and_resolve_rounds(
                self._cells, int(pill.left), int(pill.right), r, x, y, rounds_out
            )
            lock = self.first_frame + reach.frames - 1
            after = NT.after_lock(lock, y, rounds_out[: min(rounds, NT.MAX_ROUNDS)], self.speed)
        else:
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
        if self.timed:
            self._count_frames(after, won, topped)
        return PlaceResult(int(viruses), int(cells), int(rounds), won, topped)

    def _count_frames(self, after: NT.AfterLock, won: bool, topped: bool) -> None:
        """Advance the frame count past a placement: to the frame its last virus is counted off
        (won), to the throw's last step (topped out: the spawn is taken), else to the frame before
        the next pill's frame 1, whose parity is the next pill's."""
        if won:
            end = max(after.cleared_at)
        elif topped:
            end = after.throw_end
        else:
            end = after.next_first - 1
            self.first_frame = after.next_first
        self.frames = end - NT.FIRST_FRAME + 1

    def copy(self) -> Game:
        other = Game.__new__(Game)
        other.__dict__.update(self.__dict__)
        other._cells = self._cells.copy()
        other.moves = list(self.moves)
        return other

    def record(self, **meta: Any) -> GameRecord:
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
            timing=self.timing,
            speed=self.speed if self.timed else None,
            frames=self.frames if self.timed else None,
        )

    def __repr__(self) -> str:
        state = self.outcome.value if self.outcome else f"pill {self.pill}"
        timing = f" timing=nes/{self.speed} frames={self.frames}" if self.timed else ""
        return (
            f"<Game seed={self.seed} level={self.level} {self.pill_mode}{timing} pills_used={self.pills_used} "
            f"viruses_left={self.viruses_left} {state}>"
        )

    def _repr_svg_(self) -> str:
        return board_svg(self._cells, pill=None if self.over else self.pill)
