"""Tree searches with a network (an `Evaluator`): `puct_search` and `gumbel_search`, over one shared
loop of simulations.

Each simulation walks every game's tree from its root to a leaf (`descend`); the leaves of all the
games are evaluated in one batch, expanded with the network's move output as priors (masked to the
legal moves, renormalised) and backed up with the expected utility of its value outputs
(`expand_and_backup`). The root is the first leaf.

- **PUCT** (AlphaZero): at each decision, argmax of Q + c_puct * prior * sqrt(N) / (1 + n), with Q
  rescaled to [0, 1] by the min and max value seen in the whole tree (``normalise="tree"``, the
  default: 47/50 wins at level 20 with 32 simulations against 42/50 for the alternative), or by
  those of the node and its children (``"siblings"``, mctx's ``qtransform_by_parent_and_siblings``;
  an unvisited child counts as the minimum), which magnifies small differences among siblings but
  also the value head's noise. The spread is floored at ``min_spread``: in an end game where no
  leaf is near a win or a top-out the values differ only by the value head's noise, and rescaling
  that noise to [0, 1] would let it outweigh the prior. Dirichlet noise on the root priors. Target:
  the root's visit fractions.
- **Gumbel** (Danihelka et al., ICLR 2022; mctx's ``gumbel_muzero_policy``): at the root, sequential
  halving over the top m moves by Gumbel noise + log prior, scored by g + log prior + sigma(q); below
  it, the deterministic choice argmax(pi' - N / (1 + sum N)). sigma(q) = (c_visit + max N) * c_scale
  * q with q the completed Q (an unvisited move takes the mixed value of the node's own evaluation
  and its visited children) rescaled to [0, 1] over the node's moves. Target: the improved policy
  pi' = softmax(log prior + sigma(completed q)), which keeps improving on the prior with 2-16
  simulations where visit counts do not.

Both are written as `core.Steps` generators (`puct_steps`, `gumbel_steps`); `puct_search` and
`gumbel_search` run them with an evaluator.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
from numba import njit

from drmario.engine import kernels as K
from drmario.search.core import (
    Evaluator,
    Leaves,
    Position,
    Prediction,
    SearchResult,
    Steps,
    check_prediction,
    pill_distribution,
    run,
)
from drmario.search.tree import (
    MAX_DEPTH,
    NONE,
    UNEXPANDED,
    Tree,
    backup,
    chance_value,
    child,
    choose_outcome,
    expand,
    node_value,
    plant,
    reserve,
    result,
    root_moves,
    step_to,
    through_edge,
)
from drmario.search.utility import Utility, expected_utility
from drmario.settings import Settings, setting

PUCT, GUMBEL = 0, 1
NORMALISE_EPSILON = 1e-8  # the smallest spread of values rescaled to [0, 1] (mctx's)


@dataclass(frozen=True)
class PuctSettings(Settings):
    """The settings only PUCT reads."""

    c_puct: float = setting(
        4.0,
        "exploration constant (4 beat 1.5 with the round-0 network, measured on training seeds; with the apprentice "
        "8 used 0.09 fewer pills per virus on 64 tuning games but 0.03 more on the 100 evaluation games)",
        ge=0,
    )
    dirichlet_alpha: float = setting(0.3, "Dirichlet noise concentration at the root", gt=0)
    dirichlet_fraction: float = setting(0.25, "share of the Dirichlet noise in the root priors (0: none)", ge=0, le=1)
    normalise: Literal["siblings", "tree"] = setting(
        "tree",
        "Q rescaled to [0, 1] by the min and max of the node and its children, or of the whole tree "
        "(tree: 47 against 42 wins of 50 at level 20, measured when it became the default)",
    )
    min_spread: float = setting(
        NORMALISE_EPSILON,
        "the smallest spread of values rescaled to [0, 1]: when the values differ by less (an end game "
        "where no leaf is near a win or a top-out), Q's differences are scaled down and the prior leads "
        "(0.05 against the default, the previous shipped network with 100 simulations, 50 tuning games at "
        "level 20: 47 against 46 wins, 0.20 more pills per virus, not significant; "
        "bench/results/search100-spread-tuning)",
        gt=0,
        le=1,
    )

    def unread(self) -> dict[str, str]:
        """`Settings.unread`: the noise's concentration without root noise."""
        none = {"dirichlet_alpha": "not read with dirichlet_fraction = 0 (no root noise)"}
        return super().unread() | (none if self.dirichlet_fraction == 0 else {})


