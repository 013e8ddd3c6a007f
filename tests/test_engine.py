"""Engine invariants (hypothesis), move counts, and clear errors for bad input."""

import warnings

import numpy as np
import pytest
from helpers import assert_kit_message, lines_of_four, random_board, random_game, reference_legal, something_can_fall
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import drmario as dm
from drmario.engine import kernels as K
from drmario.engine.level import max_virus_row

seeds = st.integers(2, 0xFFFF)
levels = st.integers(0, 24)
pills = st.sampled_from(dm.ALL_PILLS)


@st.composite
def played_boards(draw):
    """Boards from real play: a level advanced by a few random moves (always settled)."""
    game = random_game(draw(seeds), draw(levels), draw(st.integers(0, 30)), rng_seed=draw(st.integers(0, 2**32)))
    return game.board


# ---------------------------------------------------------------- formats


@settings(deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0, 1))
def test_board_string_round_trip(seed, fill):
    board = random_board(seed, fill)
    text = board.to_string()
    assert len(text) == 128
    assert dm.Board.from_string(text) == board
    assert eval(repr(board), {"Board": dm.Board}) == board
    assert hash(dm.Board.from_string(text)) == hash(board)
    assert board.copy() == board and board.copy() is not board


def test_board_coordinates_follow_rules_example():
    board = dm.Board.from_string("d" * 56 + "c" + "d" * 24 + "a" + "d" * 6 + "bb" + "d" * 38)
    assert (board[0, 8], board[1, 5], board[0, 4], board[1, 4]) == ("c", "a", "b", "b")
    assert board.virus_count == 4
    text = str(board)
    assert text.splitlines()[15 - 8].startswith(" 8 |B")  # blue virus at (0, 8)
    assert "<svg" in board._repr_svg_()


@pytest.mark.parametrize("pill", dm.ALL_PILLS)
def test_pill_string_round_trip(pill):
    assert dm.Pill.from_string(pill.to_string()) == pill
    assert dm.Pill.from_number(pill.number) == pill


def test_pill_strings_from_rules():
    assert dm.Pill.from_string("qu") == (dm.Colour.RED, dm.Colour.RED)
    assert dm.Pill.from_string("rw") == (dm.Colour.YELLOW, dm.Colour.BLUE)
    assert dm.Pill.from_string("sv") == (dm.Colour.BLUE, dm.Colour.YELLOW)


