"""The "expert": a compiled depth-2 heuristic player (the placement, then the NES preview pill).

A settled board is scored by `evaluate_board`, a weighted sum of hand-made features (`FEATURES`;
higher score = better board). `expert_scores` values every legal placement of the pill to place:
it places and resolves it, then (depth 2, when the preview pill is given) places every legal
placement of the preview pill and keeps the best evaluation. Wins and top-outs are ranked above and
below every evaluation (`WIN_NOW` > `WIN_NEXT` > evaluations > `LOSS_NEXT` > `LOSS_NOW`).

Depth 3 looks one pill further, at the pill after the preview, which nobody sees yet: the
`DEPTH3_BEAM` best moves by their depth-2 score, each with its `DEPTH3_KEEP` best preview
placements, are scored by the best of those placements' expected value over the next pill (the NES
draws the 9 colour pairs uniformly) of its best placement's evaluation. The other moves rank below
the beam; wins and losses within two pills keep their depth-2 rank. At level 20 (200 games on
training seeds) it took 1.56 pills per virus where depth 2 takes 1.88, at 3.6 times the time; a
beam of 8 with 4 placements each took 1.54 at twice depth 3's time (bench/expert_depth.py).

Depth 4 looks one pill further still: in each of depth 3's expectations, the next pill's
`DEPTH4_KEEP` best placements by evaluation are each valued by the expectation over the pill after
it of its best placement's evaluation, and the pill's value is the best of these. On the same 200
games it took 1.47 pills per virus where depth 3 takes 1.56 (0.10 fewer, 95% 0.06 to 0.14), at 8.6
times depth 3's time (46 ms a pill on one core of a Xeon).

The weights are tuned by ``bench/tune_expert.py`` (on training seeds only) and loaded from
``expert_weights.json`` next to this file (`load_weights`); `DEFAULT_WEIGHTS` are only the tuner's
starting point. `expert_search` is the search mode ``expert`` (the arena's ``expert``, the round-0
teacher, the labeller of DAgger positions); at depth 1 it is also a rollout policy.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from numba import njit

from drmario.engine import kernels as K
from drmario.engine.board import Move
from drmario.engine.rules import MOVES_SHAPE, symmetrize
from drmario.search.core import Position, SearchResult, legal_moves_of
from drmario.settings import Settings, setting

# Feature order of the weight vector. Every feature is a count on the settled board; its weight
# carries the sign (negative = bad).
FEATURES: tuple[str, ...] = (
    "viruses",  # viruses left (the dominant term: cleared viruses count through it)
    "buried",  # wrong-colour cells above a virus in its column, over all viruses
    "runs",  # open same-colour runs of 2-3 pill cells, counted length - 1 (2-run 1, 3-run 2)
    "virus_runs",  # the same for runs that hold a virus
    "holes",  # empty cells under an occupied one in their column
    "bumpiness",  # sum of |height difference| of neighbouring columns
    "height",  # sum of the column heights
    "spawn_height",  # the higher of columns 3 and 4 (the spawn columns)
    "need",  # per virus, the fewest same-colour cells still missing from an open line of 4 through it
    "no_line",  # viruses with no open line of 4 (every window through them holds another colour)
    "blockers",  # per virus, the fewest other-colour cells in a window of 4 through it (0 if open)
    "high_cells",  # occupied cells in rows 12-15, weighted 1, 2, 3, 4 by row
    "mixed",  # vertically touching cells of different colours (a colour put on another)
)
N_FEATURES = len(FEATURES)
# Indices into the feature vector (compiled code cannot look names up).
(
    F_VIRUSES,
    F_BURIED,
    F_RUNS,
    F_VIRUS_RUNS,
    F_HOLES,
    F_BUMPINESS,
    F_HEIGHT,
    F_SPAWN_HEIGHT,
    F_NEED,
    F_NO_LINE,
    F_BLOCKERS,
    F_HIGH_CELLS,
    F_MIXED,
) = range(N_FEATURES)
HIGH_ROW = 12  # rows from here up wall off the spawn

DEFAULT_WEIGHTS = np.array(
    [-100.0, -4.0, 2.0, 4.0, -4.0, -1.0, -0.5, -1.0, -5.0, -10.0, -5.0, -10.0, -4.0],
    np.float64,
)
WEIGHTS_FILE = Path(__file__).with_name("expert_weights.json")

# Terminal values: every evaluation is clamped to +-EVAL_CLAMP, far inside these.
WIN_NOW = 3e9  # the placement itself clears the last virus
WIN_NEXT = 2e9  # the preview pill can clear the last virus
LOSS_NEXT = -1e9  # every placement of the preview pill tops out (plus the evaluation after the move)
LOSS_NOW = -2e9  # the placement blocks the spawn
EVAL_CLAMP = 1e8

# Depth 3's beam: the moves rescored, and the preview placements looked past for each.
DEPTH3_BEAM = 4
DEPTH3_KEEP = 3
# Depth 4: the next pill's placements looked past, for each of its colour pairs.
DEPTH4_KEEP = 2
# The pill after the preview, its colour pairs up to order (a pill's placements cover its mirror's):
# the 3 single colours at 1/9 each, the 3 mixed pairs at 2/9.
NEXT_PILLS = np.array([[1, 1], [2, 2], [3, 3], [1, 2], [1, 3], [2, 3]], np.int64)
NEXT_PROBS = np.array([1, 1, 1, 2, 2, 2], np.float64) / 9

# Outcomes of `play_game` (as kernels: 1 won, 2 topped out; 0 = the pill cap ran out).
CAPPED, WON, TOPPED_OUT = K.RUNNING, K.WON, K.TOPPED_OUT


ExpertDepth = Literal[1, 2, 3, 4]


@dataclass(frozen=True)
class ExpertSettings(Settings):
    """The expert's settings."""

    depth: ExpertDepth = setting(
        2,
        "2: the pill and the preview (when known); 1: the pill alone; 3: also the expectation over the pill "
        "after the preview, on a beam (1.56 pills per virus at level 20 where depth 2 takes 1.85, on the 100 "
        "evaluation games; 3.6 times the time); 4: over the two pills after the preview (8.6 times depth 3's time)",
    )
    temperature: float = setting(
        0.0, "the target is softmax(score / T) over the moves; 0: uniform over the tied best moves", ge=0
    )
    weights: str | None = setting(None, "a weights JSON (bench/tune_expert.py); None: the tuned ones")


