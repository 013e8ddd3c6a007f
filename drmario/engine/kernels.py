"""Compiled hot paths of the engine (numba). The Python types in `board`, `rules` and `game` wrap these.

Boards are ``uint8[8, 16]`` arrays indexed ``[x, y]`` with ``y = 0`` at the bottom. A cell code is
``shape << 2 | colour`` (colour 1 red, 2 yellow, 3 blue; shape 0 virus, 1 disconnected, 2 bottom,
3 top, 4 left, 5 right) and 0 is empty: the maryodel letter of a non-empty cell is ``0x60 | code``.
A pill is the colour pair ``(left, right)`` as spawned. A move is ``(r, x, y)`` (rules.md section 3).
"""

from __future__ import annotations

import numpy as np
from numba import njit

WIDTH, HEIGHT = 8, 16
EMPTY = 0
RED, YELLOW, BLUE = 1, 2, 3
VIRUS, DISCONNECTED, BOTTOM, TOP, LEFT, RIGHT = 0, 1, 2, 3, 4, 5
SPAWN_X, SPAWN_Y = 3, 15
MAX_MOVES = 4 * WIDTH * HEIGHT  # an upper bound on the number of legal moves

# Outcomes of a game, as stored in compact arrays (0 while the game runs).
RUNNING, WON, TOPPED_OUT, STALEMATE = 0, 1, 2, 3


@njit(cache=True, inline="always")
def _free(board, x, y):
    """True when (x, y) is inside the bottle and empty, or above it (y >= 16; callers pass at most 16)."""
    if x < 0 or x >= WIDTH or y < 0:
        return False
    if y >= HEIGHT:
        return True
    return board[x, y] == EMPTY


@njit(cache=True, inline="always")
def _fits(board, vertical, x, y):
    """Whether a pill with its bottom-left half at (x, y) fits (top of a vertical pill may be at 16)."""
    if y >= HEIGHT or not _free(board, x, y):
        return False
    if vertical:
        return _free(board, x, y + 1)
    return _free(board, x + 1, y)


@njit(cache=True)
def resting_states(board, out):
    """Mark the resting placements reachable from spawn (rules.md section 4).

    board: uint8[8, 16]. out: uint8[4, 8, 16], overwritten; ``out[r, x, y] = 1`` for each reachable
    resting state, with r the clockwise rotation count (colours are not looked at here).
    Returns the number of resting states (0 when a spawn cell is occupied).
    """
    out[:] = 0
    if board[SPAWN_X, SPAWN_Y] != EMPTY or board[SPAWN_X + 1, SPAWN_Y] != EMPTY:
        return 0
    seen = np.zeros((4, WIDTH, HEIGHT), np.uint8)
    queue = np.empty((4 * WIDTH * HEIGHT, 3), np.int8)
    queue[0, 0], queue[0, 1], queue[0, 2] = 0, SPAWN_X, SPAWN_Y
    seen[0, SPAWN_X, SPAWN_Y] = 1
    head, tail, count = 0, 1, 0
    while head < tail:
        r, x, y = queue[head, 0], queue[head, 1], queue[head, 2]
        head += 1
        vertical = r & 1
        # Candidate successors: left, right, down, then both rotations.
        for step in range(5):
            nr, nx, ny = r, x, y
            if step == 0:
                nx = x - 1
            elif step == 1:
                nx = x + 1
            elif step == 2:
                ny = y - 1
                if ny < 0 or not _fits(board, vertical, nx, ny):
                    out[r, x, y] = 1  # down is blocked: a resting placement
                    count += 1
                    continue
            else:
                nr = (r + (1 if step == 3 else 3)) & 3
                if vertical:
                    # Vertical to horizontal: right half to (x+1, y), else kick one column left.
                    if not _free(board, x + 1, y):
                        if not _free(board, x - 1, y):
                            continue
                        nx = x - 1
                else:
                    # Horizontal to vertical: pivot on the bottom-left cell; the cell above must be free.
                    if not _free(board, x, y + 1):
                        continue
            if nr == r and not _fits(board, vertical, nx, ny):
                continue
            if seen[nr, nx, ny] == 0:
                seen[nr, nx, ny] = 1
                queue[tail, 0], queue[tail, 1], queue[tail, 2] = nr, nx, ny
                tail += 1
    return count


