"""The one game driver: many games in lockstep, one batched decision for all of them per step.

`play_lockstep` keeps up to `lockstep` games running; each step it asks the agent for one decision
in every running game (so a network or a search batches its work across games), plays them, and
refills finished slots from the queue. Every decision is seeded by (run seed, game index, pill
index), so the moves do not depend on the lockstep width or on which slot a game ran in.

With a search agent whose evaluator is asynchronous (``submit``/``wait``: `inference.BatchedInference`
on a GPU, `inference.RemoteEvaluator`), the games are split into two halves that take turns: the
CPU selects and backs up in one half while the device evaluates the other's leaves. The moves are
the same as without the overlap.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from drmario.engine.game import Game, GameRecord
from drmario.engine.level import PillMode
from drmario.play.agents import Agent, Decision, SearchAgent
from drmario.search.searcher import Position, Searcher

OnFinish = Callable[[GameRecord, list[Decision]], None]


class GameSpec(NamedTuple):
    """A game to play: where it starts, and its index in a run (for seeds and records)."""

    number: int  # the game's number in its run (seeds and records)
    seed: int
    level: int


def decision_seed(base: int, game: int, pill: int) -> int:
    """The seed of one decision: a hash of (run seed, game index, pill index)."""
    return int(np.random.SeedSequence([base, game, pill]).generate_state(1, np.uint64)[0])


class _Rules(NamedTuple):
    name: str
    base_seed: int
    pill_mode: PillMode
    stall_limit: int | None
    max_pills: int
    on_finish: OnFinish | None
    bar: object | None  # a tqdm bar, advanced per finished game


class GameSlots:
    """Up to `width` games in play, refilled from a shared queue of specs (popped from its end)."""

    def __init__(self, queue: list[GameSpec], width: int, records: dict[int, GameRecord], rules: _Rules) -> None:
        self.queue, self.records, self.rules = queue, records, rules
        self.slots: list[tuple[GameSpec, Game, list[Decision], list[float]] | None] = [None] * max(1, width)
        self.refill()

    def refill(self) -> None:
        for k in range(len(self.slots)):
            if self.slots[k] is None and self.queue:
                spec = self.queue.pop()
                rules = self.rules
                game = Game(spec.seed, spec.level, pill_mode=rules.pill_mode, stall_limit=rules.stall_limit)
                self.slots[k] = (spec, game, [], [0.0])

    def _running(self) -> list[tuple[GameSpec, Game, list[Decision], list[float]]]:
        return [s for s in self.slots if s is not None]

    @property
    def running(self) -> bool:
        return any(s is not None for s in self.slots)

    def positions(self) -> list[Position]:
        return [Position.of(game) for _, game, _, _ in self._running()]

    def seeds(self) -> list[int]:
        base = self.rules.base_seed
        return [decision_seed(base, spec.number, game.pills_used) for spec, game, _, _ in self._running()]

    def apply(self, decisions: Sequence[Decision], seconds: float) -> None:
        """Play one decision in each running game (in slot order), then refill."""
        rules = self.rules
        running = [k for k, s in enumerate(self.slots) if s is not None]
        for k, decision in zip(running, decisions):
            spec, game, made, clock = self.slots[k]  # type: ignore[misc]
            game.play(decision.move)
            made.append(decision)
            clock[0] += seconds / len(running)
            if game.over or game.pills_used >= rules.max_pills:
                meta = {"agent": rules.name, "index": spec.number, "seconds": round(clock[0], 6)}
                if not game.over:
                    meta["unfinished"] = f"stopped at max_pills={rules.max_pills}"
                record = game.record(**meta)
                self.records[spec.number] = record
                if rules.on_finish is not None:
                    rules.on_finish(record, made)
                if rules.bar is not None:
                    rules.bar.update(1)  # type: ignore[attr-defined]
                self.slots[k] = None
        self.refill()


def play_lockstep(
    agent: Agent,
    specs: Sequence[GameSpec],
    *,
    lockstep: int = 16,
    base_seed: int = 0,
    pill_mode: PillMode = "nes",
    stall_limit: int | None = None,
    max_pills: int = 2000,
    on_finish: OnFinish | None = None,
    progress: str | None = None,
) -> list[GameRecord]:
    """Play the games with up to `lockstep` at once (module docstring). Returns the records in the
    order of `specs` (meta: agent name, seconds spent choosing, and ``unfinished`` if the game was
    stopped at max_pills). on_finish(record, decisions) is called as games end; progress, if given,
    labels a per-game progress bar. stall_limit None: NES rules (no stalemate)."""
    from tqdm.auto import tqdm

    records: dict[int, GameRecord] = {}
    queue = list(reversed(specs))
    with tqdm(total=len(specs), desc=progress, unit="game", disable=progress is None, leave=False) as bar:
        rules = _Rules(agent.name, base_seed, pill_mode, stall_limit, max_pills, on_finish, bar)
        if isinstance(agent, SearchAgent) and hasattr(agent.evaluator, "submit"):
            half = max(1, lockstep // 2)
            halves = [GameSlots(queue, half, records, rules), GameSlots(queue, max(1, lockstep - half), records, rules)]
            _play_overlapped(agent, halves)
        else:
            slots = GameSlots(queue, lockstep, records, rules)
            while slots.running:
                start = time.perf_counter()
                decisions = agent.choose(slots.positions(), slots.seeds())
                slots.apply(decisions, time.perf_counter() - start)
    return [records[s.number] for s in specs]


def _play_overlapped(agent: SearchAgent, halves: list[GameSlots]) -> None:
    """Two halves of the games take turns: one half's tree work overlaps the other's evaluation."""
    engine = agent.evaluator
    searchers = [Searcher(agent.config, engine, games=len(h.slots)) for h in halves]
    while any(h.running for h in halves):
        start = time.perf_counter()
        live = [i for i, h in enumerate(halves) if h.running]
        positions = {i: halves[i].positions() for i in live}
        seeds = {i: halves[i].seeds() for i in live}
        for i in live:
            searchers[i].start(positions[i], seeds[i])
        tickets: dict[int, object] = {}
        while tickets or not all(searchers[i].done for i in live):
            for i in live:
                if i in tickets:
                    searchers[i].finish(engine.wait(tickets.pop(i)))  # type: ignore[union-attr]
                if not searchers[i].done:
                    batch = searchers[i].leaves()
                    if batch is not None:
                        tickets[i] = engine.submit(*batch)  # type: ignore[union-attr]
        seconds = (time.perf_counter() - start) / len(live)
        for i in live:
            results = searchers[i].results()
            decisions = [agent.decide(r, s, p.pills_used) for r, s, p in zip(results, seeds[i], positions[i])]
            halves[i].apply(decisions, seconds)
