"""Search: utility scale, one-winning-move positions, chance nodes, no peeking, golden root table."""

import json

import numpy as np
import pytest
from conftest import DATA

import drmario as dm
from drmario.engine import kernels as K
from drmario.search import mcts
from drmario.search.searcher import Position, Prediction, RolloutEvaluator, SearchConfig, Searcher, search


class UniformNetwork:
    """A stub network that is honest about knowing nothing: uniform moves, neutral values."""

    def __init__(self):
        self.calls = 0

    def evaluate(self, cells, pills):
        self.calls += 1
        n = len(cells)
        moves = np.full((n, 4, 8, 16), 1 / 512, np.float32)
        return Prediction(np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32), moves)


def one_winner_position() -> tuple[Position, dm.Move]:
    """A full bottle with a one-wide shaft at x=3 over three red viruses (the only viruses).

    Pill red|blue: only the vertical placement with red at the bottom (r=3) goes down the shaft
    and completes four reds: a win. Horizontal placements and vertical ones at x=4 rest on the
    spawn row (a top out); blue-down into the shaft clears nothing.
    """
    cells = np.zeros((8, 16), np.uint8)
    for x in range(8):
        for y in range(16):
            if y == 15 and x in (3, 4):
                continue
            cells[x, y] = K.DISCONNECTED << 2 | (1 + (x + 2 * y) % 3)  # no two alike side by side
    cells[3, 11:] = 0
    cells[3, 8:11] = K.VIRUS << 2 | K.RED
    board = dm.Board(cells)
    pill = dm.Pill.from_string("qw")
    assert board.virus_count == 3 and len(dm.legal_moves(board, pill)) == 6
    return Position(board.cells, pill, 0), dm.Move(3, 3, 11)


# ---------------------------------------------------------------- utility


def test_utility_scale():
    # A win from V=4 viruses in p=5 pills: (4 + 1 - 5/25) / 5; a top out after clearing 1 in 5 pills.
    assert mcts.utility(4, 5, K.WON, 4) == pytest.approx((4 + 1 - 5 / 25) / 5)
    assert mcts.utility(4, 5, K.STALEMATE, 4) == pytest.approx((4 + 1 - 5 / 25) / 5)
    assert mcts.utility(1, 5, K.TOPPED_OUT, 4) == pytest.approx((1 + 5 / 25) / 5)
    # Horizon-cut rollouts count like a top out at that point.
    assert mcts.utility(1, 5, K.RUNNING, 4) == mcts.utility(1, 5, K.TOPPED_OUT, 4)
    # In [0, 1]; faster wins and longer survival are better; any cleared virus beats no virus.
    assert mcts.utility(4, 1, K.WON, 4) <= 1
    assert mcts.utility(4, 10, K.WON, 4) > mcts.utility(4, 30, K.WON, 4)
    assert mcts.utility(0, 30, K.TOPPED_OUT, 4) > mcts.utility(0, 3, K.TOPPED_OUT, 4)
    assert mcts.utility(1, 1, K.TOPPED_OUT, 4) > mcts.utility(0, 1000, K.TOPPED_OUT, 4)
    # The network form: a sure finish equals the win formula, a sure top out the top-out one.
    assert mcts.expected_utility(2.0, 7.0, 1.0, 4) == pytest.approx(mcts.utility(2, 7, K.WON, 4))
    assert mcts.expected_utility(2.0, 7.0, 0.0, 4) == pytest.approx(mcts.utility(2, 7, K.TOPPED_OUT, 4))


# ---------------------------------------------------------------- finding the winning move


def test_round0_puts_most_mass_on_the_winning_move():
    position, winner = one_winner_position()
    result = search(position, SearchConfig(simulations=50), seed=3)
    assert result.best == winner
    target = result.target
    assert target[winner] > 0.5
    assert (target[dm.legal_mask(dm.Board(position.cells), position.pill)] > 0).all()  # no legal move at 0
    assert target.sum() == pytest.approx(1)


@pytest.mark.parametrize("mode", ["puct", "gumbel"])
def test_network_search_with_uniform_stub_finds_the_winning_move(mode):
    position, winner = one_winner_position()
    network = UniformNetwork()
    result = search(position, SearchConfig(mode=mode, simulations=40, dirichlet_fraction=0.25), network, seed=3)
    assert result.best == winner
    assert result.target[winner] > 0.5
    assert network.calls > 0
    assert np.allclose(result.prior, 1 / 6, atol=0.2)  # uniform over the 6 legal moves, plus noise


def test_round_n_with_rollout_evaluator_runs_batched():
    games = [dm.Game(s, 3) for s in (100, 200, 300)]
    evaluator = RolloutEvaluator(seed=1)
    results = Searcher(SearchConfig(mode="puct", simulations=16), evaluator, games=3).search(
        [Position.of(g) for g in games], seeds=[1, 2, 3]
    )
    for game, result in zip(games, results):
        assert set(result.moves) == set(game.legal_moves())
        assert result.visits.sum() == 16
        assert result.target.sum() == pytest.approx(1)


# ---------------------------------------------------------------- chance nodes


