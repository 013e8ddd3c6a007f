"""How a game's end and a training example's ``won`` target read in captions and titles.

A ``won`` target of +1 means either a win or a stalemate (the design counts a stalemate as +1), so
a caption must never print it as "won" alone: the example itself tells the two apart, because from
a decision of a won game every virus then on the board gets cleared, and in a stalemate some stay.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from drmario.engine.board import Board


class ExampleLike(Protocol):
    """What a caption needs of a training example (`drmario.learn.examples.Example` has it)."""

    board: Board
    won: int
    cleared: int
    duration: int


def outcome_text(outcome: str | None, meta: Mapping[str, Any] | None = None) -> str:
    """How a game ended, for people: "won", "topped out", "stalemate", or for a game without an
    outcome "capped (stopped at the pill cap)" when its record says so (``meta["unfinished"]``,
    as the arena writes it), else "unfinished"."""
    if outcome is None:
        return "capped (stopped at the pill cap)" if meta and meta.get("unfinished") else "unfinished"
    return str(outcome).replace("_", " ")


def record_outcome(record: Any) -> str:
    """`outcome_text` of a `GameRecord`."""
    return outcome_text(record.outcome, record.meta)


def target_outcome(won: int, cleared: int, viruses: int) -> str:
    """What a ``won`` target means at a position with `viruses` viruses on the board, from which
    `cleared` were cleared by the end: "won" (+1, every one cleared), "stalemate" (+1 with viruses
    left: the design counts it as a win), or "lost" (-1: a top out, or a stalemate where stalemates
    are counted as -1)."""
    if won < 0:
        return "lost"
    return "won" if cleared >= viruses else "stalemate"


def target_text(won: int, cleared: int, viruses: int) -> str:
    """The ``won`` target with what it stands for: "won +1", "stalemate (won target +1)", "lost -1"."""
    ended = target_outcome(won, cleared, viruses)
    if ended == "stalemate":
        return f"stalemate (won target {won:+d})"
    return f"{ended} {won:+d}"


def example_title(example: ExampleLike, index: int | None = None) -> str:
    """A caption for a training example that says how its game ended (never "won" for a
    stalemate), how many of the board's viruses were cleared by the end, and the pills to the end."""
    viruses = example.board.virus_count
    head = f"example {index}: " if index is not None else ""
    pills = "pill" if example.duration == 1 else "pills"
    return (
        f"{head}{target_text(example.won, example.cleared, viruses)}, {example.cleared} of {viruses} viruses "
        f"cleared and {example.duration} {pills} to the end"
    )
