"""Frame-exact placements (RULES.md, "Frame-exact timing") against a plain frame-by-frame simulator of
the ROM and a brute-force breadth-first search over (state, input) with it."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import random_board, random_game
from numba import njit

import drmario as dm
from drmario.engine import timing as T
from drmario.engine import timing_kernels as TK

# ---------------------------------------------------------------- the oracle: one frame, straight from the ROM

# Buttons as bits, in the order of an input string.
L, R, D, A, B = 1, 2, 4, 8, 16
DPADS = (0, L, R, D, D | L, D | R)  # a standard controller's d-pad (no Up; Left and Right never together)
INPUTS = np.array([d | ab for d in DPADS for ab in (0, A, B, A | B)], np.int64)  # 24 inputs a frame
TABLE = np.array(
    [0x45, 0x43, 0x41, 0x3F, 0x3D, 0x3B, 0x39, 0x37, 0x35, 0x33, 0x31, 0x2F, 0x2D, 0x2B, 0x29, 0x27]
    + [0x25, 0x23, 0x21, 0x1F, 0x1D, 0x1B, 0x19, 0x17, 0x15, 0x13, 0x12, 0x11, 0x10, 0x0F, 0x0E, 0x0D]
    + [0x0C, 0x0B, 0x0A, 0x09, 0x09, 0x08, 0x08, 0x07, 0x07, 0x06, 0x06, 0x05, 0x05, 0x05, 0x05, 0x05]
    + [0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x04, 0x04, 0x04, 0x04, 0x04, 0x03, 0x03, 0x03, 0x03]
    + [0x03, 0x02, 0x02, 0x02, 0x02, 0x02, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x00],
    np.int64,
)  # speedCounterTable, copied from data/drmario_data_game.asm


@njit(cache=True)
def valid(cells, x, y, rot):
    """pillMoveValidation. rot is the ROM's (0 at spawn, A subtracts one): odd = vertical, whose top
    half is the cell above (x, y); above the bottle reads as empty."""
    if rot & 1:
        if y < 0 or cells[x, y] != 0:
            return False
        return y + 1 > 15 or cells[x, y + 1] == 0
    if x < 0 or x > 6 or y < 0:
        return False
    return cells[x, y] == 0 and cells[x + 1, y] == 0


@njit(cache=True)
def rotate_validation(cells, x, y, rot, held, x_copy, rot_copy):
    """pillRotateValidation: returns (x, rot)."""
    if rot & 1 == 0:
        if valid(cells, x, y, rot):
            if held & L:
                x -= 1
                if not valid(cells, x, y, rot):
                    x += 1
            return x, rot
        x -= 1  # the wall kick
    if not valid(cells, x, y, rot):
        return x_copy, rot_copy
    return x, rot


@njit(cache=True)
def step(cells, v, x, y, rot, counter, das, held, odd, buttons):
    """One frame (action_pillFalling). State: the pill (x, y, rot), the speed counter, horVelocity (DAS),
    the buttons held last frame and the frame counter's parity. Returns (locked, state...)."""
    pressed = buttons & ~held
    # fallingPill_checkYMove
    if odd and buttons & (L | R | D) == D:
        lower = True
    else:
        counter += 1
        lower = counter > v
    if lower:
        counter = 0
        if y - 1 < 0 or not valid(cells, x, y - 1, rot):
            return True, x, y, rot, counter, das, buttons, 1 - odd
        y -= 1
    # fallingPill_checkXMove
    move = False
    if pressed & (L | R):
        das = 0
        move = True
    elif buttons & (L | R):
        das += 1
        if das >= 16:
            das = 10
            move = True
    if move:
        if buttons & R and x != (rot & 1) + 6:
            x += 1
            if not valid(cells, x, y, rot):
                x -= 1
                das = 15
        if buttons & L and x != 0:
            x -= 1
            if not valid(cells, x, y, rot):
                x += 1
                das = 15
    # fallingPill_checkRotate
    x_copy, rot_copy = x, rot
    if pressed & A:
        x, rot = rotate_validation(cells, x, y, (rot - 1) & 3, buttons, x_copy, rot_copy)
    if pressed & B:
        x, rot = rotate_validation(cells, x, y, (rot + 1) & 3, buttons, x_copy, rot_copy)
    return False, x, y, rot, counter, das, buttons, 1 - odd


