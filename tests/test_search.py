"""Search: utility ordering and scale, one-winning-move positions, chance nodes that draw the
preview, no peeking past it, sequential halving, the improved-policy target, golden root tables."""

import dataclasses
import inspect
import json
from typing import get_args, get_type_hints

import numpy as np
import pytest
from conftest import DATA
from hypothesis import given, settings
from hypothesis import strategies as st

import drmario as dm
from drmario.engine import kernels as K
from drmario.search import (
    GumbelSettings,
    Position,
    Prediction,
    PuctSettings,
    RolloutEvaluator,
    Round0Settings,
    SearchConfig,
    Utility,
    gumbel_search,
    puct_search,
    round0_search,
    search,
)
from drmario.search.config import MODE_READS, Mode
from drmario.search.core import merged, pill_distribution, run
from drmario.search.network import (
    NORMALISE_EPSILON,
    PUCT,
    Selection,
    considered_visits,
    descend,
    expand_and_backup,
    pending_leaves,
    search_inputs,
)
from drmario.search.playouts import rollouts
from drmario.search.round0 import evaluate_root, simulate
from drmario.search.tree import chance_value, plant, reserve
from drmario.search.utility import _KINDS, TOPOUT_CEILING, WIN_FLOOR, expected_utility, utility


class StubNetwork:
    """A stub network: fixed move probabilities (uniform by default), neutral values."""

    def __init__(self, moves: np.ndarray | None = None):
        self.calls = 0
        self.moves = np.full((4, 8, 16), 1 / 512, np.float32) if moves is None else moves

    def evaluate(self, cells, pills, previews):
        assert len(cells) == len(pills) == len(previews) and (previews > 0).all()
        self.calls += 1
        n = len(cells)
        moves = np.broadcast_to(self.moves, (n, 4, 8, 16)).copy()
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
    return Position(board.cells, pill, 0, preview=dm.Pill.from_string("rv")), dm.Move(3, 3, 11)


# ---------------------------------------------------------------- utility


OUTCOME = Utility(kind="outcome").params
DISCOUNTED = Utility(kind="discounted", gamma=0.9).params
CENTRED = Utility(kind="centred").params
counts = st.integers(0, 84)
pills = st.integers(1, 2000)


@settings(max_examples=300, deadline=None)
@given(counts, pills, counts, pills, st.sampled_from([K.TOPPED_OUT, K.STALEMATE, K.RUNNING]))
def test_any_win_beats_any_failure(c1, p1, c2, p2, failure):
    root = max(c1, c2)
    win = utility(OUTCOME, c1, p1, K.WON, root)
    assert win > utility(OUTCOME, c2, p2, failure, root)
    assert WIN_FLOOR <= win <= 1 and 0 <= utility(OUTCOME, c2, p2, failure, root) <= TOPOUT_CEILING
    assert utility(DISCOUNTED, c1, p1, K.WON, root) > utility(DISCOUNTED, c2, p2, failure, root) == 0


@settings(max_examples=200, deadline=None)
@given(counts, pills, pills)
def test_among_wins_fewer_pills_is_better(c, p1, p2):
    for up in (OUTCOME, DISCOUNTED):
        a, b = utility(up, c, min(p1, p2), K.WON, c), utility(up, c, max(p1, p2), K.WON, c)
        assert a > b if p1 != p2 else a == b


@settings(max_examples=300, deadline=None)
@given(counts, pills, pills, counts, pills, st.sampled_from([K.TOPPED_OUT, K.STALEMATE]), st.floats(-1, 3000))
def test_centred_wins_beat_failures_and_fewer_pills_is_better_whatever_the_centre(c, p1, p2, c2, p3, failure, centre):
    root = max(c, c2)
    a, b = utility(CENTRED, c, min(p1, p2), K.WON, root, centre), utility(CENTRED, c, max(p1, p2), K.WON, root, centre)
    assert a > b if p1 != p2 else a == b
    assert WIN_FLOOR < b <= a < 1
    assert b > utility(CENTRED, c2, p3, failure, root, centre) == utility(OUTCOME, c2, p3, failure, root)


