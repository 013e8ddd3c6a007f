"""Compiled frame-exact placement search (numba); the Python API is `drmario.engine.timing`.

The rules are RULES.md, "Frame-exact timing". A board is ``uint8[8, 16]`` ([x, y], y = 0 at the
bottom), a pose ``(r, x, y)`` is flattened to ``r * 128 + x * 16 + y`` (the layout of the
``[4, 8, 16]`` move arrays). Inputs are bit sets of the buttons held on a frame: ``L R D A B`` =
1, 2, 4, 8, 16.

The search is a breadth-first search over frames of the state after each frame: pose, gravity
counter ``g`` (0..v), held direction with its DAS counter (``h``: 0 none, 1 + das Left,
17 + das Right), A/B held (``ab``), and the frame counter's parity. Exact reductions keep it small:
Down+Left is Left and Down on an even frame is nothing (Down only acts alone on odd frames); DAS is
not kept while no direction is held (the next press resets it), nor while it cannot reach 16 in the
frames left; Left held at the left wall is nothing held; a direction held before a frame on which
only a soft drop keeps any wanted pose in time is let go; and holding A or B past the press frame is
never tried, nor is a state kept that only differs from a visited one by more held rotation buttons
(releasing them loses nothing).

What makes it fast is a lower bound on the frames each pose can still need (`_vertical_bounds`, a
relaxed pose graph `_relaxed_graph`, `_lower_bounds`): a state is kept only while some pose not yet
placed can still be reached within its budget. The first pass gives each pose its lower bound from
the spawn as the budget; a pose found within its budget is final (every faster path was kept).
Later passes search again for the rest with larger budgets (`PASS_SLACK`), capped at one frame
less than a path already found, and the last with none, which makes the result exact: every pose's
frames is the minimum, and a pose no pass finds is unreachable.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from drmario.engine.kernels import EMPTY, HEIGHT, SPAWN_X, SPAWN_Y, WIDTH, resting_states

# speedCounterTable (NTSC, data/drmario_data_game.asm): frames per row = value + 1.
SPEED_COUNTER = np.array(
    [69, 67, 65, 63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39]
    + [37, 35, 33, 31, 29, 27, 25, 23, 21, 19, 18, 17, 16, 15, 14, 13]
    + [12, 11, 10, 9, 9, 8, 8, 7, 7, 6, 6, 5, 5, 5, 5, 5]
    + [5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 3, 3, 3, 3]
    + [3, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0],
    np.int64,
)
MAX_SPEED_INDEX = len(SPEED_COUNTER) - 1  # 80
BTN_L, BTN_R, BTN_D, BTN_A, BTN_B = 1, 2, 4, 8, 16
N_POSES = 4 * WIDTH * HEIGHT  # 512
N_HELD = 33  # h: 0 none, 1..16 Left with DAS 0..15, 17..32 Right with DAS 0..15
DAS_FIRST, DAS_RELOAD, DAS_BLOCKED = 16, 10, 15  # hor_accel_speed; 16 - hor_max_speed; retry next frame
MAX_ATTEMPTS = HEIGHT + 1  # drop attempts from the top row to the floor, the failing one included
UNBOUNDED = 1 << 24  # a frame budget that prunes nothing
UNREACHED = 1 << 30
PASS_SLACK = (0, 4, 16, UNBOUNDED)  # each pass's budget over a pose's lower bound (the last: none)

# Workspace: the visited bits of the largest state space (v = 69), zero between calls.
WORK_WORDS = (2 * 4 * N_HELD * (int(SPEED_COUNTER.max()) + 1) * N_POSES + 63) // 64


def new_workspace() -> np.ndarray:
    """A zeroed uint64[WORK_WORDS] workspace for `reachable_into` (left zeroed after each call)."""
    return np.zeros(WORK_WORDS, np.uint64)


# ---------------------------------------------------------------------------------- one frame


@njit(cache=True)
def fit_masks(cells, fit_h, fit_v):
    """Per-row bit masks of the x where a pill fits: fit_h[y] horizontal (cells x and x + 1 empty),
    fit_v[y] vertical (cells (x, y) and (x, y + 1) empty; above the top row counts as empty)."""
    above = 0xFF
    for y in range(HEIGHT - 1, -1, -1):
        e = 0
        for x in range(WIDTH):
            if cells[x, y] == EMPTY:
                e |= 1 << x
        fit_h[y] = e & (e >> 1) & 0x7F
        fit_v[y] = e & above
        above = e


@njit(cache=True, inline="always")
def fits(fit_h, fit_v, r, x, y):
    """pillMoveValidation: the pill with rotation r and bottom-left cell (x, y) is in the bottle
    (horizontal x <= 6, y >= 0) and on empty cells."""
    if x < 0 or x >= WIDTH or y < 0:
        return False
    if r & 1:
        return (fit_v[y] >> x) & 1 != 0
    return (fit_h[y] >> x) & 1 != 0


@njit(cache=True, inline="always")
def _turn(fit_h, fit_v, y, x, nr, left_held, r0, x0):
    """pillRotateValidation for a turn to nr: to vertical in place; to horizontal in place (then one
    more column left if Left is held and it fits), else one column left (the wall kick); else back to
    (r0, x0), the pose from before the frame's first turn. Returns (r, x)."""
    if nr & 1:
        if fits(fit_h, fit_v, nr, x, y):
            return nr, x
        return r0, x0
    if fits(fit_h, fit_v, nr, x, y):
        if left_held and fits(fit_h, fit_v, nr, x - 1, y):
            return nr, x - 1
        return nr, x
    if fits(fit_h, fit_v, nr, x - 1, y):
        return nr, x - 1
    return r0, x0


