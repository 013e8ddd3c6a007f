"""Compiled heuristic players: the one-ply greedy baseline and its cheap scores (a rollout policy).

Boards, pills and moves as in `engine.kernels`: cells uint8[8, 16], a pill's colours (a, b) as
spawned, moves int8[n, 3] rows (r, x, y).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from drmario.engine import kernels as K


@njit(cache=True, inline="always")
def _matches(board, x, y, colour):
    """Same-colour cells next to (x, y): left, right, below and above."""
    n = 0
    if y >= K.HEIGHT:
        return 0
    if x > 0 and board[x - 1, y] != 0 and board[x - 1, y] & 3 == colour:
        n += 1
    if x < K.WIDTH - 1 and board[x + 1, y] != 0 and board[x + 1, y] & 3 == colour:
        n += 1
    if y > 0 and board[x, y - 1] != 0 and board[x, y - 1] & 3 == colour:
        n += 1
    if y < K.HEIGHT - 1 and board[x, y + 1] != 0 and board[x, y + 1] & 3 == colour:
        n += 1
    return n


@njit(cache=True)
def contact_scores(board, a, b, moves, n, scores):
    """Cheap one-ply scores without placing: same-colour neighbours of each half, minus a little
    height (a half's partner is empty before placement, so it never counts). scores: float64[>= n]."""
    for j in range(n):
        r, x, y = int(moves[j, 0]), int(moves[j, 1]), int(moves[j, 2])
        if r == 0:
            s = _matches(board, x, y, a) + _matches(board, x + 1, y, b)
        elif r == 2:
            s = _matches(board, x, y, b) + _matches(board, x + 1, y, a)
        elif r == 1:
            s = _matches(board, x, y, b) + _matches(board, x, y + 1, a)
        else:
            s = _matches(board, x, y, a) + _matches(board, x, y + 1, b)
        scores[j] = s - 0.05 * y
    return scores


@njit(cache=True)
def _stack_height(board):
    height = 0
    for x in range(K.WIDTH):
        for y in range(K.HEIGHT - 1, height - 1, -1):
            if board[x, y] != 0:
                height = max(height, y + 1)
                break
    return height


@njit(cache=True)
def greedy_move(cells, a, b, state, moves):
    """One-ply greedy: place every legal move and score the result: a win first, then avoid a top
    out, then viruses cleared, cells cleared, same-colour contacts, and a low stack; ties broken at
    random from state (uint64[1]). Fills moves and returns the chosen row (or -1: no legal move)."""
    return greedy_pick(cells, a, b, state, moves, K.legal_moves_into(cells, a, b, moves))


@njit(cache=True)
def greedy_pick(cells, a, b, state, moves, n):
    """`greedy_move` among the first n rows of moves (legal moves of pill (a, b), given: the NES
    timing's reachable ones, say). Returns the chosen row (or -1 when n is 0)."""
    if n == 0:
        return -1
    scores = np.empty(n)
    contact_scores(cells, a, b, moves, n, scores)
    scratch = np.empty_like(cells)
    for j in range(n):
        scratch[:] = cells
        v, c, _ = K.place_and_resolve(scratch, a, b, moves[j, 0], moves[j, 1], moves[j, 2])
        if K.count_viruses(scratch) == 0:
            scores[j] = 1e9
        elif K.spawn_blocked(scratch):
            scores[j] = -1e9
        else:
            scores[j] = 1000.0 * v + 10.0 * c + scores[j] - 0.5 * _stack_height(scratch)
    return K.argmax_ties(scores, n, state)