def test_centred_pill_is_worth_most_where_the_roots_pills_lie():
    """At level 20 (V = 84, about 150 pills to the end) a pill saved is worth under 0.001 in the outcome
    utility, less than a 1% difference in two moves' predicted P(win); centred on the root's 150 (the
    width w = 4 sqrt(84), 37 pills) it is worth five times more, and four widths away little. Without a
    known centre (no network) the centre is k * V."""
    v, p = 84, 150
    outcome_gain = utility(OUTCOME, v, p - 1, K.WON, v) - utility(OUTCOME, v, p, K.WON, v)
    centred_gain = utility(CENTRED, v, p - 1, K.WON, v, 150.0) - utility(CENTRED, v, p, K.WON, v, 150.0)
    assert outcome_gain < 0.001 and centred_gain > 5 * outcome_gain
    assert utility(CENTRED, v, p, K.WON, v, 150.0) == pytest.approx((WIN_FLOOR + 1) / 2)
    assert utility(CENTRED, v, 2 * v, K.WON, v) == pytest.approx((WIN_FLOOR + 1) / 2)
    far = utility(CENTRED, v, p + 147, K.WON, v, 150.0) - utility(CENTRED, v, p + 148, K.WON, v, 150.0)
    assert far < centred_gain / 10


@settings(max_examples=200, deadline=None)
@given(counts, pills, pills)
def test_among_failures_more_cleared_then_longer_survival_is_better(c, p1, p2):
    root = c + 1
    assert utility(OUTCOME, c + 1, 1, K.TOPPED_OUT, root) > utility(OUTCOME, c, 10**6, K.TOPPED_OUT, root)
    short, long = min(p1, p2), max(p1, p2)
    if short != long:
        assert utility(OUTCOME, c, long, K.TOPPED_OUT, root) > utility(OUTCOME, c, short, K.TOPPED_OUT, root)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 84), st.integers(1, 84), st.floats(0.5, 6), st.floats(0.05, 1))
def test_a_pill_per_virus_is_worth_the_same_at_every_level(v1, v2, ppv, saved):
    """The pill scale grows with the viruses at the root: the value of a win depends on the pills
    only through pills per virus, so saving a share of a pill per virus is worth the same at level 5
    and at level 20 (with a fixed scale, a pill at level 20 was worth a quarter of one at level 5)."""
    gain = [utility(OUTCOME, v, (ppv - saved) * v, K.WON, v) - utility(OUTCOME, v, ppv * v, K.WON, v) for v in (v1, v2)]
    assert gain[0] > 0 and gain[0] == pytest.approx(gain[1], rel=1e-9)


@pytest.mark.parametrize("kind", sorted(_KINDS))
def test_every_utility_kind_orders_outcomes(kind):
    """Each kind (the Literal's names are _KINDS'): any win beats any failure, among wins fewer pills
    is better, among failures more cleared is better."""
    assert set(get_args(get_type_hints(Utility)["kind"])) == set(_KINDS)
    up, rng = Utility(kind=kind).params, np.random.default_rng(0)
    for c, root, p1, p2 in zip(rng.integers(0, 85, 200), rng.integers(1, 85, 200), *rng.integers(1, 2000, (2, 200))):
        c = min(c, root)
        wins = [utility(up, root, p, K.WON, root) for p in (min(p1, p2), max(p1, p2))]
        assert wins[0] > wins[1] if p1 != p2 else wins[0] == wins[1], (kind, root, p1, p2)
        for failure in (K.TOPPED_OUT, K.STALEMATE, K.RUNNING):
            assert wins[1] > utility(up, c, p1, failure, root), (kind, c, p1, root)
        if kind != "discounted":  # (every failure is worth 0 there)
            assert utility(up, c + 1, p1, K.TOPPED_OUT, root + 1) > utility(up, c, p1, K.TOPPED_OUT, root + 1), kind


def test_the_network_form_is_the_expectation_and_the_shape_is_documented():
    for up in (OUTCOME, DISCOUNTED, CENTRED):
        assert expected_utility(up, 1.0, 7.0, 2.0, 7.0, 4) == pytest.approx(utility(up, 2, 7, K.WON, 4))
        assert expected_utility(up, 0.0, 7.0, 2.0, 7.0, 4) == pytest.approx(utility(up, 2, 7, K.TOPPED_OUT, 4))
        half = expected_utility(up, 0.5, 7.0, 2.0, 7.0, 4)
        assert half == pytest.approx((utility(up, 2, 7, K.WON, 4) + utility(up, 2, 7, K.TOPPED_OUT, 4)) / 2)
        # each branch reads its own outcome's counts: a win's pills, a loss's cleared and pills
        split = expected_utility(up, 0.25, 5.0, 1.0, 9.0, 4)
        assert split == pytest.approx(0.25 * utility(up, 4, 5, K.WON, 4) + 0.75 * utility(up, 1, 9, K.TOPPED_OUT, 4))
    # P = 2 * V = 8 for V = 4 viruses
    assert utility(OUTCOME, 4, 5, K.WON, 4) == pytest.approx(0.6 + 0.4 * (1 - 5 / 13))
    assert utility(OUTCOME, 1, 5, K.TOPPED_OUT, 4) == pytest.approx(0.5 * (1 + 5 / 13) / 5)
    assert utility(DISCOUNTED, 4, 5, K.WON, 4) == pytest.approx(0.9**5)
    with pytest.raises(ValueError, match="pills_per_virus"):
        Utility(pills_per_virus=0)


