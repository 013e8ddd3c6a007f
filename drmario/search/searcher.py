"""MCTS with chance nodes for the next pill, over many games in lockstep.

Round 0 (``mode="round0"``): every root placement is evaluated with rollouts, then UCT simulations
grow the tree, each ending in a rollout (random legal placements, or ``rollout_policy="greedy"``).
The moves target is proportional to each move's value, so no legal move gets probability 0.

Round N (``mode="puct"`` or ``"gumbel"``): leaves are evaluated by an `Evaluator` (a network, in
one batched call for the leaves of all games), priors are its move output masked to legal moves and
renormalised, with Dirichlet noise at the root; the target is the root's visit fractions. Gumbel
root selection with sequential halving suits few simulations; its target is the improved policy
softmax(logits + sigma(completed Q)).

Utility (`playouts`): outcome first, or discounted success; the numbers are settings.

The search sees a position (board, pill to place, stall counter, and the NES preview of the next
pill), never a game's later pills. With ``use_preview`` (the default) the preview resolves the
root's chance nodes; every later pill is a chance node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol

import numpy as np
from numba import njit

from drmario.engine import kernels as K
from drmario.engine.board import Move, Pill
from drmario.engine.game import Game
from drmario.engine.rules import MOVES_SHAPE, symmetrize
from drmario.search import expert, mcts
from drmario.search.playouts import POLICIES, rollout, utility_params
from drmario.settings import Settings, setting

Mode = Literal["round0", "expert", "puct", "gumbel"]
NO_NETWORK = ("round0", "expert")  # the modes that need no evaluator


class Position(NamedTuple):
    """What a player may know: the board, the pill to place, the stall rule's state (pills since a
    virus was last cleared, and the game's stall limit, None without a stall rule), the NES preview
    of the next pill, and how many pills the game has used."""

    cells: np.ndarray  # uint8[8, 16]
    pill: Pill
    stall: int = 0
    stall_limit: int | None = None
    preview: Pill | None = None
    pills_used: int = 0

    @classmethod
    def of(cls, game: Game) -> Position:
        return cls(game.board.cells, game.pill, game.stall, game.stall_limit, game.next_pill, game.pills_used)


@dataclass(frozen=True)
class SearchConfig(Settings):
    """Search settings; every field is recorded with the examples a search makes."""

    mode: Mode = setting(
        "round0", "round0: MCTS with rollouts; expert: the depth-2 heuristic search; puct or gumbel: with a network"
    )
    simulations: int = setting(200, "simulations per decision (round 0: after the root evaluation)", ge=0, le=10**6)
    pill_probs: tuple[float, ...] | None = setting(
        None, "probabilities of the 9 next pills (r, y, b order of the left then right half); None: uniform", ge=0
    )
    use_preview: bool = setting(True, "the known next pill (the NES preview) resolves the root's chance nodes")
    utility: Literal["outcome", "discounted"] = setting(
        "outcome", "outcome: any win beats any top-out; discounted: a win is worth gamma ** pills, a top-out 0"
    )
    win_floor: float = setting(0.6, "outcome utility: a win is worth at least this", gt=0, le=1)
    topout_ceiling: float = setting(0.5, "outcome utility: a top-out is worth at most this (< win_floor)", ge=0, lt=1)
    pill_scale: float = setting(20.0, "outcome utility: P of the survival share p / (p + P)", gt=0)
    gamma: float = setting(0.98, "discounted utility: a win p pills away is worth gamma ** p", gt=0, le=1)
    # round 0
    root_rollouts: int = setting(2, "round 0: rollouts per root placement before the simulations", ge=1, le=1000)
    rollout_policy: Literal["random", "greedy", "expert"] = setting(
        "random", "round 0: rollout moves: random, greedy (cheap contact scores) or expert (its depth-1 evaluation)"
    )
    horizon: int | None = setting(None, "round 0: rollout length cap in pills; None: to the end of the game", ge=1)
    c_uct: float = setting(1.0, "round 0: UCT exploration, on min-max normalised values", ge=0)
    target_power: float = setting(1.0, "round 0: the moves target is proportional to value ** target_power", ge=0)
    # expert
    expert_temperature: float = setting(
        0.0, "expert: the target is softmax(score / T) over the moves; 0: uniform over the tied best moves", ge=0
    )
    expert_weights: str | None = setting(None, "expert: a weights JSON (bench/tune_expert.py); None: the tuned ones")
    # round N
    c_puct: float = setting(
        4.0, "PUCT exploration constant (4 beat 1.5 with the round-0 network, measured on training seeds)", ge=0
    )
    fpu_reduction: float = setting(0.0, "unvisited moves start at the parent's value minus this", ge=0)
    dirichlet_alpha: float = setting(0.3, "Dirichlet noise concentration at the root", gt=0)
    dirichlet_fraction: float = setting(0.25, "share of the Dirichlet noise in the root priors (0: none)", ge=0, le=1)
    gumbel_m: int = setting(16, "gumbel: root candidates for sequential halving", ge=1, le=512)
    gumbel_c_visit: float = setting(50.0, "gumbel: c_visit of sigma(q)", ge=0)
    gumbel_c_scale: float = setting(1.0, "gumbel: c_scale of sigma(q)", ge=0)

    def check(self) -> list[str]:
        problems = pill_probs_problems(self.pill_probs)
        if self.topout_ceiling >= self.win_floor:
            problems.append(f"topout_ceiling = {self.topout_ceiling}: expected < win_floor ({self.win_floor})")
        return problems

    @property
    def probs(self) -> np.ndarray:
        return pill_distribution(self.pill_probs)

    @property
    def utility_params(self) -> np.ndarray:
        """float64[5] for the compiled search (`playouts.utility_params`)."""
        return utility_params(self.utility, self.win_floor, self.topout_ceiling, self.pill_scale, self.gamma)


def expert_target(scores: np.ndarray, temperature: float) -> np.ndarray:
    """The expert's moves target from its scores float[n]: softmax(score / T), or at T = 0 the
    tied best moves (within 1e-9) sharing the mass equally."""
    if temperature > 0:
        w = np.exp((scores - scores.max()) / temperature)
    else:
        w = (scores >= scores.max() - 1e-9).astype(np.float64)
    return w / w.sum()


def pill_probs_problems(probs: Sequence[float] | None) -> list[str]:
    """The settings problem of a next-pill distribution (9 probabilities summing to 1, or None)."""
    if probs is not None and (len(probs) != 9 or abs(sum(probs) - 1) > 1e-6):
        return [f"pill_probs = {list(probs)}: expected 9 numbers >= 0 summing to 1 (or None: uniform)"]
    return []


def pill_distribution(probs: Sequence[float] | None) -> np.ndarray:
    """float64[9] probabilities of the next pill (pill index 3 * (left - 1) + right - 1); None: uniform."""
    return np.full(9, 1 / 9) if probs is None else np.asarray(probs, np.float64)


class Prediction(NamedTuple):
    """Evaluator outputs for N positions."""

    won: np.ndarray  # float32[N] in [-1, 1]
    cleared: np.ndarray  # float32[N] >= 0, viruses cleared from here to the end
    duration: np.ndarray  # float32[N] >= 0, pills from here to the end
    moves: np.ndarray  # float32[N, 4, 8, 16] move probabilities


class Evaluator(Protocol):
    """Evaluates the leaves of many games in one call."""

    def evaluate(self, cells: np.ndarray, pills: np.ndarray) -> Prediction:
        """cells uint8[N, 8, 16], pills uint8[N, 2] -> Prediction."""
        ...


@njit(cache=True)
def _rollout_batch(cells, pills, stall_limit, horizon, policy, weights, cdf, seeds, won, cleared, duration, moves_out):
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    scores = np.empty(K.MAX_MOVES)
    board = np.empty((K.WIDTH, K.HEIGHT), np.uint8)
    state = np.empty(1, np.uint64)
    for i in range(cells.shape[0]):
        board[:] = cells[i]
        state[0] = seeds[i]
        first = (pills[i, 0] - 1) * 3 + pills[i, 1] - 1
        outcome, c, p = rollout(
            board, first, K.count_viruses(cells[i]), 0, stall_limit, horizon, policy, weights, cdf, state, moves, scores
        )
        won[i] = 1.0 if outcome == K.WON else -1.0
        cleared[i], duration[i] = c, p
        K.legal_mask_into(cells[i], pills[i, 0], pills[i, 1], moves_out[i])


class RolloutEvaluator:
    """An `Evaluator` without a network: one rollout per position for the value, uniform priors
    over the legal moves. (Round 0 uses the same rollouts inside the compiled search.)

    Like a network it is a pure function of the position: each rollout is seeded by a hash of the
    board, the pill and `seed`, so results do not depend on how leaves are batched."""

    def __init__(
        self, stall_limit: int | None = 20, horizon: int | None = None, policy: str = "random", seed: int = 0
    ) -> None:
        self.stall_limit, self.horizon, self.policy = stall_limit or 0, horizon or 1 << 30, POLICIES[policy]
        self.weights = expert.load_weights()
        self._weights = np.random.default_rng([seed, 77]).integers(1, 2**63, 130, dtype=np.uint64) | np.uint64(1)

    def _seeds(self, cells: np.ndarray, pills: np.ndarray) -> np.ndarray:
        keys = np.concatenate([cells.reshape(len(cells), -1), pills], axis=1).astype(np.uint64) + np.uint64(1)
        with np.errstate(over="ignore"):
            return (keys * self._weights).sum(axis=1, dtype=np.uint64) | np.uint64(1)

    def evaluate(self, cells: np.ndarray, pills: np.ndarray) -> Prediction:
        n = len(cells)
        won, cleared, duration = (np.zeros(n, np.float32) for _ in range(3))
        legal = np.zeros((n, *MOVES_SHAPE), np.uint8)
        seeds = self._seeds(cells, pills)
        _rollout_batch(
            np.ascontiguousarray(cells),
            np.ascontiguousarray(pills),
            self.stall_limit,
            self.horizon,
            self.policy,
            self.weights,
            np.cumsum(np.full(9, 1 / 9)),
            seeds,
            won,
            cleared,
            duration,
            legal,
        )
        moves = legal.astype(np.float32)
        moves /= np.maximum(moves.sum(axis=(1, 2, 3), keepdims=True), 1)
        return Prediction(won, cleared, duration, moves)


@dataclass
class SearchResult:
    """The root of one search. n = legal moves."""

    pill: Pill
    moves: list[Move]  # the legal moves (canonical r for same-colour pills)
    prior: np.ndarray  # float64[n] (round 0: uniform)
    visits: np.ndarray  # float64[n] visits of each move
    value: np.ndarray  # float64[n] utility of each move (NaN if never visited)
    target: np.ndarray  # float32[4, 8, 16] the moves training target
    best: Move  # the move the search plays at temperature 0
    simulations: int  # simulations run (root evaluations not counted)

    @property
    def root_value(self) -> float:
        visited = self.visits > 0
        return float(np.sum(self.value[visited] * self.visits[visited]) / max(self.visits[visited].sum(), 1))

    def table(self):
        """The root moves as a pandas DataFrame (r, x, y, prior, visits, value, target)."""
        import pandas as pd

        r, x, y = (np.array([m[i] for m in self.moves], int) for i in range(3))
        target = self.target[r, x, y] * (2 if self.pill.same_colour else 1)  # mass of r and r + 2
        return pd.DataFrame(
            {"r": r, "x": x, "y": y, "prior": self.prior, "visits": self.visits, "value": self.value, "target": target}
        )


class Searcher:
    """Runs searches for up to `games` positions at once, sharing one pool of tree nodes.

    >>> searcher = Searcher(SearchConfig(simulations=50))
    >>> [result] = searcher.search([Position.of(Game(1234, 5))], seeds=[7])
    """

    def __init__(self, config: SearchConfig, evaluator: Evaluator | None = None, games: int = 1) -> None:
        if config.mode not in NO_NETWORK and evaluator is None:
            raise ValueError(f"search mode {config.mode!r} needs an evaluator (a network)")
        self.config, self.evaluator = config, evaluator
        self.forest = mcts.new_forest(games, 1024, 16384, 1024)
        self.forest.weights[:] = expert.load_weights(config.expert_weights)
        self._probs = config.probs
        self.evaluations = 0
        self._expert_results: list[SearchResult] = []

    def _reserve(self, decisions: int, edges: int, chances: int) -> None:
        """Grow the pools so that this many more nodes and edges fit."""
        used = self.forest.used
        sizes = mcts.pool_sizes(self.forest)
        need = (int(used[0]) + decisions, int(used[1]) + edges, int(used[2]) + chances)
        if any(n > s for n, s in zip(need, sizes)):
            self.forest = mcts.grow(self.forest, *(max(n, 2 * s) if n > s else s for n, s in zip(need, sizes)))

    def search(self, positions: list[Position], seeds: list[int]) -> list[SearchResult]:
        """Search each position (at most `games`); seeds make each search reproducible on its own."""
        self.start(positions, seeds)
        while not self.done:
            batch = self.leaves()
            if batch is not None:
                assert self.evaluator is not None  # round 0 is done after start(); others need one (__init__)
                self.finish(self.evaluator.evaluate(*batch))
        return self.results()

    # The same search in steps, for callers that overlap the evaluation of one group of games with
    # the tree work of another: start, then until done: leaves -> evaluate -> finish; then results.

    def start(self, positions: list[Position], seeds: list[int]) -> None:
        """Set up the roots. Round 0 runs its whole search here (it needs no evaluator)."""
        cfg, g = self.config, len(positions)
        if g > len(self.forest.root):
            self.forest = mcts.new_forest(g, *mcts.pool_sizes(self.forest))
        games = len(self.forest.root)
        active = np.zeros(games, np.bool_)
        active[:g] = True
        cells = np.zeros((games, K.WIDTH, K.HEIGHT), np.uint8)
        pills = np.ones((games, 2), np.uint8)
        stalls = np.zeros(games, np.int16)
        previews = np.full(games, -1, np.int8)
        limits = {pos.stall_limit for pos in positions}
        if len(limits) > 1:
            raise ValueError(f"positions searched together must share the stall rule, got stall limits {limits}")
        for i, pos in enumerate(positions):
            if K.spawn_blocked(pos.cells):
                raise ValueError(f"position {i}: a spawn cell is occupied, so there is no move to search")
            cells[i], pills[i], stalls[i] = pos.cells, (pos.pill.left, pos.pill.right), pos.stall
            if cfg.use_preview and pos.preview is not None:
                previews[i] = pos.preview.number
        seed_array = np.zeros(games, np.uint64)
        seed_array[:g] = np.asarray(seeds, np.uint64)
        self._reserve(games, 0, 0)
        self.forest.uparams[:] = cfg.utility_params
        mcts.set_roots(self.forest, active, cells, pills, previews, stalls, seed_array)
        self._active, self._seeds, self._n = active, seed_array, g
        self._stall_limit = (positions[0].stall_limit or 0) if positions else 0
        self._mode = {"round0": mcts.UCT, "expert": mcts.UCT, "puct": mcts.PUCT, "gumbel": mcts.GUMBEL}[cfg.mode]
        self._steps_done = -1  # the first step evaluates the roots
        if cfg.mode == "expert":
            self._expert_results = [self._expert(pos, seed) for pos, seed in zip(positions, seeds)]
            self._steps_done = cfg.simulations
        elif cfg.mode == "round0":
            self._round0(active, self._stall_limit)
            self._steps_done = cfg.simulations

    @property
    def done(self) -> bool:
        return self._steps_done >= self.config.simulations

    def leaves(self) -> tuple[np.ndarray, np.ndarray] | None:
        """One simulation step's selection: the leaf positions to evaluate, (cells uint8[P, 8, 16],
        pills uint8[P, 2]), or None when every game's simulation ended in a finished game."""
        cfg, games = self.config, len(self._active)
        self._reserve(games, games * K.MAX_MOVES, games)
        f = self.forest
        pending = mcts.select(
            f,
            self._active,
            self._mode,
            cfg.c_puct,
            cfg.fpu_reduction,
            cfg.gumbel_c_visit,
            cfg.gumbel_c_scale,
            self._stall_limit,
            self._probs,
        )
        if pending == 0:
            self._advance()
            return None
        leaves = f.leaf[f.leaf >= 0]
        return f.d_cells[leaves], f.d_pill[leaves]

    def finish(self, pred: Prediction) -> None:
        """Expand the leaves of the last `leaves` call with the evaluator's outputs, back up."""
        self.evaluations += len(pred.won)
        mcts.expand_and_backup(
            self.forest,
            np.asarray(pred.won, np.float32),
            np.asarray(pred.cleared, np.float32),
            np.asarray(pred.duration, np.float32),
            np.ascontiguousarray(pred.moves, np.float32),
        )
        self._advance()

    def results(self) -> list[SearchResult]:
        if self.config.mode == "expert":
            return self._expert_results
        return [self._result(i) for i in range(self._n)]

    def _expert(self, pos: Position, seed: int) -> SearchResult:
        """The expert's search of one position: every move's score (depth 2 over the preview when
        it is known and used), the best move (seeded ties), and a sharp target (`expert_target`)."""
        cfg = self.config
        moves = np.empty((K.MAX_MOVES, 3), np.int8)
        scores = np.empty(K.MAX_MOVES)
        known = cfg.use_preview and pos.preview is not None
        pa, pb = (int(pos.preview.left), int(pos.preview.right)) if known else (0, 0)  # type: ignore[union-attr]
        a, b = int(pos.pill.left), int(pos.pill.right)
        n = expert.expert_scores(pos.cells, a, b, pa, pb, self.forest.weights, moves, scores)
        best = K.argmax_ties(scores, n, np.array([seed | 1], np.uint64))
        rows = moves[:n].astype(np.intp)
        dense = np.zeros(MOVES_SHAPE, np.float32)
        dense[rows[:, 0], rows[:, 1], rows[:, 2]] = expert_target(scores[:n], cfg.expert_temperature)
        move_list = [Move(*m) for m in moves[:n].tolist()]
        return SearchResult(
            pill=pos.pill,
            moves=move_list,
            prior=np.full(n, 1.0 / n),
            visits=np.zeros(n),
            value=scores[:n].copy(),
            target=symmetrize(dense, pos.pill.same_colour),
            best=move_list[best],
            simulations=0,
        )

    def _advance(self) -> None:
        if self._steps_done == -1:
            self._prepare_roots()
        self._steps_done += 1

    def _round0(self, active: np.ndarray, stall_limit: int) -> None:
        cfg, games = self.config, len(active)
        horizon, policy = cfg.horizon or 1 << 30, POLICIES[cfg.rollout_policy]
        self._reserve(0, games * K.MAX_MOVES, games * K.MAX_MOVES)
        mcts.round0_root(self.forest, active, cfg.root_rollouts, stall_limit, horizon, policy, self._probs)
        chunk = 16  # simulations per compiled call; each adds at most one node of each kind
        for done in range(0, cfg.simulations, chunk):
            n = min(chunk, cfg.simulations - done)
            self._reserve(games * n, games * n * K.MAX_MOVES, games * n)
            mcts.round0_simulate(self.forest, active, n, cfg.c_uct, stall_limit, horizon, policy, self._probs)

    def _prepare_roots(self) -> None:
        """After the roots' evaluation: Dirichlet noise on their priors, or the Gumbel candidates."""
        cfg, f, active, seeds = self.config, self.forest, self._active, self._seeds
        for g in np.nonzero(active)[0]:
            start, n = f.d_edge_start[f.root[g]], f.d_edge_count[f.root[g]]
            rng = np.random.default_rng([int(seeds[g]), 1])
            priors = f.e_prior[start : start + n]
            if cfg.mode == "gumbel":
                gumbel = rng.gumbel(size=n)
                f.e_logit[start : start + n] = np.log(np.maximum(priors, 1e-12)) + gumbel
            elif cfg.dirichlet_fraction > 0 and n > 1:
                noise = rng.dirichlet(np.full(n, cfg.dirichlet_alpha))
                priors[:] = (1 - cfg.dirichlet_fraction) * priors + cfg.dirichlet_fraction * noise
        if cfg.mode == "gumbel":
            mcts.start_gumbel(f, active, cfg.gumbel_m, cfg.simulations)

    def _result(self, g: int) -> SearchResult:
        cfg, f = self.config, self.forest
        moves_buf = np.empty((K.MAX_MOVES, 3), np.int8)
        stats = np.empty((K.MAX_MOVES, 3))
        n = mcts.root_table(f, g, self._probs, moves_buf, stats)
        moves = [Move(*m) for m in moves_buf[:n].tolist()]
        prior, visits, value = stats[:n, 0].copy(), stats[:n, 1].copy(), stats[:n, 2].copy()
        pill = Pill.from_number(3 * (int(f.d_pill[f.root[g], 0]) - 1) + int(f.d_pill[f.root[g], 1]) - 1)
        if cfg.mode == "round0":
            weights = np.maximum(np.nan_to_num(value, nan=0.0), 1e-6) ** cfg.target_power
            best = int(np.argmax(np.nan_to_num(value, nan=-1.0)))
        elif cfg.mode == "puct":
            weights = visits
            best = int(np.argmax(visits + 1e-6 * np.nan_to_num(value, nan=0.0)))  # value breaks ties
        else:
            weights, best = self._gumbel_policy(g, prior, visits, value)
        probs = weights / weights.sum()
        dense = np.zeros(MOVES_SHAPE, np.float32)
        r, x, y = moves_buf[:n].T.astype(np.intp)
        dense[r, x, y] = probs
        return SearchResult(
            pill=pill,
            moves=moves,
            prior=prior,
            visits=visits,
            value=value,
            target=symmetrize(dense, pill.same_colour),
            best=moves[best],
            simulations=cfg.simulations,
        )

    def _gumbel_policy(self, g: int, prior, visits, value) -> tuple[np.ndarray, int]:
        """Improved policy softmax(logits + sigma(completed Q)); the action is the last candidate."""
        cfg, f = self.config, self.forest
        lo, hi = float(f.qmin[g]), float(f.qmax[g])
        visited = visits > 0
        root_value = np.sum(value[visited] * visits[visited]) / max(visits[visited].sum(), 1)
        q = np.where(visited, np.nan_to_num(value), root_value)
        q = (q - lo) / (hi - lo) if hi > lo else np.full_like(q, 0.5)
        sigma = (cfg.gumbel_c_visit + visits.max(initial=0)) * cfg.gumbel_c_scale * q
        logits = np.log(np.maximum(prior, 1e-12)) + sigma
        weights = np.exp(logits - logits.max())
        start = f.d_edge_start[f.root[g]]
        remaining = f.cand[g, : f.n_cand[g]] - start
        best = remaining[np.argmax(f.e_logit[start + remaining] + sigma[remaining])]
        return weights, int(best)


def search(
    position: Position | Game, config: SearchConfig, evaluator: Evaluator | None = None, seed: int = 0
) -> SearchResult:
    """Search one position (a convenience over `Searcher`)."""
    if isinstance(position, Game):
        position = Position.of(position)
    return Searcher(config, evaluator).search([position], [seed])[0]
