"""Input planes and the moves target forms (drmario.learn.encode)."""

import numpy as np
import pytest
import torch
from helpers import random_board
from hypothesis import given, settings
from hypothesis import strategies as st

import drmario as dm
from drmario.engine import kernels as K
from drmario.engine.rules import MOVES_SHAPE, move_index, placement_mass, symmetrize
from drmario.learn.encode import (
    DESIGN_PLANES,
    EXPERT_PLANES,
    N_PLANES,
    _planes_gather,
    dense_moves,
    encode,
    moves_from_dict,
    planes,
    planes_torch,
    sparse_moves,
)
from drmario.learn.examples import colour_table
from drmario.search import expert

pills = st.sampled_from(dm.ALL_PILLS)


def test_design_note_example_decodes_to_exactly_those_cells():
    dense = dense_moves([[3, 5, 0.5], [6, 7, 0.2, 2, 4, 0.3], [], []])
    assert dense.shape == (4, 8, 16) and dense.dtype == np.float32
    expected = np.zeros((4, 8, 16), np.float32)
    expected[0, 3, 5], expected[1, 6, 7], expected[1, 2, 4] = 0.5, 0.2, 0.3
    assert np.array_equal(dense, expected)
    assert sparse_moves(dense) == [[3, 5, 0.5], [2, 4, 0.3, 6, 7, 0.2], [], []]  # (x, y) order


def test_small_move_masses_keep_six_significant_digits():
    """Round 0's floor gives every legal move some mass; written with 6 decimals, 4e-7 was 0 (left out)."""
    dense = np.zeros((4, 8, 16), np.float32)
    dense[0, 1, 2], dense[1, 3, 4], dense[2, 0, 0] = 0.123456789, 4e-7, 0.0123456789
    dense[3, 7, 15] = 1 - dense.sum()
    sparse = sparse_moves(dense)
    assert sparse[:3] == [[1, 2, 0.123457], [3, 4, 4e-07], [0, 0, 0.0123457]]
    assert (dense_moves(sparse) > 0).sum() == 4 and sparse_moves(dense_moves(sparse)) == sparse


def hand_built() -> tuple[dm.Board, dm.Pill, dict[int, list[tuple[int, int]]]]:
    """A board with a few viruses, a horizontal and a vertical pill and a lone half, and the planes
    each occupied cell must set."""
    cells = np.zeros((8, 16), np.uint8)
    expected = {}

    def put(x, y, shape, colour, channel):
        cells[x, y] = shape << 2 | colour
        expected.setdefault(channel, []).append((x, y))

    put(0, 0, K.VIRUS, K.RED, 0)
    put(7, 3, K.VIRUS, K.YELLOW, 1)
    put(2, 10, K.VIRUS, K.BLUE, 2)
    put(5, 2, K.VIRUS, K.BLUE, 2)
    put(3, 0, K.LEFT, K.YELLOW, 7)  # horizontal pill yellow|blue
    put(4, 0, K.RIGHT, K.BLUE, 11)
    put(6, 0, K.BOTTOM, K.RED, 3)  # vertical pill: red bottom, blue top, both "disconnected" planes
    put(6, 1, K.TOP, K.BLUE, 5)
    put(1, 5, K.DISCONNECTED, K.YELLOW, 4)
    put(0, 15, K.DISCONNECTED, K.RED, 3)
    return dm.Board(cells), dm.Pill.from_string("su"), expected  # pill blue|red


def test_hand_built_board_sets_exactly_the_expected_planes():
    board, pill, expected = hand_built()
    # the board survives its text form, so the cells are what the letters say
    assert dm.Board.from_string(board.to_string()) == board
    assert board[3, 0] == "r" and board[4, 0] == "w" and board[6, 0] == "i" and board[6, 1] == "o"
    x = encode(board, pill, dm.Pill.from_string("rv"))  # preview yellow|yellow
    assert x.shape == (N_PLANES, 8, 16) == (24, 8, 16) and x.dtype == np.float32
    want = np.zeros((24, 8, 16), np.float32)
    for channel, cells in expected.items():
        for cx, cy in cells:
            want[channel, cx, cy] = 1
    want[12 + 2] = 1  # left colour blue
    want[15 + 0] = 1  # right colour red
    want[18 + 1] = want[21 + 1] = 1  # the preview: yellow, yellow
    assert np.array_equal(x, want)
    assert x[:12].sum() == sum(len(v) for v in expected.values())  # one plane per occupied cell
    design = encode(board, pill, dm.Pill.from_string("rv"), n_planes=DESIGN_PLANES)  # the design's 18: no preview
    assert design.shape == (18, 8, 16) and np.array_equal(design, want[:18])
    assert encode(board, pill)[18:].sum() == 0  # an unknown preview leaves its planes at zero


