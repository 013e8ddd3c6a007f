"""Players for the arena and self-play (`lockstep.play_lockstep` drives them).

An agent chooses moves for a batch of positions in one call (so a network or a search can batch
its work across games). Agents see a `Position` (the board, the pill, the NES preview of the next
one, the stall counter, the game's timing), never the pills after the preview; under NES timing
every agent chooses among the reachable moves (`core.legal_moves_of`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple, Protocol

import numpy as np

from drmario.engine import kernels as K
from drmario.engine.board import Move
from drmario.engine.rules import placement_mass
from drmario.search.config import SearchConfig
from drmario.search.core import (
    Evaluator,
    Position,
    SearchResult,
    Steps,
    legal_mask_of,
    legal_moves_of,
    merged,
    run,
)
from drmario.search.heuristics import greedy_move, greedy_pick

# The networks' number formats in play (`drmario.learn.device.resolve_dtype`): auto is bfloat16 on CUDA,
# float32 on the CPU. Torch-free here, for the settings and the command line.
PlayDtype = Literal["auto", "float32", "bfloat16"]


class Decision(NamedTuple):
    """A move, and the search that chose it (None for agents that do not search). recorded: False
    for a fast search's move under playout cap randomisation (`SearchAgent`), which self-play does
    not write as a training example."""

    move: Move
    search: SearchResult | None = None
    recorded: bool = True

    @property
    def target(self) -> np.ndarray | None:
        """float32[4, 8, 16] the search's moves target (for training examples), or None."""
        return None if self.search is None else self.search.target


class Agent(Protocol):
    """A player: a name (the arena's row label) and `choose`. The arena, self-play, the gate and the
    command line take any Agent; `drmario.run.agents.make_agent` builds the kit's by name."""

    name: str

    def choose(self, positions: Sequence[Position], seeds: Sequence[int]) -> list[Decision]:
        """One decision per position; seeds make each choice reproducible on its own."""
        ...


class RandomAgent:
    """Uniformly random legal placements."""

    name = "random"

    def choose(self, positions: Sequence[Position], seeds: Sequence[int]) -> list[Decision]:
        moves = np.empty((K.MAX_MOVES, 3), np.int8)
        out = []
        for pos, seed in zip(positions, seeds):
            n = legal_moves_of(pos, moves)
            out.append(Decision(Move(*moves[np.random.default_rng(seed).integers(n)].tolist())))
        return out


class GreedyAgent:
    """The one-ply heuristic baseline (`greedy_move`)."""

    name = "greedy"

    def choose(self, positions: Sequence[Position], seeds: Sequence[int]) -> list[Decision]:
        moves = np.empty((K.MAX_MOVES, 3), np.int8)
        out = []
        for pos, seed in zip(positions, seeds):
            state = np.array([seed | 1], np.uint64)
            cells = pos.cells.copy()  # writable, as the rollouts' boards: the kernels compile once
            if pos.speed_index is None:
                j = greedy_move(cells, int(pos.pill.left), int(pos.pill.right), state, moves)
            else:  # NES timing: among the reachable moves
                j = greedy_pick(
                    cells, int(pos.pill.left), int(pos.pill.right), state, moves, legal_moves_of(pos, moves)
                )
            out.append(Decision(Move(*moves[j].tolist())))
        return out


def playout_cap_problem(config: SearchConfig, full_search_share: float, fast_simulations: int | None) -> str | None:
    """What is wrong with these playout cap randomisation settings for config's search, or None."""
    if not 0 < full_search_share <= 1:
        return f"full_search_share = {full_search_share}: expected a share in (0, 1]"
    if full_search_share == 1:
        return None
    if config.mode == "expert":
        return f"full_search_share = {full_search_share}: the expert's search has no simulations to cap"
    if fast_simulations is None or not 0 <= fast_simulations < config.simulations:
        return (
            f"fast_simulations = {fast_simulations}: full_search_share = {full_search_share} needs fast_simulations "
            f"in [0, {config.simulations}), fewer than the full search's"
        )
    return None