@njit(cache=True, inline="always")
def _shift(fit_h, fit_v, r, x, y, h, d):
    """fallingPill_checkXMove with direction d held (0 none, 1 Left, 2 Right): a fresh press moves at
    once (DAS 0); held, DAS counts up and moves at 16 (then reloads to 10); a blocked move sets DAS to
    15, a wall leaves it. Returns (x, h)."""
    if d == 0:
        return x, 0
    if h == 0 or (h <= 16) != (d == 1):
        das = 0
        move = True
    else:
        das = (h - 1 if d == 1 else h - 17) + 1
        move = das >= DAS_FIRST
        if move:
            das = DAS_RELOAD
    if move:
        if d == 2:
            if x != 6 + (r & 1):
                if fits(fit_h, fit_v, r, x + 1, y):
                    x += 1
                else:
                    das = DAS_BLOCKED
        elif x != 0:
            if fits(fit_h, fit_v, r, x - 1, y):
                x -= 1
            else:
                das = DAS_BLOCKED
    return x, (1 if d == 1 else 17) + das


@njit(cache=True, inline="always")
def _rotate(fit_h, fit_v, r, x, y, press_a, press_b, left):
    """fallingPill_checkRotate: A turns clockwise, then B counter-clockwise, each from the pose the
    frame's first turn started from when it fails. Returns (r, x)."""
    r0, x0 = r, x
    if press_a:
        r, x = _turn(fit_h, fit_v, y, x, (r + 1) & 3, left, r0, x0)
    if press_b:
        r, x = _turn(fit_h, fit_v, y, x, (r + 3) & 3, left, r0, x0)
    return r, x


@njit(cache=True, inline="always")
def frame(fit_h, fit_v, v, odd, x, y, r, g, h, ab, inp):
    """One frame of the falling pill: vertical step, then horizontal, then rotation.

    odd: the frame counter's parity on this frame; inp: the buttons held (never Left and Right
    together); h, ab: the held direction with its DAS, and A/B held, after the previous frame.
    Returns (locked, x, y, r, g, h, ab): when locked, (x, y, r) is the lock pose.
    """
    if odd and (inp & 7) == BTN_D:  # soft drop: odd frames, d-pad Down alone
        drop = True
        g = 0
    else:
        g += 1
        drop = g > v
        if drop:
            g = 0
    if drop:
        if not fits(fit_h, fit_v, r, x, y - 1):
            return True, x, y, r, g, h, ab
        y -= 1
    x, h = _shift(fit_h, fit_v, r, x, y, h, 1 if inp & BTN_L else (2 if inp & BTN_R else 0))
    press_a = (inp & BTN_A) != 0 and (ab & 1) == 0
    press_b = (inp & BTN_B) != 0 and (ab & 2) == 0
    if press_a or press_b:
        r, x = _rotate(fit_h, fit_v, r, x, y, press_a, press_b, (inp & BTN_L) != 0)
    return False, x, y, r, g, h, (1 if inp & BTN_A else 0) | (2 if inp & BTN_B else 0)