@dataclass(frozen=True)
class GumbelSettings(Settings):
    """The settings only the Gumbel search reads (mctx's defaults)."""

    m: int = setting(16, "root moves considered by sequential halving", ge=1, le=512)
    c_visit: float = setting(50.0, "c_visit of sigma(q) = (c_visit + max N) * c_scale * q", ge=0)
    c_scale: float = setting(0.1, "c_scale of sigma(q)", ge=0)
    noise: float = setting(
        1.0,
        "scale of the Gumbel noise at the root: 1 samples every move (self-play), 0 plays the best (evaluation; with "
        "temperature_moves, self-play then samples only its opening). 8-simulation self-play from the shipped network "
        "(levels 14-24): 398 of 600 games stalemated with 1, 174 with 0 (bench/one_round.py)",
        ge=0,
    )


class Selection(NamedTuple):
    """How `descend` chooses an edge: the rule (PUCT or GUMBEL) and its constants."""

    rule: int
    c_puct: float
    c_visit: float
    c_scale: float
    siblings: bool  # PUCT: normalise values among siblings (else over the whole tree)
    min_spread: float  # PUCT: the smallest spread of values rescaled to [0, 1]


# ------------------------------------------------------------------------------------------------
# Choosing an edge


@njit(cache=True)
def _puct_edge(t, g, d, c_puct, siblings, min_spread):
    start, n = t.d_edge_start[d], t.d_edge_count[d]
    if siblings:
        lo = hi = node_value(t, d)
        for e in range(start, start + n):
            if t.e_visits[e] > 0:
                q = chance_value(t, t.e_chance[e])
                lo, hi = min(lo, q), max(hi, q)
    else:  # the tree's range of values; an unvisited move counts as its parent
        lo, hi = t.qmin[g], t.qmax[g]
    spread = max(hi - lo, min_spread)
    unvisited = 0.0 if siblings else (node_value(t, d) - lo) / spread
    sqrt_n = np.sqrt(max(t.d_visits[d], 1))
    best, choice = -np.inf, start
    for e in range(start, start + n):
        q = (chance_value(t, t.e_chance[e]) - lo) / spread if t.e_visits[e] > 0 else unvisited
        score = q + c_puct * t.e_prior[e] * sqrt_n / (1 + t.e_visits[e])
        if score > best:
            best, choice = score, e
    return choice


@njit(cache=True)
def completed_q(t, d, out):
    """out[:n] = the completed Q of decision d's edges rescaled to [0, 1]: a visited edge's value,
    an unvisited one the mixed value (the node's own evaluation and its visited children's
    prior-weighted values, as if one more visit). Returns the most visits of an edge."""
    start, n = t.d_edge_start[d], t.d_edge_count[d]
    visits, most, weighted, mass = 0, 0, 0.0, 0.0
    for j in range(n):
        e = start + j
        if t.e_visits[e] > 0:
            q = chance_value(t, t.e_chance[e])
            out[j] = q
            visits += t.e_visits[e]
            most = max(most, t.e_visits[e])
            weighted += t.e_prior[e] * q
            mass += t.e_prior[e]
    mixed = t.d_value[d] if mass == 0 else (t.d_value[d] + visits * weighted / mass) / (visits + 1)
    lo, hi = np.inf, -np.inf
    for j in range(n):
        if t.e_visits[start + j] == 0:
            out[j] = mixed
        lo, hi = min(lo, out[j]), max(hi, out[j])
    spread = max(hi - lo, NORMALISE_EPSILON)
    for j in range(n):
        out[j] = (out[j] - lo) / spread
    return most


@njit(cache=True)
def improved_logits(t, d, c_visit, c_scale, out):
    """out[:n] = log prior + sigma(completed q) of decision d's edges (the improved policy's logits).
    Returns sigma's scale (c_visit + max N) * c_scale."""
    start, n = t.d_edge_start[d], t.d_edge_count[d]
    scale = (c_visit + completed_q(t, d, out)) * c_scale
    for j in range(n):
        out[j] = np.log(max(t.e_prior[start + j], 1e-12)) + scale * out[j]
    return scale


