"""Game replays: frames, a strip of chosen steps, and an ipywidgets player (see `drmario.viz`)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import numpy as np

from drmario.engine.board import Board, Move, Pill
from drmario.engine.game import GameRecord
from drmario.engine.svg import board_svg
from drmario.viz.boards import ORIENTATION, as_moves_array, compare_heatmaps, html_row, move_share
from drmario.viz.outcomes import outcome_text, record_outcome
from drmario.viz.views import HTMLView, Panel, ipywidgets_or_none


@dataclass(frozen=True)
class ReplayState:
    """A game between moves: step i is the board before move i, counting from 0 (step n: after the
    last move); the slider, titles and captions of the replays count steps the same way."""

    board: Board
    pill: Pill | None  # the pill to place; None once the game is over
    move: Move | None  # the move played from here; None for the last state
    cleared: int  # viruses cleared before this state
    viruses: int  # viruses at the start of the game
    outcome: str | None  # the outcome, on the last state of a finished game
    capped: bool = False  # on the last state: the game was stopped at the pill cap (no outcome)

    @property
    def ended(self) -> str:
        """How the game ended, for captions (`outcomes.outcome_text`): never "won" for a stalemate."""
        return outcome_text(self.outcome, {"unfinished": True} if self.capped else None)


def replay_states(record: GameRecord) -> list[ReplayState]:
    """Replay record: len(record.moves) + 1 states, from the start to after the last move."""
    game = record.new_game()
    total = game.viruses_left
    states = []
    for i, move in enumerate(record.moves):
        states.append(ReplayState(game.board, game.pill, move, game.viruses_cleared, total, None))
        record.play_move(game, i)
    outcome = game.outcome.value if game.outcome else None
    capped = outcome is None and bool(record.meta.get("unfinished"))
    pill = None if game.over else game.pill
    states.append(ReplayState(game.board, pill, None, game.viruses_cleared, total, outcome, capped))
    return states


def _state_title(st: ReplayState, i: int, n: int) -> str:
    if st.move is not None:
        return f"step {i}/{n}, {st.cleared} cleared"
    return f"{st.ended}, {st.cleared} cleared"


def _state_svg(st: ReplayState, i: int, n: int, ghost: bool, cell: int, coordinates: bool = False) -> str:
    g = (st.pill, st.move) if ghost and st.pill is not None and st.move is not None else None
    title = _state_title(st, i, n)
    return board_svg(st.board.cells, pill=st.pill, ghost=g, cell=cell, title=title, coordinates=coordinates)


def _frame_indices(n: int, every: int) -> list[int]:
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    steps = list(range(0, n + 1, every))
    return steps if steps[-1] == n else [*steps, n]


def replay_frames(record: GameRecord, every: int = 1, *, ghost: bool = True, cell: int = 18) -> list[str]:
    """Board SVGs of a replay: the start, then after every `every` moves, always ending with the
    final board (every=1: len(record.moves) + 1 frames). Each frame shows the pill to place and,
    with ghost, where it goes; its root element's ``data-board`` is the board string."""
    states = replay_states(record)
    n = len(record.moves)
    return [_state_svg(states[i], i, n, ghost, cell) for i in _frame_indices(n, every)]


def _move_text(pill: Pill, move: Move) -> str:
    return f"{pill} r={move.r} x={move.x} y={move.y} ({ORIENTATION[move.r]})"


def _caption(st: ReplayState, i: int) -> str:
    if st.pill is None or st.move is None:
        return f"step {i}"
    return f"step {i}: " + _move_text(st.pill, st.move)


def replay_strip(
    record: GameRecord, steps: Sequence[int] | None = None, *, ghost: bool = True, cell: int = 14
) -> HTMLView:
    """Chosen replay states in one row: step i is the board before move i (negative counts from
    the end, -1 the final board). By default 6 steps spread over the game."""
    states = replay_states(record)
    n = len(record.moves)
    if steps is None:
        steps = sorted(set(np.linspace(0, n, min(6, n + 1)).round().astype(int).tolist()))
    picked = []
    for s in steps:
        if not -(n + 1) <= s <= n:
            raise ValueError(f"step {s} is outside 0..{n} (the game has {n} moves)")
        picked.append(s % (n + 1))
    svgs = [_state_svg(states[i], i, n, ghost, cell) for i in picked]
    captions = [_caption(states[i], i) for i in picked]
    title = f"seed {record.seed}, level {record.level}: {n} moves, {record_outcome(record)}"
    return HTMLView(html_row(svgs, captions, title), svgs)


