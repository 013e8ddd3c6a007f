"""Rollouts: a game played on from a board by a cheap policy (compiled), the round-0 search's
leaf evaluation.

The settings of the rollouts travel as one `Rollouts` tuple and their working memory as one
`Scratch` tuple (numba takes named tuples), so the compiled callers pass two names, not ten.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from drmario.engine import kernels as K
from drmario.engine.kernels import RUNNING, STALEMATE, TOPPED_OUT, WON
from drmario.search.core import N_PILLS
from drmario.search.expert import depth1_scores_into, load_weights
from drmario.search.heuristics import contact_scores

RANDOM, GREEDY, EXPERT = 0, 1, 2  # rollout policies
POLICIES = {"random": RANDOM, "greedy": GREEDY, "expert": EXPERT}


class Rollouts(NamedTuple):
    """How rollouts play: the policy (RANDOM, GREEDY or EXPERT), the horizon in pills, the stall
    limit (0: none), the expert's weights (its policy) and the CDF of the next pill."""

    policy: int
    horizon: int
    stall_limit: int
    weights: np.ndarray  # float64[F]
    cdf: np.ndarray  # float64[9]


class Scratch(NamedTuple):
    """Working memory of a rollout: legal moves, their scores, and a board."""

    moves: np.ndarray  # int8[MAX_MOVES, 3]
    scores: np.ndarray  # float64[MAX_MOVES]
    board: np.ndarray  # uint8[8, 16]


def rollouts(policy: str, horizon: int | None, stall_limit: int | None, probs: np.ndarray) -> Rollouts:
    """The `Rollouts` of settings: a policy name, a horizon (None: to the end), a stall limit (None:
    none) and the next pill's probabilities float[9]."""
    weights = load_weights() if policy == "expert" else np.zeros(1)
    return Rollouts(POLICIES[policy], horizon or 1 << 30, stall_limit or 0, weights, np.cumsum(probs))


@njit(cache=True)
def new_scratch():
    return Scratch(np.empty((K.MAX_MOVES, 3), np.int8), np.empty(K.MAX_MOVES), np.empty((K.WIDTH, K.HEIGHT), np.uint8))


@njit(cache=True)
def rollout(board, pill, preview, left, stall, how, state, scratch):
    """Play from board (modified in place) until the game ends or `how.horizon` pills are placed.

    The first pills are `pill` and `preview` (0..8; preview -1: unknown), later ones are drawn from
    how.cdf. how.policy RANDOM: uniformly random legal placements; GREEDY: the best `contact_scores`;
    EXPERT: the best placement by the expert's evaluation (depth 1); ties at random. Returns
    (outcome, viruses cleared, pills placed); outcome RUNNING when the horizon cut it.
    """
    moves, scores = scratch.moves, scratch.scores
    cleared = 0
    used = 0
    upcoming = preview
    while used < how.horizon:
        if pill < 0:
            u = K.rand_below(state, 1 << 30) / float(1 << 30)
            pill = 0
            while pill < N_PILLS - 1 and u >= how.cdf[pill]:
                pill += 1
        a, b = pill // 3 + 1, pill % 3 + 1
        pill, upcoming = upcoming, -1
        n = K.legal_moves_into(board, a, b, moves)
        if n == 0:
            return TOPPED_OUT, cleared, used
        if how.policy == GREEDY:
            contact_scores(board, a, b, moves, n, scores)
            j = K.argmax_ties(scores, n, state)
        elif how.policy == EXPERT:
            depth1_scores_into(board, a, b, how.weights, moves, scores)
            j = K.argmax_ties(scores, n, state)
        else:
            j = K.rand_below(state, n)
        v, _, _ = K.place_and_resolve(board, a, b, moves[j, 0], moves[j, 1], moves[j, 2])
        used += 1
        cleared += v
        left -= v
        stall = 0 if v > 0 else stall + 1
        if left == 0:
            return WON, cleared, used
        if K.spawn_blocked(board):
            return TOPPED_OUT, cleared, used
        if how.stall_limit > 0 and stall >= how.stall_limit:
            return STALEMATE, cleared, used
    return RUNNING, cleared, used
