"""Watch and play: a person plays a level by choosing placements, beside an agent (a network, a
search, any `drmario.play.agents.Agent`) playing the same pills on its own board, one pill at a time.

`PlaySession` is the game logic, usable in plain cells (``session.choose(move)``, ``session.step()``,
``session.view()``); `play_widget` puts an ipywidgets UI on it: the rotation, the column and (where a
pill can rest at several heights: tucks, slides) the landing row, with the legal places of the chosen
rotation outlined and the chosen one drawn as a ghost, then "place". Without ipywidgets it returns
the boards as a static picture.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import numpy as np

from drmario.engine import kernels as K
from drmario.engine.board import Board, Move, Pill, move_values
from drmario.engine.game import Game, GameRecord
from drmario.engine.level import PillMode
from drmario.engine.rules import canonical, legal_mask, legal_moves
from drmario.engine.svg import board_svg
from drmario.play.agents import Agent, Decision
from drmario.play.lockstep import decision_seed
from drmario.search.core import Position
from drmario.viz.boards import ORIENTATION, html_row, move_heatmap
from drmario.viz.outcomes import outcome_text
from drmario.viz.views import HTMLView, Panel, ipywidgets_or_none


@dataclass(frozen=True)
class AgentMove:
    """One decision of the agent: the position it saw and what it chose (its search target, if any)."""

    board: Board
    pill: Pill
    decision: Decision


class PlaySession:
    """A person and an agent play the same game (seed, level: the same viruses and pills), each on
    their own board: the person chooses a placement (`choose`), and `step` places it and then lets
    the agent place the same pill. Once one game is over the other goes on alone.

    NES rules by default (no stalemate: stall_limit None) with a pill cap, as in the arena; the
    agent's decisions are seeded as in `play.lockstep` (decision_seed, game 0).
    """

    def __init__(
        self,
        agent: Agent | None,
        seed: int,
        level: int,
        *,
        pill_mode: PillMode = "nes",
        stall_limit: int | None = None,
        max_pills: int = 2000,
        decision_seed: int = 0,
    ) -> None:
        if max_pills < 1:
            raise ValueError(f"max_pills must be >= 1, got {max_pills}")
        self.agent = agent
        self.max_pills = max_pills
        self.decision_seed = decision_seed
        self.you = Game(seed, level, pill_mode=pill_mode, stall_limit=stall_limit)
        self.machine = Game(seed, level, pill_mode=pill_mode, stall_limit=stall_limit) if agent is not None else None
        self.selected: Move | None = None
        self.agent_moves: list[AgentMove] = []

    # -- state

    @property
    def you_done(self) -> bool:
        return self.you.over or self.you.pills_used >= self.max_pills

    @property
    def agent_done(self) -> bool:
        return self.machine is None or self.machine.over or self.machine.pills_used >= self.max_pills

    @property
    def over(self) -> bool:
        return self.you_done and self.agent_done

    def legal_moves(self) -> list[Move]:
        """Your pill's legal placements (same-colour pills: r in {0, 1}); none once your game is over."""
        return [] if self.you_done else legal_moves(self.you.board, self.you.pill)

    def rotations(self) -> list[int]:
        """The rotations r with at least one legal placement now."""
        return sorted({m.r for m in self.legal_moves()})

    def columns(self, r: int) -> list[int]:
        return sorted({m.x for m in self.legal_moves() if m.r == r})

    def landings(self, r: int, x: int) -> list[int]:
        """The rows where the pill can rest in rotation r at column x, highest (a straight drop) first."""
        return sorted({m.y for m in self.legal_moves() if m.r == r and m.x == x}, reverse=True)

    # -- moves

    def choose(self, move: Move | Sequence[int]) -> Move:
        """Select your next placement (r, x, y) (shown as a ghost; `step` plays it). Any r of a
        same-colour pill's placement is taken. ValueError for an illegal one."""
        if self.you_done:
            raise ValueError("your game is over: no more placements (step lets the agent play on)")
        r, x, y = move_values(move)  # FormatError (a ValueError) unless three integers
        mask = legal_mask(self.you.board, self.you.pill)
        if not (0 <= r < 4 and 0 <= x < K.WIDTH and 0 <= y < K.HEIGHT) or not mask[r, x, y]:
            raise ValueError(f"placement r={r} x={x} y={y} is not legal for pill {self.you.pill}")
        self.selected = canonical(self.you.pill, Move(r, x, y))
        return self.selected

    def step(self) -> None:
        """Place your chosen pill, then the agent places the same pill on its board. Once your game
        is over, the agent places its next pill alone. ValueError if you have chosen no placement."""
        played = not self.you_done
        if played:
            if self.selected is None:
                raise ValueError("choose a placement first (session.choose((r, x, y)))")
            self.you.play(self.selected)
            self.selected = None
        behind = self.machine is not None and self.machine.pills_used < self.you.pills_used
        if not self.agent_done and (behind or not played):
            self.agent_step()

    def agent_step(self) -> Decision:
        """The agent places its next pill (whatever your game's state)."""
        if self.machine is None or self.agent is None:
            raise ValueError("no agent in this session")
        if self.agent_done:
            raise ValueError("the agent's game is over")
        game = self.machine
        seed = decision_seed(self.decision_seed, 0, game.pills_used)
        [decision] = self.agent.choose([Position.of(game)], [seed])
        self.agent_moves.append(AgentMove(game.board, game.pill, decision))
        game.play(decision.move)
        return decision

    def finish_agent(self, on_pill: Callable[[Game], None] | None = None, *, progress: bool = False) -> None:
        """The agent plays its game to the end (or to the pill cap): up to max_pills decisions, so
        on_pill(game) is called after each (the widget shows the count) and progress=True shows a
        progress bar (tqdm) in plain cells."""
        if self.agent_done:
            return
        from drmario.progress import tqdm

        assert self.machine is not None and self.agent is not None
        left = self.max_pills - self.machine.pills_used
        with tqdm(
            total=left, desc=f"{self.agent.name} plays on", unit="pill", disable=not progress, leave=False
        ) as bar:
            while not self.agent_done:
                self.agent_step()
                bar.update(1)
                if on_pill is not None:
                    on_pill(self.machine)

    # -- results

    def records(self) -> tuple[GameRecord, GameRecord | None]:
        """Your game and the agent's as records (replay them with `viz.replay_strip` or
        `GameRecord.replay`); a game stopped at the pill cap has ``meta["unfinished"]``."""

        def record(game: Game, name: str) -> GameRecord:
            meta: dict[str, Any] = {"agent": name}
            if not game.over and game.pills_used >= self.max_pills:
                meta["unfinished"] = f"stopped at max_pills={self.max_pills}"
            return game.record(**meta)

        agent = None if self.machine is None or self.agent is None else record(self.machine, self.agent.name)
        return record(self.you, "you"), agent

    def status(self, game: Game | None) -> str:
        """A game's state in words: pills placed, viruses left, or how it ended."""
        if game is None:
            return ""
        state = f"{game.pills_used} pills, {game.viruses_cleared} cleared, {game.viruses_left} left"
        if game.over:
            return f"{outcome_text(game.outcome.value if game.outcome else None)}: {state}"
        if game.pills_used >= self.max_pills:
            return f"{outcome_text(None, {'unfinished': True})}: {state}"
        return state

    def view(self, cell: int = 20) -> HTMLView:
        """Both boards now, side by side: yours with the pill to place (turned as selected), the
        selected placement as a ghost and the legal places of its rotation outlined; the agent's
        with its last placement outlined."""
        svgs = [self._your_svg(cell)]
        captions = [f"you: {self.status(self.you)}"]
        if self.machine is not None and self.agent is not None:
            svgs.append(self._agent_svg(cell))
            captions.append(f"{self.agent.name}: {self.status(self.machine)}")
        title = f"seed {self.you.seed}, level {self.you.level}: {self.you.start.board.virus_count} viruses"
        return HTMLView(html_row(svgs, captions, title), svgs)

    def agent_target(self, cell: int = 12) -> HTMLView | None:
        """The agent's last decision as a move heatmap (its search target), if it has one."""
        last = self.agent_moves[-1] if self.agent_moves else None
        target = last.decision.target if last is not None else None
        if last is None or target is None:
            return None
        title = f"{self.agent.name if self.agent else 'agent'}'s search target for pill {len(self.agent_moves)}"
        return move_heatmap(last.board, last.pill, target, chosen=last.decision.move, title=title, cell=cell)

    def _your_svg(self, cell: int) -> str:
        game = self.you
        if self.you_done:
            return board_svg(game.board.cells, cell=cell, title="you", coordinates=True)
        sel = self.selected
        outline = legal_mask(game.board, game.pill)[sel.r] if sel is not None else None
        ghost = (game.pill, sel) if sel is not None else None
        return board_svg(
            game.board.cells,
            pill=game.pill,
            pill_r=sel.r if sel is not None else 0,  # a strip two cells high, as the agent's: the bottles level
            outline=outline,
            ghost=ghost,
            cell=cell,
            title=f"you: pill {game.pills_used + 1}",
            coordinates=True,  # the column buttons' numbers
        )

    def _agent_svg(self, cell: int) -> str:
        game = self.machine
        assert game is not None
        outline = None
        if self.agent_moves:
            r, x, y = self.agent_moves[-1].decision.move
            outline = np.zeros((K.WIDTH, K.HEIGHT), bool)
            outline[x, y] = True
            if r % 2 == 0 and x + 1 < K.WIDTH:
                outline[x + 1, y] = True
            elif r % 2 == 1 and y + 1 < K.HEIGHT:
                outline[x, y + 1] = True
        pill = None if self.agent_done else game.pill
        name = self.agent.name if self.agent is not None else "agent"
        pill_r = None if pill is None else 0
        return board_svg(
            game.board.cells, pill=pill, pill_r=pill_r, outline=outline, cell=cell, title=name, coordinates=True
        )