def load_weights(path: str | Path | None = None) -> np.ndarray:
    """The tuned weights from the tuner's JSON file (``{"features": [...], "weights": [...]}``); a
    copy, read once per path."""
    return _read_weights(str(path or WEIGHTS_FILE)).copy()


@functools.cache
def _read_weights(path: str) -> np.ndarray:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        names, values = data["features"], data["weights"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not an expert weights file ({{'features': [...], 'weights': [...]}}): {e!r}") from e
    if not isinstance(names, list) or tuple(names) != FEATURES:
        raise ValueError(f"{path}: features {names} are not this evaluator's {list(FEATURES)}")
    # the compiled evaluator reads one weight per feature with no bounds check: a short list must not pass
    if not isinstance(values, list) or len(values) != len(FEATURES):
        raise ValueError(f"{path}: expected {len(FEATURES)} weights, one per feature, got {values!r}")
    for name, w in zip(FEATURES, values):
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
            raise ValueError(f"{path}: the weight of {name} is {w!r}, not a finite number")
    return np.asarray(values, np.float64)


# ----------------------------------------------------------------------------------------------
# Board features


def new_scratch() -> np.ndarray:
    """Working memory of `features_into`: bit masks per colour of columns and rows, virus list."""
    return np.empty((6, 128), np.int32)


@njit(cache=True, inline="always")
def _popcount(v):
    """Set bits of a 16-bit value."""
    v = v - ((v >> 1) & 0x5555)
    v = (v & 0x3333) + ((v >> 2) & 0x3333)
    v = (v + (v >> 4)) & 0x0F0F
    return (v + (v >> 8)) & 0x1F


@njit(cache=True)
def features_into(cells, scratch, f):
    """Write the features of a settled board into f: float64[N_FEATURES]. scratch: `new_scratch()`.

    The board is first turned into bit masks (per colour, of each column and each row; colour 0 =
    any cell) so that windows of 4 and runs are a few bit operations each. One function on purpose:
    the features share those masks in one pass, and it runs at every leaf of the depth-2 search.
    """
    f[:] = 0.0
    cols, rows = scratch[:4, :8], scratch[:4, 16:32]  # [colour, x] (bit y), [colour, y] (bit x)
    vcols, vrows, viruses = scratch[4, :8], scratch[4, 16:32], scratch[5]
    cols[:] = 0
    rows[:] = 0
    vcols[:] = 0
    vrows[:] = 0
    nv = 0
    for x in range(K.WIDTH):
        for y in range(K.HEIGHT):
            v = cells[x, y]
            if v == 0:
                continue
            c = v & 3
            cols[c, x] |= 1 << y
            rows[c, y] |= 1 << x
            if v >> 2 == K.VIRUS:
                vcols[x] |= 1 << y
                vrows[y] |= 1 << x
                viruses[nv] = x << 4 | y
                nv += 1
    for x in range(K.WIDTH):
        cols[0, x] = cols[1, x] | cols[2, x] | cols[3, x]
    for y in range(K.HEIGHT):
        rows[0, y] = rows[1, y] | rows[2, y] | rows[3, y]
    # Columns: heights, holes, bumpiness, high cells.
    prev = 0
    for x in range(K.WIDTH):
        occ = cols[0, x]
        h = 0
        while occ >> h:
            h += 1
        f[F_HEIGHT] += h
        f[F_HOLES] += h - _popcount(occ)
        same = 0
        for c in range(1, 4):
            same += _popcount(cols[c, x] & (cols[c, x] >> 1))
        f[F_MIXED] += _popcount(occ & (occ >> 1)) - same
        for y in range(HIGH_ROW, h):
            if occ >> y & 1:
                f[F_HIGH_CELLS] += y - HIGH_ROW + 1
        if x > 0:
            f[F_BUMPINESS] += abs(h - prev)
        if x == K.SPAWN_X or x == K.SPAWN_X + 1:
            f[F_SPAWN_HEIGHT] = max(f[F_SPAWN_HEIGHT], h)
        prev = h
    # Viruses: count, wrong-colour cells above, and the windows of 4 through each: an open one (no
    # other colour) gives the cells still missing, else the fewest other-colour cells to clear.
    f[F_VIRUSES] = nv
    for i in range(nv):
        x, y = viruses[i] >> 4, viruses[i] & 15
        c = cells[x, y] & 3
        other_col = cols[0, x] & ~cols[c, x]
        f[F_BURIED] += _popcount(other_col >> (y + 1))
        same_row, other_row = rows[c, y], rows[0, y] & ~rows[c, y]
        best, fewest = 5, 4
        for x0 in range(max(0, x - 3), min(K.WIDTH - 4, x) + 1):
            w = 15 << x0
            if other_row & w == 0:
                best = min(best, 4 - _popcount(same_row & w))
            else:
                fewest = min(fewest, _popcount(other_row & w))
        same_col = cols[c, x]
        for y0 in range(max(0, y - 3), min(K.HEIGHT - 4, y) + 1):
            w = 15 << y0
            if other_col & w == 0:
                best = min(best, 4 - _popcount(same_col & w))
            else:
                fewest = min(fewest, _popcount(other_col & w))
        if best == 5:
            f[F_NO_LINE] += 1.0
            f[F_BLOCKERS] += fewest
        else:
            f[F_NEED] += best
    # Open runs of 2-3 same-colour cells: vertical ones need room above (an empty cell on top and
    # the rows to reach 4), horizontal ones enough empty or same-colour cells around to reach 4.
    for c in range(1, 4):
        for x in range(K.WIDTH):
            m = cols[c, x]
            starts = m & ~(m << 1)
            while starts:
                y0 = _lowest_bit(starts)
                starts &= starts - 1
                n = _run_length(m, y0)
                top = y0 + n
                if 2 <= n <= 3 and top + 4 - n <= K.HEIGHT and not (cols[0, x] >> top) & 1:
                    virus = vcols[x] & (((1 << n) - 1) << y0)
                    f[F_VIRUS_RUNS if virus else F_RUNS] += n - 1
        for y in range(K.HEIGHT):
            m = rows[c, y]
            starts = m & ~(m << 1)
            room = 255 & ~(rows[0, y] & ~m)  # empty or this colour
            while starts:
                x0 = _lowest_bit(starts)
                starts &= starts - 1
                n = _run_length(m, x0)
                if 2 <= n <= 3:
                    lo, hi = x0, x0 + n
                    while lo > 0 and (room >> (lo - 1)) & 1:
                        lo -= 1
                    while hi < K.WIDTH and (room >> hi) & 1:
                        hi += 1
                    if hi - lo >= 4:
                        virus = vrows[y] & (((1 << n) - 1) << x0)
                        f[F_VIRUS_RUNS if virus else F_RUNS] += n - 1


@njit(cache=True, inline="always")
def _lowest_bit(m):
    """Index of the lowest set bit of m (m > 0)."""
    i = 0
    while not (m >> i) & 1:
        i += 1
    return i


@njit(cache=True, inline="always")
def _run_length(m, i):
    """Length of the run of set bits of m from bit i up."""
    n = 0
    while (m >> (i + n)) & 1:
        n += 1
    return n


@njit(cache=True)
def _evaluate(cells, weights, scratch, f):
    features_into(cells, scratch, f)
    s = 0.0
    for i in range(f.shape[0]):
        s += weights[i] * f[i]
    return min(max(s, -EVAL_CLAMP), EVAL_CLAMP)


@njit(cache=True)
def evaluate_board(cells, weights):
    """Static value of a settled board (higher = better): the weighted sum of its features."""
    scratch = np.empty((6, 128), np.int32)
    f = np.empty(N_FEATURES)
    return _evaluate(cells, weights, scratch, f)


def board_features(cells: np.ndarray) -> dict[str, float]:
    """The features of a board by name (for study; the search calls the compiled form)."""
    f = np.empty(N_FEATURES)
    features_into(_writable(cells), new_scratch(), f)
    return dict(zip(FEATURES, f.tolist()))


# ----------------------------------------------------------------------------------------------
# Search


@njit(cache=True, inline="always")
def _line_through(board, x, y):
    """Whether the cell (x, y) is in a horizontal or vertical run of 4+ of its colour."""
    c = board[x, y] & 3
    lo, hi = x, x
    while lo > 0 and board[lo - 1, y] != 0 and board[lo - 1, y] & 3 == c:
        lo -= 1
    while hi < K.WIDTH - 1 and board[hi + 1, y] != 0 and board[hi + 1, y] & 3 == c:
        hi += 1
    if hi - lo >= 3:
        return True
    lo, hi = y, y
    while lo > 0 and board[x, lo - 1] != 0 and board[x, lo - 1] & 3 == c:
        lo -= 1
    while hi < K.HEIGHT - 1 and board[x, hi + 1] != 0 and board[x, hi + 1] & 3 == c:
        hi += 1
    return hi - lo >= 3


@njit(cache=True)
def place_quick(board, a, b, r, x, y):
    """`kernels.place_and_resolve` without the resolve pass when the pill makes no line (nothing
    can clear then): the same board, viruses cleared returned. In place."""
    K.write_pill(board, a, b, r, x, y)
    if r & 1:
        line = _line_through(board, x, y) or (y + 1 < K.HEIGHT and _line_through(board, x, y + 1))
    else:
        line = _line_through(board, x, y) or _line_through(board, x + 1, y)
    if not line:
        return 0
    v, _, _ = K.resolve(board)
    return v


def expert_scores(
    cells: np.ndarray,
    a: int,
    b: int,
    pa: int,
    pb: int,
    weights: np.ndarray,
    moves: np.ndarray,
    scores: np.ndarray,
    depth: int = 2,
    beam: int = DEPTH3_BEAM,
    keep: int = DEPTH3_KEEP,
) -> int:
    """Fill moves (int8[>=MAX_MOVES, 3]) with the legal moves of pill (a, b) and scores
    (float64[>=MAX_MOVES]) with their values; depth 2 (or 3) over the preview pill (pa, pb) when
    pa > 0, depth 1 when pa == 0 (depth 3's beam and keep: module docstring). Returns the number of
    moves (0 when the spawn is blocked). Compiled code calls `scores_into`."""
    a, b, pa, pb, depth, beam, keep = (int(v) for v in (a, b, pa, pb, depth, beam, keep))
    return scores_into(_writable(cells), a, b, pa, pb, weights, moves, scores, depth, beam, keep)


def score_moves(
    cells: np.ndarray,
    a: int,
    b: int,
    pa: int,
    pb: int,
    weights: np.ndarray,
    moves: np.ndarray,
    n: int,
    scores: np.ndarray,
    depth: int = 2,
    beam: int = DEPTH3_BEAM,
    keep: int = DEPTH3_KEEP,
) -> None:
    """`expert_scores` of the first n rows of moves (legal moves of pill (a, b), given: the NES
    timing's reachable ones, say); the preview's placements stay the timing-free ones."""
    a, b, pa, pb, n, depth, beam, keep = (int(v) for v in (a, b, pa, pb, n, depth, beam, keep))
    _score_moves(_writable(cells), a, b, pa, pb, weights, moves, n, scores, depth, beam, keep)


def _writable(cells: np.ndarray) -> np.ndarray:
    return np.require(cells, np.uint8, ["C", "W"])  # a board's cells are read-only: copied


# The compiled entries take every argument, as a writable board and int64 numbers: a read-only board,
# uint8 colours or a constant argument would each compile the whole search again (seconds apiece).


@njit(cache=True)
def scores_into(cells, a, b, pa, pb, weights, moves, scores, depth, beam, keep):
    """`expert_scores` for compiled callers (see above)."""
    n = K.legal_moves_into(cells, a, b, moves)
    _score_moves(cells, a, b, pa, pb, weights, moves, n, scores, depth, beam, keep)
    return n


@njit(cache=True)
def depth1_scores_into(cells, a, b, weights, moves, scores):
    """`scores_into` at depth 1 (no preview; a rollout policy)."""
    zero = np.int64(0)
    return scores_into(cells, np.int64(a), np.int64(b), zero, zero, weights, moves, scores, np.int64(1), zero, zero)


ONE_PLY_SCALE = 16.0  # the score gap (a virus is worth 100) at which a placement's plane value halves


@njit(cache=True)
def one_ply_planes_into(cells, pills, weights, scale, out):
    """The expert's one-ply preference among each position's placements, as network input planes.

    cells uint8[N, 8, 16], pills uint8[N, 2] -> out float32[N, 4, 8, 16] [r, x, y]: at each legal
    move 1 / (1 + gap / scale), gap = its depth-1 score below the best move's (1 at the best); 0 at
    illegal moves; a same-colour pill's planes r and r + 2 are equal (as in its legal-move mask).
    """
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    scores = np.empty(K.MAX_MOVES)
    board = np.empty((K.WIDTH, K.HEIGHT), np.uint8)  # a writable copy: the search places on it
    out[:] = 0
    for i in range(cells.shape[0]):
        board[:] = cells[i]
        a, b = np.int64(pills[i, 0]), np.int64(pills[i, 1])
        n = depth1_scores_into(board, a, b, weights, moves, scores)
        if n == 0:
            continue
        best = scores[:n].max()
        for j in range(n):
            r, x, y = moves[j, 0], moves[j, 1], moves[j, 2]
            v = 1.0 / (1.0 + (best - scores[j]) / scale)
            out[i, r, x, y] = v
            if a == b:
                out[i, r + 2, x, y] = v


@njit(cache=True)
def _score_moves(cells, a, b, pa, pb, weights, moves, n, scores, depth, beam, keep):
    if n == 0:
        return
    _score_depth2(cells, a, b, pa, pb, weights, moves, n, scores)
    if depth >= 3 and pa > 0:
        _rescore_depth3(cells, a, b, pa, pb, weights, moves, n, scores, beam, keep, depth)


@njit(cache=True)
def _score_depth2(cells, a, b, pa, pb, weights, moves, n, scores):
    scratch = np.empty((6, 128), np.int32)
    f = np.empty(N_FEATURES)
    moves2 = np.empty((K.MAX_MOVES, 3), np.int8)
    b1 = np.empty_like(cells)
    b2 = np.empty_like(cells)
    left0 = K.count_viruses(cells)
    for j in range(n):
        b1[:] = cells
        left1 = left0 - place_quick(b1, a, b, moves[j, 0], moves[j, 1], moves[j, 2])
        if left1 == 0:
            scores[j] = WIN_NOW
            continue
        if K.spawn_blocked(b1):
            scores[j] = LOSS_NOW - left1
            continue
        if pa == 0:
            scores[j] = _evaluate(b1, weights, scratch, f)
            continue
        m = K.legal_moves_into(b1, pa, pb, moves2)
        best = LOSS_NEXT + _evaluate(b1, weights, scratch, f)  # every preview placement tops out
        for k in range(m):
            b2[:] = b1
            left2 = left1 - place_quick(b2, pa, pb, moves2[k, 0], moves2[k, 1], moves2[k, 2])
            if left2 == 0:
                best = WIN_NEXT
                break
            if K.spawn_blocked(b2):
                continue
            best = max(best, _evaluate(b2, weights, scratch, f))
        scores[j] = best


@njit(cache=True)
def _rescore_depth3(cells, a, b, pa, pb, weights, moves, n, scores, beam, keep, depth=3):
    """Depth 3 (or 4) on the beam of depth-2 scores (module docstring), in place."""
    scratch = np.empty((6, 128), np.int32)
    f = np.empty(N_FEATURES)
    moves2 = np.empty((K.MAX_MOVES, 3), np.int8)
    moves3 = np.empty((K.MAX_MOVES, 3), np.int8)
    moves4 = np.empty((K.MAX_MOVES, 3), np.int8)
    b1 = np.empty_like(cells)
    b2 = np.empty_like(cells)
    b3 = np.empty_like(cells)
    b4 = np.empty_like(cells)
    evals = np.empty(K.MAX_MOVES)
    evals4 = np.empty(K.MAX_MOVES)
    taken = 0
    for j in np.argsort(-scores[:n]):
        if abs(scores[j]) > EVAL_CLAMP:  # a win or a loss within two pills: ranked as at depth 2
            continue
        if taken == beam:
            scores[j] = -2 * EVAL_CLAMP  # below the beam, above every loss
            continue
        taken += 1
        b1[:] = cells
        place_quick(b1, a, b, moves[j, 0], moves[j, 1], moves[j, 2])
        m = _placement_evals(b1, pa, pb, weights, moves2, b2, evals, scratch, f)
        best = -2 * EVAL_CLAMP
        for k in np.argsort(-evals[:m])[:keep]:
            if evals[k] == -np.inf:
                break
            b2[:] = b1
            place_quick(b2, pa, pb, moves2[k, 0], moves2[k, 1], moves2[k, 2])
            if depth >= 4:
                value = _expected_depth4(b2, weights, moves3, b3, moves4, b4, evals4, scratch, f)
            else:
                value = _expected_best(b2, weights, moves3, b3, scratch, f)
            best = max(best, value)
        scores[j] = best


@njit(cache=True)
def _expected_depth4(board, weights, moves3, b3, moves4, b4, evals, scratch, f):
    """Depth 4's value of a board after the preview: E over the next pill of the best, among its
    `DEPTH4_KEEP` best placements by evaluation, of `_expected_best` after it (-EVAL_CLAMP where every
    placement tops out)."""
    expected = 0.0
    for c in range(NEXT_PILLS.shape[0]):
        a, b = NEXT_PILLS[c, 0], NEXT_PILLS[c, 1]
        m = _placement_evals(board, a, b, weights, moves3, b3, evals, scratch, f)
        value = -EVAL_CLAMP
        for k in np.argsort(-evals[:m])[:DEPTH4_KEEP]:
            if evals[k] == -np.inf:
                break
            b3[:] = board
            place_quick(b3, a, b, moves3[k, 0], moves3[k, 1], moves3[k, 2])
            value = max(value, _expected_best(b3, weights, moves4, b4, scratch, f))
        expected += NEXT_PROBS[c] * value
    return expected


@njit(cache=True)
def _placement_evals(board, a, b, weights, moves, out, evals, scratch, f):
    """Fill moves with the placements of pill (a, b) on board and evals with their evaluations
    (-inf where one tops out; out: scratch board); returns how many."""
    m = K.legal_moves_into(board, a, b, moves)
    for k in range(m):
        out[:] = board
        place_quick(out, a, b, moves[k, 0], moves[k, 1], moves[k, 2])
        evals[k] = -np.inf if K.spawn_blocked(out) else _evaluate(out, weights, scratch, f)
    return m


@njit(cache=True)
def _expected_best(board, weights, moves, out, scratch, f):
    """E over the next pill (the NES's 9 colour pairs) of its best placement's evaluation."""
    expected = 0.0
    for c in range(NEXT_PILLS.shape[0]):
        expected += NEXT_PROBS[c] * _best_placement(
            board, NEXT_PILLS[c, 0], NEXT_PILLS[c, 1], weights, moves, out, scratch, f
        )
    return expected


@njit(cache=True)
def _best_placement(board, a, b, weights, moves, out, scratch, f):
    """The best evaluation over the placements of pill (a, b) on board (out: scratch board);
    -EVAL_CLAMP when every one tops out."""
    m = K.legal_moves_into(board, a, b, moves)
    best = -EVAL_CLAMP
    for k in range(m):
        out[:] = board
        place_quick(out, a, b, moves[k, 0], moves[k, 1], moves[k, 2])
        if not K.spawn_blocked(out):
            best = max(best, _evaluate(out, weights, scratch, f))
    return best


def expert_move(
    cells: np.ndarray,
    a: int,
    b: int,
    pa: int,
    pb: int,
    weights: np.ndarray,
    seed: int,
    moves: np.ndarray,
    scores: np.ndarray,
    depth: int = 2,
) -> int:
    """Index into moves of the expert's choice for pill (a, b) with preview (pa, pb) (pa = 0: depth 1);
    -1 when there is no legal move. seed (nonzero) drives the tie-break."""
    n = expert_scores(cells, a, b, pa, pb, weights, moves, scores, depth)
    if n == 0:
        return -1
    return K.argmax_ties(scores, n, np.array([seed], np.uint64))


@njit(cache=True)
def tie_seed(game_seed, pill_index):
    """A nonzero tie-break seed for one decision (a splitmix64 hash of the game seed and pill index),
    so the compiled game loop and a move-by-move player make the same choices."""
    z = np.uint64(game_seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(pill_index + 1)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return (z ^ (z >> np.uint64(31))) | np.uint64(1)


@njit(cache=True)
def play_game(cells, pills, weights, depth, game_seed, max_pills, record, beam=DEPTH3_BEAM, keep=DEPTH3_KEEP):
    """Play one NES game to its end with the expert (no stalemate rule) from the start board cells
    and the 128-pill list pills (uint8[128, 2], thrown in order, repeating). depth 2 looks at the
    preview, depth 3 past it. The moves go to record (int8[>=max_pills, 3]).

    Returns (outcome, viruses cleared, pills used); outcome CAPPED when max_pills ran out.
    """
    board = cells.copy()
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    scores = np.empty(K.MAX_MOVES)
    state = np.empty(1, np.uint64)
    left = K.count_viruses(board)
    cleared = 0
    for k in range(max_pills):
        a, b = np.int64(pills[k % 128, 0]), np.int64(pills[k % 128, 1])
        pa, pb = np.int64(pills[(k + 1) % 128, 0]), np.int64(pills[(k + 1) % 128, 1])
        if depth < 2:
            pa, pb = np.int64(0), np.int64(0)
        n = scores_into(board, a, b, pa, pb, weights, moves, scores, np.int64(depth), np.int64(beam), np.int64(keep))
        if n == 0:
            return TOPPED_OUT, cleared, k
        state[0] = tie_seed(game_seed, k)
        j = K.argmax_ties(scores, n, state)
        record[k, 0], record[k, 1], record[k, 2] = moves[j, 0], moves[j, 1], moves[j, 2]
        v, _, _ = K.place_and_resolve(board, a, b, moves[j, 0], moves[j, 1], moves[j, 2])
        cleared += v
        left -= v
        if left == 0:
            return WON, cleared, k + 1
        if K.spawn_blocked(board):
            return TOPPED_OUT, cleared, k + 1
    return CAPPED, cleared, max_pills


@njit(cache=True)
def play_games(starts, pills, weights, depth, game_seeds, max_pills, out, beam=DEPTH3_BEAM, keep=DEPTH3_KEEP):
    """`play_game` over a batch: starts uint8[N, 8, 16], pills uint8[N, 128, 2], game_seeds int64[N];
    out int64[N, 3] gets (outcome, viruses cleared, pills used) per game."""
    record = np.empty((max_pills, 3), np.int8)
    for i in range(starts.shape[0]):
        o, c, p = play_game(starts[i], pills[i], weights, depth, game_seeds[i], max_pills, record, beam, keep)
        out[i, 0], out[i, 1], out[i, 2] = o, c, p


# ----------------------------------------------------------------------------------------------
# The search mode


def expert_target(scores: np.ndarray, temperature: float) -> np.ndarray:
    """The expert's moves target from its scores float[n]: softmax(score / T), or at T = 0 the
    tied best moves (within 1e-9) sharing the mass equally."""
    if temperature > 0:
        w = np.exp((scores - scores.max()) / temperature)
    else:
        w = (scores >= scores.max() - 1e-9).astype(np.float64)
    return w / w.sum()


def expert_search(
    positions: Sequence[Position],
    seeds: Sequence[int],
    *,
    depth: int = 2,
    temperature: float = 0.0,
    weights: str | Path | None = None,
) -> list[SearchResult]:
    """The expert's choice in each position: every move's score (depth 2 over the preview when it is
    known, depth 3 past it), the best move (ties broken by the seed), and a sharp target
    (`expert_target`). Not a tree search: visits are 0, the values are its scores. Under NES timing
    (`Position.speed_index`) it chooses among the reachable moves; its look at the preview (and past
    it) stays timing-free."""
    w = load_weights(weights)
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    scores = np.empty(K.MAX_MOVES)
    out = []
    for pos, seed in zip(positions, seeds):
        known = depth >= 2 and pos.preview is not None
        pa, pb = (int(pos.preview.left), int(pos.preview.right)) if known else (0, 0)  # type: ignore[union-attr]
        if pos.speed_index is None:
            n = expert_scores(pos.cells, int(pos.pill.left), int(pos.pill.right), pa, pb, w, moves, scores, depth)
        else:  # NES timing: the reachable moves only
            n = legal_moves_of(pos, moves)
            score_moves(pos.cells, int(pos.pill.left), int(pos.pill.right), pa, pb, w, moves, n, scores, depth)
        if n == 0:
            raise ValueError("a spawn cell is occupied, so there is no move to choose")
        best = K.argmax_ties(scores, n, np.array([seed | 1], np.uint64))
        rows = moves[:n].astype(np.intp)
        dense = np.zeros(MOVES_SHAPE, np.float32)
        dense[rows[:, 0], rows[:, 1], rows[:, 2]] = expert_target(scores[:n], temperature)
        listed = [Move(*m) for m in moves[:n].tolist()]
        out.append(
            SearchResult(
                pill=pos.pill,
                moves=listed,
                prior=np.full(n, 1.0 / n),
                visits=np.zeros(n),
                value=scores[:n].copy(),
                target=symmetrize(dense, pos.pill.same_colour),
                best=listed[best],
                simulations=0,
            )
        )
    return out
