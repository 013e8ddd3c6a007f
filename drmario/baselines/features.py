"""Board features for the TD learner (design note 004 feeds a small net hand-picked inputs) and the
compiled expansion its shallow search runs on.

The value is a property of a board with the next pill still unknown, so the features look at the
cells alone. ``FEATURES`` names them; each is scaled to about [0, 1] for typical boards (viruses per
colour go to 2.8 at level 20) so the sigmoid units start unsaturated:

- ``height_0`` .. ``height_7``: each column's height (1 + the highest occupied row) / 16;
- ``max_height``: the tallest column / 16;
- ``holes``: empty cells under an occupied cell of their column / 32;
- ``viruses_red``, ``viruses_yellow``, ``viruses_blue``: viruses left per colour / 10;
- ``viruses``: viruses left / 30;
- ``buried``: viruses with a cell of another colour directly on top / 10;
- ``pairs_v``, ``pairs_h``: vertically / horizontally adjacent same-colour cells / 16;
- ``virus_run3_v``, ``virus_run2_v``, ``virus_run3_h``, ``virus_run2_h``: maximal same-colour runs
  of exactly 3 or 2 cells that hold a virus (one or two more cells of the colour clear it) / 4;
- ``spawn_area``: occupied cells in rows 12-15 of columns 2-5 (where a top out starts) / 16;
- ``pill_cells``: pill halves on the board / 32.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from drmario.engine import kernels as K

FEATURES = (
    *(f"height_{x}" for x in range(K.WIDTH)),
    "max_height",
    "holes",
    "viruses_red",
    "viruses_yellow",
    "viruses_blue",
    "viruses",
    "buried",
    "pairs_v",
    "pairs_h",
    "virus_run3_v",
    "virus_run2_v",
    "virus_run3_h",
    "virus_run2_h",
    "spawn_area",
    "pill_cells",
)
N_FEATURES = len(FEATURES)


@njit(cache=True)
def features_into(cells, out):
    """Features of one board: cells uint8[8, 16] -> out float32[N_FEATURES] (see the module doc)."""
    out[:] = 0.0
    virus = np.zeros(4, np.int64)  # by colour code (1..3)
    runs = np.zeros(4, np.int64)  # run3_v, run2_v, run3_h, run2_h
    tallest, holes, buried, pairs_v, pairs_h, spawn, pills = _cell_counts(cells, out, virus)
    _virus_runs(cells, runs)
    out[8] = tallest / 16.0
    out[9] = holes / 32.0
    for colour in range(1, 4):
        out[9 + colour] = virus[colour] / 10.0
    out[13] = (virus[1] + virus[2] + virus[3]) / 30.0
    out[14] = buried / 10.0
    out[15] = pairs_v / 16.0
    out[16] = pairs_h / 16.0
    for k in range(4):
        out[17 + k] = runs[k] / 4.0
    out[21] = spawn / 16.0
    out[22] = pills / 32.0


@njit(cache=True)
def _cell_counts(cells, heights, virus):
    """One pass over the cells: each column's height / 16 into heights[0:8], viruses by colour added
    to virus[1..3]; returns the counts (tallest column, holes, buried viruses, vertical and
    horizontal same-colour pairs, occupied spawn-area cells, pill halves)."""
    tallest = holes = buried = pairs_v = pairs_h = spawn = pills = 0
    for x in range(K.WIDTH):
        height = 0
        for y in range(K.HEIGHT - 1, -1, -1):
            if cells[x, y] != K.EMPTY:
                height = y + 1
                break
        heights[x] = height / 16.0
        tallest = max(tallest, height)
        for y in range(K.HEIGHT):
            c = cells[x, y]
            if c == K.EMPTY:
                if y < height:
                    holes += 1
                continue
            colour = c & 3
            if c >> 2 == K.VIRUS:
                virus[colour] += 1
                if y + 1 < K.HEIGHT and cells[x, y + 1] != K.EMPTY and cells[x, y + 1] & 3 != colour:
                    buried += 1
            else:
                pills += 1
            if y >= 12 and 2 <= x <= 5:
                spawn += 1
            if y + 1 < K.HEIGHT and cells[x, y + 1] != K.EMPTY and cells[x, y + 1] & 3 == colour:
                pairs_v += 1
            if x + 1 < K.WIDTH and cells[x + 1, y] != K.EMPTY and cells[x + 1, y] & 3 == colour:
                pairs_h += 1
    return tallest, holes, buried, pairs_v, pairs_h, spawn, pills


@njit(cache=True)
def _virus_runs(cells, runs):
    """Maximal same-colour runs of length 2 or 3 that contain a virus, added to runs int64[4]
    (run3_v, run2_v, run3_h, run2_h): vertical runs along each column, then horizontal ones."""
    for vertical in range(2):
        lines, length = (K.WIDTH, K.HEIGHT) if vertical else (K.HEIGHT, K.WIDTH)
        for a in range(lines):
            i = 0
            while i < length:
                c = cells[a, i] if vertical else cells[i, a]
                colour = c & 3
                end, has_virus = i + 1, c != K.EMPTY and c >> 2 == K.VIRUS
                while colour != 0 and end < length:
                    d = cells[a, end] if vertical else cells[end, a]
                    if d == K.EMPTY or d & 3 != colour:
                        break
                    has_virus = has_virus or d >> 2 == K.VIRUS
                    end += 1
                if colour != 0 and has_virus and 2 <= end - i <= 3:
                    runs[(0 if vertical else 2) + (end - i == 2)] += 1
                i = end


@njit(cache=True)
def board_features(boards, out):
    """Batch form: boards uint8[N, 8, 16] -> out float32[N, N_FEATURES]."""
    for i in range(boards.shape[0]):
        features_into(boards[i], out[i])


@njit(cache=True)
def expand(boards, stalls, pills, stall_limit, child, feats, parent, pill_of, moves, outcome, info):
    """Place every pill of pills at every canonical legal move on every board, and resolve.

    boards uint8[M, 8, 16]; stalls int64[M] (pills since a virus was last cleared); pills uint8[P, 2];
    stall_limit <= 0 disables stalemates. Writes, per child, in (board, pill, move) order:
    child uint8[T, 8, 16] (the board after), feats float32[T, N_FEATURES], parent int64[T],
    pill_of int64[T] (index into pills), moves int8[T, 3] (r, x, y), outcome int8[T] (RUNNING, WON,
    TOPPED_OUT, STALEMATE, the game's order of checks), info int64[T, 3] (the stall counter after,
    viruses cleared, viruses left).
    The buffers need T >= M * P * MAX_MOVES.
    Returns T.
    """
    buf = np.empty((K.MAX_MOVES, 3), np.int8)
    t = 0
    for b in range(boards.shape[0]):
        left = 0
        for x in range(K.WIDTH):
            for y in range(K.HEIGHT):
                if boards[b, x, y] != K.EMPTY and boards[b, x, y] >> 2 == K.VIRUS:
                    left += 1
        for p in range(pills.shape[0]):
            n = K.legal_moves_into(boards[b], pills[p, 0], pills[p, 1], buf)
            for j in range(n):
                child[t] = boards[b]
                v, _, _ = K.place_and_resolve(child[t], pills[p, 0], pills[p, 1], buf[j, 0], buf[j, 1], buf[j, 2])
                if v == left:
                    outcome[t] = K.WON
                elif K.spawn_blocked(child[t]):
                    outcome[t] = K.TOPPED_OUT
                elif stall_limit > 0 and v == 0 and stalls[b] + 1 >= stall_limit:
                    outcome[t] = K.STALEMATE
                else:
                    outcome[t] = K.RUNNING
                info[t, 0], info[t, 1], info[t, 2] = 0 if v > 0 else stalls[b] + 1, v, left - v
                features_into(child[t], feats[t])
                parent[t], pill_of[t] = b, p
                moves[t, 0], moves[t, 1], moves[t, 2] = buf[j, 0], buf[j, 1], buf[j, 2]
                t += 1
    return t


@njit(cache=True)
def mlp_values(feats, w1, b1, w2, b2, out):
    """The value network on the CPU without threads (a few thousand boards per search):
    feats float32[T, F], w1 float32[H, F], b1 float32[H], w2 float32[H], b2 float32[1] ->
    out float64[T] = sigmoid(w2 . sigmoid(w1 feats + b1) + b2)."""
    for t in range(feats.shape[0]):
        z = np.float64(b2[0])
        for h in range(w1.shape[0]):
            a = np.float64(b1[h])
            for f in range(w1.shape[1]):
                a += w1[h, f] * feats[t, f]
            z += w2[h] / (1.0 + np.exp(-a))
        out[t] = 1.0 / (1.0 + np.exp(-z))