@njit(cache=True)
def _gumbel_interior_edge(t, d, c_visit, c_scale):
    start, n = t.d_edge_start[d], t.d_edge_count[d]
    logits = np.empty(n)
    improved_logits(t, d, c_visit, c_scale, logits)
    top = logits.max()
    total, visits = 0.0, 0
    for j in range(n):
        logits[j] = np.exp(logits[j] - top)
        total += logits[j]
        visits += t.e_visits[start + j]
    best, choice = -np.inf, start
    for j in range(n):
        score = logits[j] / total - t.e_visits[start + j] / (1.0 + visits)
        if score > best:
            best, choice = score, start + j
    return choice


@njit(cache=True)
def _gumbel_root_edge(t, d, considered_visits, c_visit, c_scale):
    """Sequential halving: among the moves with exactly `considered_visits` visits, the best by
    Gumbel noise + log prior + sigma(q)."""
    start, n = t.d_edge_start[d], t.d_edge_count[d]
    q = np.empty(n)
    scale = (c_visit + completed_q(t, d, q)) * c_scale
    best, choice = -np.inf, -1
    for j in range(n):
        if t.e_visits[start + j] == considered_visits:
            score = t.e_gumbel[start + j] + scale * q[j]
            if score > best:
                best, choice = score, start + j
    return choice if choice >= 0 else start + int(np.argmax(t.e_gumbel[start : start + n] + scale * q))


# ------------------------------------------------------------------------------------------------
# One simulation step for every game


@njit(cache=True)
def descend(t, active, sel, halving):
    """Walk each active game's tree from its root to a leaf. A leaf that is a finished game is backed
    up at once; an unexpanded decision node is left in t.leaf[g] for the caller to evaluate (then
    `expand_and_backup`). halving int32[G]: each root's visits per considered move at this
    simulation (Gumbel). Returns the number of leaves to evaluate."""
    pending = 0
    for g in range(len(active)):
        t.leaf[g] = -1
        if not active[g]:
            continue
        state = t.rng[g : g + 1]
        d, depth = np.int64(t.root[g]), np.int64(0)
        while True:
            if t.d_edge_count[d] == UNEXPANDED or depth == MAX_DEPTH:
                step_to(t, g, depth, d, NONE, NONE)
                t.path_len[g] = depth + 1
                t.leaf[g] = d
                pending += 1
                break
            if sel.rule == PUCT:
                e = _puct_edge(t, g, d, sel.c_puct, sel.siblings, sel.min_spread)
            elif depth == 0:
                e = _gumbel_root_edge(t, d, halving[g], sel.c_visit, sel.c_scale)
            else:
                e = _gumbel_interior_edge(t, d, sel.c_visit, sel.c_scale)
            c = through_edge(t, g, depth, d, e)
            if c < 0:
                break
            i = choose_outcome(t, c, state)
            t.path[g, depth, 3] = i
            d = child(t, c, i)
            depth += 1
    return pending


@njit(cache=True, inline="always")
def _rescaled(rest, root_rest, scale):
    """A leaf's predicted rest as the root's prediction plus scale times the leaf's difference from it."""
    return max(root_rest + scale * (rest - root_rest), 0.0)


@njit(cache=True)
def expand_and_backup(t, won, win_pills, loss_cleared, loss_pills, moves_prob):
    """Finish the step of the games with a pending leaf, from the evaluator's outputs for the leaves
    in game order (`search_inputs`): won, and the pills to the end of a won game, the viruses cleared
    and pills of a lost one, float32[P]; moves_prob float32[P, 4, 8, 16].

    The leaf gets its legal moves with priors from moves_prob (masked and renormalised; a
    same-colour placement gets planes r and r + 2) and the value `expected_utility` of the
    predictions (pills placed along the path plus the predicted rest), which is backed up. The
    root's predicted pills to a win become the centre of the centred utility.
    """
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    k = 0
    for g in range(len(t.leaf)):
        d = np.int64(t.leaf[g])  # int64 ids, as `descend` passes them
        if d < 0:
            continue
        if t.d_edge_count[d] == UNEXPANDED:
            n = expand(t, d, moves)
            same = t.d_pill[d] % 4 == 0  # pills 0, 4, 8 are the same-colour ones
            total = 0.0
            start = t.d_edge_start[d]
            for e in range(start, start + n):
                r, x, y = t.e_move[e, 0], t.e_move[e, 1], t.e_move[e, 2]
                p = moves_prob[k, r, x, y] + (moves_prob[k, r + 2, x, y] if same else 0.0)
                t.e_prior[e] = p
                total += p
            for e in range(start, start + n):
                t.e_prior[e] = t.e_prior[e] / total if total > 0 else 1.0 / n
        p_win = min(max((won[k] + 1.0) / 2.0, 0.0), 1.0)
        win_rest, loss_rest = max(win_pills[k], 0.0), max(loss_pills[k], 0.0)
        if d == t.root[g]:  # the centred utility's centre: the pills the root is expected to need
            t.root_pills[g] = win_rest
        elif t.uparams[4] != 1.0:  # Utility.rest_scale: the leaf's rest measured from the root's prediction
            win_rest = _rescaled(win_rest, t.root_pills[g], t.uparams[4])
            loss_rest = _rescaled(loss_rest, t.root_pills[g], t.uparams[4])
        cleared_total = t.d_cleared[d] + max(loss_cleared[k], 0.0)
        value = expected_utility(
            t.uparams,
            p_win,
            t.d_pills[d] + win_rest,
            cleared_total,
            t.d_pills[d] + loss_rest,
            t.root_left[g],
            t.root_pills[g],
        )
        t.d_value[d] = value
        backup(t, g, value)
        t.leaf[g] = -1
        k += 1