@pytest.mark.parametrize(
    "text, message",
    [
        ("d" * 127, "expected 128 letters, got 127"),
        ("d" * 129, "expected 128 letters, got 129"),
        ("d" * 17 + "h" + "d" * 110, "invalid letter 'h' at position 17 (x=1, y=13)"),
        ("d" * 5 + "l" + "d" * 122, "invalid letter 'l' at position 5"),
        ("d" * 7 + "é" + "d" * 120, "invalid letter 'é' at position 7"),
        ("d" * 120 + "q" + "d" * 7, "left half 'q' at position 120 (x=0, y=0) has no right half to its right"),
        ("d" * 127 + "q", "left half 'q' at position 127 (x=7, y=0) has no right half"),
        ("d" * 120 + "u" + "d" * 7, "right half 'u' at position 120 (x=0, y=0) has no left half to its left"),
        ("d" * 120 + "i" + "d" * 7, "bottom half 'i' at position 120 (x=0, y=0) has no top half above it"),
        ("m" + "d" * 127, "top half 'm' at position 0 (x=0, y=15) has no bottom half below it"),
        ("i" + "d" * 127, "bottom half 'i' at position 0"),
        ("d" * 112 + "m" + "d" * 7 + "q" + "d" * 7, "top half 'm' at position 112"),
    ],
)
def test_bad_board_strings(text, message):
    with pytest.raises(dm.FormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        dm.Board.from_string(text)


@pytest.mark.parametrize(
    "text, message",
    [
        ("q", "expected 2 letters"),
        ("quu", "expected 2 letters"),
        ("uq", "letter 0 is 'u'"),
        ("qq", "letter 1 is 'q'"),
        ("km", "letter 0 is 'k'.*'km' is a vertical pill"),  # a vertical pill is not a pill to place
        ("mk", "letter 0 is 'm', expected one of qrs \\(left half\\); a pill to place"),
        ("ad", "letter 0 is 'a'"),
        ("q\u0101", "letter 1"),
        ("rb", "letter 1 is 'b'.*the pill that prints as 'rb' is 'qw' in maryodel letters"),
        ("yy", "letter 0 is 'y'.*the pill that prints as 'yy' is 'rv'"),
    ],
)
def test_bad_pill_strings(text, message):
    with pytest.raises(dm.FormatError, match=message):
        dm.Pill.from_string(text)


def test_bad_board_cells():
    cells = np.zeros((8, 16), np.uint8)
    cells[2, 3] = 4  # shape "disconnected" with no colour
    with pytest.raises(dm.FormatError, match="invalid cell code 4 at x=2, y=3"):
        dm.Board(cells)
    with pytest.raises(dm.FormatError, match="shape"):
        dm.Board(np.zeros((16, 8), np.uint8))


@pytest.mark.parametrize("seed, level", [(0, 0), (1, 5), (65536, 3), (-4, 2), (100, -1), (100, 25), (1.5, 3)])
def test_bad_seed_or_level(seed, level):
    with pytest.raises(ValueError, match="seed must be|level must be"):
        dm.new_level(seed, level)


def test_illegal_moves_raise():
    board = dm.new_level(1234, 3).board
    pill = dm.Pill.from_string("qw")
    for move in [dm.Move(0, 7, 0), dm.Move(4, 0, 0), dm.Move(0, 3, 5), dm.Move(1, -1, 0), dm.Move(0, 0, 16)]:
        with pytest.raises(ValueError, match="illegal move"):
            dm.place(board, pill, move)


# ---------------------------------------------------------------- legal placements


def test_move_counts_on_empty_board():
    """perft-style counts: 7 + 8 + 7 + 8 placements, 15 for a same-colour pill."""
    board = dm.Board.empty()
    assert len(dm.legal_moves(board, dm.Pill.from_string("qw"))) == 30
    assert len(dm.legal_moves(board, dm.Pill.from_string("rv"))) == 15
    assert {m.r for m in dm.legal_moves(board, dm.Pill.from_string("rv"))} == {0, 1}


def test_vertical_top_above_bottle():
    """A column filled to y=14 under the spawn: a vertical pill rests at y=15, its top half lost."""
    cells = np.zeros((8, 16), np.uint8)
    cells[2, :15] = [K.VIRUS << 2 | (1 + y % 3) for y in range(15)]  # no line of 4
    board = dm.Board(cells)
    pill = dm.Pill.from_string("rw")
    assert dm.Move(1, 2, 15) in dm.legal_moves(board, pill)
    after, _ = dm.place(board, pill, dm.Move(1, 2, 15))
    assert after[2, 15] == "g"  # blue (the right colour is at the bottom for r=1), disconnected


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.1, 0.8), pills)
def test_legal_moves_match_reference_search(seed, fill, pill):
    board = random_board(seed, fill)
    assert set(dm.legal_moves(board, pill)) == reference_legal(board, pill)


@settings(max_examples=60, deadline=None)
@given(played_boards(), pills)
def test_legal_move_cells_are_empty_and_supported(board, pill):
    cells = board.cells
    mask = dm.legal_mask(board, pill)
    moves = dm.legal_moves(board, pill)
    assert mask.sum() == len(moves) * (2 if pill.same_colour else 1)
    for move in moves:
        assert mask[move]
        placed = dm.move_cells(pill, move)
        assert all(cells[c.x, c.y] == 0 for c in placed)
        below = [(c.x, c.y - 1) for c in placed if c.shape != dm.Shape.TOP]
        assert any(y < 0 or cells[x, y] != 0 for x, y in below)


# ---------------------------------------------------------------- place and resolve


@settings(max_examples=80, deadline=None)
@given(played_boards(), pills, st.integers(0, 1000))
def test_resolve_leaves_no_lines_and_nothing_falls(board, pill, pick):
    moves = dm.legal_moves(board, pill)
    assume(moves)
    after, result = dm.place(board, pill, moves[pick % len(moves)])
    assert after.virus_count == board.virus_count - result.viruses_cleared
    assert result.cells_cleared >= result.viruses_cleared >= 0
    assert (result.clear_rounds == 0) == (result.cells_cleared == 0)
    assert result.won == (after.virus_count == 0)
    assert not lines_of_four(after.cells)  # a win does not stop a cascade (rules.md section 5)
    assert not something_can_fall(after.cells)
    dm.Board.from_string(after.to_string())  # pairs stay well formed


