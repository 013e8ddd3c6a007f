"""The search trees of many games in flat pools, and the steps every tree search shares (compiled).

The trees of G games share one `Tree`: pools of **decision nodes** (a board, the pill to place and
the preview, as the player sees them), **edges** (the legal placements of a decision node) and
**chance nodes** (the board after a placement). A chance node's 9 outcomes are the next *preview*:
its children place the parent's preview and see outcome i as theirs, so every decision node knows
its pill and its preview, as the player does, and the search never reads a game's later pills.

Values are utilities in [0, 1] (`utility`) backed up along the path of each simulation: every
decision node on it, every edge and the chance outcome taken. A chance node's value is the
probability-weighted mean of its visited outcomes. Paths are kept per game, iteratively (no
recursion in compiled code).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from drmario.engine import kernels as K
from drmario.engine.board import Move, Pill
from drmario.engine.kernels import RUNNING, STALEMATE, TOPPED_OUT, WON
from drmario.engine.rules import MOVES_SHAPE
from drmario.search.core import N_PILLS, Position, SearchResult, check_positions, dense_target, legal_mask_of
from drmario.search.utility import utility

MAX_DEPTH = 64  # decisions below the root a simulation may descend (a leaf is evaluated there)
UNEXPANDED = -1
# No edge, chance node or outcome at a path step. Node ids and steps reach the compiled helpers as
# int64 (this, not the constant -1; int32 ids cast where they are read), so each compiles once.
NONE = np.int64(-1)


class Tree(NamedTuple):
    """The search trees of G games. D, E, C: capacities of the decision, edge and chance pools."""

    # settings, the same for every game
    uparams: np.ndarray  # float64[5] the utility (`Utility.params`)
    probs: np.ndarray  # float64[9] the next pill's probabilities
    stall_limit: int  # 0: no stall rule
    # per game [G]
    root: np.ndarray  # int32[G] root decision node (-1: game not searched)
    root_left: np.ndarray  # int16[G] viruses at the root (V of the utility)
    root_pills: np.ndarray  # float32[G] pills the root is expected to need (the centred utility's; < 0: unknown)
    rng: np.ndarray  # uint64[G] generator states
    leaf: np.ndarray  # int32[G] decision node waiting for an evaluation (-1: none)
    path: np.ndarray  # int32[G, MAX_DEPTH + 1, 4] (decision node, edge, chance node, outcome)
    path_len: np.ndarray  # int32[G]
    qmin: np.ndarray  # float32[G] smallest value backed up (for min-max normalisation)
    qmax: np.ndarray  # float32[G]
    # decision nodes [D]
    d_cells: np.ndarray  # uint8[D, 8, 16]
    d_pill: np.ndarray  # int8[D] the pill to place (0..8)
    d_preview: np.ndarray  # int8[D] the preview (0..8)
    d_cleared: np.ndarray  # int16[D] viruses cleared since the root
    d_pills: np.ndarray  # int16[D] pills placed since the root
    d_stall: np.ndarray  # int16[D] consecutive pills without a virus cleared
    d_left: np.ndarray  # int16[D] viruses left
    d_edge_start: np.ndarray  # int32[D]
    d_edge_count: np.ndarray  # int32[D] (UNEXPANDED: not yet)
    d_visits: np.ndarray  # int32[D]
    d_wsum: np.ndarray  # float32[D] sum of the values backed up through the node
    d_value: np.ndarray  # float32[D] the node's own evaluation by the network (round 0 leaves it 0)
    # edges [E]
    e_move: np.ndarray  # int8[E, 3] (r, x, y)
    e_prior: np.ndarray  # float32[E]
    e_gumbel: np.ndarray  # float32[E] Gumbel noise + log prior (Gumbel roots only)
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
    c_pill: np.ndarray  # int8[C] the pill its children place (the parent's preview)
    c_child: np.ndarray  # int32[C, 9] decision node per next preview (-1: none yet)
    c_visits: np.ndarray  # int32[C, 9]
    c_wsum: np.ndarray  # float32[C, 9] sum of values backed up through each outcome
    # pool use: [decision nodes, edges, chance nodes]
    used: np.ndarray  # int64[3]
    # NES timing: root decision node d < R keeps only the moves set in root_legal[d] (R = 0: none)
    root_legal: np.ndarray  # uint8[R, 4, 8, 16]


def new_tree(
    games: int,
    sizes: tuple[int, int, int],
    uparams: np.ndarray,
    probs: np.ndarray,
    stall_limit: int | None,
) -> Tree:
    """Empty pools for `games` trees, of sizes (decisions, edges, chances)."""
    g, (d, e, c) = games, sizes
    return Tree(
        uparams=np.asarray(uparams, np.float64),
        probs=np.asarray(probs, np.float64),
        stall_limit=int(stall_limit or 0),
        root=np.full(g, -1, np.int32),
        root_left=np.zeros(g, np.int16),
        root_pills=np.full(g, -1.0, np.float32),
        rng=np.arange(1, g + 1, dtype=np.uint64),
        leaf=np.full(g, -1, np.int32),
        path=np.zeros((g, MAX_DEPTH + 1, 4), np.int32),
        path_len=np.zeros(g, np.int32),
        qmin=np.zeros(g, np.float32),
        qmax=np.zeros(g, np.float32),
        d_cells=np.zeros((d, K.WIDTH, K.HEIGHT), np.uint8),
        d_pill=np.zeros(d, np.int8),
        d_preview=np.zeros(d, np.int8),
        d_cleared=np.zeros(d, np.int16),
        d_pills=np.zeros(d, np.int16),
        d_stall=np.zeros(d, np.int16),
        d_left=np.zeros(d, np.int16),
        d_edge_start=np.zeros(d, np.int32),
        d_edge_count=np.full(d, UNEXPANDED, np.int32),
        d_visits=np.zeros(d, np.int32),
        d_wsum=np.zeros(d, np.float32),
        d_value=np.zeros(d, np.float32),
        e_move=np.zeros((e, 3), np.int8),
        e_prior=np.zeros(e, np.float32),
        e_gumbel=np.zeros(e, np.float32),
        e_visits=np.zeros(e, np.int32),
        e_chance=np.full(e, -1, np.int32),
        c_cells=np.zeros((c, K.WIDTH, K.HEIGHT), np.uint8),
        c_outcome=np.zeros(c, np.int8),
        c_value=np.zeros(c, np.float32),
        c_cleared=np.zeros(c, np.int16),
        c_pills=np.zeros(c, np.int16),
        c_stall=np.zeros(c, np.int16),
        c_left=np.zeros(c, np.int16),
        c_pill=np.zeros(c, np.int8),
        c_child=np.full((c, N_PILLS), -1, np.int32),
        c_visits=np.zeros((c, N_PILLS), np.int32),
        c_wsum=np.zeros((c, N_PILLS), np.float32),
        used=np.zeros(3, np.int64),
        root_legal=np.zeros((0, 4, K.WIDTH, K.HEIGHT), np.uint8),
    )


def pool_sizes(tree: Tree) -> tuple[int, int, int]:
    return len(tree.d_visits), len(tree.e_visits), len(tree.c_outcome)


def reserve(tree: Tree, decisions: int, edges: int, chances: int) -> Tree:
    """The tree, or a copy with bigger pools (at least doubled), so that this many more decision
    nodes, edges and chance nodes fit."""
    need = (int(tree.used[0]) + decisions, int(tree.used[1]) + edges, int(tree.used[2]) + chances)
    sizes = pool_sizes(tree)
    if all(n <= s for n, s in zip(need, sizes)):
        return tree
    fields: dict[str, Any] = {}
    for name, old in tree._asdict().items():
        if name[:2] in ("d_", "e_", "c_"):
            size = {"d": 0, "e": 1, "c": 2}[name[0]]
            grown = max(need[size], 2 * sizes[size]) if need[size] > sizes[size] else sizes[size]
            new = np.empty((grown, *old.shape[1:]), old.dtype)
            new[: len(old)] = old
            fields[name] = new
        else:
            fields[name] = old
    return tree._replace(**fields)


# ------------------------------------------------------------------------------------------------
# Building blocks


@njit(cache=True)
def new_decision(t, cells, pill, preview, cleared, pills, stall, left):
    """A decision node placing `pill` with `preview` (0..8) on cells; returns its id."""
    d = t.used[0]
    t.used[0] += 1
    t.d_cells[d] = cells
    t.d_pill[d], t.d_preview[d] = pill, preview
    t.d_cleared[d], t.d_pills[d], t.d_stall[d], t.d_left[d] = cleared, pills, stall, left
    t.d_edge_count[d] = UNEXPANDED
    t.d_visits[d] = 0
    t.d_wsum[d] = 0.0
    t.d_value[d] = 0.0
    return d


@njit(cache=True)
def expand(t, d, moves):
    """Give decision node d its legal moves as edges with uniform priors (a root under NES timing:
    its reachable ones, `root_legal`; the nodes below a root are timing-free). Returns the edge
    count."""
    pill = t.d_pill[d]
    n = K.legal_moves_into(t.d_cells[d], pill // 3 + 1, pill % 3 + 1, moves)
    if d < t.root_legal.shape[0]:
        k = 0
        for j in range(n):
            if t.root_legal[d, moves[j, 0], moves[j, 1], moves[j, 2]]:
                moves[k] = moves[j]
                k += 1
        n = k
    start = t.used[1]
    t.used[1] += n
    for j in range(n):
        e = start + j
        t.e_move[e] = moves[j]
        t.e_prior[e] = 1.0 / n
        t.e_gumbel[e] = 0.0
        t.e_visits[e] = 0
        t.e_chance[e] = -1
    t.d_edge_start[d] = start
    t.d_edge_count[d] = n
    return n


@njit(cache=True)
def new_chance(t, g, d, e):
    """Create the chance node of edge e of decision d in game g: the placement's result. Returns it."""
    c = t.used[2]
    t.used[2] += 1
    cells = t.c_cells[c]
    cells[:] = t.d_cells[d]
    pill = t.d_pill[d]
    v, _, _ = K.place_and_resolve(cells, pill // 3 + 1, pill % 3 + 1, t.e_move[e, 0], t.e_move[e, 1], t.e_move[e, 2])
    left = t.d_left[d] - v
    stall = 0 if v > 0 else t.d_stall[d] + 1
    t.c_cleared[c] = t.d_cleared[d] + v
    t.c_pills[c] = t.d_pills[d] + 1
    t.c_stall[c] = stall
    t.c_left[c] = left
    t.c_pill[c] = t.d_preview[d]
    if left == 0:
        outcome = WON
    elif K.spawn_blocked(cells):
        outcome = TOPPED_OUT
    elif t.stall_limit > 0 and stall >= t.stall_limit:
        outcome = STALEMATE
    else:
        outcome = RUNNING
    t.c_outcome[c] = outcome
    finished = outcome != RUNNING
    t.c_value[c] = (
        utility(t.uparams, t.c_cleared[c], t.c_pills[c], outcome, t.root_left[g], t.root_pills[g]) if finished else 0.0
    )
    t.c_child[c, :] = -1
    t.c_visits[c, :] = 0
    t.c_wsum[c, :] = 0.0
    t.e_chance[e] = c
    return c


@njit(cache=True)
def child(t, c, i):
    """The decision node below chance node c for next preview i (made on first use)."""
    d = t.c_child[c, i]
    if d < 0:
        pill, cleared, pills = np.int64(t.c_pill[c]), np.int64(t.c_cleared[c]), np.int64(t.c_pills[c])
        stall, left = np.int64(t.c_stall[c]), np.int64(t.c_left[c])
        d = new_decision(t, t.c_cells[c], pill, np.int64(i), cleared, pills, stall, left)  # int64s, as `set_roots`
        t.c_child[c, i] = d
    return d


@njit(cache=True)
def chance_value(t, c):
    """The value of chance node c: a finished game's utility, else the probability-weighted mean of
    the outcomes (next previews) visited so far."""
    if t.c_outcome[c] != RUNNING:
        return t.c_value[c]
    total = 0.0
    weight = 0.0
    for i in range(N_PILLS):
        if t.c_visits[c, i] > 0:
            total += t.probs[i] * t.c_wsum[c, i] / t.c_visits[c, i]
            weight += t.probs[i]
    return total / weight if weight > 0 else 0.0


@njit(cache=True)
def edge_value(t, e):
    """The value of edge e (its chance node's), NaN if never visited."""
    return chance_value(t, t.e_chance[e]) if t.e_visits[e] > 0 else np.nan


@njit(cache=True)
def node_value(t, d):
    """The mean value backed up through decision node d (its own evaluation before any)."""
    return t.d_wsum[d] / t.d_visits[d] if t.d_visits[d] > 0 else t.d_value[d]


@njit(cache=True)
def choose_outcome(t, c, state):
    """Stratified choice of the next preview: the outcome furthest below its share of visits, ties
    broken at random, so visit counts follow the probabilities."""
    total = 0
    for i in range(N_PILLS):
        total += t.c_visits[c, i]
    deficits = np.empty(N_PILLS)
    for i in range(N_PILLS):
        deficits[i] = t.probs[i] * (total + 1) - t.c_visits[c, i] if t.probs[i] > 0 else -np.inf
    return K.argmax_ties(deficits, N_PILLS, state)


@njit(cache=True)
def backup(t, g, value):
    """Add value to every node, edge and chance outcome on game g's path."""
    t.qmin[g] = min(t.qmin[g], value)
    t.qmax[g] = max(t.qmax[g], value)
    for k in range(t.path_len[g]):
        d, e, c, i = t.path[g, k, 0], t.path[g, k, 1], t.path[g, k, 2], t.path[g, k, 3]
        t.d_visits[d] += 1
        t.d_wsum[d] += value
        if e >= 0:
            t.e_visits[e] += 1
        if c >= 0 and i >= 0:
            t.c_visits[c, i] += 1
            t.c_wsum[c, i] += value


@njit(cache=True)
def step_to(t, g, k, d, e, i):
    """Record step k of game g's path: decision d, edge e (-1: none), its chance node (-1: none)
    and outcome i (-1: none)."""
    t.path[g, k, 0], t.path[g, k, 1], t.path[g, k, 3] = d, e, i
    t.path[g, k, 2] = t.e_chance[e] if e >= 0 else -1


@njit(cache=True)
def through_edge(t, g, k, d, e):
    """Step k of game g's path goes from decision d through edge e: place the pill if this is the
    edge's first visit. A finished game ends the simulation here (its value is backed up) and gives
    -1; otherwise the chance node."""
    c = t.e_chance[e]
    if c < 0:
        c = new_chance(t, g, d, e)
    step_to(t, g, k, d, e, NONE)
    if t.c_outcome[c] != RUNNING:
        t.path_len[g] = k + 1
        backup(t, g, np.float64(t.c_value[c]))  # float64, as the evaluated leaves' values
        return -1
    return c


@njit(cache=True)
def set_roots(t, active, cells, pills, previews, stalls, seeds):
    """Start a fresh search for each active game: reset the pools and make the roots.

    cells uint8[G, 8, 16], pills and previews int8[G] (0..8), stalls int16[G], seeds uint64[G]
    (one per game and decision, so that every search is reproducible on its own).
    """
    t.used[:] = 0
    for g in range(len(active)):
        t.root[g] = -1
        t.leaf[g] = -1
        t.path_len[g] = 0
        if not active[g]:
            continue
        left = K.count_viruses(cells[g])
        pill, preview, stall, zero = np.int64(pills[g]), np.int64(previews[g]), np.int64(stalls[g]), np.int64(0)
        t.root[g] = new_decision(t, cells[g], pill, preview, zero, zero, stall, np.int64(left))
        t.root_left[g] = left
        t.root_pills[g] = -1.0  # until an evaluator predicts it
        t.qmin[g], t.qmax[g] = 1.0, 0.0  # empty range until values arrive
        s = np.uint64(seeds[g]) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)
        t.rng[g] = s if s != 0 else np.uint64(1)


