"""Search: utility ordering, one-winning-move positions, chance nodes and the preview pill, no
peeking past the preview, golden root tables."""

import json

import numpy as np
import pytest
from conftest import DATA
from hypothesis import given, settings
from hypothesis import strategies as st

import drmario as dm
from drmario.engine import kernels as K
from drmario.search import mcts
from drmario.search.playouts import expected_utility, utility, utility_params
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


OUTCOME = utility_params("outcome")
DISCOUNTED = utility_params("discounted", gamma=0.9)
counts = st.integers(0, 84)
pills = st.integers(1, 2000)


@settings(max_examples=300, deadline=None)
@given(counts, pills, counts, pills, st.sampled_from([K.TOPPED_OUT, K.STALEMATE, K.RUNNING]))
def test_any_win_beats_any_failure(c1, p1, c2, p2, failure):
    root = max(c1, c2)
    win = utility(OUTCOME, c1, p1, K.WON, root)
    assert win > utility(OUTCOME, c2, p2, failure, root)
    assert 0.6 <= win <= 1 and 0 <= utility(OUTCOME, c2, p2, failure, root) <= 0.5
    assert utility(DISCOUNTED, c1, p1, K.WON, root) > utility(DISCOUNTED, c2, p2, failure, root) == 0


@settings(max_examples=200, deadline=None)
@given(counts, pills, pills)
def test_among_wins_fewer_pills_is_better(c, p1, p2):
    for up in (OUTCOME, DISCOUNTED):
        a, b = utility(up, c, min(p1, p2), K.WON, c), utility(up, c, max(p1, p2), K.WON, c)
        assert a > b if p1 != p2 else a == b


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 83), pills, pills)
def test_among_failures_more_cleared_then_longer_survival_is_better(c, p1, p2):
    root = 84
    # one more virus cleared beats any survival; with the same viruses, surviving longer is better
    assert utility(OUTCOME, c + 1, 1, K.TOPPED_OUT, root) > utility(OUTCOME, c, 10**6, K.TOPPED_OUT, root)
    short, long = sorted((p1, p2))
    if short < long:
        assert utility(OUTCOME, c, long, K.TOPPED_OUT, root) > utility(OUTCOME, c, short, K.TOPPED_OUT, root)


def test_the_network_form_is_the_expectation():
    for up in (OUTCOME, DISCOUNTED):
        assert expected_utility(up, 2.0, 7.0, 1.0, 4) == pytest.approx(utility(up, 2, 7, K.WON, 4))
        assert expected_utility(up, 2.0, 7.0, 0.0, 4) == pytest.approx(utility(up, 2, 7, K.TOPPED_OUT, 4))
        half = expected_utility(up, 2.0, 7.0, 0.5, 4)
        assert half == pytest.approx((utility(up, 2, 7, K.WON, 4) + utility(up, 2, 7, K.TOPPED_OUT, 4)) / 2)
    assert utility(OUTCOME, 4, 5, K.WON, 4) == pytest.approx(0.6 + 0.4 * (1 - 5 / 25))  # the documented shape
    assert utility(OUTCOME, 1, 5, K.TOPPED_OUT, 4) == pytest.approx(0.5 * (1 + 5 / 25) / 5)
    assert utility(DISCOUNTED, 4, 5, K.WON, 4) == pytest.approx(0.9**5)
    with pytest.raises(ValueError, match="topout_ceiling"):
        SearchConfig(win_floor=0.5, topout_ceiling=0.5)


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
    """Two games with the same board, pill and preview but different later pills search identically."""
    a = dm.Game(2468, 6)
    b = dm.Game(2468, 6)
    future = b.pills._array.copy()
    future[2:] = future[2:][::-1]  # a different pill sequence after the preview
    b.pills._array = future
    assert a.pill == b.pill and a.next_pill == b.next_pill and a.pills[2] != b.pills[2]
    cfg = SearchConfig(mode=mode, simulations=40)
    evaluator = RolloutEvaluator(seed=9) if mode == "puct" else None
    ra = search(a, cfg, evaluator, seed=11)
    evaluator = RolloutEvaluator(seed=9) if mode == "puct" else None
    rb = search(b, cfg, evaluator, seed=11)
    assert ra.moves == rb.moves
    assert np.array_equal(ra.visits, rb.visits)
    assert np.array_equal(ra.value, rb.value, equal_nan=True)
    assert np.array_equal(ra.target, rb.target)


@pytest.mark.parametrize("mode", ["round0", "puct"])
def test_the_preview_resolves_the_roots_chance_nodes_only(mode):
    game = dm.Game(2468, 6)
    evaluator = RolloutEvaluator(seed=9) if mode == "puct" else None
    searcher = Searcher(SearchConfig(mode=mode, simulations=60), evaluator)
    searcher.search([Position.of(game)], seeds=[3])
    f = searcher.forest
    root_edges = range(f.d_edge_start[f.root[0]], f.d_edge_start[f.root[0]] + f.d_edge_count[f.root[0]])
    below_root = [f.e_chance[e] for e in root_edges if f.e_chance[e] >= 0 and f.c_outcome[f.e_chance[e]] == K.RUNNING]
    assert below_root
    for c in below_root:  # after the root's placement comes the preview, and only the preview
        assert f.c_visits[c].sum() == f.c_visits[c, game.next_pill.number] > 0
    if mode == "puct":  # (round 0 spends 60 simulations near the root; puct goes deeper)
        deeper = [c for c in range(f.used[2]) if c not in below_root and f.c_visits[c].sum() >= 2]
        assert any((f.c_visits[c] > 0).sum() > 1 for c in deeper)  # later pills stay chance nodes
    blind = Searcher(SearchConfig(mode=mode, simulations=60, use_preview=False), evaluator)
    blind.search([Position.of(game)], seeds=[3])
    g = blind.forest
    assert any((g.c_visits[c] > 0).sum() > 1 for c in range(g.used[2]) if g.c_visits[c].sum() >= 2)
    other = Position.of(game)._replace(preview=dm.Pill.from_number((game.next_pill.number + 1) % 9))
    assert not np.array_equal(search(other, SearchConfig(simulations=60), seed=3).value, blind.results()[0].value)


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