@njit(cache=True)
def legal_moves_into(board, left, right, moves):
    """Write the legal moves of pill (left, right) on board into moves: int8[>=MAX_MOVES, 3].

    Rows are (r, x, y) in increasing order. A same-colour pill uses the canonical r in {0, 1}
    (r and r + 2 put the same colours on the same cells). Returns the number of moves.
    """
    rest = np.empty((4, WIDTH, HEIGHT), np.uint8)
    if resting_states(board, rest) == 0:
        return 0
    same = left == right
    n = 0
    for r in range(2 if same else 4):
        for x in range(WIDTH):
            for y in range(HEIGHT):
                if rest[r, x, y] or (same and rest[r + 2, x, y]):
                    moves[n, 0], moves[n, 1], moves[n, 2] = r, x, y
                    n += 1
    return n


@njit(cache=True)
def legal_mask_into(board, left, right, mask):
    """Legal moves as a uint8[4, 8, 16] mask; for a same-colour pill planes r and r + 2 are equal."""
    n = resting_states(board, mask)
    if left == right:
        for r in range(2):
            for x in range(WIDTH):
                for y in range(HEIGHT):
                    v = mask[r, x, y] | mask[r + 2, x, y]
                    mask[r, x, y] = v
                    mask[r + 2, x, y] = v
    return n


@njit(cache=True)
def legal_masks_batch(boards, pills, masks):
    """Batch form of `legal_mask_into`: boards uint8[N, 8, 16], pills uint8[N, 2] -> masks uint8[N, 4, 8, 16]."""
    for i in range(boards.shape[0]):
        legal_mask_into(boards[i], pills[i, 0], pills[i, 1], masks[i])


@njit(cache=True)
def write_pill(board, left, right, r, x, y):
    """Lock pill (left, right) at move (r, x, y); a vertical top half at y = 16 is lost (rules 3)."""
    if r == 0 or r == 2:
        a, b = (left, right) if r == 0 else (right, left)
        board[x, y] = LEFT << 2 | a
        board[x + 1, y] = RIGHT << 2 | b
    else:
        bottom, top = (right, left) if r == 1 else (left, right)
        if y + 1 < HEIGHT:
            board[x, y] = BOTTOM << 2 | bottom
            board[x, y + 1] = TOP << 2 | top
        else:
            board[x, y] = DISCONNECTED << 2 | bottom


@njit(cache=True)
def _mark_lines(board, marked):
    """Mark every horizontal or vertical run of 4+ cells of one colour. Returns the cells marked."""
    n = 0
    for y in range(HEIGHT):
        x = 0
        while x < WIDTH:
            c = board[x, y] & 3
            end = x + 1
            while end < WIDTH and c != 0 and board[end, y] & 3 == c:
                end += 1
            if c != 0 and end - x >= 4:
                for i in range(x, end):
                    if not marked[i, y]:
                        marked[i, y] = True
                        n += 1
            x = end
    for x in range(WIDTH):
        y = 0
        while y < HEIGHT:
            c = board[x, y] & 3
            end = y + 1
            while end < HEIGHT and c != 0 and board[x, end] & 3 == c:
                end += 1
            if c != 0 and end - y >= 4:
                for j in range(y, end):
                    if not marked[x, j]:
                        marked[x, j] = True
                        n += 1
            y = end
    return n


@njit(cache=True)
def _disconnect(board, x, y):
    """Turn the half at (x, y), if any, into a disconnected half of its colour."""
    c = board[x, y]
    if c != EMPTY:
        board[x, y] = DISCONNECTED << 2 | (c & 3)


