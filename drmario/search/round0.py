"""Round 0: MCTS without a network (design: every root placement evaluated, the tree grown by UCT,
rollouts to the end of the game or a horizon), and `RolloutEvaluator`, rollouts in the form of a
network for tests and experiments.

Every root placement is first evaluated with `root_rollouts` rollouts; then each simulation walks
the tree by UCT on min-max normalised values and ends in a rollout from a new placement or a new
outcome (next preview), or in a finished game. The moves target is proportional to each move's
value (``value ** target_power``), so no legal move gets probability 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numba import njit

from drmario.engine import kernels as K
from drmario.engine.kernels import RUNNING, WON
from drmario.engine.rules import MOVES_SHAPE
from drmario.search.core import Position, Prediction, SearchResult, pill_distribution
from drmario.search.playouts import POLICIES, new_scratch, rollout, rollouts
from drmario.search.tree import (
    MAX_DEPTH,
    UNEXPANDED,
    backup,
    chance_value,
    child,
    choose_outcome,
    expand,
    plant,
    reserve,
    result,
    root_moves,
    step_to,
    through_edge,
)
from drmario.search.utility import Utility, utility
from drmario.settings import Settings, setting


@dataclass(frozen=True)
class Round0Settings(Settings):
    """The settings only round 0 reads."""

    root_rollouts: int = setting(2, "rollouts per root placement before the simulations", ge=1, le=1000)
    rollout_policy: Literal["random", "greedy", "expert"] = setting(
        "random", "rollout moves: random, greedy (cheap contact scores) or expert (its depth-1 evaluation)"
    )
    horizon: int | None = setting(None, "rollout length cap in pills; None: to the end of the game", ge=1)
    c_uct: float = setting(1.0, "UCT exploration, on min-max normalised values", ge=0)
    target_power: float = setting(1.0, "the moves target is proportional to value ** target_power", ge=0)


@njit(cache=True)
def _uct_edge(t, g, d, c_uct, state):
    """UCT over min-max normalised values; unvisited edges first, in random order."""
    start, n = t.d_edge_start[d], t.d_edge_count[d]
    log_n = np.log(max(t.d_visits[d], 1))
    lo, hi = t.qmin[g], t.qmax[g]
    scores = np.empty(n)
    for j in range(n):
        e = start + j
        if t.e_visits[e] == 0:
            scores[j] = 1e6  # above a visited edge's at any usual c_uct; 1e20's ties argmax_ties' tolerance misses
        else:
            q = chance_value(t, t.e_chance[e])
            q = (q - lo) / (hi - lo) if hi > lo else 0.5
            scores[j] = q + c_uct * np.sqrt(log_n / t.e_visits[e])
    return start + K.argmax_ties(scores, n, state)


@njit(cache=True)
def _rollout_from(t, g, k, d, e, c, i, how, state, scratch):
    """Step k of game g's path goes from decision d through edge e (chance node c) to outcome i; a
    rollout plays on from there (c's pill, then preview i) and its value is backed up."""
    step_to(t, g, k, d, e, i)
    t.path_len[g] = k + 1
    board = scratch.board
    board[:] = t.c_cells[c]
    pill, left, stall = np.int64(t.c_pill[c]), np.int64(t.c_left[c]), np.int64(t.c_stall[c])  # as `_rollout_batch`'s
    outcome, cleared, pills = rollout(board, pill, np.int64(i), left, stall, how, state, scratch)
    value = utility(t.uparams, t.c_cleared[c] + cleared, t.c_pills[c] + pills, outcome, t.root_left[g], t.root_pills[g])
    backup(t, g, value)


@njit(cache=True)
def _visit_edge(t, g, k, d, e, how, state, scratch):
    """Step k: through edge e of decision d (placed if new), then a rollout through a chosen outcome,
    or the finished game's value."""
    c = through_edge(t, g, k, d, e)
    if c >= 0:
        _rollout_from(t, g, k, d, e, c, choose_outcome(t, c, state), how, state, scratch)


@njit(cache=True)
def evaluate_root(t, active, per_edge, how):
    """Expand each active root and evaluate every placement with per_edge rollouts."""
    scratch = new_scratch()
    for g in range(len(active)):
        if not active[g]:
            continue
        state = t.rng[g : g + 1]
        root = np.int64(t.root[g])
        if t.d_edge_count[root] == UNEXPANDED:
            expand(t, root, scratch.moves)
        start, n = t.d_edge_start[root], t.d_edge_count[root]
        for e in range(start, start + n):
            for _ in range(per_edge):
                _visit_edge(t, g, np.int64(0), root, e, how, state, scratch)


@njit(cache=True)
def simulate(t, active, sims, c_uct, how):
    """`sims` UCT simulations per active game, each ending in a rollout from a new placement or
    outcome (or in a finished game); each adds at most one decision node (with its edges) and one
    chance node to the pools."""
    scratch = new_scratch()
    for g in range(len(active)):
        if not active[g]:
            continue
        state = t.rng[g : g + 1]
        for _ in range(sims):
            d, depth = np.int64(t.root[g]), np.int64(0)
            while True:
                if t.d_edge_count[d] == UNEXPANDED:
                    expand(t, d, scratch.moves)
                e = _uct_edge(t, g, d, c_uct, state)
                c = np.int64(t.e_chance[e])
                if c < 0 or t.c_outcome[c] != RUNNING or depth == MAX_DEPTH:
                    _visit_edge(t, g, depth, d, e, how, state, scratch)
                    break
                i = choose_outcome(t, c, state)
                if t.c_child[c, i] < 0 and t.c_visits[c, i] == 0:  # a new outcome: a rollout from it
                    _rollout_from(t, g, depth, d, e, c, i, how, state, scratch)
                    break
                step_to(t, g, depth, d, e, i)
                d = child(t, c, i)
                depth += 1


def round0_search(
    positions: Sequence[Position],
    seeds: Sequence[int],
    *,
    simulations: int = 200,
    utility: Utility | None = None,
    pill_probs: Sequence[float] | None = None,
    root_rollouts: int = 2,
    rollout_policy: str = "random",
    horizon: int | None = None,
    c_uct: float = 1.0,
    target_power: float = 1.0,
) -> list[SearchResult]:
    """Round-0 MCTS of each position (module docstring); seeds make each search reproducible on
    its own. The target is proportional to value ** target_power; the best move has the highest
    value."""
    probs = pill_distribution(pill_probs)
    params = (utility or Utility()).params
    g = len(positions)
    tree = plant(positions, seeds, params, probs, (g * (simulations + 1), g * K.MAX_MOVES, g * K.MAX_MOVES))
    stall_limit = positions[0].stall_limit if positions else None
    how = rollouts(rollout_policy, horizon, stall_limit, probs)
    active = np.ones(g, np.bool_)
    tree = reserve(tree, 0, g * K.MAX_MOVES, g * K.MAX_MOVES)
    evaluate_root(tree, active, root_rollouts, how)
    chunk = 16  # simulations per compiled call; each adds at most one node of each kind
    for done in range(0, simulations, chunk):
        n = min(chunk, simulations - done)
        tree = reserve(tree, g * n, g * n * K.MAX_MOVES, g * n)
        simulate(tree, active, n, c_uct, how)
    out = []
    for k, pos in enumerate(positions):
        _, stats = root_moves(tree, k)
        value = np.nan_to_num(stats[:, 2], nan=0.0)
        weights = np.maximum(value, 1e-6) ** target_power
        best = int(np.argmax(np.nan_to_num(stats[:, 2], nan=-1.0)))
        out.append(result(tree, k, pos.pill, weights, best, simulations))
    return out


@njit(cache=True)
def _rollout_batch(cells, pills, previews, how, seeds, won, cleared, duration, legal):
    scratch = new_scratch()
    state = np.empty(1, np.uint64)
    for i in range(cells.shape[0]):
        board = scratch.board
        board[:] = cells[i]
        state[0] = seeds[i]
        pill = (pills[i, 0] - 1) * 3 + pills[i, 1] - 1
        preview = (previews[i, 0] - 1) * 3 + previews[i, 1] - 1 if previews[i, 0] > 0 else -1
        left, stall = np.int64(K.count_viruses(cells[i])), np.int64(0)
        outcome, c, p = rollout(board, np.int64(pill), np.int64(preview), left, stall, how, state, scratch)
        won[i] = 1.0 if outcome == WON else -1.0
        cleared[i], duration[i] = c, p
        K.legal_mask_into(cells[i], pills[i, 0], pills[i, 1], legal[i])


class RolloutEvaluator:
    """An `Evaluator` without a network: one rollout per position for the value (its pill, its
    preview, then random pills), uniform priors over the legal moves.

    Like a network it is a pure function of the position: each rollout is seeded by a hash of the
    board, the pills and `seed`, so results do not depend on how leaves are batched."""

    def __init__(
        self, stall_limit: int | None = 20, horizon: int | None = None, policy: str = "random", seed: int = 0
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
        self.how = rollouts(policy, horizon, stall_limit, pill_distribution(None))
        self._weights = np.random.default_rng([seed, 77]).integers(1, 2**63, 132, dtype=np.uint64) | np.uint64(1)

    def _seeds(self, cells: np.ndarray, pills: np.ndarray, previews: np.ndarray) -> np.ndarray:
        keys = np.concatenate([cells.reshape(len(cells), -1), pills, previews], axis=1).astype(np.uint64) + np.uint64(1)
        with np.errstate(over="ignore"):
            return (keys * self._weights).sum(axis=1, dtype=np.uint64) | np.uint64(1)

    def evaluate(self, cells: np.ndarray, pills: np.ndarray, previews: np.ndarray) -> Prediction:
        n = len(cells)
        cells, pills = np.ascontiguousarray(cells, np.uint8), np.ascontiguousarray(pills, np.uint8)
        previews = np.ascontiguousarray(previews, np.uint8)
        won, cleared, duration = (np.zeros(n, np.float32) for _ in range(3))
        legal = np.zeros((n, *MOVES_SHAPE), np.uint8)
        _rollout_batch(
            cells, pills, previews, self.how, self._seeds(cells, pills, previews), won, cleared, duration, legal
        )
        moves = legal.astype(np.float32)
        moves /= np.maximum(moves.sum(axis=(1, 2, 3), keepdims=True), 1)
        return Prediction(won, cleared, duration, moves)
