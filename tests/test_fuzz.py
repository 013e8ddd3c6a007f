"""Every public engine function, called with anything, answers with its result or the kit's clean
error (`FormatError`, a ValueError, or ValueError itself), never a TypeError, AttributeError,
RecursionError or a hang from deep inside (issue 21, point 9)."""

import inspect
import json
import warnings

import numpy as np
import pytest
from helpers import assert_kit_message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import drmario
from drmario.engine import board as B
from drmario.engine import game as G
from drmario.engine import level as L
from drmario.engine import rules as R
from drmario.engine import svg as S
from drmario.engine import timing as T
from drmario.engine.board import ALL_PILLS, Board, FormatError, Move, Pill

MODULES = (B, L, R, G, T, S)  # the engine's public modules; kernels and timing_kernels are its compiled insides
MID = drmario.new_level(1234, 10).board

# Records with no behaviour to fuzz: constructing one checks nothing (the functions that take them do).
RECORDS = {"Colour", "Shape", "FormatError", "Move", "PlacedCell", "Level", "PlaceResult", "Outcome", "Reach"}


def _play(move):
    return G.Game(1234, 0).play(move)


def _sequence(mode, k):
    return L.PillSequence(mode, drmario.new_level(2, 0))[k]


# name: (callable, number of arguments)
TARGETS = {
    "integer": (B.integer, 2),
    "unpaired_halves": (B.unpaired_halves, 1),
    "Board": (Board, 1),
    "Board.from_string": (Board.from_string, 1),
    "Board.__getitem__": (lambda xy: MID[xy], 1),
    "Pill.from_string": (Pill.from_string, 1),
    "Pill.from_number": (Pill.from_number, 1),
    "Pill.__str__": (lambda a, b: str(Pill(a, b)), 2),
    "Pill.__repr__": (lambda a, b: repr(Pill(a, b)), 2),
    "Pill.to_string": (lambda a, b: Pill(a, b).to_string(), 2),
    "Pill.number": (lambda a, b: Pill(a, b).number, 2),
    "move_values": (B.move_values, 1),
    "as_move": (B.as_move, 1),
    "as_pill": (B.as_pill, 1),
    "as_board": (B.as_board, 1),
    "move_cells": (B.move_cells, 2),
    "check_seed_level": (L.check_seed_level, 2),
    "is_evaluation_seed": (L.is_evaluation_seed, 1),
    "virus_count": (L.virus_count, 1),
    "max_virus_row": (L.max_virus_row, 1),
    "pill_array": (L.pill_array, 1),
    "new_level": (L.new_level, 2),
    "viruses_only": (L.viruses_only, 2),
    "PillSequence": (_sequence, 2),
    "legal_moves": (R.legal_moves, 2),
    "legal_mask": (R.legal_mask, 2),
    "canonical": (R.canonical, 2),
    "is_legal": (R.is_legal, 3),
    "place": (R.place, 3),
    "symmetrize": (R.symmetrize, 2),
    "placement_mass": (R.placement_mass, 2),
    "move_index": (R.move_index, 1),
    "check_pill_mode": (L.check_pill_mode, 1),
    "check_stall_limit": (G.check_stall_limit, 1),
    "GameRecord.from_dict": (G.GameRecord.from_dict, 1),
    "GameRecord.from_json": (G.GameRecord.from_json, 1),
    "Game": (G.Game, 2),
    "Game.play": (_play, 1),
    "speed_index": (T.speed_index, 3),
    "frames_per_row": (T.frames_per_row, 1),
    "input_string": (T.input_string, 1),
    "input_bits": (T.input_bits, 1),
    "input_path": (T.input_path, 1),
    "read_input_path": (T.read_input_path, 1),
    "reachable": (T.reachable, 3),
    "reachable_mask": (T.reachable_mask, 3),
    "board_string": (S.board_string, 1),
    "board_svg": (S.board_svg, 1),
}

# What a caller might pass by mistake, next to what each function takes.
SPECIAL = [
    Pill(1.0, 2.0),
    Pill(None, 1),
    Pill(1, 2),
    ALL_PILLS[0],
    ALL_PILLS[4],
    Move(0, 0, 0),
    Move(1.5, 0, 0),
    Board.empty(),
    MID,
    {},
    {"seed": 2, "level": 0, "moves": []},
    {"seed": "x", "level": 0, "moves": []},
    {"seed": 2, "level": 0, "moves": None},
    {"seed": 2, "level": 99, "moves": [[0, 3, 15]]},
    "d" * 128,
    "qw",
    "LOW",
    "HI",
    "[" * 50_000,
    '{"seed": 2, "level": 0, "moves": [[0, 3, 15]]}',
    np.zeros((8, 16), np.uint8),
    np.zeros((8, 16)),
    np.full((8, 16), 99),
    np.zeros((4, 8, 16)),
    np.zeros((2, 4, 8, 16)),
    np.array("x"),
    np.zeros(0),
    np.int64(5),
    np.float64(2.0),
    object(),
]
scalars = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-2, 130),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=200),
    st.binary(max_size=20),
)
VALUES = st.one_of(
    scalars,
    st.sampled_from(SPECIAL),
    st.lists(scalars, max_size=4),
    st.tuples(st.integers(-2, 20), st.integers(-2, 20), st.integers(-2, 20)),
    st.lists(st.lists(st.integers(0, 40), max_size=3), max_size=3),
    st.builds(lambda shape, v: np.full(shape, v), st.sampled_from([(8, 16), (4, 8, 16), (3,), ()]), scalars),
)