@njit(cache=True)
def _clear_marked(board, marked):
    """Empty the marked cells, disconnect their surviving partners. Returns viruses cleared."""
    viruses = 0
    for x in range(WIDTH):
        for y in range(HEIGHT):
            if not marked[x, y]:
                continue
            shape = board[x, y] >> 2
            if shape == VIRUS:
                viruses += 1
            elif shape == LEFT and not marked[x + 1, y]:
                _disconnect(board, x + 1, y)
            elif shape == RIGHT and not marked[x - 1, y]:
                _disconnect(board, x - 1, y)
            elif shape == BOTTOM and not marked[x, y + 1]:
                _disconnect(board, x, y + 1)
            elif shape == TOP and not marked[x, y - 1]:
                _disconnect(board, x, y - 1)
    for x in range(WIDTH):
        for y in range(HEIGHT):
            if marked[x, y]:
                board[x, y] = EMPTY
    return viruses


@njit(cache=True)
def _settle(board):
    """Apply gravity until nothing moves; one bottom-up pass suffices because every piece is
    dropped only after everything below it has settled. Returns True if anything moved."""
    moved = False
    for y in range(1, HEIGHT):
        for x in range(WIDTH):
            c = board[x, y]
            shape = c >> 2
            if c == EMPTY or shape in (VIRUS, TOP, RIGHT):
                continue  # tops and rights move with their bottom / left partner
            ny = y
            if shape == LEFT:
                while ny > 0 and board[x, ny - 1] == EMPTY and board[x + 1, ny - 1] == EMPTY:
                    ny -= 1
                if ny != y:
                    board[x, ny], board[x + 1, ny] = c, board[x + 1, y]
                    board[x, y], board[x + 1, y] = EMPTY, EMPTY
            else:
                while ny > 0 and board[x, ny - 1] == EMPTY:
                    ny -= 1
                if ny != y:
                    board[x, ny] = c
                    board[x, y] = EMPTY
                    if shape == BOTTOM:
                        board[x, ny + 1] = board[x, y + 1]
                        board[x, y + 1] = EMPTY
            moved |= ny != y
    return moved


@njit(cache=True)
def count_viruses(board):
    """The viruses left on board uint8[8, 16]."""
    n = 0
    for x in range(WIDTH):
        for y in range(HEIGHT):
            c = board[x, y]
            if c != EMPTY and c >> 2 == VIRUS:
                n += 1
    return n


@njit(cache=True)
def resolve(board):
    """Clear lines, disconnect partners and settle, repeatedly, in place (rules.md section 5).

    A cascade runs to its end even when an early round clears the last virus: the game is won,
    but the board still settles, and the counts include every round (as the oracle vectors do).
    Returns (viruses_cleared, cells_cleared, clear_rounds).
    """
    marked = np.zeros((WIDTH, HEIGHT), np.bool_)
    viruses = cells = rounds = 0
    while True:
        marked[:] = False
        n = _mark_lines(board, marked)
        if n == 0:
            break
        viruses += _clear_marked(board, marked)
        _settle(board)
        cells += n
        rounds += 1
    return viruses, cells, rounds


@njit(cache=True)
def place_and_resolve(board, left, right, r, x, y):
    """Lock a pill at (r, x, y) and resolve, in place. The move must be legal (not checked here)."""
    write_pill(board, left, right, r, x, y)
    return resolve(board)


@njit(cache=True, inline="always")
def spawn_blocked(board):
    """Whether a new pill has no room: a cell of the spawn (its two halves) is taken."""
    return board[SPAWN_X, SPAWN_Y] != EMPTY or board[SPAWN_X + 1, SPAWN_Y] != EMPTY


# ----------------------------------------------------------------------------------------------
# NES level generation (rules.md section 6)

# Pill colours in table order (yellow, red, blue) and the 16-entry virus colour table.
_PILL_COLOURS = np.array([YELLOW, RED, BLUE], np.uint8)
_VIRUS_TABLE16 = np.array([2, 1, 3, 3, 1, 2, 2, 1, 3, 3, 1, 2, 2, 1, 3, 1], np.uint8)
_WANTED = np.array([YELLOW, 0, BLUE, RED], np.uint8)  # 0 = random from table16


