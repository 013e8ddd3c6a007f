"""Players for the arena and self-play (`lockstep.play_lockstep` drives them).

An agent chooses moves for a batch of positions in one call (so a network or a search can batch
its work across games). Agents see a `Position` (the board, the pill, the NES preview of the next
one, the stall counter), never the pills after the preview.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

import numpy as np

from drmario.engine import kernels as K
from drmario.engine.board import Move
from drmario.search.heuristics import greedy_move
from drmario.search.searcher import Evaluator, Position, SearchConfig, Searcher, SearchResult


class Decision(NamedTuple):
    move: Move
    target: np.ndarray | None = None  # float32[4, 8, 16] moves target, for training examples
    value: float = float("nan")  # the agent's estimate of the position (search utility)


class Agent(Protocol):
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
            n = K.legal_moves_into(pos.cells, int(pos.pill.left), int(pos.pill.right), moves)
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
            j = greedy_move(pos.cells, int(pos.pill.left), int(pos.pill.right), state, moves)
            out.append(Decision(Move(*moves[j].tolist())))
        return out


class SearchAgent:
    """MCTS: round 0 (rollouts) or round N (with an evaluator, i.e. a network).

    temperature > 0 samples the move from the target sharpened by 1/temperature for the first
    `temperature_moves` pills of a game (exploration in self-play); otherwise the search's best.
    """

    def __init__(
        self,
        config: SearchConfig,
        evaluator: Evaluator | None = None,
        *,
        temperature: float = 0.0,
        temperature_moves: int = 0,
        name: str | None = None,
    ) -> None:
        self.config, self.evaluator = config, evaluator
        self.temperature, self.temperature_moves = temperature, temperature_moves
        self.name = name or ("mcts-round0" if config.mode == "round0" else f"mcts-{config.mode}")
        self._searcher: Searcher | None = None

    def search(self, positions: Sequence[Position], seeds: Sequence[int]) -> list[SearchResult]:
        if self._searcher is None or len(self._searcher.forest.root) < len(positions):
            self._searcher = Searcher(self.config, self.evaluator, games=len(positions))
        return self._searcher.search(list(positions), list(seeds))

    def choose(self, positions: Sequence[Position], seeds: Sequence[int]) -> list[Decision]:
        results = self.search(positions, seeds)
        return [self.decide(r, seed, pos.pills_used) for r, seed, pos in zip(results, seeds, positions)]

    def decide(self, result: SearchResult, seed: int, pills_used: int) -> Decision:
        """The move of a finished search: sampled from the target sharpened by 1 / temperature
        early in a game, else the search's best."""
        move = result.best
        if self.temperature > 0 and pills_used < self.temperature_moves:
            weights = np.array([result.target[m] for m in result.moves], np.float64) ** (1 / self.temperature)
            rng = np.random.default_rng([seed, 2])
            move = result.moves[rng.choice(len(weights), p=weights / weights.sum())]
        return Decision(move, result.target, result.root_value)


class PolicyAgent:
    """The network's move output alone: the most probable legal move (no search)."""

    def __init__(self, evaluator: Evaluator, name: str = "policy") -> None:
        self.evaluator, self.name = evaluator, name

    def choose(self, positions: Sequence[Position], seeds: Sequence[int]) -> list[Decision]:
        cells = np.stack([p.cells for p in positions])
        pills = np.array([(p.pill.left, p.pill.right) for p in positions], np.uint8)
        legal = np.empty((len(positions), 4, K.WIDTH, K.HEIGHT), np.uint8)
        K.legal_masks_batch(cells, pills, legal)
        pred = self.evaluator.evaluate(cells, pills)
        scores = np.where(legal > 0, pred.moves, -1.0).reshape(len(positions), -1)
        out = []
        for i, pos in enumerate(positions):
            r, x, y = np.unravel_index(int(np.argmax(scores[i])), (4, K.WIDTH, K.HEIGHT))
            if pos.pill.same_colour:
                r %= 2
            out.append(Decision(Move(int(r), int(x), int(y)), None, float(pred.won[i])))
        return out