# ---------------------------------------------------------------- finding the winning move


def test_round0_puts_most_mass_on_the_winning_move():
    position, winner = one_winner_position()
    result = search(position, SearchConfig(mode="round0", simulations=50), seed=3)
    assert result.best == winner
    target = result.target
    assert target[winner] > 0.5
    assert (target[dm.legal_mask(dm.Board(position.cells), position.pill)] > 0).all()  # no legal move at 0
    assert target.sum() == pytest.approx(1)


@pytest.mark.parametrize("mode", ["puct", "gumbel"])
def test_network_search_with_uniform_stub_finds_the_winning_move(mode):
    position, winner = one_winner_position()
    network = StubNetwork()
    result = search(position, SearchConfig(mode=mode, simulations=40), network, seed=3)
    assert result.best == winner
    assert result.target[winner] > 0.5
    assert network.calls > 0
    assert np.allclose(result.prior, 1 / 6)  # the network's policy over the 6 legal moves, before noise
    assert result.kl() > 0.5  # the search moved far from a uniform prior


def test_network_search_with_rollouts_runs_batched():
    games = [dm.Game(s, 3) for s in (100, 202, 300)]
    evaluator = RolloutEvaluator(seed=1)
    results = puct_search([Position.of(g) for g in games], [1, 2, 3], evaluator, simulations=16)
    for game, result in zip(games, results):
        assert set(result.moves) == set(game.legal_moves())
        assert result.visits.sum() == 16
        assert result.target.sum() == pytest.approx(1)


# ---------------------------------------------------------------- chance nodes draw the preview


def grown_puct_tree(position: Position, evaluator, simulations: int, probs=None, seed: int = 3, utility=None):
    probs = pill_distribution(probs)
    tree = plant([position], [seed], (utility or Utility()).params, probs, (64, 4096, 64))
    sel = Selection(PUCT, 4.0, 0.0, 0.0, True, NORMALISE_EPSILON)
    for _ in range(simulations + 1):
        tree = reserve(tree, 1, K.MAX_MOVES, 1)
        if descend(tree, np.ones(1, np.bool_), sel, np.zeros(1, np.int32)):
            expand_and_backup(tree, *search_inputs(evaluator.evaluate(*pending_leaves(tree))))
    return tree


class ExpectsAWin(StubNetwork):
    """Predicts a win `rest` pills from every position."""

    def __init__(self, rest: float):
        super().__init__()
        self.rest = rest

    def evaluate(self, cells, pills, previews):
        prediction = super().evaluate(cells, pills, previews)
        n = len(cells)
        return prediction._replace(won=np.ones(n, np.float32), duration=np.full(n, self.rest, np.float32))


def test_the_centred_utility_centres_on_the_roots_predicted_pills():
    """The root's prediction (150 pills to go) is the centre: the root is worth the middle of a win's
    range, and a child, one pill placed and 150 predicted, a little less."""
    position = Position.of(dm.Game(1234, 20))
    tree = grown_puct_tree(position, ExpectsAWin(150.0), 4, utility=Utility(kind="centred"))
    root = tree.root[0]
    assert tree.root_pills[0] == 150.0
    assert tree.d_value[root] == pytest.approx((WIN_FLOOR + 1) / 2)
    children = tree.d_value[root + 1 : tree.used[0]]
    assert len(children) == 4 and np.allclose(children, utility(CENTRED, 0, 151, K.WON, 84, 150.0))
    assert (children < tree.d_value[root]).all()


class SplitsByOutcome(StubNetwork):
    """An even chance of a win in 40 pills or a loss in 10 clearing 2 viruses; its means over both
    outcomes (duration 25, cleared 43) are not what either outcome takes."""

    def __init__(self, conditioned: bool):
        super().__init__()
        self.conditioned = conditioned

    def evaluate(self, cells, pills, previews):
        n = len(cells)
        plain = super().evaluate(cells, pills, previews)
        plain = plain._replace(cleared=np.full(n, 43, np.float32), duration=np.full(n, 25, np.float32))
        if not self.conditioned:
            return plain
        counts = (np.full(n, v, np.float32) for v in (40, 2, 10))
        return plain._replace(**dict(zip(("win_pills", "loss_cleared", "loss_pills"), counts)))