@njit(cache=True, inline="always")
def rng_step(s):
    """One step of the NES 16-bit generator: the new top bit is bit 1 XOR bit 9."""
    return (s >> 1) | ((((s >> 1) ^ (s >> 9)) & 1) << 15)


def virus_count(level: int) -> int:
    """`level.virus_count` without its checks."""
    return min(84, 4 * (level + 1))


def max_virus_row(level: int) -> int:
    """`level.max_virus_row` without its checks."""
    return 9 if level <= 14 else 10 if level <= 16 else 11 if level <= 18 else 12


@njit(cache=True)
def generate_pills(seed, pills):
    """Draw the 128 pills from RNG state seed; pills: uint8[128, 2] gets them in throwing order
    (g127, g126, ..., g1, g128). Returns the RNG state after the draws."""
    s = seed
    k = 0
    drawn = np.empty((128, 2), np.uint8)
    for i in range(128):
        s = rng_step(s)
        k = (((s >> 8) & 15) + k) % 9
        drawn[i, 0] = _PILL_COLOURS[k // 3]
        drawn[i, 1] = _PILL_COLOURS[k % 3]
    for i in range(127):
        pills[i] = drawn[126 - i]
    pills[127] = drawn[127]
    return s


@njit(cache=True)
def place_viruses(seed, count, ymax, board):
    """Place count viruses on an empty board from RNG state seed. Returns the final RNG state."""
    s = seed
    for i in range(count):
        wanted = _WANTED[i & 3]
        placed = False
        while not placed:
            s = rng_step(s)
            while (s >> 8) & 15 > ymax:
                s = rng_step(s)
            x, y = s & 7, (s >> 8) & 15
            colour = wanted
            if colour == 0:
                s = rng_step(s)
                colour = _VIRUS_TABLE16[s & 15]
            while y >= 0 and not placed:
                if board[x, y] == EMPTY:
                    c = colour
                    for _ in range(3):
                        if not (
                            (x >= 2 and board[x - 2, y] == c)
                            or (x <= 5 and board[x + 2, y] == c)
                            or (y >= 2 and board[x, y - 2] == c)
                            or (y <= 13 and board[x, y + 2] == c)
                        ):
                            board[x, y] = c  # a virus code is its colour
                            placed = True
                            break
                        c = c % 3 + 1  # blue -> red -> yellow -> blue
                if not placed:
                    x += 1
                    if x == WIDTH:
                        x = 0
                        y -= 1
    return s


# ----------------------------------------------------------------------------------------------
# Fast random numbers for compiled playouts (xorshift64*, explicit state so runs are reproducible).


@njit(cache=True, inline="always")
def rand_below(state, n):
    """A uniform integer in [0, n) from state: uint64[1], advanced in place; state must not be 0
    (xorshift's fixed point: it would stay 0 and always give 0; callers seed with ``seed | 1``)."""
    s = state[0]
    s ^= s >> np.uint64(12)
    s ^= s << np.uint64(25)
    s ^= s >> np.uint64(27)
    state[0] = s
    return np.int64((s * np.uint64(2685821657736338717)) >> np.uint64(33)) % n


@njit(cache=True)
def argmax_ties(scores, n, state):
    """Index of the largest of scores[:n], ties (within 1e-9) broken uniformly at random from
    state (`rand_below`, nonzero); the one tie-breaking argmax of the compiled players and searches.
    NaN scores are never chosen (0 when all are NaN, or n is 0). The tolerance is absolute: equal
    scores beyond about 1e7 (the expert's win and loss constants) do not tie, the first is taken."""
    best, choice, ties = -np.inf, 0, 0
    for j in range(n):
        s = scores[j]
        if s > best + 1e-9:
            best, choice, ties = s, j, 1
        elif s > best - 1e-9:
            ties += 1
            if rand_below(state, ties) == 0:
                choice = j
    return choice