def play_widget(
    agent: Agent | None,
    seed: int = 1234,
    level: int = 0,
    *,
    pill_mode: PillMode = "nes",
    stall_limit: int | None = None,
    max_pills: int = 2000,
    decision_seed: int = 0,
    cell: int = 20,
) -> Panel | HTMLView:
    """Play level `level` of NES seed `seed` beside agent (None: alone), one pill at a time.

    Choose the rotation, the column and the landing row (the highest is a straight drop; lower
    ones are tucks and slides under overhangs); the legal places of the rotation are outlined and
    the choice is drawn as a ghost; "place" plays it and the agent then plays the same pill.
    "agent: next pill" and "agent: to the end" let the agent go on alone.

    Returns a Panel (controls ``rotation``, ``column``, ``landing``, ``place``, ``agent_next``,
    ``agent_end``, ``show_target``, ``info``, ``picture``, ``target`` (the agent's heatmap), and
    ``session``: the `PlaySession`). Its static snapshot (both boards as SVG) is an output of its own
    below the widget, so an HTML export shows the boards without the widget scripts. Without
    ipywidgets: the boards as a static picture, with a warning (play on with a `PlaySession`).
    """
    session = PlaySession(
        agent,
        seed,
        level,
        pill_mode=pill_mode,
        stall_limit=stall_limit,
        max_pills=max_pills,
        decision_seed=decision_seed,
    )
    widgets = ipywidgets_or_none()
    if widgets is None:
        warnings.warn(
            "ipywidgets is not installed: showing the boards only (play with PlaySession: choose, step)", stacklevel=2
        )
        return session.view(cell)
    return _PlayUI(widgets, session, cell).panel


