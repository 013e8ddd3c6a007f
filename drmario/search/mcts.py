"""Compiled Monte Carlo tree search over many games at once (numba).

The trees of G games share one `Forest`: flat pools of decision nodes (a board and the known pill),
edges (the legal placements of a decision node) and chance nodes (the board after a placement, whose
9 outcomes are the possible next pills). The search never sees a game's real future pills: the pill
after a placement is always a chance outcome.

Values are utilities in [0, 1] on one scale per search, outcome first (`playouts`: any win is worth
more than any top-out; among wins fewer pills is better; among failures more viruses cleared and
longer survival). A rollout cut off by the horizon counts as a failure at that point (it credits
survival, never a finish it did not reach).

The next pill after a placement is a chance node, except below the root when the game's preview
is known (`Forest.preview`): the NES shows the next pill, so the root's placements are followed by
that pill only. Later pills stay chance nodes.

One simulation step per game at a time: `select` walks each tree to a leaf; leaves that need a
network evaluation are returned to Python, evaluated in one batch, and `expand_and_backup` finishes
the step. Round 0 (no network) runs whole simulations, rollouts included, in `run_round0`.
Everything is iterative; paths are kept in per-game arrays.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from drmario.engine import kernels as K
from drmario.engine.kernels import MAX_MOVES, RUNNING, STALEMATE, TOPPED_OUT, WON
from drmario.search.expert import N_FEATURES
from drmario.search.playouts import N_PILLS, expected_utility, rollout, utility

MAX_DEPTH = 64  # decisions below the root a simulation may descend (a leaf is evaluated there)
UNEXPANDED = -1

# Selection modes
UCT, PUCT, GUMBEL = 0, 1, 2


class Forest(NamedTuple):
    """The search trees of G games in flat pools. D, E, C: pool capacities."""

    # per game
    root: np.ndarray  # int32[G] root decision node (-1: game not searched)
    root_left: np.ndarray  # int16[G] viruses left at the root (V of the utility)
    preview: np.ndarray  # int8[G] the known pill after the root's (0..8), -1: a chance node
    uparams: np.ndarray  # float64[5] the utility's settings (`playouts.utility_params`)
    weights: np.ndarray  # float64[F] the expert's weights (its rollout policy)
    rng: np.ndarray  # uint64[G] generator states
    qmin: np.ndarray  # float32[G] smallest value backed up (for min-max normalisation)
    qmax: np.ndarray  # float32[G]
    leaf: np.ndarray  # int32[G] decision node waiting for a network evaluation (-1: none)
    path: np.ndarray  # int32[G, MAX_DEPTH + 1, 4] (decision node, edge, chance node, outcome)
    path_len: np.ndarray  # int32[G]
    cand: np.ndarray  # int32[G, MAX_MOVES] Gumbel candidates (root edges), best first
    n_cand: np.ndarray  # int32[G]
    phase_target: np.ndarray  # int32[G] visits each remaining candidate gets in this phase
    sims_left: np.ndarray  # int32[G] simulations still to run at the root (Gumbel phases)
    # decision nodes [D]
    d_cells: np.ndarray  # uint8[D, 8, 16]
    d_pill: np.ndarray  # uint8[D, 2]
    d_cleared: np.ndarray  # int16[D] viruses cleared since the root
    d_pills: np.ndarray  # int16[D] pills placed since the root
    d_stall: np.ndarray  # int16[D] consecutive pills without a virus cleared
    d_left: np.ndarray  # int16[D] viruses left
    d_edge_start: np.ndarray  # int32[D]
    d_edge_count: np.ndarray  # int32[D] (-1: not expanded)
    d_visits: np.ndarray  # int32[D]
    d_value: np.ndarray  # float32[D] leaf evaluation (network or first rollout)
    # edges [E]
    e_move: np.ndarray  # int8[E, 3] (r, x, y)
    e_prior: np.ndarray  # float32[E]
    e_logit: np.ndarray  # float32[E] log prior + Gumbel noise (Gumbel root only)
    e_visits: np.ndarray  # int32[E]
    e_chance: np.ndarray  # int32[E] chance node (-1: not yet placed)
    # chance nodes [C]
    c_cells: np.ndarray  # uint8[C, 8, 16] board after the placement
    c_outcome: np.ndarray  # int8[C] RUNNING, WON, TOPPED_OUT or STALEMATE
    c_value: np.ndarray  # float32[C] utility of a finished game
    c_cleared: np.ndarray  # int16[C] since the root, this placement included
    c_pills: np.ndarray  # int16[C]
    c_stall: np.ndarray  # int16[C]
    c_left: np.ndarray  # int16[C]
    c_child: np.ndarray  # int32[C, 9] decision node per next pill (-1: none yet)
    c_visits: np.ndarray  # int32[C, 9]
    c_wsum: np.ndarray  # float32[C, 9] sum of values backed up through each outcome
    # pool use: [decision nodes, edges, chance nodes]
    used: np.ndarray  # int64[3]


def new_forest(games: int, decisions: int, edges: int, chances: int) -> Forest:
    g, d, e, c = games, decisions, edges, chances
    return Forest(
        root=np.full(g, -1, np.int32),
        root_left=np.zeros(g, np.int16),
        preview=np.full(g, -1, np.int8),
        uparams=np.zeros(5, np.float64),
        weights=np.zeros(N_FEATURES, np.float64),
        rng=np.arange(1, g + 1, dtype=np.uint64),
        qmin=np.zeros(g, np.float32),
        qmax=np.zeros(g, np.float32),
        leaf=np.full(g, -1, np.int32),
        path=np.zeros((g, MAX_DEPTH + 1, 4), np.int32),
        path_len=np.zeros(g, np.int32),
        cand=np.zeros((g, MAX_MOVES), np.int32),
        n_cand=np.zeros(g, np.int32),
        phase_target=np.zeros(g, np.int32),
        sims_left=np.zeros(g, np.int32),
        d_cells=np.zeros((d, K.WIDTH, K.HEIGHT), np.uint8),
        d_pill=np.zeros((d, 2), np.uint8),
        d_cleared=np.zeros(d, np.int16),
        d_pills=np.zeros(d, np.int16),
        d_stall=np.zeros(d, np.int16),
        d_left=np.zeros(d, np.int16),
        d_edge_start=np.zeros(d, np.int32),
        d_edge_count=np.full(d, UNEXPANDED, np.int32),
        d_visits=np.zeros(d, np.int32),
        d_value=np.zeros(d, np.float32),
        e_move=np.zeros((e, 3), np.int8),
        e_prior=np.zeros(e, np.float32),
        e_logit=np.zeros(e, np.float32),
        e_visits=np.zeros(e, np.int32),
        e_chance=np.full(e, -1, np.int32),
        c_cells=np.zeros((c, K.WIDTH, K.HEIGHT), np.uint8),
        c_outcome=np.zeros(c, np.int8),
        c_value=np.zeros(c, np.float32),
        c_cleared=np.zeros(c, np.int16),
        c_pills=np.zeros(c, np.int16),
        c_stall=np.zeros(c, np.int16),
        c_left=np.zeros(c, np.int16),
        c_child=np.full((c, N_PILLS), -1, np.int32),
        c_visits=np.zeros((c, N_PILLS), np.int32),
        c_wsum=np.zeros((c, N_PILLS), np.float32),
        used=np.zeros(3, np.int64),
    )


def pool_sizes(forest: Forest) -> tuple[int, int, int]:
    return len(forest.d_visits), len(forest.e_visits), len(forest.c_outcome)


def grow(forest: Forest, decisions: int, edges: int, chances: int) -> Forest:
    """A copy of forest with pools of at least the given sizes (contents kept)."""
    bigger = new_forest(len(forest.root), decisions, edges, chances)
    for name, old in forest._asdict().items():
        new = getattr(bigger, name)
        if name[:2] in ("d_", "e_", "c_"):
            new[: len(old)] = old
        else:
            new[...] = old
    return bigger


# ------------------------------------------------------------------------------------------------
# Tree building blocks


@njit(cache=True)
def _new_decision(f, cells, pill, cleared, pills, stall, left):
    d = f.used[0]
    f.used[0] += 1
    f.d_cells[d] = cells
    f.d_pill[d, 0], f.d_pill[d, 1] = pill // 3 + 1, pill % 3 + 1
    f.d_cleared[d], f.d_pills[d], f.d_stall[d], f.d_left[d] = cleared, pills, stall, left
    f.d_edge_count[d] = UNEXPANDED
    f.d_visits[d] = 0
    f.d_value[d] = 0.0
    return d


@njit(cache=True)
def _expand(f, d, moves):
    """Give decision node d its legal moves as edges with uniform priors. Returns the edge count."""
    n = K.legal_moves_into(f.d_cells[d], f.d_pill[d, 0], f.d_pill[d, 1], moves)
    start = f.used[1]
    f.used[1] += n
    for j in range(n):
        e = start + j
        f.e_move[e] = moves[j]
        f.e_prior[e] = 1.0 / n
        f.e_logit[e] = 0.0
        f.e_visits[e] = 0
        f.e_chance[e] = -1
    f.d_edge_start[d] = start
    f.d_edge_count[d] = n
    return n


@njit(cache=True)
def _place(f, d, e, stall_limit, root_left):
    """Create the chance node of edge e (the placement's result). Returns its id."""
    c = f.used[2]
    f.used[2] += 1
    cells = f.c_cells[c]
    cells[:] = f.d_cells[d]
    r, x, y = f.e_move[e, 0], f.e_move[e, 1], f.e_move[e, 2]
    v, _, _ = K.place_and_resolve(cells, f.d_pill[d, 0], f.d_pill[d, 1], r, x, y)
    left = f.d_left[d] - v
    stall = 0 if v > 0 else f.d_stall[d] + 1
    f.c_cleared[c] = f.d_cleared[d] + v
    f.c_pills[c] = f.d_pills[d] + 1
    f.c_stall[c] = stall
    f.c_left[c] = left
    if left == 0:
        outcome = WON
    elif K.spawn_blocked(cells):
        outcome = TOPPED_OUT
    elif stall_limit > 0 and stall >= stall_limit:
        outcome = STALEMATE
    else:
        outcome = RUNNING
    f.c_outcome[c] = outcome
    f.c_value[c] = utility(f.uparams, f.c_cleared[c], f.c_pills[c], outcome, root_left) if outcome != RUNNING else 0.0
    f.c_child[c, :] = -1
    f.c_visits[c, :] = 0
    f.c_wsum[c, :] = 0.0
    f.e_chance[e] = c
    return c


@njit(cache=True)
def chance_value(f, c, probs):
    """The value of chance node c: a finished game's utility, else the probability-weighted mean
    of the outcomes (next pills) visited so far."""
    if f.c_outcome[c] != RUNNING:
        return f.c_value[c]
    total = 0.0
    weight = 0.0
    for i in range(N_PILLS):
        if f.c_visits[c, i] > 0:
            total += probs[i] * f.c_wsum[c, i] / f.c_visits[c, i]
            weight += probs[i]
    return total / weight if weight > 0 else 0.0


@njit(cache=True)
def _choose_outcome(f, c, probs, state):
    """Stratified choice of the next pill: the outcome furthest below its share of visits, ties
    broken at random, so visit counts follow the probabilities."""
    total = 0
    for i in range(N_PILLS):
        total += f.c_visits[c, i]
    deficits = np.empty(N_PILLS)
    for i in range(N_PILLS):
        deficits[i] = probs[i] * (total + 1) - f.c_visits[c, i] if probs[i] > 0 else -np.inf
    return K.argmax_ties(deficits, N_PILLS, state)


@njit(cache=True, inline="always")
def _next_pill(f, g, d, c, probs, state):
    """The next pill after decision d's placement (chance node c): the known preview below the
    root, else a stratified choice (`_choose_outcome`)."""
    if d == f.root[g] and f.preview[g] >= 0:
        return f.preview[g]
    return _choose_outcome(f, c, probs, state)


@njit(cache=True, inline="always")
def _normalise(f, g, q):
    lo, hi = f.qmin[g], f.qmax[g]
    return (q - lo) / (hi - lo) if hi > lo else 0.5


@njit(cache=True)
def _select_edge(f, g, d, mode, c_explore, fpu_reduction, probs, state):
    start, n = f.d_edge_start[d], f.d_edge_count[d]
    visits = f.d_visits[d]
    if mode == UCT:
        log_n = np.log(max(visits, 1))
        scores = np.empty(n)
        for j in range(n):
            e = start + j
            if f.e_visits[e] == 0:
                scores[j] = 1e20  # unvisited first, in random order
            else:
                q = _normalise(f, g, chance_value(f, f.e_chance[e], probs))
                scores[j] = q + c_explore * np.sqrt(log_n / f.e_visits[e])
        return start + K.argmax_ties(scores, n, state)
    best, choice = -1e30, start
    sqrt_n = np.sqrt(max(visits, 1))
    fpu = _normalise(f, g, f.d_value[d]) - fpu_reduction
    for e in range(start, start + n):
        q = fpu if f.e_visits[e] == 0 else _normalise(f, g, chance_value(f, f.e_chance[e], probs))
        score = q + c_explore * f.e_prior[e] * sqrt_n / (1 + f.e_visits[e])
        if score > best:
            best, choice = score, e
    return choice


@njit(cache=True)
def _gumbel_score(f, g, e, c_visit, c_scale, max_visits, probs):
    q = _normalise(f, g, chance_value(f, f.e_chance[e], probs)) if f.e_visits[e] > 0 else 0.0
    return f.e_logit[e] + (c_visit + max_visits) * c_scale * q


@njit(cache=True)
def _gumbel_root_edge(f, g, c_visit, c_scale, probs):
    """Sequential halving at the root: visit the remaining candidates evenly; when each has its
    phase's visits, keep the better half by logit + Gumbel + sigma(q)."""
    m = f.n_cand[g]
    while True:
        choice, fewest = -1, 1 << 30
        for k in range(m):
            e = f.cand[g, k]
            if f.e_visits[e] < f.phase_target[g] and f.e_visits[e] < fewest:
                choice, fewest = e, f.e_visits[e]
        if choice >= 0 or m == 1:
            return choice if choice >= 0 else f.cand[g, 0]
        # Phase over: rank the candidates and halve them.
        max_visits = 0
        for k in range(m):
            max_visits = max(max_visits, f.e_visits[f.cand[g, k]])
        scores = np.empty(m)
        for k in range(m):
            scores[k] = _gumbel_score(f, g, f.cand[g, k], c_visit, c_scale, max_visits, probs)
        order = np.argsort(-scores)
        ranked = f.cand[g, :m].copy()
        for k in range(m):
            f.cand[g, k] = ranked[order[k]]
        m = max(1, m // 2)
        f.n_cand[g] = m
        if m == 1:
            f.phase_target[g] = 1 << 30  # the last candidate takes every remaining simulation
        else:
            phases_left = int(np.ceil(np.log2(m)))
            f.phase_target[g] += max(1, f.sims_left[g] // (phases_left * m))


# ------------------------------------------------------------------------------------------------
# One simulation step for every game


@njit(cache=True)
def _backup(f, g, value):
    """Add value to every node and edge on game g's path."""
    f.qmin[g] = min(f.qmin[g], value)
    f.qmax[g] = max(f.qmax[g], value)
    for k in range(f.path_len[g]):
        d, e, c, i = f.path[g, k, 0], f.path[g, k, 1], f.path[g, k, 2], f.path[g, k, 3]
        f.d_visits[d] += 1
        if e >= 0:
            f.e_visits[e] += 1
        if c >= 0 and i >= 0:
            f.c_visits[c, i] += 1
            f.c_wsum[c, i] += value


@njit(cache=True)
def _through_edge(f, g, k, d, e, stall_limit):
    """Step k of game g's path goes from decision d through edge e: place the pill if this is the
    edge's first visit. A finished game ends the simulation here (its value is backed up) and
    gives -1; otherwise the chance node."""
    f.path[g, k, 0], f.path[g, k, 1], f.path[g, k, 3] = d, e, -1
    c = f.e_chance[e]
    if c < 0:
        c = _place(f, d, e, stall_limit, f.root_left[g])
    f.path[g, k, 2] = c
    if f.c_outcome[c] != RUNNING:
        f.path_len[g] = k + 1
        _backup(f, g, f.c_value[c])
        return -1
    return c


@njit(cache=True)
def select(f, active, mode, c_explore, fpu_reduction, c_visit, c_scale, stall_limit, probs):
    """Walk each active game's tree from its root to a leaf.

    A leaf that is a finished game is backed up at once; an unexpanded decision node is left in
    f.leaf[g] for the caller to evaluate (then `expand_and_backup`). Returns the number of those.
    """
    pending = 0
    for g in range(len(active)):
        f.leaf[g] = -1
        if not active[g]:
            continue
        state = f.rng[g : g + 1]
        d = f.root[g]
        depth = 0
        while True:
            f.path[g, depth, 0] = d
            f.path[g, depth, 1] = -1
            f.path[g, depth, 2] = -1
            f.path[g, depth, 3] = -1
            if f.d_edge_count[d] == UNEXPANDED or depth == MAX_DEPTH:
                f.path_len[g] = depth + 1
                f.leaf[g] = d
                pending += 1
                break
            if mode == GUMBEL and depth == 0:
                e = _gumbel_root_edge(f, g, c_visit, c_scale, probs)
            else:
                e = _select_edge(f, g, d, PUCT if mode == GUMBEL else mode, c_explore, fpu_reduction, probs, state)
            c = _through_edge(f, g, depth, d, e, stall_limit)
            if c < 0:
                break
            i = _next_pill(f, g, d, c, probs, state)
            f.path[g, depth, 3] = i
            child = f.c_child[c, i]
            if child < 0:
                child = _new_decision(f, f.c_cells[c], i, f.c_cleared[c], f.c_pills[c], f.c_stall[c], f.c_left[c])
                f.c_child[c, i] = child
            d = child
            depth += 1
        if mode == GUMBEL:
            f.sims_left[g] -= 1
    return pending


@njit(cache=True)
def expand_and_backup(f, won, cleared, duration, moves_prob):
    """Finish the step for games with a pending leaf, from the network's outputs for the leaves in
    game order: won, cleared, duration float32[P]; moves_prob float32[P, 4, 8, 16].

    The leaf gets its legal moves with priors from moves_prob (masked and renormalised; a
    same-colour placement gets planes r and r + 2) and the value `expected_utility` of the
    predictions, which is backed up.
    """
    moves = np.empty((MAX_MOVES, 3), np.int8)
    k = 0
    for g in range(len(f.leaf)):
        d = f.leaf[g]
        if d < 0:
            continue
        if f.d_edge_count[d] == UNEXPANDED:
            n = _expand(f, d, moves)
            same = f.d_pill[d, 0] == f.d_pill[d, 1]
            total = 0.0
            start = f.d_edge_start[d]
            for e in range(start, start + n):
                r, x, y = f.e_move[e, 0], f.e_move[e, 1], f.e_move[e, 2]
                p = moves_prob[k, r, x, y] + (moves_prob[k, r + 2, x, y] if same else 0.0)
                f.e_prior[e] = p
                total += p
            for e in range(start, start + n):
                f.e_prior[e] = f.e_prior[e] / total if total > 0 else 1.0 / n
        p_win = min(max((won[k] + 1.0) / 2.0, 0.0), 1.0)
        value = expected_utility(
            f.uparams,
            f.d_cleared[d] + max(cleared[k], 0.0),
            f.d_pills[d] + max(duration[k], 0.0),
            p_win,
            f.root_left[g],
        )
        f.d_value[d] = value
        _backup(f, g, value)
        f.leaf[g] = -1
        k += 1


@njit(cache=True)
def _rollout_buffers(probs):
    """Scratch space of the round-0 rollouts: moves, scores, a board, and the next pill's CDF."""
    moves = np.empty((MAX_MOVES, 3), np.int8)
    scores = np.empty(MAX_MOVES)
    scratch = np.empty((K.WIDTH, K.HEIGHT), np.uint8)
    return moves, scores, scratch, np.cumsum(probs)


@njit(cache=True)
def round0_root(f, active, root_rollouts, stall_limit, horizon, policy, probs):
    """Round 0, first part: expand each active root and evaluate every placement with
    `root_rollouts` rollouts (or its finished game's value)."""
    moves, scores, scratch, cdf = _rollout_buffers(probs)
    for g in range(len(active)):
        if not active[g]:
            continue
        state = f.rng[g : g + 1]
        root = f.root[g]
        if f.d_edge_count[root] == UNEXPANDED:
            _expand(f, root, moves)
        start, n = f.d_edge_start[root], f.d_edge_count[root]
        for e in range(start, start + n):
            for _ in range(root_rollouts):
                f.path_len[g] = 0
                _simulate_edge(f, g, root, e, stall_limit, horizon, policy, probs, cdf, state, moves, scores, scratch)


@njit(cache=True)
def round0_simulate(f, active, sims, c_explore, stall_limit, horizon, policy, probs):
    """Round 0, second part: `sims` UCT simulations per active game, each ending in a rollout
    from a new placement or outcome (or in a finished game). Each simulation adds at most one
    decision node (with its edges) and one chance node to the pools."""
    moves, scores, scratch, cdf = _rollout_buffers(probs)
    for g in range(len(active)):
        if not active[g]:
            continue
        state = f.rng[g : g + 1]
        for _ in range(sims):
            d, depth = f.root[g], 0
            while True:
                f.path[g, depth, 0], f.path[g, depth, 1] = d, -1
                f.path[g, depth, 2], f.path[g, depth, 3] = -1, -1
                if f.d_edge_count[d] == UNEXPANDED:
                    _expand(f, d, moves)
                e = _select_edge(f, g, d, UCT, c_explore, 0.0, probs, state)
                c = f.e_chance[e]
                if c < 0 or f.c_outcome[c] != RUNNING or depth == MAX_DEPTH:
                    f.path_len[g] = depth
                    _simulate_edge(f, g, d, e, stall_limit, horizon, policy, probs, cdf, state, moves, scores, scratch)
                    break
                i = _next_pill(f, g, d, c, probs, state)
                child = f.c_child[c, i]
                if child < 0 and f.c_visits[c, i] == 0:
                    # First visit of this outcome: a rollout starting with that pill.
                    f.path_len[g] = depth
                    _rollout_outcome(f, g, d, e, c, i, horizon, policy, stall_limit, cdf, state, moves, scores, scratch)
                    break
                if child < 0:
                    child = _new_decision(f, f.c_cells[c], i, f.c_cleared[c], f.c_pills[c], f.c_stall[c], f.c_left[c])
                    f.c_child[c, i] = child
                f.path[g, depth, 1], f.path[g, depth, 2], f.path[g, depth, 3] = e, c, i
                d = child
                depth += 1


@njit(cache=True)
def _simulate_edge(f, g, d, e, stall_limit, horizon, policy, probs, cdf, state, moves, scores, scratch):
    """One visit of edge e below decision d (path[:path_len] leads to d): place if new, then a
    rollout through a chosen outcome, or the finished game's value."""
    c = _through_edge(f, g, f.path_len[g], d, e, stall_limit)
    if c < 0:
        return
    i = _next_pill(f, g, d, c, probs, state)
    _rollout_outcome(f, g, d, e, c, i, horizon, policy, stall_limit, cdf, state, moves, scores, scratch)


@njit(cache=True)
def _rollout_outcome(f, g, d, e, c, i, horizon, policy, stall_limit, cdf, state, moves, scores, scratch):
    k = f.path_len[g]
    f.path[g, k, 0], f.path[g, k, 1], f.path[g, k, 2], f.path[g, k, 3] = d, e, c, i
    f.path_len[g] = k + 1
    scratch[:] = f.c_cells[c]
    outcome, cleared, pills = rollout(
        scratch, i, f.c_left[c], f.c_stall[c], stall_limit, horizon, policy, f.weights, cdf, state, moves, scores
    )
    value = utility(f.uparams, f.c_cleared[c] + cleared, f.c_pills[c] + pills, outcome, f.root_left[g])
    _backup(f, g, value)


@njit(cache=True)
def set_roots(f, active, cells, pills, previews, stalls, seeds):
    """Start a fresh search for each active game: reset the pools and make the roots.

    cells uint8[G, 8, 16], pills uint8[G, 2], previews int8[G] (the known next pill 0..8, or -1),
    stalls int16[G], seeds uint64[G] (one per game and decision, so every search is reproducible on
    its own).
    """
    f.used[:] = 0
    for g in range(len(active)):
        f.root[g] = -1
        f.leaf[g] = -1
        f.path_len[g] = 0
        f.n_cand[g] = 0
        f.phase_target[g] = 0
        f.sims_left[g] = 0
        if not active[g]:
            continue
        left = K.count_viruses(cells[g])
        pill = (pills[g, 0] - 1) * 3 + (pills[g, 1] - 1)
        f.root[g] = _new_decision(f, cells[g], pill, 0, 0, stalls[g], left)
        f.root_left[g] = left
        f.preview[g] = previews[g]
        f.qmin[g], f.qmax[g] = 1.0, 0.0  # empty range until values arrive
        s = np.uint64(seeds[g]) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)
        f.rng[g] = s if s != 0 else np.uint64(1)


@njit(cache=True)
def start_gumbel(f, active, m, sims):
    """Choose each root's Gumbel candidates (the m best by logit + Gumbel, e_logit set by the caller)
    and the first phase of sequential halving."""
    for g in range(len(active)):
        if not active[g]:
            continue
        d = f.root[g]
        start, n = f.d_edge_start[d], f.d_edge_count[d]
        order = np.argsort(-f.e_logit[start : start + n])
        k = min(m, n)
        for j in range(k):
            f.cand[g, j] = start + order[j]
        f.n_cand[g] = k
        f.sims_left[g] = sims
        if k > 1:
            f.phase_target[g] = max(1, sims // (int(np.ceil(np.log2(k))) * k))
        else:
            f.phase_target[g] = 1 << 30


@njit(cache=True)
def root_table(f, g, probs, out_moves, out_stats):
    """The root's edges of game g: out_moves int8[n, 3]; out_stats float64[n, 3] = (prior, visits,
    value). Returns n."""
    d = f.root[g]
    start, n = f.d_edge_start[d], f.d_edge_count[d]
    for j in range(n):
        e = start + j
        out_moves[j] = f.e_move[e]
        out_stats[j, 0] = f.e_prior[e]
        out_stats[j, 1] = f.e_visits[e]
        out_stats[j, 2] = chance_value(f, f.e_chance[e], probs) if f.e_chance[e] >= 0 else np.nan
    return n