# ---------------------------------------------------------------------------------- bounds


@njit(cache=True)
def _vertical_bounds(v):
    """vlb[n, g, p]: the fewest frames to make n drop attempts from gravity counter g when the next
    frame's parity is p (soft drops on odd frames, gravity when the counter passes v). int32[18, v + 1, 2]."""
    vlb = np.zeros((MAX_ATTEMPTS + 1, v + 1, 2), np.int32)
    for n in range(1, MAX_ATTEMPTS + 1):
        for g in range(v, -1, -1):
            for p in range(2):
                best = 1 + (vlb[n - 1, 0, 1 - p] if g + 1 > v else vlb[n, g + 1, 1 - p])  # gravity, or wait
                if p == 1:
                    best = min(best, 1 + vlb[n - 1, 0, 0])
                vlb[n, g, p] = best
    return vlb


@njit(cache=True)
def _relaxed_graph(fit_h, fit_v, start, succ, nsucc, dist):
    """A relaxed one-frame move graph over the poses reachable from start, with their distances.

    One relaxed frame: drop a row or not, move a column or not, then turn a quarter or not and shift
    one column left or not; every pose on the way must fit. Every real frame is one of these, so
    relaxed distances are lower bounds on frames. succ: int16[512, 40], nsucc: int32[512] (0 for
    poses not reached), dist: int32[512] (UNREACHED where none); all overwritten.
    """
    nsucc[:] = 0
    dist[:] = UNREACHED
    queue = np.empty(N_POSES, np.int32)
    dist[start] = 0
    queue[0] = start
    head, tail = 0, 1
    while head < tail:
        p = queue[head]
        head += 1
        r, x, y = p >> 7, (p >> 4) & 7, p & 15
        here = fit_v if r & 1 else fit_h
        n = 0
        for yy in range(y, max(y - 2, -1), -1):
            if not (here[yy] >> x) & 1:
                continue
            moved = ((1 << x) | (2 << x) | ((1 << x) >> 1)) & here[yy]  # x - 1, x, x + 1 where they fit
            shifted = moved | (moved >> 1)
            for dr in (0, 1, 3):
                rr = (r + dr) & 3
                m = shifted & (fit_v[yy] if rr & 1 else fit_h[yy])
                for xr in range(WIDTH):
                    q = rr * 128 + xr * 16 + yy
                    if (m >> xr) & 1 and q != p:
                        succ[p, n] = q
                        n += 1
                        if dist[q] == UNREACHED:
                            dist[q] = dist[p] + 1
                            queue[tail] = q
                            tail += 1
        nsucc[p] = n


@njit(cache=True)
def _deadlines(succ, nsucc, target, budget, deadline):
    """deadline[p]: the last frame after which a pill at pose p can still lock at an open target
    within its budget, by the relaxed graph: max(budget[p] - 1 if p is a target, deadline[q] - 1 for
    each successor q). Rows are done bottom-up (moves never go up), each to a fixed point."""
    deadline[:] = -UNREACHED
    for y in range(HEIGHT):
        changed = True
        first = True
        while changed:
            changed = False
            for r in range(4):
                for x in range(WIDTH):
                    p = r * 128 + x * 16 + y
                    if nsucc[p] == 0 and not target[p]:
                        continue
                    best = deadline[p]
                    if first and target[p]:
                        best = max(best, budget[p] - 1)
                    for k in range(nsucc[p]):
                        best = max(best, deadline[succ[p, k]] - 1)
                    if best > deadline[p]:
                        deadline[p] = best
                        changed = True
            first = False