class _PlayUI:
    """The widgets of `play_widget` and how they follow the session."""

    def __init__(self, widgets: Any, session: PlaySession, cell: int) -> None:
        self.session, self.cell = session, cell
        self.busy = False  # set while the controls are refilled, so their observers stay quiet
        w = widgets
        self.rotation = w.ToggleButtons(description="rotation", style={"button_width": "92px"})
        self.column = w.ToggleButtons(description="column", style={"button_width": "34px"})
        self.landing = w.Dropdown(description="landing")
        self.place = w.Button(description="place", button_style="primary", tooltip="place your pill")
        self.agent_next = w.Button(description="agent: next pill", disabled=session.agent is None)
        self.agent_end = w.Button(description="agent: to the end", disabled=session.agent is None)
        self.show_target = w.Checkbox(value=False, description="agent's search target", indent=False)
        self.info, self.picture, self.target = w.HTML(), w.HTML(), w.HTML()
        self.rotation.observe(self._on_rotation, names="value")
        self.column.observe(self._on_column, names="value")
        self.landing.observe(self._on_landing, names="value")
        self.show_target.observe(lambda _: self.redraw(), names="value")
        self.place.on_click(lambda _: self._act(session.step))
        self.agent_next.on_click(lambda _: self._act(session.agent_step))
        self.agent_end.on_click(lambda _: self._act(lambda: session.finish_agent(self._agent_progress)))
        self.refill()
        box = w.VBox(
            [
                self.rotation,
                self.column,
                w.HBox([self.landing, self.place, self.agent_next, self.agent_end, self.show_target]),
                self.info,
                self.picture,
                self.target,
            ]
        )
        self.panel = Panel(
            box,
            snapshot=lambda: session.view(cell).html,
            session=session,
            rotation=self.rotation,
            column=self.column,
            landing=self.landing,
            place=self.place,
            agent_next=self.agent_next,
            agent_end=self.agent_end,
            show_target=self.show_target,
            info=self.info,
            picture=self.picture,
            target=self.target,
        )

    def _agent_progress(self, game: Game) -> None:
        """While the agent plays on alone (a long loop in a button's callback): its count, every 10 pills."""
        if game.pills_used % 10 == 0:
            self.info.value = escape(
                f"{self.session.agent.name if self.session.agent else 'agent'}: {self.session.status(game)} …"
            )

    def _act(self, action: Any) -> None:
        try:
            action()
            message = ""
        except ValueError as e:  # e.g. the agent's game is over: say so, keep the UI alive
            message = str(e)
        self.refill(message)

    def refill(self, message: str = "") -> None:
        """Refill the controls with your pill's legal placements, select the first, redraw."""
        s = self.session
        self.busy = True
        try:
            pill = None if s.you_done else s.you.pill
            rotations = s.rotations()
            self.rotation.options = [(f"r={r} {self._shape(pill, r)}", r) for r in rotations]
            self.rotation.value = rotations[0] if rotations else None
            self._fill_columns()
        finally:
            self.busy = False
        self._select()
        self.place.disabled = s.you_done
        no_agent = s.agent is None or s.agent_done
        self.agent_next.disabled = self.agent_end.disabled = no_agent
        self.redraw(message)

    @staticmethod
    def _shape(pill: Pill | None, r: int) -> str:
        """How the pill lies at rotation r, in its colour letters (e.g. "[r b]", "b under r")."""
        if pill is None:
            return ORIENTATION[r]
        text = str(pill)  # the colour letters r y b (upper-case L and R never clash with them)
        return ORIENTATION[r].replace("L", text[0]).replace("R", text[1])

    def _fill_columns(self) -> None:
        r = self.rotation.value
        columns = self.session.columns(r) if r is not None else []
        keep = self.column.value if self.column.value in columns else None
        if keep is None and columns:  # the spawn column first: a straight drop is the usual move
            keep = K.SPAWN_X if K.SPAWN_X in columns else columns[0]
        self.column.options = [(str(x), x) for x in columns]
        self.column.value = keep
        self._fill_landings()

    def _fill_landings(self) -> None:
        r, x = self.rotation.value, self.column.value
        rows = self.session.landings(r, x) if r is not None and x is not None else []
        names = [f"y={y} (drop)" if k == 0 else f"y={y} (tuck or slide)" for k, y in enumerate(rows)]
        self.landing.options = list(zip(names, rows))
        self.landing.value = rows[0] if rows else None

    def _select(self) -> None:
        r, x, y = self.rotation.value, self.column.value, self.landing.value
        if None not in (r, x, y) and not self.session.you_done:
            self.session.choose((r, x, y))

    def _changed(self, refill_below: Callable[[], None] | None = None) -> None:
        """A control was changed by the user (not by a refill): refill the controls below it,
        select the placement and redraw."""
        if self.busy:
            return
        if refill_below is not None:
            self.busy = True
            try:
                refill_below()
            finally:
                self.busy = False
        self._select()
        self.redraw()

    def _on_rotation(self, _: Any) -> None:
        self._changed(self._fill_columns)

    def _on_column(self, _: Any) -> None:
        self._changed(self._fill_landings)

    def _on_landing(self, _: Any) -> None:
        self._changed()

    def redraw(self, message: str = "") -> None:
        s = self.session
        parts = [f"you: {s.status(s.you)}"]
        if s.machine is not None and s.agent is not None:
            parts.append(f"{s.agent.name}: {s.status(s.machine)}")
        if not s.you_done:
            parts.append(f"your pill: {s.you.pill} (next {s.you.next_pill})")
            if s.selected is not None:
                r, x, y = s.selected
                parts.append(f"chosen: r={r} x={x} y={y}")
        elif not s.agent_done:
            parts.append("your game is over: the agent can play on")
        if message:
            parts.append(f"<b>{escape(message)}</b>")
        self.info.value = " · ".join(p if p.startswith("<b>") else escape(p) for p in parts)
        self.picture.value = s.view(self.cell).html
        target = s.agent_target() if self.show_target.value else None
        self.target.value = target.html if target is not None else ""