def test_pill_and_preview_planes_for_every_pair():
    for pill in dm.ALL_PILLS:
        for preview in dm.ALL_PILLS:
            x = encode(dm.Board.empty(), pill, preview)
            assert x[:12].sum() == 0
            for first, colours in ((12, pill), (18, preview)):
                assert [int(x[first + c, 0, 0]) for c in range(3)] == [int(colours.left == c + 1) for c in range(3)]
                assert [int(x[first + 3 + c, 5, 9]) for c in range(3)] == [
                    int(colours.right == c + 1) for c in range(3)
                ]
            assert x[12:].sum() == 4 * 128


def test_a_bad_plane_count_is_refused():
    with pytest.raises(ValueError, match="n_planes must be 18"):
        encode(dm.Board.empty(), dm.ALL_PILLS[0], n_planes=20)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0, 1), st.lists(pills, min_size=1, max_size=5))
def test_numpy_and_torch_planes_agree(seed, fill, pill_list):
    boards = np.stack([random_board(seed + i, fill).cells for i in range(len(pill_list))])
    pill_array = np.array([(p.left, p.right) for p in pill_list], np.uint8)
    previews = np.roll(pill_array, 1, axis=0)
    previews[0] = 0  # one unknown preview
    for n_planes in (DESIGN_PLANES, N_PLANES, EXPERT_PLANES):
        x = planes(boards, pill_array, previews, n_planes)
        x_half = torch.from_numpy(x).to(torch.bfloat16)  # the expert's preferences round in bfloat16
        assert x.shape == (len(pill_list), n_planes, 8, 16)
        for i, p in enumerate(pill_list):
            preview = None if i == 0 else dm.Pill(*map(dm.Colour, previews[i]))
            assert np.array_equal(x[i], encode(dm.Board(boards[i]), p, preview, n_planes))
        tensors = (torch.from_numpy(boards), torch.from_numpy(pill_array), torch.from_numpy(previews))
        t = planes_torch(*tensors, n_planes)
        assert t.dtype == torch.float32 and np.array_equal(t.numpy(), x)
        half = planes_torch(*tensors, n_planes, torch.bfloat16)
        assert half.dtype == torch.bfloat16 and torch.equal(half, x_half)
        # the gather used on GPUs, run here on the CPU
        for dtype, want in ((torch.float32, torch.from_numpy(x)), (torch.bfloat16, x_half)):
            g = _planes_gather(*tensors, n_planes, dtype)
            assert g.dtype == dtype and torch.equal(g, want)
        if torch.cuda.is_available():
            c = planes_torch(*(a.cuda() for a in tensors), n_planes)
            assert c.is_cuda and np.array_equal(c.cpu().numpy(), x)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0, 0.7), pills)
def test_expert_planes_hold_the_expert_one_ply_preference(seed, fill, pill):
    board = random_board(seed, fill)
    preview = dm.ALL_PILLS[seed % 9]
    x = encode(board, pill, preview, EXPERT_PLANES)
    assert x.shape == (28, 8, 16) and np.array_equal(x[:24], encode(board, pill, preview))
    preference = x[24:]
    legal = np.zeros(MOVES_SHAPE, np.uint8)
    K.legal_mask_into(board.cells.copy(), pill.left, pill.right, legal)
    assert np.array_equal(preference > 0, legal > 0)  # every legal move and only those
    moves, scores = np.zeros((K.MAX_MOVES, 3), np.int8), np.zeros(K.MAX_MOVES)
    n = expert.expert_scores(board.cells, pill.left, pill.right, 0, 0, expert.load_weights(), moves, scores, depth=1)
    if n == 0:
        return
    gap = scores[:n].max() - scores[:n]
    r, mx, my = moves[:n].T.astype(int)
    np.testing.assert_allclose(preference[r, mx, my], 1 / (1 + gap / expert.ONE_PLY_SCALE), rtol=1e-6)
    assert preference.max() == 1  # the expert's best move
    if pill.left == pill.right:
        assert np.array_equal(preference[:2], preference[2:])
    # the expert's evaluation does not depend on which colour is which: a renaming keeps the planes
    perm = (2, 3, 1)
    rename = np.array([0, *perm], np.uint8)
    renamed = colour_table(perm)[board.cells]
    pair, next_pair = rename[[pill.left, pill.right]], rename[[preview.left, preview.right]]
    assert np.array_equal(planes(renamed, pair, next_pair, EXPERT_PLANES)[24:], preference)


def test_planes_keep_leading_dimensions():
    boards = np.zeros((2, 3, 8, 16), np.uint8)
    boards[1, 2, 4, 4] = K.VIRUS << 2 | K.BLUE
    pill_array = np.full((2, 3, 2), K.YELLOW, np.uint8)
    x = planes(boards, pill_array, dtype=np.uint8)
    assert x.shape == (2, 3, 24, 8, 16) and x.dtype == np.uint8
    assert x[1, 2, 2, 4, 4] == 1 and x[..., :12, :, :].sum() == 1
    assert (x[..., 13, :, :] == 1).all() and (x[..., 16, :, :] == 1).all()


