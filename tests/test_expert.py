"""The expert player: its features against a plain per-cell reference, its search's rules (wins
first, no top-out while another move exists) and the compiled game loop against `Game`."""

from __future__ import annotations

import numpy as np
import pytest

import drmario as dm
from drmario.engine import kernels as K
from drmario.engine.level import new_level
from drmario.search import expert as E


def reference_features(cells: np.ndarray) -> dict[str, float]:
    """The features of `expert.FEATURES`, the slow obvious way (cell by cell)."""
    f = dict.fromkeys(E.FEATURES, 0.0)
    colour = cells & 3
    heights = [max((y + 1 for y in range(16) if cells[x, y]), default=0) for x in range(8)]
    for x in range(8):
        f["height"] += heights[x]
        f["holes"] += sum(1 for y in range(heights[x]) if cells[x, y] == 0)
        f["mixed"] += sum(1 for y in range(15) if cells[x, y] and cells[x, y + 1] and colour[x, y] != colour[x, y + 1])
        f["high_cells"] += sum(y - E.HIGH_ROW + 1 for y in range(E.HIGH_ROW, 16) if cells[x, y])
    f["bumpiness"] = float(sum(abs(heights[x + 1] - heights[x]) for x in range(7)))
    f["spawn_height"] = float(max(heights[3], heights[4]))
    for x in range(8):
        for y in range(16):
            v = cells[x, y]
            if v == 0 or v >> 2 != K.VIRUS:
                continue
            c = v & 3
            f["viruses"] += 1
            f["buried"] += sum(1 for yy in range(y + 1, 16) if cells[x, yy] and colour[x, yy] != c)
            windows = [[(x0 + i, y) for i in range(4)] for x0 in range(max(0, x - 3), min(4, x) + 1)]
            windows += [[(x, y0 + i) for i in range(4)] for y0 in range(max(0, y - 3), min(12, y) + 1)]
            need, blockers = [], []
            for w in windows:
                others = sum(1 for p in w if cells[p] and colour[p] != c)
                if others == 0:
                    need.append(4 - sum(1 for p in w if cells[p]))
                blockers.append(others)
            if need:
                f["need"] += min(need)
            else:
                f["no_line"] += 1
                f["blockers"] += min(blockers)
    for vertical in (True, False):
        lines = (
            [[(x, y) for y in range(16)] for x in range(8)]
            if vertical
            else [[(x, y) for x in range(8)] for y in range(16)]
        )
        for line in lines:
            i = 0
            while i < len(line):
                c = colour[line[i]]
                j = i + 1
                while c and j < len(line) and colour[line[j]] == c:
                    j += 1
                n = j - i
                if c and 2 <= n <= 3:
                    if vertical:
                        ok = j + 4 - n <= 16 and cells[line[j]] == 0
                    else:
                        lo, hi = i, j
                        while lo > 0 and colour[line[lo - 1]] in (0, c):
                            lo -= 1
                        while hi < len(line) and colour[line[hi]] in (0, c):
                            hi += 1
                        ok = hi - lo >= 4
                    if ok:
                        virus = any(cells[p] >> 2 == K.VIRUS for p in line[i:j])
                        f["virus_runs" if virus else "runs"] += n - 1
                i = j
    return f