def test_a_network_with_outcome_values_is_valued_by_each_outcomes_own_counts():
    position = Position.of(dm.Game(1234, 20))
    for conditioned, (win_pills, cleared, loss_pills) in ((True, (40, 2, 10)), (False, (25, 43, 25))):
        tree = grown_puct_tree(position, SplitsByOutcome(conditioned), 2)
        left = tree.root_left[0]
        assert left == 84
        win, loss = (
            utility(OUTCOME, 0, win_pills, K.WON, left),
            utility(OUTCOME, cleared, loss_pills, K.TOPPED_OUT, left),
        )
        assert tree.d_value[tree.root[0]] == pytest.approx((win + loss) / 2), conditioned


class FallsHalfAPill(ExpectsAWin):
    """Predicts a win 150 pills from the root and 149.5 from every later position: the prediction
    falls by half a pill for the one pill placed."""

    def evaluate(self, cells, pills, previews):
        prediction = super().evaluate(cells, pills, previews)
        self.rest = 149.5
        return prediction


@pytest.mark.parametrize("rest_scale, child_pills", [(1.0, 150.5), (2.0, 150.0)])
def test_rest_scale_measures_a_leafs_rest_from_the_roots_prediction(rest_scale, child_pills):
    """A child one pill down predicting 149.5 to go is worth 1 + 149.5 pills as predicted; with
    rest_scale 2 its fall from the root's 150 counts double (1 + 149), as much as the root's."""
    position = Position.of(dm.Game(1234, 20))
    tree = grown_puct_tree(position, FallsHalfAPill(150.0), 4, utility=Utility(kind="centred", rest_scale=rest_scale))
    root = tree.root[0]
    assert tree.root_pills[0] == 150.0
    children = tree.d_value[root + 1 : tree.used[0]]
    params = Utility(kind="centred", rest_scale=rest_scale).params
    assert len(children) == 4 and np.allclose(children, utility(params, 0, child_pills, K.WON, 84, 150.0))
    assert np.allclose(children, tree.d_value[root]) == (rest_scale == 2.0)


def test_each_decision_knows_its_pill_and_preview():
    """The root places the game's pill and sees its preview; below a chance node, a child places
    the parent's preview and sees the chance outcome as its own preview."""
    game = dm.Game(2468, 6)
    tree = grown_puct_tree(Position.of(game), RolloutEvaluator(seed=9), 80)
    root = tree.root[0]
    assert (tree.d_pill[root], tree.d_preview[root]) == (game.pill.number, game.next_pill.number)
    checked = 0
    for c in range(tree.used[2]):
        for i in range(9):
            d = tree.c_child[c, i]
            if d >= 0:
                parent = next(n for n in range(tree.used[0]) if c in _chance_children(tree, n))
                assert tree.d_pill[d] == tree.d_preview[parent] and tree.d_preview[d] == i
                checked += 1
    assert checked > 10
    root_chances = _chance_children(tree, root)
    assert any((tree.c_visits[c] > 0).sum() > 1 for c in root_chances)  # the next preview is a chance


def _chance_children(tree, d) -> list[int]:
    start, n = tree.d_edge_start[d], tree.d_edge_count[d]
    return [int(tree.e_chance[e]) for e in range(start, start + max(n, 0)) if tree.e_chance[e] >= 0]