def test_cascade_disconnects_partners():
    # Red virus column x=0 y=0..2 and a horizontal red|blue pill dropped on top: the red half clears
    # with the viruses, its blue partner is disconnected and falls to the floor.
    cells = np.zeros((8, 16), np.uint8)
    cells[0, 0:3] = K.VIRUS << 2 | K.RED
    board = dm.Board(cells)
    after, result = dm.place(board, dm.Pill.from_string("qw"), dm.Move(0, 0, 3))
    assert (result.viruses_cleared, result.cells_cleared, result.clear_rounds, result.won) == (3, 4, 1, True)
    assert after[1, 0] == "g"


def test_cascade_runs_to_its_end_after_the_last_virus():
    # The last virus (red, x=0 y=0) goes in the first round with the red column; the blue partner
    # of the placed pill falls to (1, 0) and completes a blue row: a second round after the win.
    cells = np.zeros((8, 16), np.uint8)
    cells[0, 0] = K.VIRUS << 2 | K.RED
    cells[0, 1:3] = K.DISCONNECTED << 2 | K.RED
    cells[2:5, 0] = K.DISCONNECTED << 2 | K.BLUE
    board = dm.Board(cells)
    pill, move = dm.Pill.from_string("qw"), dm.Move(0, 0, 3)
    after, result = dm.place(board, pill, move)
    assert (result.viruses_cleared, result.cells_cleared, result.clear_rounds) == (1, 8, 2)
    assert result.won and not result.topped_out
    assert after == dm.Board.empty()  # the board settled after the win too
    cells = board.cells.copy()
    assert K.place_and_resolve(cells, K.RED, K.BLUE, *move) == (1, 8, 2)
    assert not cells.any()


# ---------------------------------------------------------------- levels


@settings(max_examples=200, deadline=None)
@given(seeds, levels)
def test_generated_levels_follow_rules(seed, level):
    board = dm.new_level(seed, level).board
    cells = board.cells
    assert board.virus_count == min(84, 4 * (level + 1))
    ys = np.nonzero(cells)[1]
    assert ys.max() <= max_virus_row(level)
    assert ((cells >> 2) == K.VIRUS)[cells > 0].all()
    for x in range(8):
        for y in range(16):
            c = cells[x, y]
            if c:
                assert x + 2 > 7 or cells[x + 2, y] != c
                assert y + 2 > 15 or cells[x, y + 2] != c


def test_pill_sequence_modes():
    level = dm.new_level(777, 4)
    nes = dm.PillSequence("nes", level)
    assert [nes[k] for k in range(130)] == [level.pills[k % 128] for k in range(130)]
    iid = dm.PillSequence("iid", level)
    again = dm.PillSequence("iid", level)
    assert [iid[k] for k in range(600)] == [again[k] for k in range(600)]
    counts = np.bincount([iid[k].number for k in range(600)], minlength=9)
    assert counts.min() > 30  # every pair appears (600 draws of 9 values)
    with pytest.raises(ValueError, match="pill mode"):
        dm.PillSequence("random", level)


# ---------------------------------------------------------------- games


@settings(max_examples=25, deadline=None)
@given(seeds, levels, st.integers(0, 2**32), st.sampled_from(["nes", "iid"]))
def test_random_game_replays_exactly(seed, level, rng_seed, mode):
    game = random_game(seed, level, 500, rng_seed=rng_seed, pill_mode=mode)
    assert game.over
    record = dm.GameRecord.from_json(game.record().to_json())
    again = record.replay()
    assert again.board == game.board and again.outcome == game.outcome
    assert again.viruses_cleared + again.viruses_left == dm.virus_count(level)
    steps = list(record.steps())
    assert len(steps) == game.pills_used
    assert all(before.pill == game.pills[i] for i, (before, _, _) in enumerate(steps))


def test_stalemate_after_stall_limit():
    game = dm.Game(1234, 24, stall_limit=3)
    while not game.over:
        # the last legal move in (r, x, y) order stacks on the right, rarely clearing anything
        result = game.play(game.legal_moves()[-1])
        if game.outcome is dm.Outcome.STALEMATE:
            assert game.stall == 3 and result.viruses_cleared == 0
    # this game stalls from its first pill: three pills clearing nothing end it
    assert game.outcome is dm.Outcome.STALEMATE and game.pills_used == 3 and game.stall == 3
    assert dm.Outcome.STALEMATE.won_value == 1 and dm.Outcome.TOPPED_OUT.won_value == -1