@njit(cache=True)
def brute_force(cells, v, parity, frames):
    """Breadth-first search over frames from the spawn, every one of the 24 inputs from every state.
    frames: int64[4, 8, 16] [r, x, y] (kit r = -rot mod 4), set to the first frame each pose locks
    (0: never). The state kept for "seen" is the ROM's, except Down's held bit (the ROM reads Down
    only as held on the current frame). Returns the number of states."""
    frames[:] = 0
    if cells[3, 15] != 0 or cells[4, 15] != 0:
        return 0
    seen = np.zeros(4 * 8 * 16 * (v + 1) * 16 * 16 * 2, np.uint8)
    layer = np.empty((1, 7), np.int64)
    layer[0] = (3, 15, 0, 0, 0, 0, parity)
    t, count = 0, 1
    while layer.shape[0] > 0:
        t += 1
        following = np.empty((24 * layer.shape[0], 7), np.int64)
        n = 0
        for i in range(layer.shape[0]):
            x, y, rot, counter, das, held, odd = layer[i]
            for buttons in INPUTS:
                locked, nx, ny, nrot, nc, nd, nh, nodd = step(cells, v, x, y, rot, counter, das, held, odd, buttons)
                if locked:
                    if frames[-nrot & 3, nx, ny] == 0:
                        frames[-nrot & 3, nx, ny] = t
                    continue
                h4 = (nh & 3) | (nh >> 1 & 12)
                key = ((((((nrot * 8 + nx) * 16 + ny) * (v + 1) + nc) * 16 + nd) * 16 + h4) * 2) + nodd
                if seen[key] == 0:
                    seen[key] = 1
                    following[n] = (nx, ny, nrot, nc, nd, nh, nodd)
                    n += 1
        layer = following[:n].copy()
        count += n
    return count


def replay(board: dm.Board, speed: int, parity: int, inputs) -> tuple[dm.Move | None, int]:
    """Play inputs (strings of "LRDAB") from the spawn with the oracle; (the lock move, its frame), or
    (None, frames played) if the pill has not locked when they run out."""
    state = (3, 15, 0, 0, 0, 0, parity)
    for t, text in enumerate(inputs, 1):
        locked, *state = step(board.cells, int(TABLE[speed]), *state, T.input_bits(text))
        if locked:
            x, y, rot = state[:3]
            return dm.Move(-rot & 3, x, y), t
    return None, len(inputs)


def canonical_frames(frames: np.ndarray, same: bool) -> dict[dm.Move, int]:
    """{move: frames} of a frames[4, 8, 16] array, canonical (r in {0, 1}, the faster twin) for a same-colour pill."""
    if same:
        both = np.where(
            frames[:2] == 0, frames[2:], np.where(frames[2:] == 0, frames[:2], np.minimum(frames[:2], frames[2:]))
        )
        frames = np.concatenate([both, np.zeros_like(both)])
    return {dm.Move(int(r), int(x), int(y)): int(frames[r, x, y]) for r, x, y in zip(*np.nonzero(frames))}


def check_against_oracle(board: dm.Board, pill: dm.Pill, speed: int, parity: int, replay_all: bool = True) -> None:
    frames = np.zeros((4, 8, 16), np.int64)
    brute_force(board.cells, int(TABLE[speed]), parity, frames)
    want = canonical_frames(frames, pill.same_colour)
    got = dm.reachable(board, pill, speed, parity)
    assert {m: r.frames for m, r in got.items()} == want, (board.to_string(), pill.to_string(), speed, parity)
    mask, fast = T.reachable_mask(board, pill, speed, parity)
    assert mask.sum() == (2 if pill.same_colour else 1) * len(want)
    assert all(fast[m] == n for m, n in want.items())
    for move, reach in got.items() if replay_all else list(got.items())[:3]:
        assert len(reach.inputs) == reach.frames
        locked, t = replay(board, speed, parity, reach.inputs)
        assert (locked and dm.canonical(pill, locked), t) == (move, reach.frames), (board.to_string(), move, reach)