def test_chance_nodes_draw_all_nine_previews_weighted_by_probability():
    probs = np.array([0.3, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05])
    position, _ = one_winner_position()
    position = position._replace(pill=dm.Pill.from_string("sv"))  # blue|yellow cannot win: the shaft is all
    tree = plant([position], [5], Utility().params, probs, (1024, 1 << 16, 1 << 12))
    how = rollouts("random", None, None, probs)
    tree = reserve(tree, 0, K.MAX_MOVES, K.MAX_MOVES)
    active = np.ones(1, np.bool_)
    evaluate_root(tree, active, 1, how)
    for _ in range(600 // 16):
        tree = reserve(tree, 16, 16 * K.MAX_MOVES, 16)
        simulate(tree, active, 16, 1.0, how)
    visited = [c for c in range(tree.used[2]) if tree.c_outcome[c] == K.RUNNING and tree.c_visits[c].sum() >= 60]
    assert visited, "some chance node should be visited often"
    for c in visited:
        n = tree.c_visits[c]
        assert (n > 0).all()  # every one of the 9 next previews was explored
        assert np.abs(n / n.sum() - probs).max() < 0.03  # visits follow the probabilities
        means = tree.c_wsum[c] / n
        assert chance_value(tree, c) == pytest.approx(float(np.sum(probs * means)), rel=1e-5)


def test_bad_settings_and_positions_are_refused():
    assert np.allclose(pill_distribution(None), 1 / 9)
    with pytest.raises(ValueError, match="pill_probs"):
        SearchConfig(pill_probs=(0.5, 0.5))
    with pytest.raises(ValueError, match="needs an evaluator"):
        SearchConfig(mode="puct").run([Position.of(dm.Game(2, 0))], [0])
    with pytest.raises(ValueError, match="preview .* is unknown"):
        round0_search([Position.of(dm.Game(2, 0))._replace(preview=None)], [0], simulations=2)
    over = dm.Game(2, 0, stall_limit=1)
    over.play(over.legal_moves()[0])  # a pill that clears nothing: a stalemate
    with pytest.raises(ValueError, match=r"is over \(stalemate\): it has no pill to place"):
        Position.of(over)
    cells = np.zeros((8, 16), np.uint8)
    cells[3, :] = [K.VIRUS << 2 | (1 + y % 3) for y in range(16)]  # a column up to the spawn cell
    lost = Position(cells, dm.Pill.from_string("qu"), preview=dm.Pill.from_string("qu"))
    for mode in ("expert", "round0"):
        with pytest.raises(ValueError, match="spawn cell is occupied"):
            search(lost, SearchConfig(mode=mode, simulations=4))


# ---------------------------------------------------------------- no peeking


@pytest.mark.parametrize("mode", ["round0", "puct", "gumbel"])
def test_search_ignores_the_real_future_pills(mode):
    """Two games with the same board, pill and preview but different later pills search identically."""
    a = dm.Game(2468, 6)
    b = dm.Game(2468, 6)
    future = b.pills._array.copy()
    future[2:] = future[2:][::-1]  # a different pill sequence after the preview
    b.pills._array = future
    assert a.pill == b.pill and a.next_pill == b.next_pill and a.pills[2] != b.pills[2]
    cfg = SearchConfig(mode=mode, simulations=40)
    evaluator = None if mode == "round0" else RolloutEvaluator(seed=9)
    ra, rb = search(a, cfg, evaluator, seed=11), search(b, cfg, evaluator, seed=11)
    assert ra.moves == rb.moves
    assert np.array_equal(ra.visits, rb.visits)
    assert np.array_equal(ra.value, rb.value, equal_nan=True)
    assert np.array_equal(ra.target, rb.target)
    other = Position.of(a)._replace(preview=dm.Pill.from_number((a.next_pill.number + 1) % 9))
    assert not np.array_equal(search(other, cfg, evaluator, seed=11).value, ra.value, equal_nan=True)


@pytest.mark.parametrize("mode", ["round0", "puct", "gumbel"])
def test_searches_in_lockstep_match_searches_alone(mode):
    positions = [Position.of(dm.Game(s, 4)) for s in (11, 22, 33, 44)]
    cfg = SearchConfig(mode=mode, simulations=30)
    evaluator = None if mode == "round0" else RolloutEvaluator(seed=2)
    together = cfg.run(positions, [1, 2, 3, 4], evaluator)
    for position, seed, shared in zip(positions, [1, 2, 3, 4], together):
        alone = search(position, cfg, evaluator, seed=seed)
        assert np.array_equal(alone.visits, shared.visits)
        assert np.array_equal(alone.value, shared.value, equal_nan=True)


class Counted:
    """An evaluator that counts its calls."""

    def __init__(self, evaluator):
        self.evaluator, self.calls = evaluator, 0

    def evaluate(self, cells, pills, previews):
        self.calls += 1
        return self.evaluator.evaluate(cells, pills, previews)


def test_merged_searches_share_each_evaluator_call_and_match_searches_alone():
    """core.merged: a Gumbel search of 8 simulations and a PUCT search of 2 driven as one make as
    many evaluator calls as the longer alone, and each returns what it returns alone."""
    positions = [Position.of(dm.Game(s, 4)) for s in (11, 22, 33)]
    configs = [SearchConfig(mode="gumbel", simulations=8), SearchConfig(mode="puct", simulations=2)]
    parts = [(configs[0], positions[:2], [1, 2]), (configs[1], positions[2:], [3])]
    alone = []
    for config, pos, seeds in parts:
        counted = Counted(RolloutEvaluator(seed=2))
        alone.append((config.run(pos, seeds, counted), counted.calls))
    counted = Counted(RolloutEvaluator(seed=2))
    together = run(merged([config.steps(pos, seeds) for config, pos, seeds in parts]), counted)
    assert counted.calls == max(calls for _, calls in alone) > min(calls for _, calls in alone)
    assert [len(results) for results in together] == [2, 1]
    for (results, _), shared in zip(alone, together):
        for a, b in zip(results, shared):
            assert a.best == b.best and np.array_equal(a.visits, b.visits) and np.array_equal(a.target, b.target)
            assert np.array_equal(a.value, b.value, equal_nan=True)


# ---------------------------------------------------------------- PUCT's value scale


class SlightlyAgainst(StubNetwork):
    """The stub's prior, and a won output a hair lower (0.02) on boards where the cell (x, y) is
    filled: the values prefer, by less than a value head's noise, every move but the one there."""

    def __init__(self, moves: np.ndarray, x: int, y: int):
        super().__init__(moves)
        self.x, self.y = x, y

    def evaluate(self, cells, pills, previews):
        prediction = super().evaluate(cells, pills, previews)
        return prediction._replace(won=np.where(cells[:, self.x, self.y] > 0, -0.01, 0.01).astype(np.float32))


def test_min_spread_lets_the_prior_lead_when_values_barely_differ():
    """PUCT rescales Q to [0, 1] by the spread of the values seen. With the spread floored at 1e-8 a
    value difference of 0.005 fills [0, 1] and draws visits to moves the prior barely considers;
    floored at min_spread = 0.2 it stays small beside the prior's term, and they get a visit or two."""
    position = Position.of(dm.Game(1234, 8))
    favourite = next(iter(dm.legal_moves(dm.Board(position.cells), position.pill)))
    prior = np.full((4, 8, 16), 0.01, np.float32)
    prior[favourite] = 0.2  # 0.39 of the legal moves' mass; each other move 0.02
    network = SlightlyAgainst(prior, favourite.x, favourite.y)
    most_elsewhere = {}
    for floor in (1e-8, 0.2):
        [result] = puct_search([position], [5], network, simulations=60, dirichlet_fraction=0.0, min_spread=floor)
        others = np.delete(result.visits, result.moves.index(favourite))
        most_elsewhere[floor] = others.max()
        assert result.best == favourite
    assert most_elsewhere[1e-8] >= 10 > 2 >= most_elsewhere[0.2]


# ---------------------------------------------------------------- Gumbel


def test_sequential_halving_schedule():
    table = considered_visits(16, 32)
    assert table.shape == (17, 32)
    row = table[16]
    assert list(row[:16]) == [0] * 16  # every one of 16 moves once
    assert list(row[16:24]) == [1] * 8  # then the better half
    assert list(row[24:]) == [2, 2, 2, 2, 3, 3, 3, 3]  # then the better quarter twice
    assert list(table[1]) == list(range(32))  # one move takes every simulation
    assert list(table[3][:12]) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]  # 3 moves, 5 rounds of each, then 2


