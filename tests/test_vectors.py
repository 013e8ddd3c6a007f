"""The golden vectors of ../shared/vectors (copied to tests/data/vectors), reproduced exactly."""

from collections import defaultdict

import numpy as np

import drmario as dm
from drmario.engine.level import viruses_only
from drmario.engine.nes_timing import place_and_resolve_rounds


def test_levels(level_vectors):
    assert len(level_vectors) == 150
    for v in level_vectors:
        level = dm.new_level(v["seed"], v["level"])
        where = f"seed={v['seed']} level={v['level']}"
        assert level.board.to_string() == v["board"], where
        assert [p.to_string() for p in level.pills] == v["pills"], where
        assert [str(p) for p in level.pills] == v["pill_colors"], where
        assert level.rng_after_pills == v["rng_after_pills"], where
        assert level.board.virus_count == v["virus_count"] == dm.virus_count(v["level"]), where
        assert max(y for x in range(8) for y in range(16) if level.board[x, y] in "abc") == v["max_virus_y"]
        assert viruses_only(v["seed"], v["level"]).to_string() == v["board_only"], where


def test_placements(placement_vectors):
    assert len(placement_vectors) == 983
    for v in placement_vectors:
        board, pill = dm.Board.from_string(v["board_before"]), dm.Pill.from_string(v["pill"])
        x, y, r = v["placement"]
        move = dm.Move(r, x, y)
        where = f"game {v['game']} pill {v['pill_index']}"
        assert move in dm.legal_moves(board, pill), where
        cells = dm.move_cells(pill, move)
        placed = "".join(chr(0x60 | c.shape << 2 | c.colour) for c in cells)
        if len(cells) == 1:  # a vertical pill locked at y=15 loses its top half
            assert y == 15 and cells[0].shape == dm.Shape.DISCONNECTED, where
            assert ord(placed) & 3 == ord(v["placed_pill"][0]) & 3, where
        else:
            assert placed == v["placed_pill"], where
        after, result = dm.place(board, pill, move)
        assert after.to_string() == v["board_after"], where
        got = (result.viruses_cleared, result.cells_cleared, result.clear_rounds, result.won, result.topped_out)
        assert got == (v["viruses_cleared"], v["cells_cleared"], v["clear_rounds"], v["won"], v["lost"]), where
        assert after.virus_count == v["viruses_remaining"], where
        assert result.cells_cleared == sum(rd["cells"] for rd in v["rounds"])


def test_each_clear_round(placement_vectors):
    """Every clear round of a placement: its viruses and how far the pieces then fall."""
    checked = 0
    for v in placement_vectors:
        board, pill = dm.Board.from_string(v["board_before"]), dm.Pill.from_string(v["pill"])
        x, y, r = v["placement"]
        rounds = np.zeros((len(v["rounds"]) + 1, 3), np.int64)
        *_, n = place_and_resolve_rounds(board.cells.copy(), pill.left, pill.right, r, x, y, rounds)
        where = f"game {v['game']} pill {v['pill_index']}"
        assert n == len(v["rounds"]), where
        got = [(int(hor + ver), int(fall)) for hor, ver, fall in rounds[:n]]
        assert got == [(rd["viruses"], rd["rows_fallen_after"]) for rd in v["rounds"]], where
        checked += n > 0
    assert checked == 250


def test_whole_games_replay(placement_vectors):
    """Each game of placements.jsonl, replayed with `Game` from its (seed, level) line by line."""
    games = defaultdict(list)
    for v in placement_vectors:
        games[v["game"]].append(v)
    assert len(games) == 29
    for lines in games.values():
        lines.sort(key=lambda v: v["pill_index"])
        first = lines[0]
        game = dm.Game(first["seed"], first["level"], stall_limit=None)
        assert game.board.virus_count == first["original_viruses"]
        for v in lines:
            assert game.pills_used == v["pill_index"]
            assert game.board.to_string() == v["board_before"]
            assert game.pill.to_string() == v["pill"]
            x, y, r = v["placement"]
            result = game.play(dm.Move(r, x, y))
            assert game.board.to_string() == v["board_after"]
            assert result.viruses_cleared == v["viruses_cleared"]
            assert (game.outcome is dm.Outcome.WON) == v["won"]
            assert (game.outcome is dm.Outcome.TOPPED_OUT) == v["lost"]
        record = game.record()
        assert dm.GameRecord.from_json(record.to_json()).replay().board == game.board


def test_reachability_contains_mapprox(reachable_vectors):
    assert len(reachable_vectors) == 156
    for i, v in enumerate(reachable_vectors):
        board, pill = dm.Board.from_string(v["board"]), dm.Pill.from_string(v["pill"])
        legal = set(dm.legal_moves(board, pill))
        wanted = {dm.canonical(pill, dm.Move(r, x, y)) for x, y, r in v["mapprox"]}
        assert wanted <= legal, f"case {i}: missing {sorted(wanted - legal)}"
        spawn_blocked = board[3, 15] != "d" or board[4, 15] != "d"
        assert (not legal) == (not v["mapprox"] and spawn_blocked), f"case {i}"