def midgame_boards(count: int, level: int, seed: int = 0) -> list[np.ndarray]:
    """Boards from random play on a level (a mix of viruses and debris)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        game = dm.Game(int(rng.integers(2, 0x10000)), level, stall_limit=None)
        for _ in range(int(rng.integers(0, 40))):
            moves = game.legal_moves()
            game.play(moves[int(rng.integers(len(moves)))])
            if game.over:
                break
        out.append(game.board.cells)
    return out


def test_features_match_reference() -> None:
    for level in (0, 10, 20):
        for cells in midgame_boards(40, level, seed=level):
            got = E.board_features(cells)
            assert got == pytest.approx(reference_features(cells)), dm.Board(cells)


def test_place_matches_place_and_resolve() -> None:
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    for i, cells in enumerate(midgame_boards(30, 15, seed=7)):
        for a, b in ((1, 1), (1, 2), (3, 2)):
            n = K.legal_moves_into(cells, a, b, moves)
            for r, x, y in moves[:n]:
                fast, slow = cells.copy(), cells.copy()
                v = E.place_quick(fast, a, b, r, x, y)
                assert v == K.place_and_resolve(slow, a, b, r, x, y)[0]
                assert np.array_equal(fast, slow), (i, r, x, y)


def board_of(cells: dict[tuple[int, int], int]) -> np.ndarray:
    board = np.zeros((K.WIDTH, K.HEIGHT), np.uint8)
    for (x, y), code in cells.items():
        board[x, y] = code
    return board


def virus(colour: int) -> int:
    return K.VIRUS << 2 | colour


def half(colour: int) -> int:
    return K.DISCONNECTED << 2 | colour


def scores_of(
    cells: np.ndarray, pill: tuple[int, int], preview: tuple[int, int], weights=E.DEFAULT_WEIGHTS, depth: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    moves, scores = np.empty((K.MAX_MOVES, 3), np.int8), np.empty(K.MAX_MOVES)
    n = E.expert_scores(cells, *pill, *preview, weights, moves, scores, depth)
    return moves[:n], scores[:n]


def test_a_win_now_beats_everything_and_a_win_next_beats_the_rest() -> None:
    red, blue = K.RED, K.BLUE
    # A red virus under two red halves: a red half on top clears it, and wins.
    cells = board_of({(0, 0): virus(red), (0, 1): half(red), (0, 2): half(red), (5, 0): half(blue)})
    moves, scores = scores_of(cells, (red, blue), (blue, blue))
    best = int(np.argmax(scores))
    assert scores[best] == E.WIN_NOW and tuple(moves[best][1:]) == (0, 3)
    # Now the pill is blue-blue: no win now, but the red-red preview can win after any harmless move.
    moves, scores = scores_of(cells, (blue, blue), (red, red))
    assert scores.max() == E.WIN_NEXT and np.sum(scores == E.WIN_NOW) == 0
    # Depth 1 (no preview): plain evaluations.
    moves, scores = scores_of(cells, (blue, blue), (0, 0))
    assert np.all(np.abs(scores) <= E.EVAL_CLAMP)
    for (r, x, y), s in zip(moves, scores):
        after = cells.copy()
        K.place_and_resolve(after, blue, blue, r, x, y)
        assert s == pytest.approx(E.evaluate_board(after, E.DEFAULT_WEIGHTS))


def test_a_move_after_which_every_preview_placement_tops_out_ranks_as_a_loss_next() -> None:
    # Walls in columns 2 and 5 up to the top, columns 3 and 4 full to row 13 (colours making no line):
    # a pill can only lie across rows 14 (leaving row 15 free) or stand up into row 15 (topping out).
    cells = {(0, 0): virus(K.RED)}
    for y in range(16):
        cells[2, y], cells[5, y] = half(y % 3 + 1), half(y % 3 + 1)
        if y < 14:
            cells[3, y], cells[4, y] = half((y + 1) % 3 + 1), half((y + 2) % 3 + 1)
    board = board_of(cells)
    moves, scores = scores_of(board, (K.YELLOW, K.BLUE), (K.BLUE, K.YELLOW))  # (red-red would clear row 15)
    lying = np.array([r % 2 == 0 for r, _, _ in moves])
    assert lying.any() and not lying.all()
    assert np.all(scores[~lying] <= E.LOSS_NOW)  # standing up blocks the spawn now
    # lying down leaves only row 15 for the preview, where every placement blocks the spawn
    assert np.all((scores[lying] > E.LOSS_NOW) & (scores[lying] < E.LOSS_NEXT / 2)), scores


def test_never_blocks_the_spawn_while_another_move_exists() -> None:
    # Columns 3 and 4 are full up to row 14 with colours that make no line: a pill left there tops out.
    cells = {(0, 0): virus(K.RED)}
    for y in range(15):
        cells[3, y], cells[4, y] = half(y % 3 + 1), half((y + 1) % 3 + 1)
    board = board_of(cells)
    for depth_preview in ((0, 0), (K.BLUE, K.YELLOW)):
        moves, scores = scores_of(board, (K.YELLOW, K.BLUE), depth_preview)
        blocked = []
        for r, x, y in moves:
            after = board.copy()
            K.place_and_resolve(after, K.YELLOW, K.BLUE, r, x, y)
            blocked.append(K.spawn_blocked(after))
        blocked = np.array(blocked)
        assert blocked.any() and not blocked.all()
        assert np.all(scores[blocked] < scores[~blocked].min())
        assert np.all(scores[blocked] <= E.LOSS_NOW)
        chosen = E.expert_move(
            board,
            K.YELLOW,
            K.BLUE,
            *depth_preview,
            E.DEFAULT_WEIGHTS,
            np.uint64(3),
            *(np.empty((K.MAX_MOVES, 3), np.int8), np.empty(K.MAX_MOVES)),
        )
        assert not blocked[chosen]


def placed(cells: np.ndarray, pill: tuple[int, int], move: np.ndarray) -> np.ndarray:
    after = cells.copy()
    K.place_and_resolve(after, *pill, *move)
    return after


def best_after(cells: np.ndarray, pill: tuple[int, int], weights: np.ndarray) -> float:
    """The best evaluation over pill's placements that do not top out (-EVAL_CLAMP if none)."""
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    boards = [placed(cells, pill, m) for m in moves[: K.legal_moves_into(cells, *pill, moves)]]
    return max((E.evaluate_board(b, weights) for b in boards if not K.spawn_blocked(b)), default=-E.EVAL_CLAMP)