def public_engine_names() -> set[str]:
    """The engine's public functions and classes: drmario's exports and each module's own."""
    names = set(drmario.__all__) - {"ALL_PILLS", "DEFAULT_STALL_LIMIT"}
    for module in MODULES:
        for name, obj in vars(module).items():
            mine = not name.startswith("_") and getattr(obj, "__module__", None) == module.__name__
            if mine and (inspect.isfunction(obj) or inspect.isclass(obj)):
                names.add(name)
    return names - RECORDS


def test_every_public_engine_function_is_fuzzed():
    covered = {name.split(".")[0] for name in TARGETS}
    assert public_engine_names() <= covered, sorted(public_engine_names() - covered)


@pytest.mark.parametrize("name", sorted(TARGETS))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(data=st.data())
def test_engine_functions_raise_only_the_kits_errors(name, data):
    func, arity = TARGETS[name]
    args = [data.draw(VALUES, label=f"argument {i}") for i in range(arity)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            func(*args)
        except ValueError as e:  # FormatError is one; a message of the kit's that names the problem
            assert_kit_message(e)


@pytest.mark.parametrize(
    "call",
    [
        lambda: L.virus_count(-100),
        lambda: L.virus_count(1.5),
        lambda: L.virus_count(25),
        lambda: L.max_virus_row(-1),
        lambda: L.max_virus_row(2.0),
        lambda: L.is_evaluation_seed(8.5),
        lambda: L.is_evaluation_seed("8"),
        lambda: R.symmetrize({"a": 1}, True),
        lambda: R.symmetrize(np.zeros((4, 8, 16)), "yes"),
        lambda: R.symmetrize(np.full((4, 8, 16), 1e300), True),
        lambda: G.GameRecord.from_json("[" * 100_000),
        lambda: G.GameRecord.from_json(2.0),
        lambda: R.legal_moves(MID, Pill(1.0, 2.0)),
        lambda: Pill(None, 1).to_string(),
        lambda: T.read_input_path("L (D x)×2"),
        lambda: T.read_input_path("L×999999 " * 2),
        lambda: T.input_path(["LQ"]),
        lambda: T.input_path(["LL"]),  # what the reader refuses, the writer refuses too
        lambda: T.read_input_path("L×0 D"),
        lambda: T.read_input_path("(L D)×0"),
        lambda: S.board_svg(Board.empty().cells, ghost=(Pill(1, 2), (0, 7, 5))),  # past the bottle's edge
    ],
    ids=[
        "virus_count(-100)",
        "virus_count(1.5)",
        "virus_count(25)",
        "max_virus_row(-1)",
        "max_virus_row(2.0)",
        "is_evaluation_seed(8.5)",
        "is_evaluation_seed('8')",
        "symmetrize(dict)",
        "symmetrize(same_colour str)",
        "symmetrize(beyond float32)",
        "from_json(deep)",
        "from_json(float)",
        "legal_moves(Pill(1.0, 2.0))",
        "Pill(None, 1).to_string()",
        "read_input_path(unknown button)",
        "read_input_path(too long)",
        "input_path(unknown button)",
        "input_path(a button twice)",
        "read_input_path(a run of 0)",
        "read_input_path(a pair run of 0)",
        "board_svg(ghost off the bottle)",
    ],
)
def test_the_reported_inputs_are_clean_errors(call):
    with pytest.raises(ValueError) as refused:
        call()
    assert_kit_message(refused.value)


def test_valid_inputs_keep_their_answers():
    assert [L.virus_count(level) for level in (0, 20, 24)] == [4, 84, 84]
    assert L.max_virus_row(np.int64(15)) == 10 and L.is_evaluation_seed(16) and not L.is_evaluation_seed(17)
    assert repr(Pill(1.0, 2.0)) == "Pill(left=1.0, right=2.0)" and str(ALL_PILLS[5]) == "yb"
    with pytest.raises(FormatError, match=r"pill: left colour must be an integer, got None"):
        B.as_pill(Pill(None, 1))
    with pytest.raises(FormatError, match=r"got 2 values: Pill\(left=1.0, right=2.0\)"):
        B.as_move(Pill(1.0, 2.0))  # the message that crashed while it was being made
    moves = np.zeros((2, 4, 8, 16), np.float32)
    moves[:, 0, 3, 0] = 1
    out = R.symmetrize(moves, np.array([True, False]))
    assert out[0, 0, 3, 0] == out[0, 2, 3, 0] == 0.5 and out[1, 0, 3, 0] == 1
    record = G.GameRecord(seed=2, level=0, moves=(Move(0, 3, 0),))
    assert G.GameRecord.from_json(record.to_json()) == G.GameRecord.from_json(json.dumps(record.to_dict()).encode())