@njit(cache=True)
def root_table(t, g, out_moves, out_stats):
    """The root's edges of game g: out_moves int8[n, 3]; out_stats float64[n, 3] = (prior,
    visits, value). Returns n."""
    d = t.root[g]
    start, n = t.d_edge_start[d], t.d_edge_count[d]
    for j in range(n):
        e = start + j
        out_moves[j] = t.e_move[e]
        out_stats[j, 0] = t.e_prior[e]
        out_stats[j, 1] = t.e_visits[e]
        out_stats[j, 2] = edge_value(t, e)
    return n


# ------------------------------------------------------------------------------------------------
# From Python


def plant(
    positions: Sequence[Position],
    seeds: Sequence[int],
    uparams: np.ndarray,
    probs: np.ndarray,
    sizes: tuple[int, int, int],
) -> Tree:
    """A tree with one root per position (`core.check_positions`: each needs its preview), pools of
    `sizes`, and each root's generator seeded from its seed. A position under NES timing keeps its
    reachable moves at the root (`core.legal_mask_of`); below the root the tree is timing-free."""
    check_positions(positions)
    g = len(positions)
    if len(seeds) != g:  # the compiled code reads a seed per root, unchecked
        raise ValueError(f"{len(seeds)} seeds for {g} positions: one per position")
    tree = new_tree(g, sizes, uparams, probs, positions[0].stall_limit if positions else None)
    tree = reserve(tree, g, 0, 0)
    cells = np.stack([pos.cells for pos in positions]) if g else np.zeros((0, K.WIDTH, K.HEIGHT), np.uint8)
    pills = np.array([pos.pill.number for pos in positions], np.int8)
    previews = np.array([pos.preview.number for pos in positions if pos.preview is not None], np.int8)
    stalls = np.array([pos.stall for pos in positions], np.int16)
    set_roots(tree, np.ones(g, np.bool_), cells, pills, previews, stalls, np.asarray(seeds, np.uint64))
    masks = [legal_mask_of(pos) for pos in positions]
    if any(m is not None for m in masks):  # NES timing: each root keeps its reachable moves
        root_legal = np.ones((int(tree.root.max()) + 1, *MOVES_SHAPE), np.uint8)
        for i, mask in enumerate(masks):
            if mask is not None:
                root_legal[tree.root[i]] = mask
        tree = tree._replace(root_legal=root_legal)
    return tree


def root_moves(tree: Tree, g: int) -> tuple[np.ndarray, np.ndarray]:
    """The root edges of game g: (moves int8[n, 3], stats float64[n, 3] of prior, visits, value)."""
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    stats = np.empty((K.MAX_MOVES, 3))
    n = root_table(tree, g, moves, stats)
    return moves[:n], stats[:n]


def result(
    tree: Tree, g: int, pill: Pill, target: np.ndarray, best: int, simulations: int, prior: np.ndarray | None = None
) -> SearchResult:
    """The `SearchResult` of game g's root, with the target's probabilities float[n] over the root
    moves (in `root_moves` order) and the index of the move played."""
    moves, stats = root_moves(tree, g)
    listed = [Move(*m) for m in moves.tolist()]
    return SearchResult(
        pill=pill,
        moves=listed,
        prior=stats[:, 0].copy() if prior is None else prior,
        visits=stats[:, 1].copy(),
        value=stats[:, 2].copy(),
        target=dense_target(pill, moves, np.asarray(target, np.float64)),
        best=listed[best],
        simulations=simulations,
    )