def _placed(out: list[SearchResult | None], idx: list[int], results: list[SearchResult]) -> list[SearchResult | None]:
    """out with results[k] at index idx[k]."""
    for i, r in zip(idx, results):
        out[i] = r
    return out


class SearchAgent:
    """A search (`SearchConfig`: the expert, round-0 MCTS, or PUCT or Gumbel with an evaluator).

    Exploration in self-play: temperature > 0 samples the move from the target sharpened by
    1/temperature for the first `temperature_moves` pills of a game; and with probability
    `epsilon` a move is a uniformly random legal one (the decision keeps the search's target, so
    the examples teach the search's choice in positions the search would not have reached, and the
    outcomes show what a bad placement leads to). Otherwise the search's best.

    Playout cap randomisation (KataGo; Wu 2019, section 3.1): with `fast_simulations` set, a
    decision is searched in full (`config.simulations`) with probability `full_search_share`, drawn from
    its seed, and otherwise with `fast_simulations` and no exploration (no root noise, no
    temperature, no epsilon: the fast search's best move). Only full searches are recorded
    (`Decision.recorded`): self-play writes their examples alone, so a game costs fewer simulations
    and more games, each with its own outcome, fit in the same time.
    """

    def __init__(
        self,
        config: SearchConfig,
        evaluator: Evaluator | None = None,
        *,
        temperature: float = 0.0,
        temperature_moves: int = 0,
        epsilon: float = 0.0,
        name: str | None = None,
        full_search_share: float = 1.0,
        fast_simulations: int | None = None,
    ) -> None:
        if config.needs_network and evaluator is None:
            raise ValueError(f"search mode {config.mode!r} needs an evaluator (a network)")
        problem = playout_cap_problem(config, full_search_share, fast_simulations)
        if problem:
            raise ValueError(problem)
        self.config, self.evaluator = config, evaluator
        self.temperature, self.temperature_moves, self.epsilon = temperature, temperature_moves, epsilon
        self.name = name or f"search-{config.mode}"
        self.full_search_share, self.fast = full_search_share, None
        if full_search_share < 1:
            quiet = {"gumbel": config.gumbel.replace(noise=0.0), "puct": config.puct.replace(dirichlet_fraction=0.0)}
            self.fast = config.replace(simulations=fast_simulations, **quiet)

    def is_full(self, seed: int) -> bool:
        """Whether the decision of this seed is searched in full (always True without a fast search)."""
        return self.fast is None or bool(np.random.default_rng([seed, 3]).random() < self.full_search_share)

    def _groups(self, seeds: Sequence[int]) -> list[tuple[SearchConfig, list[int]]]:
        """The searches to run and the positions (indices) each one searches."""
        full = [self.is_full(s) for s in seeds]
        groups = [(self.config, [i for i, f in enumerate(full) if f])]
        if self.fast is not None:
            groups.append((self.fast, [i for i, f in enumerate(full) if not f]))
        return [(config, idx) for config, idx in groups if idx]

    def search(self, positions: Sequence[Position], seeds: Sequence[int]) -> list[SearchResult]:
        if self.config.needs_network:
            return run(self.steps(positions, seeds), self.evaluator)  # type: ignore[arg-type]  # (checked in __init__)
        out: list[SearchResult | None] = [None] * len(positions)
        for config, idx in self._groups(seeds):
            results = config.run([positions[i] for i in idx], [seeds[i] for i in idx], self.evaluator)
            out = _placed(out, idx, results)
        return out  # type: ignore[return-value]  # (every slot filled)

    def steps(self, positions: Sequence[Position], seeds: Sequence[int]) -> Steps:
        """The network search of these positions as `core.Steps`: the full and the fast search
        together, one evaluator call a step for both (`core.merged`)."""
        groups = self._groups(seeds)
        parts = yield from merged(
            [config.steps([positions[i] for i in idx], [seeds[i] for i in idx]) for config, idx in groups]
        )
        out: list[SearchResult | None] = [None] * len(positions)
        for (_, idx), results in zip(groups, parts):
            out = _placed(out, idx, results)
        return out  # type: ignore[return-value]  # (every slot filled)

    def choose(self, positions: Sequence[Position], seeds: Sequence[int]) -> list[Decision]:
        results = self.search(positions, seeds)
        return [self.decide(r, seed, pos.pills_used) for r, seed, pos in zip(results, seeds, positions)]

    def decide(self, result: SearchResult, seed: int, pills_used: int) -> Decision:
        """The move of a finished search: random with probability epsilon, sampled from the target
        sharpened by 1 / temperature early in a game, else the search's best. A fast search's
        decision (`is_full` false) is always its best move, not recorded."""
        if not self.is_full(seed):
            return Decision(result.best, result, recorded=False)
        move = result.best
        rng = np.random.default_rng([seed, 2])
        if self.epsilon > 0 and rng.random() < self.epsilon:
            move = result.moves[rng.integers(len(result.moves))]
        elif self.temperature > 0 and pills_used < self.temperature_moves:
            weights = np.array([result.target[m] for m in result.moves], np.float64) ** (1 / self.temperature)
            move = result.moves[rng.choice(len(weights), p=weights / weights.sum())]
        return Decision(move, result)