def test_gumbel_target_is_the_improved_policy_and_spends_its_simulations_on_the_halving():
    position = Position.of(dm.Game(1234, 8))
    prior = np.zeros((4, 8, 16), np.float32)
    prior[0] = 1.0
    prior /= prior.sum()  # all horizontal moves alike, vertical ones never
    [result] = gumbel_search([position], [7], StubNetwork(prior), simulations=16, m=4, noise=0.0)
    assert result.visits.sum() == 16
    assert (result.visits > 0).sum() == 4  # m = 4 considered moves
    assert sorted(result.visits[result.visits > 0]) == [2, 2, 6, 6]  # halved once: 4 x 2 (8 sims), 2 x 4
    probs = result.target_probs()
    assert probs.sum() == pytest.approx(1)
    vertical = np.array([m.r % 2 == 1 for m in result.moves])
    assert probs[vertical].max() < 1e-6  # softmax(log prior + sigma): a zero prior stays near zero
    assert result.best in [m for m, v in zip(result.moves, result.visits) if v == 6]


def test_gumbel_noise_samples_and_no_noise_plays_the_best():
    position = Position.of(dm.Game(1234, 8))
    evaluator = RolloutEvaluator(seed=3)
    best = {str(gumbel_search([position], [s], evaluator, simulations=16, noise=0.0)[0].best) for s in range(4)}
    sampled = {str(gumbel_search([position], [s], evaluator, simulations=16)[0].best) for s in range(8)}
    assert len(sampled) > len(best) >= 1


# ---------------------------------------------------------------- golden root table

GOLDEN = DATA / "search_golden.json"