def test_game_rejects_moves_after_end_and_bad_records():
    game = random_game(99, 10, 1000)
    assert game.over and game.legal_moves() == []
    with pytest.raises(ValueError, match="game is over"):
        game.play(dm.Move(0, 0, 0))
    record = game.record()
    tampered = dm.GameRecord.from_dict({**record.to_dict(), "viruses_cleared": record.viruses_cleared + 1})
    with pytest.raises(ValueError, match="replay gives"):
        tampered.replay()
    with pytest.raises(ValueError, match="move 0"):
        dm.GameRecord(seed=99, level=10, moves=(dm.Move(0, 7, 0),)).replay()
    with pytest.raises(ValueError, match="game record"):
        dm.GameRecord.from_dict({"seed": 99})
    # words the readers would misread: an unknown outcome counts as a game but neither won nor lost
    for field, value, message in [
        ("outcome", "win", "outcome must be one of"),
        ("pill_mode", "xyz", "pill_mode must be one of"),
        ("stall_limit", 0, "stall_limit must be a positive integer or null"),
        ("timing", "fast", "timing must be one of"),
        ("speed", "hi", "speed 'hi' given under free timing"),
        ("frames", 123, "frames 123 given under free timing"),  # which to_dict would drop
        ("seed", 0, "seed must be an integer in"),  # named here, not when a replay fails
        ("level", 30, "level must be an integer in 0..24"),
    ]:
        with pytest.raises(ValueError, match=f"game record: .*{message}"):
            dm.GameRecord.from_dict({**record.to_dict(), field: value})
    nes = dm.GameRecord.from_dict({**record.to_dict(), "timing": "nes", "speed": "hi"})
    assert (nes.timing, nes.speed) == ("nes", "hi")


def test_a_record_file_names_the_line_that_is_not_a_record(tmp_path):
    record = random_game(99, 10, 1000).record()
    path = tmp_path / "games.jsonl"
    path.write_text(record.to_json() + "\n\n" + record.to_json() + "\n")
    assert dm.GameRecord.read_file(path) == [record, record]
    path.write_text(record.to_json() + "\n\n" + '{"seed": 2, "level": 3, "moves": [], "outcome": "win"}\n')
    with pytest.raises(ValueError, match=f"^{path}:3: game record: .*outcome must be one of"):
        dm.GameRecord.read_file(path)


# ---------------------------------------------------------------- the public API refuses junk clearly

# Anything a caller might pass by mistake: numbers of every kind, text, containers, arrays.
junk = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=5),
        st.binary(max_size=3),
        st.sampled_from([np.int8(1), np.uint8(200), np.int64(-1), np.float32(1.0), np.bool_(True), np.nan]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner, inner),
        st.dictionaries(st.text(max_size=2), inner, max_size=2),
    ),
    max_leaves=6,
)
move_like = st.one_of(
    junk,
    st.tuples(st.integers(-2, 17), st.integers(-2, 17), st.integers(-2, 17)),
    st.tuples(st.integers(0, 3), st.integers(0, 7), st.integers(0, 15)).map(lambda m: np.array(m, np.int16)),
    st.tuples(st.floats(0, 3), st.floats(0, 7), st.floats(0, 15)),
)