class PolicyAgent:
    """The network's move output alone: the most probable legal placement (no search; a same-colour
    pill's placement weighed by both its slots, `rules.placement_mass`)."""

    def __init__(self, evaluator: Evaluator, name: str = "policy") -> None:
        self.evaluator, self.name = evaluator, name

    def choose(self, positions: Sequence[Position], seeds: Sequence[int]) -> list[Decision]:
        cells = np.stack([p.cells for p in positions])
        pills = np.array([(p.pill.left, p.pill.right) for p in positions], np.uint8)
        previews = np.array([(p.preview.left, p.preview.right) if p.preview else (0, 0) for p in positions], np.uint8)
        legal = np.empty((len(positions), 4, K.WIDTH, K.HEIGHT), np.uint8)
        K.legal_masks_batch(cells, pills, legal)
        for i, pos in enumerate(positions):
            timed = legal_mask_of(pos)  # NES timing: the reachable moves only
            if timed is not None:
                legal[i] = timed
        pred = self.evaluator.evaluate(cells, pills, previews)
        same = pills[:, 0] == pills[:, 1]  # a same-colour pill's placement is planes r and r + 2 together
        mass = placement_mass(np.where(legal > 0, pred.moves, 0.0), same)
        scores = np.where(placement_mass(legal, same) > 0, mass, -1.0).reshape(len(positions), -1)
        moves = np.unravel_index(scores.argmax(axis=1), (4, K.WIDTH, K.HEIGHT))
        return [Decision(Move(int(r), int(x), int(y))) for r, x, y in zip(*moves)]


class RescueAgent:
    """A learner whose stalled stretches its teacher plays: a position that has gone `after` pills
    without clearing a virus (`Position.stall`) is the teacher's to move, until a virus is cleared
    and the learner takes over again (roll-in learner, roll-out teacher, as in DAgger's relatives).

    Why: the network's search can stall in end games it cannot finish (one virus left under pill
    halves of other colours); there every move looks alike to its value, so self-play alone never
    shows it the way out. With a rescue those games still end, and the teacher's moves out of the
    stall and the game's real outcome enter the examples.
    """

    def __init__(self, learner: Agent, teacher: Agent, after: int) -> None:
        if after < 1:
            raise ValueError(f"after must be at least 1 pill, got {after}")
        self.learner, self.teacher, self.after = learner, teacher, after
        self.name = learner.name

    def choose(self, positions: Sequence[Position], seeds: Sequence[int]) -> list[Decision]:
        stalled = [p.stall >= self.after for p in positions]
        out: list[Decision | None] = [None] * len(positions)
        for agent, mine in ((self.learner, False), (self.teacher, True)):
            idx = [i for i, s in enumerate(stalled) if s == mine]
            if idx:
                for i, d in zip(idx, agent.choose([positions[i] for i in idx], [seeds[i] for i in idx])):
                    out[i] = d
        return out  # type: ignore[return-value]  # (every slot filled above)
