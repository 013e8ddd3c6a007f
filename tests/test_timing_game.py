"""Timing as a setting of the game (`Game(timing="nes", speed=...)`): legal moves at the game's real
speed, the frame count (`engine.nes_timing`) and records that replay it."""

from __future__ import annotations

import json

import numpy as np
import pytest

import drmario as dm
from drmario.engine import kernels as K
from drmario.engine import nes_timing as NT
from drmario.engine import timing as T
from drmario.engine.game import Game


def play_middle(game: Game, pills: int) -> Game:
    """Play the middle legal move (a deterministic, not too clever player) for up to `pills` pills."""
    while not game.over and pills > 0:
        moves = game.legal_moves()
        game.play(moves[len(moves) // 2])
        pills -= 1
    return game


def test_free_timing_is_the_default_and_its_json_is_unchanged():
    game = play_middle(Game(7, 3), 5)
    assert game.timing == "free" and not game.timed and game.frames == 0
    d = game.record().to_dict()
    assert not {"timing", "speed", "frames"} & set(d)
    # a record written before timing existed reads as free timing and replays
    old = dm.GameRecord.from_json(json.dumps(d))
    assert (old.timing, old.speed, old.frames) == ("free", None, None)
    assert old.replay().legal_moves() == game.legal_moves()


def test_bad_timing_or_speed():
    with pytest.raises(ValueError, match="timing must be"):
        Game(1, 0, timing="fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="speed must be"):
        Game(1, 0, timing="nes", speed="turbo")  # type: ignore[arg-type]


@pytest.mark.parametrize("speed, base", [("low", 15), ("med", 25), ("hi", 31)])
def test_speed_index_follows_the_pills_placed(speed, base):
    game = Game(11, 5, timing="nes", speed=speed, stall_limit=None)
    seen = []
    while not game.over and game.pills_used < 20:
        seen.append((game.pills_used, game.speed_index))
        game.play(game.legal_moves()[0])
    for n, index in seen:
        assert index == base + (n + 2) // 10  # the first speed-up on pill 8
    assert (8, base + 1) in seen


@pytest.mark.parametrize("seed, level, speed", [(3, 10, "hi"), (90, 15, "med"), (1234, 4, "low")])
def test_nes_legal_moves_are_the_reachable_ones(seed, level, speed):
    game = Game(seed, level, timing="nes", speed=speed)
    for _ in range(12):
        if game.over:
            break
        reach = T.reachable(game.board, game.pill, game.speed_index, game.parity)
        moves = game.legal_moves()
        assert set(moves) == set(reach) and moves
        free = dm.legal_moves(game.board, game.pill)
        assert moves == [m for m in free if m in reach]  # the free order, filtered
        mask = game.legal_mask()
        assert mask.sum() == len(moves) * (2 if game.pill.same_colour else 1)
        assert all(mask[m] for m in moves)
        game.play(moves[-1])


def test_at_the_top_speed_nes_refuses_moves_free_timing_allows():
    game = Game(5, 12, timing="nes", speed="hi", stall_limit=None)
    game.pills_used = 500  # index 31 + 49 = 80: the pill drops every frame
    assert game.speed_index == 80
    free = dm.legal_moves(game.board, game.pill)
    moves = game.legal_moves()
    assert set(moves) < set(free)
    lost = next(m for m in free if m not in set(moves))
    with pytest.raises(ValueError, match="illegal move"):
        game.copy().play(lost)
    game.play(moves[0])  # a reachable one is fine


def test_low_speed_parity_is_always_odd():
    game = Game(21, 8, timing="nes", speed="low")
    parities = []
    while not game.over and game.pills_used < 30:
        parities.append(game.parity)
        moves = game.legal_moves()
        game.play(moves[game.pills_used % len(moves)])
    assert set(parities) == {1}


def test_hi_speed_parity_follows_the_frame_count():
    game = Game(21, 8, timing="nes", speed="hi", stall_limit=None)
    parities = []
    while not game.over and game.pills_used < 40:
        assert game.first_frame == game.frames + 1  # the next pill's frame 1 follows the count
        parities.append(game.parity)
        assert game.parity == game.first_frame % 2
        moves = game.legal_moves()
        game.play(moves[game.pills_used % len(moves)])
    assert set(parities) == {0, 1}  # both happen at MED and HI


def test_after_lock_by_hand():
    # no clear, a pill locked in the bottom row on frame 100, HI: checkDrop waits for the 16 rows
    # (frame 116), 4 match steps, 3 more steps, 22 throw steps, sendPillFinished, then frame 1
    after = NT.after_lock(100, 0, np.zeros((0, 3), np.int64), "hi")
    assert after == NT.AfterLock(next_first=147, throw_end=145, cleared_at=())
    # high in the bottle: the first checkDrop comes after the 3 steps that follow the lock
    assert NT.after_lock(100, 14, np.zeros((0, 3)), "hi").next_first == 100 + 4 + 4 + 4 + 21 + 2
    # one clear with a horizontal virus, then pieces fall 2 rows: 3 drop passes of 16 frames
    after = NT.after_lock(100, 3, np.array([[1, 0, 2]]), "med")
    assert after.cleared_at == (100 + 13 + 2,)
    assert after.next_first == 100 + 13 + 4 + 16 * 3 + 4 + 4 + 21 + 2
    # a virus in a vertical line is counted a frame later
    assert NT.after_lock(100, 3, np.array([[0, 1, 0]]), "med").cleared_at == (116,)
    # LOW: the throw steps only on odd frames, so the next pill's first frame is odd
    for lock in range(50, 60):
        for y in (0, 5, 15):
            low = NT.after_lock(lock, y, np.zeros((0, 3)), "low")
            assert low.next_first % 2 == 1
            assert low.next_first - NT.after_lock(lock, y, np.zeros((0, 3)), "hi").next_first in (21, 22)


def test_resolve_with_rounds_matches_the_kernel():
    rng = np.random.default_rng(0)
    rounds_seen = falls_seen = 0
    for _ in range(40):
        game = Game(int(rng.integers(2, 2**16)), int(rng.integers(0, 21)), stall_limit=None)
        while not game.over and game.pills_used < 60:
            moves = game.legal_moves()
            move = moves[int(rng.integers(len(moves)))]
            a, b = int(game.pill.left), int(game.pill.right)
            mine, kernel = game.board.cells.copy(), game.board.cells.copy()
            out = np.zeros((NT.MAX_ROUNDS, 3), np.int64)
            got = NT.place_and_resolve_rounds(mine, a, b, *dm.canonical(game.pill, move), out)
            want = K.place_and_resolve(kernel, a, b, *dm.canonical(game.pill, move))
            assert tuple(map(int, got)) == tuple(map(int, want))
            assert np.array_equal(mine, kernel)
            assert out[: got[0] and got[2], :2].sum() == got[0]  # every virus counted once
            rounds_seen += int(got[2])
            falls_seen += int((out[: got[2], 2] > 0).sum())
            game.play(move)
    assert rounds_seen > 20 and falls_seen > 3


def test_frames_add_up_placement_by_placement():
    game = Game(77, 6, timing="nes", speed="med", stall_limit=None)
    while not game.over and game.pills_used < 25:
        moves = game.legal_moves()
        move = moves[(3 * game.pills_used) % len(moves)]
        reach = game.reachable()[move]
        first, before = game.first_frame, game.copy()
        result = game.play(move)
        lock = first + reach.frames - 1
        if result.won or result.topped_out:
            break
        # at least the lock's 4 steps, a round, 3 steps, the throw and sendPillFinished
        assert game.first_frame >= lock + 4 + 4 + 3 + 22 + 1 + 1
        if result.clear_rounds == 0:
            assert game.first_frame == lock + max(4, 16 - move[2]) + 4 + 4 + 21 + 2
        else:
            assert game.first_frame >= lock + 16 * result.clear_rounds + 20
        assert before.frames < game.frames == game.first_frame - 1


def test_a_won_game_ends_on_its_last_clear():
    # a won nes game at level 0, with the greedy baseline's choices
    from drmario.search.heuristics import greedy_move

    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    for seed in range(2, 32):
        game = Game(seed, 0, timing="nes", speed="hi", stall_limit=None)
        while not game.over and game.pills_used < 200:
            state = np.array([seed | 1], np.uint64)
            j = greedy_move(game.board.cells, int(game.pill.left), int(game.pill.right), state, moves)
            move = dm.Move(*moves[j].tolist())
            if move not in set(game.legal_moves()):
                move = game.legal_moves()[0]
            before = game.copy()
            result = game.play(move)
        if game.outcome is dm.Outcome.WON:
            break
    assert game.outcome is dm.Outcome.WON
    # the game ends in the last placement's clear rounds: the first is found 2 or 3 frames after
    # the first checkDrop, each later one at most 4 + 16 * 16 frames after the one before
    lock = before.first_frame + before.reachable()[dm.canonical(before.pill, move)].frames - 1
    first_drop = lock + max(4, 16 - move[2])
    end = game.frames + NT.FIRST_FRAME - 1  # the absolute frame of the last virus
    assert first_drop + 2 <= end <= first_drop + 3 + (4 + 16 * 16) * (result.clear_rounds - 1)
    record = game.record(agent="greedy")
    assert (record.timing, record.speed, record.frames) == ("nes", "hi", game.frames)


def test_nes_record_round_trip_and_replay():
    game = play_middle(Game(42, 9, timing="nes", speed="hi"), 30)
    record = game.record()
    d = json.loads(record.to_json())
    assert (d["timing"], d["speed"], d["frames"]) == ("nes", "hi", game.frames)
    again = dm.GameRecord.from_json(record.to_json())
    assert again == record
    replayed = again.replay()
    assert replayed.timed and replayed.frames == game.frames and replayed.first_frame == game.first_frame
    with pytest.raises(ValueError, match="replay gives"):
        dm.GameRecord.from_dict({**d, "frames": game.frames + 1}).replay()
    # the same moves at another speed are another game: its frames differ (or a move is refused)
    with pytest.raises(ValueError):
        dm.GameRecord.from_dict({**d, "speed": "low"}).replay()


# ---------------------------------------------------------------- agents and the arena under NES timing


class PreferNetwork:
    """A stub network whose move output puts nearly all its mass on given moves."""

    def __init__(self, favourite: list[dm.Move]):
        self.moves = np.full((4, 8, 16), 1e-6, np.float32)
        for r, x, y in favourite:
            self.moves[r, x, y] = 1.0

    def evaluate(self, cells, pills, previews):
        from drmario.search.core import Prediction

        n = len(cells)
        zeros = np.zeros(n, np.float32)
        return Prediction(zeros, zeros, zeros, np.broadcast_to(self.moves, (n, 4, 8, 16)).copy())


def top_speed_game(seed: int = 5, level: int = 12) -> Game:
    """A nes game at speed index 80 (the pill drops every frame), where many moves are unreachable."""
    game = Game(seed, level, timing="nes", speed="hi", stall_limit=None)
    game.pills_used = 500
    assert game.speed_index == 80
    return game


def test_position_carries_the_timing():
    from drmario.search.core import Position, legal_mask_of, legal_moves_of

    free = Position.of(Game(5, 12))
    assert free.speed_index is None and legal_mask_of(free) is None
    game = top_speed_game()
    pos = Position.of(game)
    assert (pos.speed_index, pos.parity) == (80, game.parity)
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    n = legal_moves_of(pos, moves)
    assert [dm.Move(*m) for m in moves[:n].tolist()] == game.legal_moves()
    assert np.array_equal(legal_mask_of(pos).astype(bool), game.legal_mask())
    assert legal_moves_of(pos._replace(speed_index=None), moves) == len(dm.legal_moves(game.board, game.pill)) > n


def test_agents_choose_only_reachable_moves():
    from drmario.play.agents import GreedyAgent, PolicyAgent, RandomAgent, SearchAgent
    from drmario.search.config import SearchConfig
    from drmario.search.core import Position

    games = [top_speed_game(seed, level) for seed, level in [(5, 12), (77, 15), (901, 18)]]
    positions = [Position.of(g) for g in games]
    legal = [set(g.legal_moves()) for g in games]
    lost = [[m for m in dm.legal_moves(g.board, g.pill) if m not in ok] for g, ok in zip(games, legal)]
    assert all(lost)
    agents = [
        RandomAgent(),
        GreedyAgent(),
        SearchAgent(SearchConfig(mode="expert"), name="expert"),
        SearchAgent(SearchConfig(mode="round0", simulations=20)),
        SearchAgent(SearchConfig(mode="puct", simulations=12), PreferNetwork([m for ms in lost for m in ms])),
        SearchAgent(SearchConfig(mode="gumbel", simulations=12), PreferNetwork([m for ms in lost for m in ms])),
        PolicyAgent(PreferNetwork([m for ms in lost for m in ms])),  # the network wants the lost ones
    ]
    for agent in agents:
        for seed in range(3):
            decisions = agent.choose(positions, [seed * 7 + i for i in range(len(positions))])
            for d, ok, pos in zip(decisions, legal, positions):
                assert dm.canonical(pos.pill, d.move) in ok, agent.name
                if d.search is not None:  # the root's moves are the reachable ones
                    assert set(d.search.moves) == ok, agent.name
                    assert d.search.target.sum() == pytest.approx(1.0, abs=1e-5)


def test_arena_under_nes_timing():
    from drmario.play.agents import SearchAgent
    from drmario.play.arena import ARENA_COLUMNS, EvalConfig, arena
    from drmario.search.config import SearchConfig

    expert = SearchAgent(SearchConfig(mode="expert"), name="expert")
    nes = EvalConfig(levels=[0], top_level_games=4, timing="nes", speed="hi", lockstep=2)
    table, records = arena([expert], config=nes, progress=False)
    assert list(table.columns) == ARENA_COLUMNS
    row = table.iloc[0]
    assert row["wins"] >= 1
    frames = sorted(r.frames for r in records["expert"] if r.outcome == "won")
    assert row["frames_median"] == pytest.approx(np.median(frames))
    assert row["frames_p90"] == pytest.approx(np.quantile(frames, 0.9))  # pandas and numpy both interpolate linearly
    for record in records["expert"]:
        assert (record.timing, record.speed) == ("nes", "hi")
        assert record.replay().frames == record.frames
    free, _ = arena([expert], config=nes.replace(timing="free"), progress=False)
    assert np.isnan(free.iloc[0]["frames_median"]) and np.isnan(free.iloc[0]["frames_p90"])


def test_a_notebook_replay_keeps_the_evaluation_s_timing():
    from drmario.play.agents import SearchAgent
    from drmario.play.arena import EvalConfig, arena
    from drmario.run.notebook import replay_with_search
    from drmario.search.config import SearchConfig

    agent = SearchAgent(SearchConfig(mode="round0", simulations=8), name="mcts-8")
    nes = EvalConfig(levels=[2], top_level_games=2, timing="nes", speed="hi", lockstep=2, max_pills=60)
    _, played = arena([agent], config=nes, progress=False)
    for spec, played_record in zip(nes.games(), played["mcts-8"]):
        record, targets = replay_with_search(agent, spec, nes)
        assert (record.timing, record.speed) == ("nes", "hi")
        assert record.moves == played_record.moves and record.frames == played_record.frames > 0
        assert record.replay().frames == record.frames  # every move reachable at its speed and parity
        assert len(targets) == len(record.moves) and all(t is not None for t in targets)
    record, _ = replay_with_search(agent, nes.games()[0], nes.replace(timing="free"))
    assert record.timing == "free" and record.frames is None
