"""The one game driver: many games in lockstep, one batched decision for all of them per step.

`play_lockstep` keeps up to `lockstep` games running; each step it asks the agent for one decision
in every running game (so a network or a search batches its work across games), plays them, and
refills finished slots from the queue. Every decision is seeded by (run seed, game index, pill
index), so the moves do not depend on the lockstep width or on which slot a game ran in.

With a search agent whose evaluator is asynchronous (`AsyncEvaluator`: `inference.BatchedInference`
on a GPU, `inference.RemoteEvaluator`), the games are split into two halves that take turns: the
CPU selects and backs up in one half while the device evaluates the other's leaves. The moves are
the same as without the overlap.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from drmario.engine.game import Game, GameRecord
from drmario.engine.level import PillMode
from drmario.engine.nes_timing import Speed, Timing
from drmario.play.agents import Agent, Decision, SearchAgent
from drmario.search.core import Position, Prediction, Steps

OnFinish = Callable[[GameRecord, list[Decision]], None]


class GameSpec(NamedTuple):
    """A game to play: where it starts, and its index in a run (for seeds and records)."""

    number: int  # the game's number in its run (seeds and records)
    seed: int
    level: int


@runtime_checkable
class AsyncEvaluator(Protocol):
    """An evaluator that can take one batch while another is on the device."""

    def submit(self, cells: np.ndarray, pills: np.ndarray, previews: np.ndarray) -> Any:
        """Start evaluating; returns a ticket for `wait`."""
        ...

    def wait(self, ticket: Any) -> Prediction: ...


def decision_seed(base: int, game: int, pill: int) -> int:
    """The seed of one decision: a hash of (run seed, game index, pill index)."""
    return int(np.random.SeedSequence([base, game, pill]).generate_state(1, np.uint64)[0])


@dataclass
class Slot:
    """A game in play: its spec, the game, the decisions made so far and the seconds spent on them."""

    spec: GameSpec
    game: Game
    decisions: list[Decision] = field(default_factory=list)
    seconds: float = 0.0


class GameSlots:
    """Up to `width` games in play, refilled from a shared queue of specs (popped from its end).
    new_game(spec) starts a game; ended(slot) is told when one is over; who: the agent, for errors."""

    def __init__(
        self,
        queue: list[GameSpec],
        width: int,
        new_game: Callable[[GameSpec], Game],
        ended: Callable[[Slot], bool],
        base_seed: int,
        who: str = "the agent",
    ) -> None:
        self.queue, self.new_game, self.ended, self.base_seed, self.who = queue, new_game, ended, base_seed, who
        self.slots: list[Slot | None] = [None] * max(1, width)
        self.refill()

    def refill(self) -> None:
        for k, slot in enumerate(self.slots):
            if slot is None and self.queue:
                spec = self.queue.pop()
                self.slots[k] = Slot(spec, self.new_game(spec))

    def running(self) -> list[Slot]:
        return [s for s in self.slots if s is not None]

    def positions(self) -> list[Position]:
        return [Position.of(s.game) for s in self.running()]

    def seeds(self) -> list[int]:
        return [decision_seed(self.base_seed, s.spec.number, s.game.pills_used) for s in self.running()]

    def apply(self, decisions: Sequence[Decision], seconds: float) -> None:
        """Play one decision in each running game (in slot order), then refill."""
        running = [k for k, s in enumerate(self.slots) if s is not None]
        for k, decision in zip(running, decisions):
            slot = self.slots[k]
            assert slot is not None
            try:
                slot.game.play(decision.move)
            except ValueError as e:  # an agent's bad move: which game, which agent
                spec = slot.spec
                raise ValueError(f"game {spec.number} (seed {spec.seed}, level {spec.level}), {self.who}: {e}") from e
            slot.decisions.append(decision)
            slot.seconds += seconds / len(running)
            if self.ended(slot):
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
    timing: Timing = "free",
    speed: Speed = "med",
    start_game: Callable[[GameSpec], Game] | None = None,
) -> list[GameRecord]:
    """Play the games with up to `lockstep` at once (module docstring). Returns the records in the
    order of `specs` (meta: agent name, seconds spent choosing, and ``unfinished`` if the game was
    stopped at max_pills). on_finish(record, decisions) is called as games end; progress, if given,
    labels a per-game progress bar. stall_limit None: NES rules (no stalemate). timing and speed:
    the games' timing (`Game`). start_game(spec), if given, is the game to play on from (e.g. a copy of
    one part-played), instead of a new game of the spec's seed and level; its settings are its own."""
    from drmario.progress import tqdm

    twice = sorted(n for n, count in Counter(s.number for s in specs).items() if count > 1)
    if twice:  # records are kept by number: one would overwrite another
        raise ValueError(f"games numbered {twice} more than once: every game needs its own number")
    records: dict[int, GameRecord] = {}
    queue = list(reversed(specs))

    def new_game(spec: GameSpec) -> Game:
        if start_game is not None:
            return start_game(spec)
        return Game(spec.seed, spec.level, pill_mode=pill_mode, stall_limit=stall_limit, timing=timing, speed=speed)

    with tqdm(total=len(specs), desc=progress, unit="game", disable=progress is None, leave=False) as bar:

        def ended(slot: Slot) -> bool:
            game = slot.game
            if not game.over and game.pills_used < max_pills:
                return False
            meta = {"agent": agent.name, "index": slot.spec.number, "seconds": round(slot.seconds, 6)}
            if not game.over:
                meta["unfinished"] = f"stopped at max_pills={max_pills}"
            record = game.record(**meta)
            records[slot.spec.number] = record
            if on_finish is not None:
                on_finish(record, slot.decisions)
            bar.update(1)
            return True

        if isinstance(agent, SearchAgent) and isinstance(agent.evaluator, AsyncEvaluator):
            half = max(1, lockstep // 2)
            widths = (half, max(1, lockstep - half))
            halves = [GameSlots(queue, width, new_game, ended, base_seed, agent.name) for width in widths]
            _play_overlapped(agent, agent.evaluator, halves)
        else:
            slots = GameSlots(queue, lockstep, new_game, ended, base_seed, agent.name)
            while slots.running():
                start = time.perf_counter()
                decisions = agent.choose(slots.positions(), slots.seeds())
                slots.apply(decisions, time.perf_counter() - start)
    return [records[s.number] for s in specs]


def _play_overlapped(agent: SearchAgent, device: AsyncEvaluator, halves: list[GameSlots]) -> None:
    """Two halves of the games take turns: one half's tree work overlaps the other's evaluation."""
    while any(h.running() for h in halves):
        start = time.perf_counter()
        live = [i for i, h in enumerate(halves) if h.running()]
        positions = {i: halves[i].positions() for i in live}
        seeds = {i: halves[i].seeds() for i in live}
        searches: dict[int, Steps] = {i: agent.steps(positions[i], seeds[i]) for i in live}
        tickets = {i: device.submit(*next(searches[i])) for i in live}
        results = {}
        while tickets:
            for i in list(tickets):
                try:
                    leaves = searches[i].send(device.wait(tickets.pop(i)))
                    tickets[i] = device.submit(*leaves)
                except StopIteration as done:
                    results[i] = done.value
        seconds = (time.perf_counter() - start) / len(live)
        for i in live:
            decisions = [agent.decide(r, s, p.pills_used) for r, s, p in zip(results[i], seeds[i], positions[i])]
            halves[i].apply(decisions, seconds)