MIXED = [(a, b) for a in (1, 2, 3) for b in (1, 2, 3)]  # the 9 next pills, equally likely


def board_in_play() -> tuple[np.ndarray, tuple[int, int]]:
    """A level-14 board 12 pills into the expert's game, and its 13th pill."""
    start = new_level(99, 14)
    cells, pills = start.board.cells.copy(), start.pill_array
    record = np.empty((12, 3), np.int8)
    E.play_game(cells, pills, E.load_weights(), 2, 99, 12, record)
    for k in range(12):
        K.place_and_resolve(cells, *pills[k], *record[k])
    return cells, tuple(pills[12].tolist())


def best_boards(cells: np.ndarray, pill: tuple[int, int], weights: np.ndarray, keep: int) -> list[np.ndarray]:
    """The keep best boards by evaluation after pill's placements that do not top out."""
    options = np.empty((K.MAX_MOVES, 3), np.int8)
    boards = [placed(cells, pill, m) for m in options[: K.legal_moves_into(cells, *pill, options)]]
    boards = [b for b in boards if not K.spawn_blocked(b)]
    return sorted(boards, key=lambda b: -E.evaluate_board(b, weights))[:keep]


def test_depth_3_rescores_the_beam_by_the_expected_best_placement_of_the_unknown_next_pill() -> None:
    weights = E.load_weights()
    cells, pill = board_in_play()
    preview = (K.RED, K.BLUE)
    moves, depth2 = scores_of(cells, pill, preview, weights, 2)
    depth3 = scores_of(cells, pill, preview, weights, 3)[1]
    open_ = np.abs(depth2) <= E.EVAL_CLAMP
    assert np.array_equal(depth3[~open_], depth2[~open_])  # wins and losses within two pills keep their rank
    beam = open_ & (depth3 > -2 * E.EVAL_CLAMP)
    assert beam.sum() == min(E.DEPTH3_BEAM, open_.sum()) and np.all(depth3[open_ & ~beam] == -2 * E.EVAL_CLAMP)
    assert depth2[beam].min() >= depth2[open_ & ~beam].max()  # the beam is the best by depth 2
    for j in np.flatnonzero(beam):
        boards = best_boards(placed(cells, pill, moves[j]), preview, weights, E.DEPTH3_KEEP)
        expected = [np.mean([best_after(b, p, weights) for p in MIXED]) for b in boards]
        assert depth3[j] == pytest.approx(max(expected), rel=1e-9)