def oracle_cases(batch: int, count: int, speeds: tuple[int, int], fill: tuple[float, float], games: int):
    """Seeded cases: random debris boards (fill in the given range) and, one case in `games`, boards
    from random play (a level after a few random moves)."""
    rng = np.random.default_rng(1000 + batch)
    for i in range(count):
        if i % games == games - 1:
            level, pills = int(rng.integers(10, 25)), int(rng.integers(0, 12))
            board = random_game(int(rng.integers(2, 0x10000)), level, pills, rng_seed=i).board
        else:
            board = random_board(int(rng.integers(2**32)), float(rng.uniform(*fill)))
        yield (
            board,
            dm.ALL_PILLS[int(rng.integers(9))],
            int(rng.integers(speeds[0], speeds[1] + 1)),
            int(rng.integers(2)),
        )


# 500 cases in all: most at fast speeds (small state spaces), fewer at slow ones where the oracle is slow.
@pytest.mark.parametrize(
    "batch, count, speeds, fill, games",
    [(b, 50, (56, 80), (0.05, 0.6), 5) for b in range(6)]
    + [(6 + b, 50, (31, 55), (0.3, 0.6), 4) for b in range(3)]
    + [(9, 50, (0, 30), (0.4, 0.7), 1000)],
)
def test_equals_brute_force(batch, count, speeds, fill, games):
    """The search's moves and fewest frames equal the brute force's, and every path replays."""
    for board, pill, speed, parity in oracle_cases(batch, count, speeds, fill, games):
        check_against_oracle(board, pill, speed, parity)


