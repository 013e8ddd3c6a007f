"""The search's utility and its rollouts (compiled).

Utility: one scale in [0, 1] for every search, **outcome first** - any
win is worth more than any top-out. A game that ends (or is cut off) p pills after the root, having
cleared c of the root's V viruses, with survival s = p / (p + P), is worth

- a win:        win_floor + (1 - win_floor) * (1 - s)    (fewer pills is better)
- otherwise:    topout_ceiling * (c + s) / (V + 1)       (more cleared, then longer survival)

with topout_ceiling < win_floor (defaults 0.5 and 0.6, P = 20). A top-out, a stalemate and a
rollout cut off by the horizon all take the second form: none of them is a win. The option
**discounted** (the value idea of seed note 002) is gamma ** p for a win and 0 otherwise. With a
network, the utility is its expectation under the predicted P(win) = (won + 1) / 2, predicted
viruses cleared and pills to the end (`expected_utility`).

The utility's numbers travel as one float64 array (`utility_params`) so that every compiled caller
takes the same settings.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from drmario.engine import kernels as K
from drmario.engine.kernels import RUNNING, STALEMATE, TOPPED_OUT, WON
from drmario.search.expert import expert_scores
from drmario.search.heuristics import contact_scores

N_PILLS = 9
OUTCOME, DISCOUNTED = 0, 1  # utility kinds
RANDOM, GREEDY, EXPERT = 0, 1, 2  # rollout policies
POLICIES = {"random": RANDOM, "greedy": GREEDY, "expert": EXPERT}


def utility_params(
    kind: str = "outcome",
    win_floor: float = 0.6,
    topout_ceiling: float = 0.5,
    pill_scale: float = 20.0,
    gamma: float = 0.98,
) -> np.ndarray:
    """float64[5]: the utility's settings in the order the compiled functions read them."""
    if kind not in ("outcome", "discounted"):
        raise ValueError(f"utility must be 'outcome' or 'discounted', got {kind!r}")
    if not 0 <= topout_ceiling < win_floor <= 1:
        raise ValueError(f"need 0 <= topout_ceiling < win_floor <= 1, got {topout_ceiling}, {win_floor}")
    return np.array([OUTCOME if kind == "outcome" else DISCOUNTED, win_floor, topout_ceiling, pill_scale, gamma])


@njit(cache=True, inline="always")
def _win_value(up, pills):
    if up[0] == DISCOUNTED:
        return up[4] ** pills
    return up[1] + (1.0 - up[1]) * (1.0 - pills / (pills + up[3]))


@njit(cache=True, inline="always")
def _failure_value(up, cleared, pills, root_left):
    if up[0] == DISCOUNTED:
        return 0.0
    return up[2] * (cleared + pills / (pills + up[3])) / (root_left + 1.0)


@njit(cache=True, inline="always")
def utility(up, cleared, pills, outcome, root_left):
    """Value of a finished (or horizon-cut) game: cleared viruses and pills counted from the root."""
    if outcome == WON:
        return _win_value(up, pills)
    return _failure_value(up, cleared, pills, root_left)


@njit(cache=True, inline="always")
def expected_utility(up, cleared, pills, p_win, root_left):
    """The utility with the game's end uncertain: p_win the probability it ends in a win (the
    network's won output mapped from [-1, 1] to [0, 1]); cleared and pills its predicted totals."""
    return p_win * _win_value(up, pills) + (1.0 - p_win) * _failure_value(up, cleared, pills, root_left)


@njit(cache=True)
def rollout(board, first_pill, left, stall, stall_limit, horizon, policy, weights, pill_cdf, state, moves, scores):
    """Play from board (modified in place) until the game ends or `horizon` pills are placed.

    The first pill is `first_pill` (0..8), later ones are drawn from pill_cdf (float64[9]).
    policy RANDOM: uniformly random legal placements; GREEDY: the best `contact_scores`; EXPERT: the
    best placement by the expert's evaluation with the expert weights (depth 1: a rollout's next
    pill is not known ahead); ties at random. Returns (outcome, viruses cleared, pills placed);
    outcome RUNNING when the horizon cut it.
    """
    cleared = 0
    used = 0
    pill = first_pill
    while used < horizon:
        if pill < 0:
            u = K.rand_below(state, 1 << 30) / float(1 << 30)
            pill = 0
            while pill < N_PILLS - 1 and u >= pill_cdf[pill]:
                pill += 1
        a, b = pill // 3 + 1, pill % 3 + 1
        pill = -1
        n = K.legal_moves_into(board, a, b, moves)
        if n == 0:
            return TOPPED_OUT, cleared, used
        if policy == GREEDY:
            contact_scores(board, a, b, moves, n, scores)
            j = K.argmax_ties(scores, n, state)
        elif policy == EXPERT:
            expert_scores(board, a, b, 0, 0, weights, moves, scores)
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
        if stall_limit > 0 and stall >= stall_limit:
            return STALEMATE, cleared, used
    return RUNNING, cleared, used