def test_depth_4_looks_past_the_best_placements_of_the_next_pill_too() -> None:
    weights = E.load_weights()
    cells, pill = board_in_play()
    preview = (K.RED, K.BLUE)
    moves, depth3 = scores_of(cells, pill, preview, weights, 3)
    depth4 = scores_of(cells, pill, preview, weights, 4)[1]
    beam = np.abs(depth3) < E.EVAL_CLAMP  # the same beam; the other moves keep their rank
    assert np.array_equal(depth4[~beam], depth3[~beam]) and not np.array_equal(depth4[beam], depth3[beam])

    def next_value(board: np.ndarray, p: tuple[int, int]) -> float:
        looked = [np.mean([best_after(b, q, weights) for q in MIXED]) for b in best_boards(board, p, weights, 2)]
        return max(looked, default=-E.EVAL_CLAMP)

    j = int(np.argmax(np.where(beam, depth4, -np.inf)))  # the chosen move (brute force for one: seconds)
    boards = best_boards(placed(cells, pill, moves[j]), preview, weights, E.DEPTH3_KEEP)
    expected = [np.mean([next_value(b, p) for p in MIXED]) for b in boards]
    assert E.DEPTH4_KEEP == 2 and depth4[j] == pytest.approx(max(expected), rel=1e-9)


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_compiled_game_loop_matches_game(depth: int) -> None:
    seed, level = 1234, {1: 3, 2: 8, 3: 4, 4: 2}[depth]
    start = new_level(seed, level)
    record = np.empty((2000, 3), np.int8)
    outcome, cleared, used = E.play_game(
        start.board.cells, start.pill_array, E.DEFAULT_WEIGHTS, depth, seed, 2000, record
    )
    game = dm.Game(seed, level, stall_limit=None)
    moves, scores = np.empty((K.MAX_MOVES, 3), np.int8), np.empty(K.MAX_MOVES)
    while not game.over:
        preview = (int(game.next_pill.left), int(game.next_pill.right)) if depth >= 2 else (0, 0)
        seed_k = np.uint64(E.tie_seed(seed, game.pills_used))
        j = E.expert_move(
            game.board.cells,
            int(game.pill.left),
            int(game.pill.right),
            *preview,
            E.DEFAULT_WEIGHTS,
            seed_k,
            moves,
            scores,
            depth,
        )
        assert tuple(moves[j]) == tuple(record[game.pills_used])
        game.play(dm.Move(*moves[j].tolist()))
    assert (outcome, cleared, used) == (
        E.WON if game.outcome is dm.Outcome.WON else E.TOPPED_OUT,
        game.viruses_cleared,
        game.pills_used,
    )


def test_weights_file_matches_features() -> None:
    weights = E.load_weights()
    assert weights.shape == (E.N_FEATURES,)
    assert np.all(np.isfinite(weights))


@pytest.mark.parametrize(
    "content, message",
    [
        ("{", "not an expert weights file"),
        ('{"weights": []}', "not an expert weights file.*features"),
        (None, f"expected {E.N_FEATURES} weights, one per feature"),  # the features and 5 weights
        ("nan", "the weight of .* is nan, not a finite number"),
        ("bool", "the weight of .* is True, not a finite number"),
    ],
)
def test_a_bad_weights_file_is_refused_by_name(tmp_path, content, message) -> None:
    import json

    features = list(E.FEATURES)
    if content is None:
        content = json.dumps({"features": features, "weights": [1.0] * 5})
    elif content in ("nan", "bool"):
        weights = [1.0] * len(features)
        weights[3] = float("nan") if content == "nan" else True
        content = json.dumps({"features": features, "weights": weights})
    path = tmp_path / f"w-{len(content)}.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=f"{path}: {message}"):
        E.load_weights(path)


def test_every_caller_reaches_one_compiled_search():
    """A read-only board, uint8 colours or a constant argument would each compile the expert's whole
    search again (seconds apiece on a fresh install): from Python (a game's read-only board, numpy
    colours), the compiled game loop and the rollouts, the search is one specialization."""
    from drmario.search.playouts import new_scratch, rollout, rollouts

    start = new_level(7, 10)
    weights, moves, scores = E.load_weights(), np.empty((K.MAX_MOVES, 3), np.int8), np.empty(K.MAX_MOVES)
    board = start.board.cells
    assert not board.flags.writeable
    a, b = start.pill_array[0]
    E.expert_scores(board, a, b, *start.pill_array[1], weights, moves, scores, 3)
    E.score_moves(board, int(a), int(b), 0, 0, weights, moves, 4, scores)
    E.play_game(board, start.pill_array, weights, 3, 7, 5, np.empty((5, 3), np.int8))
    how = rollouts("expert", 3, None, np.full(9, 1 / 9))
    rollout(board.copy(), 0, 4, K.count_viruses(board), 0, how, np.array([5], np.uint64), new_scratch())
    # (a function compiled only inside a cached caller lists no signature; these two are also called
    # from Python, and a second one would show wherever the callers compiled in this process)
    for kernel in (E.scores_into, E._score_moves):
        assert len(kernel.signatures) == 1, kernel.signatures