def test_chance_nodes_expand_all_nine_pills_weighted_by_probability():
    probs = np.array([0.3, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05])
    cfg = SearchConfig(simulations=600, root_rollouts=1, pill_probs=tuple(probs))
    position, _ = one_winner_position()
    searcher = Searcher(cfg)
    # Blue|yellow cannot win: the two placements down the shaft are the only ones that do not top out.
    searcher.search([position._replace(pill=dm.Pill.from_string("sv"))], seeds=[5])
    f = searcher.forest
    visited = [c for c in range(f.used[2]) if f.c_outcome[c] == K.RUNNING and f.c_visits[c].sum() >= 60]
    assert visited, "some chance node should be visited often"
    for c in visited:
        n = f.c_visits[c]
        assert (n > 0).all()  # every one of the 9 next pills was explored
        assert np.abs(n / n.sum() - probs).max() < 0.03  # visits follow the probabilities
        means = f.c_wsum[c] / n
        assert mcts.chance_value(f, c, probs) == pytest.approx(float(np.sum(probs * means)), rel=1e-5)


def test_uniform_pills_by_default_and_bad_probabilities_rejected():
    assert np.allclose(SearchConfig().probs, 1 / 9)
    with pytest.raises(ValueError, match="pill_probs"):
        SearchConfig(pill_probs=(0.5, 0.5))
    with pytest.raises(ValueError, match="needs an evaluator"):
        Searcher(SearchConfig(mode="puct"))


# ---------------------------------------------------------------- no peeking


@pytest.mark.parametrize("mode", ["round0", "puct"])
def test_search_ignores_the_real_future_pills(mode):
    """Two games with the same board and pill but different future pills search identically."""
    a = dm.Game(2468, 6)
    b = dm.Game(2468, 6)
    future = b.pills._array.copy()
    future[1:] = future[1:][::-1]  # a different pill sequence after the current pill
    b.pills._array = future
    assert a.pill == b.pill and a.next_pill != b.next_pill
    cfg = SearchConfig(mode=mode, simulations=40)
    evaluator = RolloutEvaluator(seed=9) if mode == "puct" else None
    ra = search(a, cfg, evaluator, seed=11)
    evaluator = RolloutEvaluator(seed=9) if mode == "puct" else None
    rb = search(b, cfg, evaluator, seed=11)
    assert ra.moves == rb.moves
    assert np.array_equal(ra.visits, rb.visits)
    assert np.array_equal(ra.value, rb.value, equal_nan=True)
    assert np.array_equal(ra.target, rb.target)


def test_searches_in_lockstep_match_searches_alone():
    games = [dm.Game(s, 4) for s in (11, 22, 33, 44)]
    cfg = SearchConfig(simulations=30)
    together = Searcher(cfg, games=4).search([Position.of(g) for g in games], seeds=[1, 2, 3, 4])
    for game, seed, shared in zip(games, [1, 2, 3, 4], together):
        alone = search(game, cfg, seed=seed)
        assert np.array_equal(alone.visits, shared.visits)
        assert np.array_equal(alone.value, shared.value, equal_nan=True)


# ---------------------------------------------------------------- golden root table

GOLDEN = DATA / "search_golden.json"


def golden_tables() -> dict:
    position = Position.of(dm.Game(1234, 8))
    out = {}
    for name, cfg, evaluator in [
        ("round0", SearchConfig(simulations=60, root_rollouts=1), None),
        ("round0_greedy", SearchConfig(simulations=60, root_rollouts=1, rollout_policy="greedy", horizon=15), None),
        ("puct_uniform", SearchConfig(mode="puct", simulations=40), UniformNetwork()),
        ("gumbel_uniform", SearchConfig(mode="gumbel", simulations=32, gumbel_m=8), UniformNetwork()),
    ]:
        result = search(position, cfg, evaluator, seed=42)
        table = result.table()
        out[name] = {
            "config": cfg.to_dict(),
            "best": list(result.best),
            "rows": [
                [int(r.r), int(r.x), int(r.y), int(r.visits), None if np.isnan(r.value) else round(float(r.value), 6)]
                for r in table.itertuples()
            ],
        }
    return out


def test_golden_root_tables():
    """A fixed seed and settings give a fixed root visit/value table. If search behaviour changes
    on purpose, regenerate with `python tests/test_search.py` and review the diff."""
    want = json.loads(GOLDEN.read_text())
    got = golden_tables()
    for name in want:
        assert got[name]["best"] == want[name]["best"], name
        for g_row, w_row in zip(got[name]["rows"], want[name]["rows"], strict=True):
            assert g_row[:4] == w_row[:4], (name, g_row, w_row)
            assert (g_row[4] is None) == (w_row[4] is None), name
            if w_row[4] is not None:
                assert g_row[4] == pytest.approx(w_row[4], abs=1e-5), name


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(golden_tables(), indent=1) + "\n")
    print(f"wrote {GOLDEN}")


def test_a_lost_position_is_refused():
    cells = np.zeros((8, 16), np.uint8)
    cells[3, :] = [K.VIRUS << 2 | (1 + y % 3) for y in range(16)]  # a column up to the spawn cell
    with pytest.raises(ValueError, match="spawn cell is occupied"):
        search(Position(cells, dm.Pill.from_string("qu")), SearchConfig(simulations=4))
