"""Engine throughput on one core: legal-placement enumeration, place-and-resolve, random play and
level generation. Run: `python bench/engine.py` (or `make bench`)."""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from common import rate, report  # noqa: E402
from numba import njit  # noqa: E402

import drmario as dm  # noqa: E402
from drmario.engine import kernels as K  # noqa: E402
from drmario.search.heuristics import greedy_move  # noqa: E402
from drmario.search.playouts import RANDOM, rollout  # noqa: E402


def midgame_boards(count: int, level: int = 20, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Level-`level` boards after 10-40 pills of the one-ply greedy player (fewer viruses, debris),
    each with the pill to place next. Returns boards uint8[N, 8, 16] and pills uint8[N, 2]."""
    rng = np.random.default_rng(seed)
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    boards, pills = [], []
    while len(boards) < count:
        game = dm.Game(int(rng.integers(2, 0x10000)), level, stall_limit=None)
        for _ in range(int(rng.integers(10, 41))):
            pill, cells = game.pill, game.board.cells
            state = np.array([rng.integers(1, 2**62) | 1], np.uint64)
            j = greedy_move(cells, int(pill.left), int(pill.right), state, moves)
            trial = game.copy()
            trial.play(dm.Move(*moves[j].tolist()))
            if trial.over:
                break
            game = trial
        boards.append(game.board.cells)
        pills.append((game.pill.left, game.pill.right))
    return np.stack(boards), np.array(pills, np.uint8)


@njit(cache=True)
def enumerate_all(boards, pills):
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    total = 0
    for i in range(boards.shape[0]):
        total += K.legal_moves_into(boards[i], pills[i, 0], pills[i, 1], moves)
    return total


@njit(cache=True)
def place_all(boards, pills, chosen):
    scratch = np.empty((K.WIDTH, K.HEIGHT), np.uint8)
    cleared = 0
    for i in range(boards.shape[0]):
        scratch[:] = boards[i]
        v, _, _ = K.place_and_resolve(scratch, pills[i, 0], pills[i, 1], chosen[i, 0], chosen[i, 1], chosen[i, 2])
        cleared += v
    return cleared


@njit(cache=True)
def random_games(starts, first_pills, state, stall_limit):
    """Random play to the end of each game with the search's rollout (uniform i.i.d. pills after
    the level's first one). Returns the pills placed."""
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    scores = np.empty(K.MAX_MOVES)
    cdf = np.cumsum(np.full(9, 1 / 9))
    weights = np.zeros(1)  # (the expert's, unused by random rollouts)
    pills_used = 0
    for i in range(starts.shape[0]):
        board = starts[i].copy()
        left = K.count_viruses(board)
        _, _, used = rollout(
            board, first_pills[i], left, 0, stall_limit, 1 << 30, RANDOM, weights, cdf, state, moves, scores
        )
        pills_used += used
    return pills_used


@njit(cache=True)
def generate_levels(seeds, level):
    pills = np.empty((128, 2), np.uint8)
    board = np.empty((K.WIDTH, K.HEIGHT), np.uint8)
    for s in seeds:
        board[:] = 0
        state = K.generate_pills(s, pills)
        K.place_viruses(state, min(84, 4 * (level + 1)), 12 if level >= 19 else 9, board)
    return seeds.shape[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--boards", type=int, default=500, help="mid-game level-20 boards")
    parser.add_argument("--seconds", type=float, default=1.0, help="minimum time per figure")
    args = parser.parse_args()

    boards, pills = midgame_boards(args.boards)
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    rng = np.random.default_rng(1)
    chosen = np.empty((len(boards), 3), np.int8)
    for i in range(len(boards)):
        n = K.legal_moves_into(boards[i], pills[i, 0], pills[i, 1], moves)
        chosen[i] = moves[rng.integers(n)]
    py_boards = [dm.Board(b) for b in boards]
    py_pills = [dm.Pill(dm.Colour(a), dm.Colour(b)) for a, b in pills]
    py_moves = [dm.Move(*m) for m in chosen.tolist()]

    # Random play: levels 0..20 with their NES pill lists; stalemate after 20 idle pills.
    seeds = rng.integers(2, 0x10000, 210)
    levels = [dm.new_level(int(s), i % 21) for i, s in enumerate(seeds)]
    starts = np.stack([lv.board.cells for lv in levels])
    first_pills = np.array([lv.pills[0].number for lv in levels], np.int64)
    state = np.array([12345], np.uint64)
    level_seeds = rng.integers(2, 0x10000, 1000).astype(np.int64)
    t = args.seconds
    figures = {
        "legal_enumerations_per_s": rate(lambda: (enumerate_all(boards, pills), len(boards))[1], t),
        "legal_enumerations_per_s_python_api": rate(
            lambda: sum(1 for b, p in zip(py_boards, py_pills) if dm.legal_moves(b, p) is not None), t
        ),
        "place_and_resolve_per_s": rate(lambda: (place_all(boards, pills, chosen), len(boards))[1], t),
        "place_and_resolve_per_s_python_api": rate(
            lambda: sum(1 for b, p, m in zip(py_boards, py_pills, py_moves) if dm.place(b, p, m)), t
        ),
        "random_play_pills_per_s": rate(lambda: random_games(starts, first_pills, state, 20), t),
        "levels_per_s": rate(lambda: generate_levels(level_seeds, 20), t),
        "levels_per_s_python_api": rate(lambda: sum(1 for s in level_seeds[:200] if dm.new_level(int(s), 20)), t),
        "mean_legal_moves_midgame": float(enumerate_all(boards, pills) / len(boards)),
        "mean_viruses_midgame": float(np.mean([b.virus_count for b in py_boards])),
    }
    report(
        "engine",
        {
            "boards": args.boards,
            "board_level": 20,
            "boards_made_by": "greedy player, 10-40 pills",
            "random_play_levels": "0-20",
            "random_play_pills": "level first pill, then i.i.d. uniform",
            "stall_limit": 20,
            "threads": 1,
        },
        figures,
        targets={
            "legal_enumerations_per_s": 100_000,
            "place_and_resolve_per_s": 200_000,
            "random_play_pills_per_s": 50_000,
        },
    )


if __name__ == "__main__":
    main()