@njit(cache=True)
def _lower_bounds(v, parity, vlb, dist, lower):
    """lower[p]: a lower bound on the frames from the spawn to a lock at pose p: enough drop attempts
    (vlb), the relaxed distance, the lateral pace (the same direction at most every other frame by
    the d-pad, plus one more column left every other frame by a turn), and a lock frame that can
    attempt a drop (odd, or by gravity from frame v + 1 on), and two quarter turns for r = 2 (the same
    button twice, released in between)."""
    for p in range(N_POSES):
        if dist[p] >= UNREACHED:
            lower[p] = UNREACHED
            continue
        r, x = p >> 7, (p >> 4) & 7
        dx = x - SPAWN_X
        pace = 2 * dx - 1 if dx > 0 else (2 * ((1 - dx) // 2) - 1 if dx < 0 else 0)
        turns = 3 if r == 2 else (1 if r & 1 else 0)  # twice the same way: a button pressed afresh
        t = max(vlb[SPAWN_Y - (p & 15) + 1, 0, parity], dist[p] + 1, pace + 1, turns + 1)
        if (parity + t - 1) & 1 == 0 and t <= v:
            t += 1
        lower[p] = t


# ---------------------------------------------------------------------------------- search


@njit(cache=True, inline="always")
def _dense(pose, g, h, ab, p, G):
    """The bit of a state in the visited set."""
    return ((((p * 4 + ab) * N_HELD + h) * G + g) << 9) | pose


@njit(cache=True)
def _grown(queue):
    bigger = np.empty((2 * queue.shape[0], 3), np.int32)
    bigger[: queue.shape[0]] = queue
    return bigger


@njit(cache=True)
def _row_budget(target, budget, row_budget, y):
    best = -1
    for r in range(4):
        for x in range(WIDTH):
            p = r * 128 + x * 16 + y
            if target[p] and budget[p] > best:
                best = budget[p]
    row_budget[y] = best


@njit(cache=True)
def _search(fit_h, fit_v, v, parity, same, vlb, succ, nsucc, target, budget, visited, best, queue, start):
    """One gated breadth-first search over frames (see the module docstring).

    target: uint8[512], 1 for a pose still wanted (cleared as poses are placed); budget: int32[512],
    the frames within which a wanted pose must be found to be final. best: int32[512, 3], per pose
    (frame, queue index of the state before the lock frame, lock input), updated where faster.
    queue: int32[n, 3] (packed state, parent index, input), filled from index start on and grown as
    needed. Returns (queue, final, end) where final[p] is 1 for a pose whose best frame is proven
    minimal (2: its twin's is). visited (the workspace) is left zeroed.
    """
    G = v + 1
    stride_ab = N_HELD * G << 9
    final = np.zeros(N_POSES, np.uint8)
    open_count = 0
    for p in range(N_POSES):
        open_count += target[p]
    row_budget = np.full(HEIGHT, -1, np.int32)
    row_ok = np.zeros((HEIGHT, G, 2), np.int32)  # (frame << 1 | the vertical test's result) by (y, g, parity)
    for y in range(HEIGHT):
        _row_budget(target, budget, row_budget, y)
    deadline = np.empty(N_POSES, np.int32)
    _deadlines(succ, nsucc, target, budget, deadline)
    open_at_deadlines = open_count

    spawn = SPAWN_X * 16 + SPAWN_Y
    if start == queue.shape[0]:
        queue = _grown(queue)
    queue[start, 0], queue[start, 1], queue[start, 2] = spawn | parity << 24, -1, 0
    d0 = _dense(spawn, 0, 0, 0, parity, G)
    visited[d0 >> 6] |= np.uint64(1) << np.uint64(d0 & 63)
    head, tail, t = start, start + 1, 0
    while head < tail and open_count > 0:
        t += 1
        odd = (parity + t - 1) & 1  # this frame's parity
        pnext = 1 - odd
        # A DAS count that cannot reach 16 before the last frame any open target allows acts as 0.
        das_floor = 16 - (row_budget.max() - 1 - t)
        layer_end = tail
        while head < layer_end and open_count > 0:
            s = queue[head, 0]
            pose, g, h, ab = s & 511, (s >> 9) & 127, (s >> 16) & 63, (s >> 22) & 3
            r, x, y = pose >> 7, (pose >> 4) & 7, pose & 15
            for soft in range(1 + odd):
                # vertical step: gravity (every input but Down alone on an odd frame) or soft drop
                ng = 0 if soft else g + 1
                ny = y
                if soft or ng > v:
                    ng = 0
                    if not fits(fit_h, fit_v, r, x, y - 1):  # locks at pose on frame t
                        if t < best[pose, 0]:
                            best[pose, 0], best[pose, 1], best[pose, 2] = t, head, BTN_D * soft
                        if target[pose]:
                            final[pose] = 1 if t <= budget[pose] else 0
                            target[pose] = 0
                            open_count -= 1
                            twin = pose ^ 256  # the same placement turned twice
                            if same and target[twin] and t <= budget[twin]:
                                target[twin] = 0
                                final[twin] = 2
                                open_count -= 1
                            _row_budget(target, budget, row_budget, y)
                        continue
                    ny = y - 1
                # some row at or below with an open target must be reachable in time (memo per frame)
                memo = row_ok[ny, ng, pnext]
                if memo >> 1 != t:
                    memo = t << 1
                    for py in range(ny, -1, -1):
                        rb = row_budget[py]
                        if rb >= 0 and t + vlb[ny - py + 1, ng, pnext] <= rb:
                            memo |= 1
                            break
                    row_ok[ny, ng, pnext] = memo
                if memo & 1 == 0:
                    continue
                ahead = -1  # whether gravity on frame t + 1 can stay in time (worked out when needed)
                # ... or before gravity must have locked the pill: a drop attempt at least every v + 1
                # frames, ny + 1 of them at most
                floor = max(das_floor, 16 - ((v + 1 - ng) + ny * (v + 1) - 1))
                for d in range(1 if soft else 3):
                    sx, sh = _shift(fit_h, fit_v, r, x, ny, h, d)
                    if sh != 0 and (sh - 1) & 15 < floor:
                        sh = 1 if sh <= 16 else 17
                    dbits = BTN_D if soft else (0 if d == 0 else (BTN_L if d == 1 else BTN_R))
                    for rot in range(4):
                        if (rot & 1 and ab & 1) or (rot & 2 and ab & 2):
                            continue  # holding A or B on: no better than letting go
                        nr, nx = r, sx
                        if rot:
                            nr, nx = _rotate(
                                fit_h, fit_v, r, sx, ny, rot & 1 and not ab & 1, rot & 2 and not ab & 2, d == 1
                            )
                        q = nr * 128 + nx * 16 + ny
                        if t > deadline[q]:
                            continue
                        nh = sh
                        if 0 < nh <= 16 and nx == 0:
                            nh = 0  # Left held at the left wall does nothing a free hand could not
                        if nh != 0 and pnext:
                            # If gravity on the next frame cannot stay in time, only Down alone is any
                            # use then: the direction held now is let go whatever it is.
                            if ahead < 0:
                                ay, ag = (ny - 1, 0) if ng + 1 > v else (ny, ng + 1)
                                ahead = 1 if ay < 0 else 0
                                for py in range(ay, -1, -1):
                                    rb = row_budget[py]
                                    if rb >= 0 and t + 1 + vlb[ay - py + 1, ag, 0] <= rb:
                                        ahead = 1
                                        break
                            if ahead == 0:
                                nh = 0
                        dn = _dense(q, ng, nh, rot, pnext, G)
                        word, bit = dn >> 6, np.uint64(1) << np.uint64(dn & 63)
                        if visited[word] & bit:
                            continue
                        visited[word] |= bit
                        for more in range(rot + 1, 4):  # the same state with more buttons held is no better
                            if more & rot == rot:
                                dm = dn + (more - rot) * stride_ab
                                visited[dm >> 6] |= np.uint64(1) << np.uint64(dm & 63)
                        if tail == queue.shape[0]:
                            queue = _grown(queue)
                        queue[tail, 0] = q | ng << 9 | nh << 16 | rot << 22 | pnext << 24
                        queue[tail, 1] = head
                        queue[tail, 2] = dbits | (BTN_A if rot & 1 else 0) | (BTN_B if rot & 2 else 0)
                        tail += 1
            head += 1
        if 0 < open_count * 2 <= open_at_deadlines:
            _deadlines(succ, nsucc, target, budget, deadline)
            open_at_deadlines = open_count
    # leave the workspace clean: zero every word holding a bit this search set
    for i in range(start, tail):
        s = queue[i, 0]
        dn = _dense(s & 511, (s >> 9) & 127, (s >> 16) & 63, 0, (s >> 24) & 1, G)
        for k in range(4):
            visited[(dn + k * stride_ab) >> 6] = np.uint64(0)
    return queue, final, tail


@njit(cache=True)
def plan(cells, v, parity, same, work, best):
    """Every reachable lock pose with its fewest frames, and the searches that find its inputs.

    cells: uint8[8, 16]; v: speedCounterTable value (frames per row - 1); parity: the frame counter's
    parity on the first frame; same: a same-colour pill (a pose and its twin turned twice count as one
    placement, so the search may stop at either); work: `new_workspace()`. best: int32[512, 3],
    overwritten: (frames or UNREACHED, queue index, lock input) per pose. Returns the searches'
    queue (int32[n, 3]) for `inputs_of`.
    """
    best[:, 0] = UNREACHED
    best[:, 1:] = 0
    queue = np.empty((4096, 3), np.int32)
    legal = np.empty((4, WIDTH, HEIGHT), np.uint8)
    if resting_states(cells, legal) == 0:
        return queue[:0]
    legal_flat = legal.reshape(N_POSES)
    fit_h = np.empty(HEIGHT, np.int64)
    fit_v = np.empty(HEIGHT, np.int64)
    fit_masks(cells, fit_h, fit_v)
    vlb = _vertical_bounds(v)
    succ = np.empty((N_POSES, 40), np.int16)
    nsucc = np.empty(N_POSES, np.int32)
    dist = np.empty(N_POSES, np.int32)
    _relaxed_graph(fit_h, fit_v, SPAWN_X * 16 + SPAWN_Y, succ, nsucc, dist)
    lower = np.empty(N_POSES, np.int32)
    _lower_bounds(v, parity, vlb, dist, lower)
    target = legal_flat.copy()
    budget = np.empty(N_POSES, np.int32)
    final = np.zeros(N_POSES, np.uint8)
    end = np.int64(0)  # not the constant 0: `_search` would be compiled for it too
    for k in range(len(PASS_SLACK)):
        left = 0
        for p in range(N_POSES):
            target[p] = legal_flat[p] and final[p] == 0
            left += target[p]
            budget[p] = min(best[p, 0] - 1, lower[p] + PASS_SLACK[k])
        if left == 0:
            break
        queue, found, end = _search(
            fit_h, fit_v, v, parity, same, vlb, succ, nsucc, target, budget, work, best, queue, end
        )
        for p in range(N_POSES):
            if legal_flat[p] and final[p] == 0 and (found[p] or budget[p] >= best[p, 0] - 1):
                final[p] = 1  # found within its budget, or no faster than the path already known
    return queue[:end]


@njit(cache=True)
def inputs_of(best, pose, queue, out):
    """The inputs (bit sets, one per frame) of the path `plan` found to pose, written to out[:frames]
    (int64[>= frames]). Returns frames (0 for an unreached pose)."""
    n = best[pose, 0]
    if n >= UNREACHED:
        return 0
    out[n - 1] = best[pose, 2]
    i = best[pose, 1]
    k = n - 2
    while queue[i, 1] >= 0:
        out[k] = queue[i, 2]
        i = queue[i, 1]
        k -= 1
    return n


@njit(cache=True)
def reachable_into(cells, left, right, speed_index, parity, mask, frames, work):
    """Frame-exact counterpart of `kernels.legal_mask_into`: mask uint8[4, 8, 16] = 1 at each lock pose
    some input sequence reaches, frames int32[4, 8, 16] = its fewest frames (0 elsewhere). For a
    same-colour pill the planes r and r + 2 are equal (the faster of the two). speed_index: 0..80
    (not checked here); parity: the frame counter's parity on the first frame; work:
    `new_workspace()`. Returns the number of poses marked."""
    best = np.empty((N_POSES, 3), np.int32)
    plan(cells, SPEED_COUNTER[speed_index], parity, left == right, work, best)
    n = 0
    for r in range(4):
        for x in range(WIDTH):
            for y in range(HEIGHT):
                f = best[r * 128 + x * 16 + y, 0]
                if left == right:
                    f = min(f, best[((r + 2) & 3) * 128 + x * 16 + y, 0])
                if f < UNREACHED:
                    mask[r, x, y] = 1
                    frames[r, x, y] = f
                    n += 1
                else:
                    mask[r, x, y] = 0
                    frames[r, x, y] = 0
    return n


@njit(cache=True)
def reachable_masks_batch(boards, pills, speed_indices, parities, masks, frames, work):
    """Batch form of `reachable_into`: boards uint8[N, 8, 16], pills uint8[N, 2], speed_indices and
    parities int[N] -> masks uint8[N, 4, 8, 16], frames int32[N, 4, 8, 16]."""
    for i in range(boards.shape[0]):
        a, b = np.int64(pills[i, 0]), np.int64(pills[i, 1])  # as `reachable` passes them: compiled once
        reachable_into(boards[i], a, b, speed_indices[i], parities[i], masks[i], frames[i], work)