def search_inputs(prediction: Prediction) -> tuple[np.ndarray, ...]:
    """`expand_and_backup`'s arrays from an evaluator's answer (contiguous float32): won, the three
    outcome-conditioned counts (`Prediction.by_outcome`), moves."""
    arrays = (prediction.won, *prediction.by_outcome(), prediction.moves)
    return tuple(np.ascontiguousarray(a, np.float32) for a in arrays)


# ------------------------------------------------------------------------------------------------
# The searches


_COLOURS = np.array([[p // 3 + 1, p % 3 + 1] for p in range(9)], np.uint8)


def pending_leaves(tree: Tree) -> Leaves:
    """The positions of the leaves `descend` left for evaluation, in game order."""
    leaves = tree.leaf[tree.leaf >= 0]
    return Leaves(tree.d_cells[leaves], _COLOURS[tree.d_pill[leaves]], _COLOURS[tree.d_preview[leaves]])


def _step(tree: Tree, sel: Selection, halving: np.ndarray | None = None) -> Generator[Leaves, Prediction, Tree]:
    """One simulation of every game: descend, have the leaves evaluated (yielded), expand and back
    up. halving int32[G]: each Gumbel root's considered visits. Returns the tree (its pools may
    have grown)."""
    games = len(tree.root)
    tree = reserve(tree, games, games * K.MAX_MOVES, games)
    active = np.ones(games, np.bool_)
    if descend(tree, active, sel, np.zeros(games, np.int32) if halving is None else halving):
        leaves = pending_leaves(tree)
        prediction: Prediction = yield leaves
        check_prediction(prediction, len(leaves.cells))  # the compiled backup reads it unchecked
        expand_and_backup(tree, *search_inputs(prediction))
    return tree


def _plant(
    positions: Sequence[Position],
    seeds: Sequence[int],
    simulations: int,
    utility: Utility | None,
    pill_probs: Sequence[float] | None,
) -> Tree:
    g = len(positions)
    sizes = (g * (simulations + 2), g * (simulations + 2) * 48, g * (simulations + 2))
    return plant(positions, seeds, (utility or Utility()).params, pill_distribution(pill_probs), sizes)


def _root_priors(tree: Tree, g: int) -> np.ndarray:
    d = tree.root[g]
    start, n = tree.d_edge_start[d], tree.d_edge_count[d]
    return tree.e_prior[start : start + n]


def puct_steps(
    positions: Sequence[Position],
    seeds: Sequence[int],
    *,
    simulations: int = 100,
    utility: Utility | None = None,
    pill_probs: Sequence[float] | None = None,
    c_puct: float = 4.0,
    dirichlet_alpha: float = 0.3,
    dirichlet_fraction: float = 0.25,
    normalise: str = "tree",
    min_spread: float = NORMALISE_EPSILON,
) -> Steps:
    """PUCT (module docstring) of each position, as `core.Steps`; seeds make each search
    reproducible on its own (its noise and its chance outcomes)."""
    tree = _plant(positions, seeds, simulations, utility, pill_probs)
    sel = Selection(PUCT, c_puct, 0.0, 0.0, normalise == "siblings", min_spread)
    tree = yield from _step(tree, sel)  # the roots
    priors = []
    for g, seed in enumerate(seeds):
        root_priors = _root_priors(tree, g)
        priors.append(root_priors.astype(np.float64))
        if dirichlet_fraction > 0 and len(root_priors) > 1:
            noise = np.random.default_rng([int(seed), 1]).dirichlet(np.full(len(root_priors), dirichlet_alpha))
            root_priors[:] = (1 - dirichlet_fraction) * root_priors + dirichlet_fraction * noise
    for _ in range(simulations):
        tree = yield from _step(tree, sel)
    out = []
    for g, pos in enumerate(positions):
        _, stats = root_moves(tree, g)
        visits, value = stats[:, 1], np.nan_to_num(stats[:, 2], nan=0.0)
        if visits.sum() > 0:
            target, best = visits, int(np.argmax(visits + 1e-6 * value))  # the value breaks ties
        else:
            target, best = priors[g], int(np.argmax(priors[g]))
        out.append(result(tree, g, pos.pill, target, best, simulations, priors[g]))
    return out


@functools.cache
def considered_visits(m: int, simulations: int) -> np.ndarray:
    """int32[m + 1, simulations]: row k (k moves considered at the root) gives, for each
    simulation, the visits a move must have to be chosen in it. Sequential halving: every
    considered move is visited in turn, then the better half is kept, until one is left, with the
    simulations spread evenly over the log2(k) phases (mctx's schedule)."""
    table = np.zeros((m + 1, simulations), np.int32)
    for k in range(2, m + 1):
        row: list[int] = []
        visits, considered = 0, k
        phases = math.ceil(math.log2(k))
        while len(row) < simulations:
            rounds = max(1, simulations // (phases * considered))
            for _ in range(rounds):
                row += [visits] * considered
                visits += 1
            considered = max(2, considered // 2)
        table[k] = row[:simulations]
    table[1] = np.arange(simulations)  # one move: it takes every simulation
    return table


def gumbel_steps(
    positions: Sequence[Position],
    seeds: Sequence[int],
    *,
    simulations: int = 32,
    utility: Utility | None = None,
    pill_probs: Sequence[float] | None = None,
    m: int = 16,
    c_visit: float = 50.0,
    c_scale: float = 0.1,
    noise: float = 1.0,
) -> Steps:
    """The Gumbel search (module docstring) of each position, as `core.Steps`; seeds make each
    search reproducible on its own (its Gumbel noise and its chance outcomes)."""
    tree = _plant(positions, seeds, simulations, utility, pill_probs)
    sel = Selection(GUMBEL, 0.0, c_visit, c_scale, True, NORMALISE_EPSILON)
    tree = yield from _step(tree, sel)  # the roots
    rows = np.zeros(len(positions), np.int64)
    for g, seed in enumerate(seeds):
        d = tree.root[g]
        start, n = tree.d_edge_start[d], tree.d_edge_count[d]
        gumbel = noise * np.random.default_rng([int(seed), 1]).gumbel(size=n)
        tree.e_gumbel[start : start + n] = np.log(np.maximum(tree.e_prior[start : start + n], 1e-12)) + gumbel
        rows[g] = min(m, n)
    table = considered_visits(m, max(simulations, 1))
    for k in range(simulations):
        tree = yield from _step(tree, sel, table[rows, k])
    out = []
    for g, pos in enumerate(positions):
        d = int(tree.root[g])  # an int64 id, as the compiled callers pass it
        start, n = tree.d_edge_start[d], tree.d_edge_count[d]
        logits = np.empty(n)
        improved_logits(tree, d, c_visit, c_scale, logits)
        visits = tree.e_visits[start : start + n]
        prior = tree.e_prior[start : start + n].astype(np.float64)
        # the move: the most visited (the last one standing), by noise + log prior + sigma(q)
        score = tree.e_gumbel[start : start + n] + (logits - np.log(np.maximum(prior, 1e-12)))
        best = int(np.argmax(np.where(visits == visits.max(), score, -np.inf)))
        out.append(result(tree, g, pos.pill, np.exp(logits - logits.max()), best, simulations, prior))
    return out


def puct_search(
    positions: Sequence[Position], seeds: Sequence[int], evaluator: Evaluator, **settings: Any
) -> list[SearchResult]:
    """`puct_steps` run with evaluator (keyword settings as there)."""
    return run(puct_steps(positions, seeds, **settings), evaluator)


def gumbel_search(
    positions: Sequence[Position], seeds: Sequence[int], evaluator: Evaluator, **settings: Any
) -> list[SearchResult]:
    """`gumbel_steps` run with evaluator (keyword settings as there)."""
    return run(gumbel_steps(positions, seeds, **settings), evaluator)