def refuses_clearly(call) -> object:
    """call() returns, or raises a ValueError (FormatError included) with a message; any other
    exception (IndexError, TypeError, numpy's ambiguous truth values) or a warning fails."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return call()
        except ValueError as e:
            assert_kit_message(e)
            return e


@pytest.mark.parametrize(
    "move, message",
    [
        ((1.0, 2.0, 15.0), "r must be an integer, got 1.0"),
        ((0, 3), "expected three integers"),
        ((0, 3, 15, 0), "got 4 values"),
        ((True, 3, 0), "r must be an integer, got True"),
        ((0, np.bool_(True), 0), "x must be an integer"),
        ("r30", "expected three integers"),
        (None, "expected three integers"),
        (np.zeros((3, 1), np.int64), "shape"),
    ],
)
def test_bad_moves_name_the_move(move, message):
    game = dm.Game(1234, 0)
    with pytest.raises(dm.FormatError, match=message):
        game.play(move)
    with pytest.raises(dm.FormatError, match=message):
        dm.place(game.board, game.pill, move)
    assert game.pills_used == 0 and game.moves == []


def test_numpy_integer_moves_are_fine():
    game = dm.Game(1234, 0)
    move = game.legal_moves()[0]
    result = game.play(np.array(move, np.int64))
    assert game.moves == [move] and all(type(v) is int for v in game.moves[0])
    assert result.viruses_cleared >= 0
    assert dm.place(dm.Board.empty(), dm.Pill.from_string("qu"), (np.int8(0), np.uint8(0), np.int32(0)))[0]


@pytest.mark.parametrize(
    "cells, message",
    [
        (np.full((8, 16), np.nan), "integer cell codes, got an array of float64"),
        (np.zeros((8, 16)), "integer cell codes"),
        (np.zeros((8, 16), bool), "integer cell codes, got an array of bool"),
        (np.full((8, 16), -1), "invalid cell code -1 at x=0, y=0"),
        (np.full((8, 16), 256), "invalid cell code 256"),
        ([[0] * 16] * 7 + [[0] * 15], "board: cells"),
        ("d" * 128, "integer cell codes"),
    ],
)
def test_bad_board_arrays(cells, message):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NaN used to become an empty cell with only a warning
        with pytest.raises(dm.FormatError, match=message):
            dm.Board(cells)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=200),
        st.text(alphabet="abcdefgijkmnoqrsuvw", min_size=128, max_size=128),
        st.text(alphabet="dddddddabcqu" + "hlp\x00é\u0101", min_size=128, max_size=128),
    )
)
def test_board_parser_refuses_or_round_trips(text):
    result = refuses_clearly(lambda: dm.Board.from_string(text))
    if isinstance(result, dm.Board):
        assert result.to_string() == text
        assert dm.Board(result.cells) == result
    else:
        assert isinstance(result, dm.FormatError) and str(result).startswith("board")


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=4), st.text(alphabet="qrsuvwdik", min_size=2, max_size=2), junk))
def test_pill_parser_refuses_or_round_trips(text):
    result = refuses_clearly(lambda: dm.Pill.from_string(text))
    if isinstance(result, dm.Pill):
        assert result.to_string() == text and result in dm.ALL_PILLS
    else:
        assert isinstance(result, dm.FormatError) and "pill" in str(result)


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 0xFFFF), st.integers(0, 24), move_like)
def test_game_play_takes_legal_moves_and_refuses_anything_else(seed, level, move):
    game = dm.Game(seed, level)
    legal = set(game.legal_moves())
    result = refuses_clearly(lambda: game.play(move))
    if isinstance(result, dm.PlaceResult):
        assert game.moves[-1] in legal and game.pills_used == 1
    else:
        assert isinstance(result, ValueError) and game.pills_used == 0 and not game.moves


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(played_boards(), junk),
    st.one_of(pills, st.tuples(st.integers(-1, 4), st.integers(-1, 4)), junk),
    move_like,
)
def test_place_takes_legal_moves_and_refuses_anything_else(board, pill, move):
    result = refuses_clearly(lambda: dm.place(board, pill, move))
    if not isinstance(result, ValueError):
        after, placed = result
        assert isinstance(after, dm.Board) and dm.is_legal(board, pill, move)
        assert placed.cells_cleared >= placed.viruses_cleared >= 0
    for call in (
        lambda: dm.legal_moves(board, pill),
        lambda: dm.legal_mask(board, pill),
        lambda: dm.is_legal(board, pill, move),
        lambda: dm.canonical(pill, move),
        lambda: dm.move_cells(pill, move),
    ):
        refuses_clearly(call)


@settings(max_examples=200, deadline=None)
@given(junk, junk, junk)
def test_game_and_record_constructors_refuse_junk(seed, level, moves):
    refuses_clearly(lambda: dm.Game(seed, level))
    refuses_clearly(lambda: dm.Game(1234, 0, pill_mode=seed, stall_limit=level))
    refuses_clearly(lambda: dm.GameRecord.from_dict({"seed": seed, "level": level, "moves": moves}))
    refuses_clearly(lambda: dm.GameRecord.from_dict(moves))
    refuses_clearly(lambda: dm.Pill.from_number(seed))
    refuses_clearly(lambda: dm.Board.empty()[seed])