def golden_tables() -> dict:
    position = Position.of(dm.Game(1234, 8))
    out = {}
    outcome = Utility(kind="outcome")  # the tables pinned before the centred utility existed
    for name, cfg, evaluator in [
        (
            "round0",
            SearchConfig(mode="round0", simulations=60, round0=Round0Settings(root_rollouts=1), utility=outcome),
            None,
        ),
        (
            "round0_greedy",
            SearchConfig(
                mode="round0",
                simulations=60,
                round0=Round0Settings(root_rollouts=1, rollout_policy="greedy", horizon=15),
                utility=outcome,
            ),
            None,
        ),
        (
            "puct_uniform",
            SearchConfig(mode="puct", simulations=40, puct=PuctSettings(), utility=outcome),
            StubNetwork(),
        ),
        (
            "gumbel_uniform",
            SearchConfig(mode="gumbel", simulations=32, gumbel=GumbelSettings(m=8), utility=outcome),
            StubNetwork(),
        ),
        ("puct_centred", SearchConfig(mode="puct", simulations=40, utility=Utility(kind="centred")), ExpectsAWin(30.0)),
        ("expert", SearchConfig(mode="expert"), None),
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
    assert set(got) == set(want)
    for name in want:
        assert got[name]["config"] == want[name]["config"], f"{name}: the settings changed; regenerate on purpose"
        assert got[name]["best"] == want[name]["best"], name
        for g_row, w_row in zip(got[name]["rows"], want[name]["rows"], strict=True):
            assert g_row[:4] == w_row[:4], (name, g_row, w_row)
            assert (g_row[4] is None) == (w_row[4] is None), name
            if w_row[4] is not None:
                assert g_row[4] == pytest.approx(w_row[4], rel=1e-5, abs=1e-5), name


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(golden_tables(), indent=1) + "\n")
    print(f"wrote {GOLDEN}")


# ---------------------------------------------------------------- hand-built nodes, hand-worked values


def hand_node(priors, visits, values, d_value=0.0, probs=None):
    """A tree whose root decision has one edge per prior; a visited edge leads to a finished chance
    node worth its value (`chance_value` returns it), an unvisited one to none."""
    tree = plant([Position.of(dm.Game(8, 10))], [0], Utility().params, pill_distribution(probs), (4, 16, 16))
    d = int(tree.root[0])
    tree.d_edge_start[d], tree.d_edge_count[d] = 0, len(priors)
    tree.d_value[d], tree.d_visits[d], tree.d_wsum[d] = d_value, sum(visits), d_value * sum(visits)
    for e, (prior, n, q) in enumerate(zip(priors, visits, values)):
        tree.e_prior[e], tree.e_visits[e], tree.e_chance[e] = prior, n, e if n else -1
        tree.c_outcome[e], tree.c_value[e] = K.WON, q
    return tree, d


def test_completed_q_and_the_improved_logits_by_hand():
    from drmario.search.network import completed_q, improved_logits

    # visited: A (prior 0.5, 3 visits, 0.8) and C (0.25, 1 visit, 0.4); B unvisited gets the mixed value
    # (0.2 + 4 * (0.5 * 0.8 + 0.25 * 0.4) / 0.75) / 5 = 0.5733, then all rescaled to [0, 1] over 0.4..0.8
    tree, d = hand_node([0.5, 0.25, 0.25], [3, 0, 1], [0.8, 0.0, 0.4], d_value=0.2)
    q, mixed = np.empty(3), (0.2 + 4 * 0.5 / 0.75) / 5
    assert completed_q(tree, d, q) == 3 and q == pytest.approx([1.0, (mixed - 0.4) / 0.4, 0.0])
    logits = np.empty(3)
    assert improved_logits(tree, d, 50.0, 0.1, logits) == pytest.approx((50 + 3) * 0.1)
    assert logits == pytest.approx(np.log([0.5, 0.25, 0.25]) + 5.3 * q)


def test_gumbel_interior_selection_moves_visits_towards_the_improved_policy():
    from drmario.search.network import _gumbel_interior_edge

    # equal priors and values: the improved policy is uniform, and the edge with both visits is the last choice
    tree, d = hand_node([1 / 3] * 3, [2, 0, 0], [0.5, 0.0, 0.0], d_value=0.5)
    assert _gumbel_interior_edge(tree, d, 50.0, 0.1) == 1


def test_puct_selection_by_hand():
    from drmario.search.network import _puct_edge

    # 17 visits, values normalised over the tree's range [0, 1], c_puct 4, the node's value 0:
    # A: 0.81 + 4 * 0.5 * sqrt(17) / 2 = 4.933; B (unvisited): 0 + 4 * 0.3 * sqrt(17) = 4.948
    tree, d = hand_node([0.5, 0.3], [1, 0], [0.81, 0.0], d_value=0.0)
    tree.d_visits[d], tree.d_wsum[d] = 17, 0.0
    tree.qmin[0], tree.qmax[0] = 0.0, 1.0
    assert _puct_edge(tree, 0, d, 4.0, False, NORMALISE_EPSILON) == 1
    tree.e_prior[1] = 0.29  # 4.784: now A's value wins
    assert _puct_edge(tree, 0, d, 4.0, False, NORMALISE_EPSILON) == 0