@st.composite
def distributions(draw):
    """A dense moves target: random positive mass on random slots, summing to 1."""
    slots = draw(st.lists(st.integers(0, 511), min_size=1, max_size=60, unique=True))
    weights = draw(st.lists(st.integers(1, 1000), min_size=len(slots), max_size=len(slots)))
    dense = np.zeros(512, np.float64)
    dense[slots] = np.array(weights) / sum(weights)
    return dense.reshape(MOVES_SHAPE).astype(np.float32)


@settings(max_examples=100, deadline=None)
@given(distributions())
def test_sparse_dense_round_trip(dense):
    sparse = sparse_moves(dense)
    assert len(sparse) == 4 and all(len(flat) % 3 == 0 for flat in sparse)
    assert all(isinstance(v, int) for flat in sparse for v in flat[0::3] + flat[1::3])
    back = dense_moves(sparse)
    assert np.abs(back - dense).max() <= 5e-7 + 1e-7
    assert set(map(tuple, np.argwhere(back))) <= set(map(tuple, np.argwhere(dense)))
    assert sparse_moves(back) == sparse  # the JSON form is a fixed point
    exact = dense_moves([[3, 5, 0.25], [], [7, 15, 0.5], [0, 0, 0.25]])
    assert dense_moves(sparse_moves(exact)).tolist() == exact.tolist()


@pytest.mark.parametrize(
    "sparse, message",
    [
        ([[3, 5, 1]], "list of 4 lists"),
        ("moves", "list of 4 lists"),
        ([[3, 5], [], [], []], r"moves\[0\] .* got length 2"),
        ([[], 7, [], []], r"moves\[1\] must be a flat list .* got int"),
        ([[], [], [1, 2, "x"], []], r"moves\[2\] triple 0: 'x' is not a number"),
        ([[], [], [], [0, 0, 0.5, 1, 2.5, 0.5]], r"moves\[3\] triple 1: position \(1, 2.5\) is not a pair of integers"),
        ([[8, 0, 1], [], [], []], r"moves\[0\] triple 0: position \(8, 0\) is off the board"),
        ([[0, -1, 1], [], [], []], "off the board"),
        ([[0, 16, 1], [], [], []], "off the board"),
        ([[1, 1, -0.5], [], [], []], r"probability -0.5 is not a number >= 0"),
        ([[1, 1, float("nan")], [], [], []], "probability nan"),
        ([[1, 1, float("inf")], [], [], []], "probability inf"),
        ([[], [1, 1, 0.5, 2, 2, 0.25, 1, 1, 0.25], [], []], r"moves\[1\] triple 2: position \(1, 1\) given twice"),
    ],
)
def test_dense_moves_errors_name_rotation_and_triple(sparse, message):
    with pytest.raises(ValueError, match=message):
        dense_moves(sparse)


def test_symmetrize_and_moves_from_dict():
    same, mixed = dm.Pill.from_string("rv"), dm.Pill.from_string("rw")
    d = moves_from_dict({dm.Move(0, 2, 0): 0.5, dm.Move(1, 4, 0): 0.5}, same)
    assert d[0, 2, 0] == d[2, 2, 0] == 0.25 and d[1, 4, 0] == d[3, 4, 0] == 0.25 and d.sum() == 1
    d = moves_from_dict({dm.Move(0, 2, 0): 0.5, dm.Move(3, 4, 0): 0.5}, mixed)
    assert d[0, 2, 0] == 0.5 and d[3, 4, 0] == 0.5 and d[2, 2, 0] == 0
    batch = np.zeros((2, 4, 8, 16), np.float32)
    batch[:, 1, 3, 3] = 1
    out = symmetrize(batch, np.array([True, False]))
    assert out[0, 1, 3, 3] == out[0, 3, 3, 3] == 0.5 and out[1, 1, 3, 3] == 1 and out[1, 3, 3, 3] == 0
    assert move_index(dm.Move(2, 3, 4)) == 2 * 128 + 3 * 16 + 4


def test_placement_mass_sums_a_same_colour_placements_two_slots():
    batch = np.zeros((2, 4, 8, 16), np.float32)
    batch[:, 0, 2, 0] = batch[:, 2, 2, 0] = 0.3  # one horizontal placement, its mass in two slots
    batch[:, 1, 5, 0], batch[:, 3, 5, 0] = 0.35, 0.05
    out = placement_mass(batch, np.array([True, False]))
    assert out[0, 0, 2, 0] == pytest.approx(0.6) and out[0, 1, 5, 0] == pytest.approx(0.4) and not out[0, 2:].any()
    assert np.array_equal(out[1], batch[1])  # two colours: every slot is a placement of its own
    assert (
        np.unravel_index(out[0].argmax(), MOVES_SHAPE) == (0, 2, 0) != np.unravel_index(batch[0].argmax(), MOVES_SHAPE)
    )
    mask = np.zeros((4, 8, 16), np.uint8)
    mask[1, 5, 0] = mask[3, 5, 0] = 1  # a legal mask folds too: > 0 where the placement is legal
    assert set(zip(*np.nonzero(placement_mass(mask, True)))) == {(1, 5, 0)}