def _per_step(arrays: Any, n: int, what: str) -> list[np.ndarray | None] | None:
    if arrays is None:
        return None
    arrays = list(arrays)
    if len(arrays) != n:
        raise ValueError(f"{what}: expected {n} arrays (one per move), got {len(arrays)}")
    return [None if a is None else as_moves_array(a, f"{what}[{i}]") for i, a in enumerate(arrays)]


def replay_widget(
    record: GameRecord,
    targets: Sequence[np.ndarray] | np.ndarray | None = None,
    network_moves: Sequence[np.ndarray] | np.ndarray | None = None,
    *,
    cell: int = 20,
    interval_ms: int = 700,
) -> Panel | HTMLView:
    """An interactive replay: a slider over the game's states, play/pause, and toggles for the
    chosen move (a ghost pill), the search target heatmap and the network heatmap.

    targets, network_moves: per move float[4, 8, 16] (a list aligned with record.moves, entries may
    be None, or an array float[n, 4, 8, 16]); a toggle appears for each one given. Returns a Panel
    (controls ``slider``, ``play``, ``info``, ``picture`` and the toggles); without ipywidgets, a
    static `replay_strip` with a warning.
    """
    states = replay_states(record)
    n = len(record.moves)
    maps: dict[str, list[np.ndarray | None]] = {}
    for name, arrays, what in (("search target", targets, "targets"), ("network", network_moves, "network_moves")):
        per_step = _per_step(arrays, n, what)
        if per_step is not None:
            maps[name] = per_step
    widgets = ipywidgets_or_none()
    if widgets is None:
        warnings.warn("ipywidgets is not installed: showing a static replay strip", stacklevel=2)
        return replay_strip(record)

    slider = widgets.IntSlider(value=0, min=0, max=n, description="step", layout=widgets.Layout(width="420px"))
    play = widgets.Play(value=0, min=0, max=n, interval=interval_ms, description="play")
    widgets.link((play, "value"), (slider, "value"))  # kernel-side, so it also works without a frontend
    ghost = widgets.Checkbox(value=True, description="chosen move", indent=False)
    toggles = {name: widgets.Checkbox(value=True, description=name, indent=False) for name in maps}
    info = widgets.HTML()
    picture = widgets.HTML()

    def redraw(_: Any = None) -> None:
        shown = [name for name in maps if toggles[name].value]
        text, parts = _replay_view(states, slider.value, maps, shown, ghost.value, cell)
        info.value = escape(" · ".join(text))
        picture.value = (
            f'<div style="display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start">{"".join(parts)}</div>'
        )

    for w in (slider, ghost, *toggles.values()):
        w.observe(redraw, names="value")
    redraw()
    box = widgets.VBox([widgets.HBox([play, slider]), widgets.HBox([ghost, *toggles.values()]), info, picture])
    named = {"search target": "target", "network": "network"}
    return Panel(
        box,
        snapshot=lambda: f"<div>{info.value}</div>{picture.value}",
        slider=slider,
        play=play,
        ghost=ghost,
        info=info,
        picture=picture,
        **{named[k]: v for k, v in toggles.items()},
    )


def _replay_view(
    states: list[ReplayState],
    i: int,
    maps: dict[str, list[np.ndarray | None]],
    shown: list[str],
    ghost: bool,
    cell: int,
) -> tuple[list[str], list[str]]:
    """What `replay_widget` shows at step i: (the parts of its info line, the HTML of its pictures:
    the board, and the heatmaps of the maps named in shown that have an entry at this step)."""
    n = len(states) - 1
    st = states[i]
    parts = [_state_svg(st, i, n, ghost, cell, coordinates=True)]  # the info line gives the move's x and y
    text = [f"step {i}/{n}", f"cleared {st.cleared}/{st.viruses} viruses"]
    if st.move is None or st.pill is None:
        text.insert(1, f"end: {st.ended}")
        return text, parts
    text[1:1] = [f"pill {st.pill}", f"plays {_move_text(st.pill, st.move)}"]
    heatmaps: dict[str, np.ndarray] = {}
    for name, arrays in maps.items():
        moves = arrays[i]
        if moves is not None:
            text.append(f"{name} p={move_share(st.pill, moves, st.move):.1%}")
            if name in shown:
                heatmaps[name] = moves
    if heatmaps:
        chosen = st.move if ghost else None
        parts.append(compare_heatmaps(st.board, st.pill, heatmaps, chosen=chosen, cell=11).html)
    return text, parts