def test_a_fresh_chance_node_draws_the_likeliest_preview_first_and_keeps_to_the_shares():
    from drmario.search.tree import choose_outcome

    for seed in range(20):
        tree, _ = hand_node([1.0], [1], [0.5], probs=[0.5, 0.25, 0.25, 0, 0, 0, 0, 0, 0])
        tree.c_visits[0] = 0
        state = np.array([seed + 1], np.uint64)
        draws = []
        for _ in range(4):
            i = choose_outcome(tree, 0, state)
            tree.c_visits[0, i] += 1
            draws.append(i)
        assert draws[0] == 0 and tree.c_visits[0].tolist() == [2, 1, 1, 0, 0, 0, 0, 0, 0], (seed, draws)


@pytest.mark.parametrize("mode", get_args(Mode))
def test_each_mode_is_given_exactly_the_settings_its_function_takes(mode):
    config = SearchConfig(mode=mode)
    bound = config._function()
    takes = inspect.signature(bound.func).parameters.values()
    assert set(bound.keywords) == {p.name for p in takes if p.kind is p.KEYWORD_ONLY}
    fields = {f.name for f in dataclasses.fields(SearchConfig)} - {"mode"}
    assert set(config.unread()) == fields - set(MODE_READS[mode])  # what it does not read, it is not given
    assert config.unread().get("puct") == (
        None if mode == "puct" else f"mode {mode!r} does not read it (mode puct's setting)"
    )


# ---------------------------------------------------------------- checks before compiled code


def test_argmax_ties_breaks_ties_evenly_and_skips_nan():
    state = np.array([12345], np.uint64)
    scores = np.array([0.5, 1e6, np.nan, 1e6 - 1e-10, -np.inf, 1e6])  # round 0's unvisited edges: 1e6
    picks = np.bincount([K.argmax_ties(scores, 6, state) for _ in range(3000)], minlength=6)
    assert picks[[0, 2, 4]].sum() == 0 and picks[[1, 3, 5]].min() > 900  # about 1,000 each
    assert K.argmax_ties(np.array([np.nan, np.nan]), 2, state) == 0 and K.argmax_ties(scores, 0, state) == 0
    assert K.argmax_ties(np.array([1.0, 2.0, 2.0 + 1e-6]), 3, state) == 2  # beyond the tolerance: no tie


def test_round0_tries_unvisited_moves_in_random_order():
    """Below the root, unvisited edges score alike, so the first move tried at a node is the seed's
    choice, not the first listed (with 1e20 for unvisited, every node began at its edge 0)."""
    probs = pill_distribution(None)
    tree = plant([Position.of(dm.Game(8, 10))], [3], Utility().params, probs, (1024, 1 << 16, 1 << 12))
    how = rollouts("random", None, None, probs)
    tree = reserve(tree, 0, K.MAX_MOVES, K.MAX_MOVES)
    active = np.ones(1, np.bool_)
    evaluate_root(tree, active, 1, how)
    for _ in range(10):
        tree = reserve(tree, 16, 16 * K.MAX_MOVES, 16)
        simulate(tree, active, 16, 1.0, how)
    firsts = []  # the one visited edge of each node below the root visited once
    for d in range(tree.used[0]):
        start, n = tree.d_edge_start[d], tree.d_edge_count[d]
        visited = np.flatnonzero(tree.e_visits[start : start + n]) if d != tree.root[0] and n > 1 else []
        if len(visited) == 1:
            firsts.append(int(visited[0]))
    assert len(firsts) > 10 and np.mean(np.array(firsts) == 0) < 0.2


def test_seeds_and_evaluator_answers_must_match_the_positions():
    """The compiled code reads a seed per root and a row per leaf unchecked: both are checked first."""
    positions = [Position.of(dm.Game(8, 10)), Position.of(dm.Game(16, 10))]
    with pytest.raises(ValueError, match="1 seeds for 2 positions"):
        puct_search(positions, [7], StubNetwork(), simulations=4)

    class Short(StubNetwork):
        def evaluate(self, cells, pills, previews):
            return super().evaluate(cells, pills, previews).rows(0, len(cells) - 1)

    with pytest.raises(ValueError, match=r"answered 2 positions with outputs of shapes \[\(1,\)"):
        puct_search(positions, [7, 8], Short(), simulations=4)

    class ShortOutcome(StubNetwork):  # one outcome value short
        def evaluate(self, cells, pills, previews):
            prediction = super().evaluate(cells, pills, previews)
            return prediction._replace(win_pills=prediction.duration[:1])

    with pytest.raises(ValueError, match=r"answered 2 positions with outputs of shapes .*\(2, 4, 8, 16\), \(1,\)"):
        puct_search(positions, [7, 8], ShortOutcome(), simulations=4)