def test_equals_brute_force_on_game_boards_at_low_speed():
    """Ten boards from real play (a level after a few random moves) at LOW and HI."""
    rng = np.random.default_rng(99)
    done = 0
    while done < 10:
        game = random_game(
            int(rng.integers(2, 0x10000)), int(rng.integers(5, 21)), int(rng.integers(3, 20)), rng_seed=done
        )
        if game.over:
            continue
        check_against_oracle(game.board, game.pill, (15, 31)[done % 2], done // 2 % 2)
        done += 1


# ---------------------------------------------------------------- the search's lower bounds


def test_vertical_bounds_by_hand():
    """vlb[n, g, p]: the fewest frames to n drop attempts from gravity counter g, the next frame of
    parity p: Down drops on odd frames, gravity once the counter passes v (both reset it)."""
    vlb = TK._vertical_bounds(39)
    assert vlb[1, 0].tolist() == [2, 1]  # an even frame first: wait for the odd one
    assert vlb[1, 39].tolist() == [1, 1]  # the counter at v: gravity on the next frame
    assert vlb[16, 0].tolist() == [32, 31]  # from the spawn to the floor (test_empty_board)
    assert TK._vertical_bounds(0)[16, 0].tolist() == [16, 16]  # gravity every frame


def relaxed_graph(cells: np.ndarray) -> tuple[np.ndarray, ...]:
    """The search's inputs for a board: fit_h, fit_v, and the relaxed graph from the spawn (succ, nsucc,
    dist)."""
    fit_h, fit_v = fit_masks(cells)
    succ = np.empty((TK.N_POSES, 40), np.int16)
    nsucc, dist = np.empty(TK.N_POSES, np.int32), np.empty(TK.N_POSES, np.int32)
    TK._relaxed_graph(fit_h, fit_v, TK.SPAWN_X * 16 + TK.SPAWN_Y, succ, nsucc, dist)
    return fit_h, fit_v, succ, nsucc, dist


def lower_bounds(cells: np.ndarray, speed: int, parity: int) -> np.ndarray:
    """The search's lower bound on the frames to lock at each pose, int32[4, 8, 16] [r, x, y]."""
    v = int(TABLE[speed])
    _, _, _, _, dist = relaxed_graph(cells)
    lower = np.empty(TK.N_POSES, np.int32)
    TK._lower_bounds(v, parity, TK._vertical_bounds(v), dist, lower)
    return lower.reshape(4, 8, 16)


def test_lower_bounds_never_exceed_the_fewest_frames():
    """A bound above a pose's true frames would have the first pass prune its fastest path (the later
    passes would still find it, so the search's results alone cannot show it)."""
    shelf = dm.Board.empty().cells.copy()
    shelf[3, 14] = shelf[4, 14] = 1  # red viruses under the spawn: Down on the first (odd) frame locks
    cases = [(shelf, 15, 1)] + [(b.cells, s, p) for b, _, s, p in oracle_cases(20, 40, (0, 80), (0.05, 0.6), 4)]
    checked = 0
    for cells, speed, parity in cases:
        frames = np.zeros((4, 8, 16), np.int64)
        brute_force(cells, int(TABLE[speed]), parity, frames)
        reached = frames > 0
        lower = lower_bounds(cells, speed, parity)
        assert (lower[reached] <= frames[reached]).all(), (speed, parity)
        checked += reached.sum()
    assert checked > 500  # poses, over the 41 boards
    assert lower_bounds(shelf, 15, 1)[0, 3, 15] == 1


def test_a_twin_is_final_only_within_its_own_budget():
    """A same-colour pill's pose turned twice (its twin) is the same placement, so the search may stop at
    either, but only when the frame found is within the twin's own budget: a twin whose paths were pruned
    below that frame may be faster, and is left to the later passes."""
    cells = dm.Board.empty().cells
    v = int(TABLE[15])
    pose = 0 * 128 + 3 * 16 + 0  # horizontal at the spawn's x, on the floor
    twin = pose ^ 256
    results = {}
    for twin_budget in (100, 10):  # 31 frames to the floor: within, then below
        fit_h, fit_v, succ, nsucc, _ = relaxed_graph(cells)
        target = np.zeros(TK.N_POSES, np.uint8)
        target[[pose, twin]] = 1
        budget = np.full(TK.N_POSES, 100, np.int32)
        budget[twin] = twin_budget
        best = np.full((TK.N_POSES, 3), TK.UNREACHED, np.int32)
        queue = np.empty((4096, 3), np.int32)
        _, final, _ = TK._search(
            fit_h, fit_v, v, 1, True, TK._vertical_bounds(v), succ, nsucc, target, budget,
            TK.new_workspace(), best, queue, np.int64(0),
        )  # fmt: skip
        results[twin_budget] = (int(best[pose, 0]), int(final[pose]), int(final[twin]))
    assert results[100] == (31, 1, 2)  # the twin counts as placed
    assert results[10] == (31, 1, 0)  # not proven: the twin may have a path faster than 31 frames


# ---------------------------------------------------------------- facts


def test_empty_board():
    """Every timing-free move is reachable; the lock frame is the 16th drop attempt, on odd frames."""
    pill = dm.Pill.from_string("qw")
    legal = set(dm.legal_moves(dm.Board.empty(), pill))
    for parity, frames in ((0, 32), (1, 31)):
        moves = dm.reachable(dm.Board.empty(), pill, 15, parity)
        assert set(moves) == legal and {r.frames for r in moves.values()} == {frames}
    fast = dm.reachable(dm.Board.empty(), pill, 80)  # one frame a row: down in 16 frames, 30 moves still
    assert set(fast) == legal and {r.frames for r in fast.values()} == {16}


def test_same_colour_pill_is_canonical():
    board = random_game(4321, 12, 6, rng_seed=3).board
    pill = dm.Pill.from_string("rv")
    moves = dm.reachable(board, pill, 31, 1)
    assert moves and {m.r for m in moves} <= {0, 1}
    assert set(moves) <= set(dm.legal_moves(board, pill))
    frames = np.zeros((4, 8, 16), np.int64)
    brute_force(board.cells, int(TABLE[31]), 1, frames)
    assert {m: r.frames for m, r in moves.items()} == canonical_frames(frames, True)
    mask, _ = T.reachable_mask(board, pill, 31, 1)
    assert np.array_equal(mask[:2], mask[2:])


def test_blocked_spawn_is_empty():
    for x in (3, 4):
        cells = np.zeros((8, 16), np.uint8)
        cells[x, 15] = 1  # a red virus in a spawn cell
        assert dm.reachable(dm.Board(cells), dm.Pill.from_string("qw"), 15) == {}
        assert not T.reachable_mask(cells, dm.Pill.from_string("qw"), 15)[0].any()


def test_top_row_vertical_loses_its_top_half():
    """A vertical pill may lock in the top row with its top half above the bottle."""
    cells = np.zeros((8, 16), np.uint8)
    cells[2, :15] = [K_VIRUS | (1 + y % 3) for y in range(15)]
    moves = dm.reachable(dm.Board(cells), dm.Pill.from_string("rw"), 15, 0)
    assert dm.Move(1, 2, 15) in moves and dm.Move(3, 2, 15) in moves
    assert dm.Move(1, 2, 15) not in dm.reachable(dm.Board(cells), dm.Pill.from_string("rw"), 80, 0)  # dropped at once


K_VIRUS = 0  # a virus cell code is its colour


@pytest.mark.parametrize("speed", [15, 31])
def test_nearly_every_timing_free_move_at_low_and_high(speed):
    """At 40 (LOW) and 14 (HI) frames a row every timing-free move is reachable on boards from play: a
    row gives enough frames for any sideways path in it (RULES.md)."""
    rng = np.random.default_rng(speed)
    legal = unreachable = boards = 0
    while boards < 50:
        game = random_game(
            int(rng.integers(2, 0x10000)), int(rng.integers(10, 21)), int(rng.integers(5, 31)), rng_seed=boards
        )
        if game.over:
            continue
        boards += 1
        moves = set(dm.legal_moves(game.board, game.pill))
        for parity in (0, 1):
            found = set(dm.reachable(game.board, game.pill, speed, parity))
            assert found <= moves
            legal += len(moves)
            unreachable += len(moves - found)
    assert legal > 1000 and unreachable == 0


def test_fast_speeds_lose_moves():
    """At one frame a row, tucks and far slides go: the reachable set shrinks but stays legal."""
    game = next(g for seed in range(700, 800) if not (g := random_game(seed, 15, 10, rng_seed=1)).over)
    legal = set(dm.legal_moves(game.board, game.pill))
    slow, fast = (set(dm.reachable(game.board, game.pill, s, 0)) for s in (15, 80))
    assert fast < slow <= legal


def test_contains_the_maryodel_frame_aware_placements(reachable_vectors):
    """tests/data/vectors/reachable.jsonl: `mapprox` is the placements maryodel's frame-aware search finds
    at `gravity` frames a row, with a soft drop possible on the first frame when `sensitive` (our parity
    1). It never returns an unreachable placement, so ours must contain it, and its path lengths (frames
    to the lock, inclusive) can never beat ours."""
    for i, v in enumerate(reachable_vectors):
        board, pill = dm.Board.from_string(v["board"]), dm.Pill.from_string(v["pill"])
        speed = int(np.flatnonzero(v["gravity"] == T.FRAMES_PER_ROW)[0])
        moves = dm.reachable(board, pill, speed, int(v["sensitive"]))
        for path in v["mapprox_paths"]:
            x, y, r = path["placement"]
            move = dm.canonical(pill, dm.Move(r, x, y))
            assert move in moves, f"case {i}: {move}"
            assert moves[move].frames <= path["path_len"], f"case {i}: {move}"
        assert {dm.canonical(pill, dm.Move(r, x, y)) for x, y, r in v["mapprox"]} <= set(moves)
        assert (not moves) == (not v["mapprox"])


# ---------------------------------------------------------------- speeds and errors


def test_speed_table_from_the_rom():
    assert T.FRAMES_PER_ROW.tolist() == (TABLE + 1).tolist()
    assert [T.frames_per_row(i) for i in range(26)] == [70 - 2 * i for i in range(26)]
    assert (T.frames_per_row(15), T.frames_per_row(25), T.frames_per_row(31), T.frames_per_row(80)) == (40, 20, 14, 1)
    assert all(a >= b for a, b in zip(T.FRAMES_PER_ROW, T.FRAMES_PER_ROW[1:]))


def test_speed_index():
    assert [T.speed_index(s, 0, 0) for s in ("low", "med", "hi")] == [15, 25, 31]
    assert [T.speed_index("low", 5, n) for n in (7, 8, 17, 18, 28)] == [15, 16, 16, 17, 18]
    assert T.speed_index("hi", 20, 10_000) == 80  # 49 speed-ups at most
    assert T.speed_index("med", 24, 100) == T.speed_index("med", 20, 100) == 25 + 10  # no bonus past level 20
    for bad in [("fast", 0, 0), ("low", 25, 0), ("low", 0, -1)]:
        with pytest.raises(ValueError):
            T.speed_index(*bad)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"speed_index": 81}, "speed_index must be an int in 0..80"),
        ({"speed_index": -1}, "speed_index must be an int in 0..80"),
        ({"speed_index": 15.0}, "speed_index must be an int in 0..80"),
        ({"speed_index": True}, "speed_index must be an int in 0..80"),
        ({"speed_index": 15, "parity": 2}, "parity must be 0 or 1"),
        ({"speed_index": 15, "parity": None}, "parity must be 0 or 1"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        dm.reachable(dm.Board.empty(), dm.Pill.from_string("qw"), **kwargs)


def test_bad_board_and_pill():
    with pytest.raises(ValueError, match="board"):
        dm.reachable("d" * 128, dm.Pill.from_string("qw"), 15)  # type: ignore[arg-type]
    with pytest.raises(dm.FormatError):
        dm.reachable(np.full((8, 16), 99, np.uint8), dm.Pill.from_string("qw"), 15)
    with pytest.raises(dm.FormatError):
        dm.reachable(dm.Board.empty(), "xx", 15)  # type: ignore[arg-type]


def test_cells_and_tuple_keys():
    board = random_game(99, 8, 5, rng_seed=2).board
    pill = dm.Pill.from_string("rw")
    by_board = dm.reachable(board, pill, 25)
    assert dm.reachable(board.cells.copy(), pill, 25) == by_board
    move = next(iter(by_board))
    assert by_board[tuple(move)] == by_board[move]  # type: ignore[index]
    assert T.input_string(T.input_bits("LDA")) == "LDA" and T.input_bits("") == 0


def test_compiled_frame_matches_the_oracle():
    """`timing_kernels.frame` (the search's one frame, in the kit's conventions) equals the oracle's step."""
    rng = np.random.default_rng(5)
    for i in range(3000):
        board = random_board(i, float(rng.uniform(0, 0.5)))
        cells = board.cells
        r, x, y = int(rng.integers(4)), int(rng.integers(8)), int(rng.integers(16))
        if not TK.fits(*fit_masks(cells), r, x, y):
            continue
        v, odd = int(rng.integers(0, 8)), int(rng.integers(2))
        g = int(rng.integers(0, v + 1))
        direction, das, ab = int(rng.integers(3)), int(rng.integers(16)), int(rng.integers(4))
        held = (0, L, R)[direction] | (A if ab & 1 else 0) | (B if ab & 2 else 0)
        h = 0 if direction == 0 else (1 if direction == 1 else 17) + das
        buttons = int(INPUTS[rng.integers(len(INPUTS))])
        want = step(cells, v, x, y, -r & 3, g, das, held, odd, buttons)
        got = TK.frame(*fit_masks(cells), v, odd, x, y, r, g, h, ab, buttons)
        locked, wx, wy, wrot, wg, wdas, wheld, _ = want
        assert got[:5] == (locked, wx, wy, -wrot & 3, wg)
        if not locked:
            d = 1 if buttons & L else (2 if buttons & R else 0)
            assert got[5] == (0 if d == 0 else (1 if d == 1 else 17) + wdas)
            assert got[6] == (1 if buttons & A else 0) | (2 if buttons & B else 0)


def fit_masks(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    fit_h, fit_v = np.empty(16, np.int64), np.empty(16, np.int64)
    TK.fit_masks(cells, fit_h, fit_v)
    return fit_h, fit_v


def test_batch_kernel():
    rng = np.random.default_rng(3)
    boards = np.stack([random_board(i, 0.3).cells for i in range(12)])
    pills = np.array([[1 + i % 3, 1 + i // 3 % 3] for i in range(12)], np.uint8)
    speeds, parities = rng.integers(0, 81, 12), rng.integers(0, 2, 12)
    masks = np.empty((12, 4, 8, 16), np.uint8)
    frames = np.empty((12, 4, 8, 16), np.int32)
    TK.reachable_masks_batch(boards, pills, speeds, parities, masks, frames, TK.new_workspace())
    for i in range(12):
        pill = dm.Pill(dm.Colour(pills[i, 0]), dm.Colour(pills[i, 1]))
        mask, fast = T.reachable_mask(boards[i], pill, int(speeds[i]), int(parities[i]))
        assert np.array_equal(masks[i], mask) and np.array_equal(frames[i], fast)
