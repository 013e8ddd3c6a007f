"""Training examples: game examples, validation, JSON Lines files and colour augmentation."""

import dataclasses
import gzip
import json
import os
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import drmario as dm
from drmario.engine.level import Level
from drmario.files import atomic_file, temp_path, write_atomic
from drmario.learn.example_decoding import SUM_TOLERANCE, decode_rows
from drmario.learn.example_files import (
    ERRORS_KEPT,
    decode_file,
    read_examples,
    read_sidecar,
    sidecar_path,
    write_examples,
    write_games,
)
from drmario.learn.examples import (
    COLOUR_PERMUTATIONS,
    Example,
    ExampleError,
    colour_table,
    game_examples,
    permute_colours,
    won_target,
)


def play_random(seed: int, level: int, rng_seed: int, **kwargs) -> tuple[dm.GameRecord, list[np.ndarray]]:
    """A finished random game and uniform targets over the legal moves of each decision."""
    rng = np.random.default_rng(rng_seed)
    game = dm.Game(seed, level, **kwargs)
    targets = []
    while not game.over:
        mask = game.legal_mask().astype(np.float32)
        targets.append(mask / mask.sum())
        moves = game.legal_moves()
        game.play(moves[rng.integers(len(moves))])
    return game.record(agent="random", rng_seed=rng_seed), targets


@pytest.fixture(scope="module")
def games() -> list[tuple[dm.GameRecord, list[Example]]]:
    out = []
    for i, (seed, level) in enumerate([(1234, 0), (777, 3), (4321, 10), (99, 15), (2024, 20), (31337, 24), (5, 0)]):
        record, targets = play_random(seed, level, rng_seed=i)
        out.append((record, game_examples(record, targets)))
    return out


@pytest.fixture(scope="module")
def all_examples(games) -> list[Example]:
    return [ex for _, exs in games for ex in exs]


# ---------------------------------------------------------------- examples from games


def test_game_examples_validate_and_count_down(games):
    outcomes = set()
    for record, examples in games:
        outcomes.add(record.outcome)
        n = len(record.moves)
        assert len(examples) == n > 0
        assert [ex.duration for ex in examples] == list(range(n, 0, -1))
        cleared = [ex.cleared for ex in examples] + [0]
        assert cleared[0] == record.viruses_cleared
        assert all(ex.won == won_target(record.outcome) for ex in examples)
        for i, ((game, move, result), ex) in enumerate(zip(record.steps(), examples)):
            assert ex.board == game.board and ex.pill == game.pill and ex.preview == game.next_pill
            assert cleared[i] - cleared[i + 1] == result.viruses_cleared  # the decision's own clears included
            legal = dm.legal_mask(ex.board, ex.pill)
            assert abs(float(ex.moves.sum()) - 1) < 1e-5
            assert (ex.moves[~legal] == 0).all() and (ex.moves[legal] > 0).all()
            if ex.pill.same_colour:
                assert np.array_equal(ex.moves[0:2], ex.moves[2:4])
            assert ex.moves[dm.canonical(ex.pill, move)] > 0  # the move played had mass
            ex.validate()
    assert {"topped_out", "stalemate"} <= outcomes


def test_game_examples_skip_the_decisions_without_a_target():
    """A None target (a fast search under playout cap randomisation): no example, and the others
    keep the whole game's counts."""
    record, targets = play_random(4321, 10, rng_seed=2)
    every = game_examples(record, targets)
    kept = [i for i in range(len(targets)) if i % 3 == 1]
    some = game_examples(record, [t if i in kept else None for i, t in enumerate(targets)])
    assert [(ex.duration, ex.cleared, ex.board) for ex in some] == [
        (every[i].duration, every[i].cleared, every[i].board) for i in kept
    ]


def test_won_targets():
    assert won_target("won") == 1 and won_target("topped_out") == -1 and won_target("stalemate") == 1
    assert won_target(dm.Outcome.STALEMATE, stalemate_won=-1) == -1
    with pytest.raises(ValueError, match="stalemate_won"):
        won_target("stalemate", 0)
    record, targets = play_random(1234, 24, rng_seed=3, stall_limit=2)
    assert record.outcome == "stalemate"
    assert {ex.won for ex in game_examples(record, targets, stalemate_won=-1)} == {-1}


def test_game_examples_errors():
    game = dm.Game(1234, 5)
    mask = game.legal_mask().astype(np.float32)
    game.play(game.legal_moves()[0])
    with pytest.raises(ValueError, match="not finished"):
        game_examples(game.record(), [mask / mask.sum()])
    record, targets = play_random(1234, 5, rng_seed=0)
    with pytest.raises(ValueError, match="targets for"):
        game_examples(record, targets[:-1])
    # A record cut short and called a stalemate (no 20 pills without a clear): its replay ends unfinished.
    cut = dataclasses.replace(record, moves=record.moves[:5], outcome="stalemate", pills_used=5)
    cut = dataclasses.replace(cut, viruses_cleared=sum(r.viruses_cleared for _, _, r in cut.steps()))
    with pytest.raises(ValueError, match="replay ends unfinished with .* but the record says stalemate"):
        game_examples(cut, targets[:5])
    ended = record.outcome
    other = "won" if ended != "won" else "topped_out"
    with pytest.raises(ValueError, match=f"replay ends {ended} .* the record says {other}"):
        game_examples(dataclasses.replace(record, outcome=other), targets)
    bad = [t.copy() for t in targets]
    bad[2] = bad[2] * 2
    with pytest.raises(ExampleError, match="decision 2: moves: probabilities sum to 2"):
        game_examples(record, bad)
    bad[0] = bad[1] = None  # decisions without an example: the error still names the decision
    with pytest.raises(ExampleError, match="decision 2: moves: probabilities sum to 2"):
        game_examples(record, bad)
    # same-colour targets given on r only are symmetrized
    asym = []
    for (g, _, _), t in zip(record.steps(), targets):
        t = t.copy()
        if g.pill.same_colour:
            t[0:2] += t[2:4]
            t[2:4] = 0
        asym.append(t)
    assert all(a == b for a, b in zip(game_examples(record, asym), game_examples(record, targets)))


# ---------------------------------------------------------------- JSON form


def test_json_round_trip(all_examples):
    for ex in all_examples:
        obj = ex.to_json()
        assert len(obj) == 7 and obj[1] == ex.pill.to_string() and len(obj[0]) == 128
        assert obj[6] == ex.preview.to_string()  # the kit writes the preview as a seventh element
        back = Example.from_json(json.loads(json.dumps(obj)))
        assert back.board == ex.board and back.pill == ex.pill and back.preview == ex.preview
        assert (back.won, back.cleared, back.duration) == (ex.won, ex.cleared, ex.duration)
        assert np.abs(back.moves - ex.moves).max() <= 6e-7
        assert back.to_json() == obj
        assert Example.from_json(ex.to_line()).to_json() == obj


def test_the_design_notes_six_element_form_still_reads(all_examples):
    ex = all_examples[3]
    row = ex.to_json()[:6]
    back = Example.from_json(row)
    assert back.preview is None and back.to_json() == row
    assert back.planes()[18:].sum() == 0 and ex.planes()[18:].sum() == 2 * 128  # unknown: preview planes off
    assert np.array_equal(back.planes()[:18], ex.planes()[:18])
    with pytest.raises(ExampleError, match="preview: pill 'xx'"):
        Example.from_json([*row, "xx"])


def test_design_note_example_on_an_empty_board():
    line = json.dumps(["d" * 128, "qw", 1, 0, 1, [[3, 5, 0.5], [6, 7, 0.2, 2, 4, 0.3], [], []]])
    # (3, 5) is not a resting place on an empty board: mass on it is rejected
    with pytest.raises(ExampleError, match=r"moves\[0\] triple 0: move \(r, x, y\) = \(0, 3, 5\) .* not a legal"):
        Example.from_json(line, where="note")
    ex = Example.from_json(["d" * 128, "qw", 1, 0, 1, [[3, 0, 0.5], [6, 0, 0.2, 2, 0, 0.3], [], []]])
    assert ex.moves[0, 3, 0] == 0.5 and ex.moves[1, 6, 0] == pytest.approx(0.2) and ex.moves.sum() == 1


def valid_row(all_examples, i=5):
    return all_examples[i].to_json()


def broken(row, kind):
    """A copy of a valid row with one kind of problem, and the message expected."""
    row = json.loads(json.dumps(row))
    board = dm.Board.from_string(row[0])
    moves = row[5]
    if kind == "arity":
        return row[:5], "expected an array of 6 or 7"
    if kind == "bad board":
        return [row[0][:20] + "h" + row[0][21:], *row[1:]], r"board: invalid letter 'h' at position 20 \(x=4, y=13\)"
    if kind == "short board":
        return [row[0][:-1], *row[1:]], "board: expected 128 letters, got 127"
    if kind == "bad pill":
        return [row[0], "uq", *row[2:]], "pill 'uq': letter 0 is 'u'"
    if kind == "won":
        return [*row[:2], 0, *row[3:]], "won must be -1 or 1, got 0"
    if kind == "negative count":
        return [*row[:3], -2, *row[4:]], r"cleared must be an integer in 0\.\.32767, got -2"
    if kind == "float count":
        return [*row[:4], 2.5, row[5]], "duration must be an integer in 0..32767, got 2.5"
    if kind == "sum":
        flat = next(f for f in moves if f)
        flat[2] += 0.01
        return row, r"moves: probabilities sum to 1\.0(1|099\d*), not 1 \(tolerance 0\.001\)"
    if kind in ("nested", "bool"):  # numpy would raise on a list inside, or read true as 1
        r, flat = next((r, f) for r, f in enumerate(moves) if f)
        flat[0] = [flat[0]] if kind == "nested" else True
        return row, rf"moves\[{r}\] triple 0: {re.escape(repr(flat[0]))} is not a number"
    if kind == "occupied":
        x, y = map(int, np.argwhere(board.cells)[0])
        moves[0] += [x, y, 0.0]  # p = 0 is allowed anywhere
        assert Example.from_json(row)
        moves[0][-1] = 0.001
        for flat in moves:
            flat[2::3] = [p * 0.999 for p in flat[2::3]]
        triple = len(moves[0]) // 3 - 1
        return row, rf"moves\[0\] triple {triple}: move \(r, x, y\) = \(0, {x}, {y}\) .* cell \({x}, {y}\) is occupied"
    raise ValueError(kind)


KINDS = [
    "arity",
    "bad board",
    "short board",
    "bad pill",
    "won",
    "negative count",
    "float count",
    "sum",
    "nested",
    "bool",
    "occupied",
]


@pytest.mark.parametrize("kind", KINDS)
def test_malformed_example_messages(all_examples, kind):
    row, message = broken(valid_row(all_examples), kind)
    with pytest.raises(ExampleError, match="^here:7: " + message):
        Example.from_json(row, where="here:7")


def test_illegal_and_asymmetric_moves_are_rejected(all_examples):
    ex = next(e for e in all_examples if not e.pill.same_colour)
    legal = dm.legal_mask(ex.board, ex.pill)
    empty_illegal = np.argwhere(~legal & (ex.board.cells == 0)[None])[0]
    moves = ex.moves.copy() * 0.5
    moves[tuple(empty_illegal)] = 0.5
    bad = Example(ex.board, ex.pill, ex.won, ex.cleared, ex.duration, moves)
    with pytest.raises(ExampleError, match="not a legal placement of pill"):
        bad.validate()
    same = next(e for e in all_examples if e.pill.same_colour)
    moves = same.moves.copy()
    r, x, y = np.argwhere(moves[:2] > 0)[0]
    moves[r, x, y] += 0.01
    moves[r + 2, x, y] -= 0.01
    with pytest.raises(ExampleError, match=f"planes {r} and {r + 2} must be equal, but at \\(x, y\\) = \\({x}, {y}\\)"):
        Example(same.board, same.pill, same.won, same.cleared, same.duration, moves).validate("x")
    moves = same.moves * (1 + SUM_TOLERANCE / 2)  # inside the tolerance
    Example(same.board, same.pill, same.won, same.cleared, same.duration, moves).validate()


@pytest.mark.parametrize("field", [3, 4])  # cleared, duration: int16 in the compact set
def test_counts_past_int16_are_refused_by_name(all_examples, field):
    name = "cleared" if field == 3 else "duration"
    good = valid_row(all_examples)
    at_limit, past = list(good), list(good)
    at_limit[field], past[field] = 32767, 32768
    decoded, errors = decode_rows([good, past, at_limit])
    assert len(decoded) == 2 and list(errors) == [1]
    assert errors[1] == f"{name} must be an integer in 0..32767, got 32768"
    assert getattr(decoded, name).tolist()[1] == 32767


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-5, 40),
            st.floats(allow_nan=True),
            st.text(max_size=3),
            st.lists(st.integers(-1, 20), max_size=7),
            st.lists(st.one_of(st.integers(-(10**30), 10**30), st.floats(), st.text(max_size=1)), max_size=7),
        ),
        min_size=6,
        max_size=6,
    ),
    st.integers(0, 5),
    st.integers(0, 6),
)
def test_fuzzed_rows_give_messages_not_crashes(values, field, keep):
    row = ["d" * 128, "qw", 1, 3, 4, [[3, 0, 0.5], [6, 0, 0.5], [], []]]
    for i in range(6):
        if i != field and i < keep:
            continue
        row[i] = values[i]
    decoded, errors = decode_rows([row])
    assert len(decoded) + len(errors) == 1
    if errors:
        assert isinstance(errors[0], str) and errors[0]


# ---------------------------------------------------------------- files


@pytest.mark.parametrize("name", ["ex.jsonl", "ex.jsonl.gz"])
def test_write_read_round_trip_with_sidecar(tmp_path, games, name):
    path = write_games(tmp_path / name, games, {"seed": 7, "levels": [0, 24], "search": {"kind": "random"}})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, "ex.meta.json"])  # no temp files left
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # not the temporary file's 0600
    if name.endswith(".gz"):
        with gzip.open(path) as f:
            assert f.readline().startswith(b'["')
    examples, report = read_examples(path)
    want = [ex for _, exs in games for ex in exs]
    assert len(examples) == len(want) == report.examples == report.lines and report.skipped == 0
    assert all(a.to_json() == b.to_json() for a, b in zip(examples, want))
    side = read_sidecar(path)
    assert side["examples"] == len(want) and side["meta"]["seed"] == 7 and side["meta"]["search"]["kind"] == "random"
    assert side["meta"]["code_version"] == dm.__version__ and side["meta"]["created"].endswith("+00:00")
    assert "git_commit" in side["meta"]
    firsts = np.cumsum([0] + [len(exs) for _, exs in games])[:-1]
    assert [(g["seed"], g["level"], g["first"], g["count"]) for g in side["games"]] == [
        (r.seed, r.level, int(f), len(exs)) for (r, exs), f in zip(games, firsts)
    ]
    assert [g["outcome"] for g in side["games"]] == [r.outcome for r, _ in games]


def test_sidecar_names_and_inferred_games(tmp_path, all_examples):
    assert sidecar_path("a/b.jsonl").as_posix() == "a/b.meta.json"
    assert sidecar_path("b.jsonl.gz").name == "b.meta.json"
    with pytest.raises(ValueError, match="jsonl"):
        sidecar_path("b.json")
    write_examples(tmp_path / "x.jsonl", iter(all_examples), {"note": "no games given"})
    side = read_sidecar(tmp_path / "x.jsonl")
    starts = [i for i, ex in enumerate(all_examples) if i == 0 or ex.duration != all_examples[i - 1].duration - 1]
    assert [g["first"] for g in side["games"]] == starts and {g["seed"] for g in side["games"]} == {None}


def test_write_refuses_invalid_examples_and_leaves_nothing(tmp_path, all_examples):
    ex = all_examples[3]
    bad = Example(ex.board, ex.pill, ex.won, ex.cleared, ex.duration, ex.moves * 3)
    with pytest.raises(ExampleError, match=r"example 4: moves: probabilities sum to 3"):
        write_examples(tmp_path / "bad.jsonl", [*all_examples[:4], bad], {})
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(TypeError):
        write_examples(tmp_path / "bad.jsonl", all_examples[:2], {"f": object()})
    with pytest.raises(ValueError, match="games table counts"):
        write_examples(tmp_path / "bad.jsonl", all_examples[:2], {}, games=[{"seed": 2, "level": 0, "count": 1}])
    assert list(tmp_path.iterdir()) == []


def test_atomic_writes_use_unique_temporary_files_and_clean_up(tmp_path):
    target = tmp_path / "x.txt"
    names = {temp_path(target).name for _ in range(100)}
    assert len(names) == 100 and all(n.startswith(f".x.txt.{os.getpid()}.") and n.endswith(".tmp") for n in names)
    assert write_atomic(target, "é\n") == target and target.read_bytes() == "é\n".encode()
    write_atomic(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
    with pytest.raises(RuntimeError, match="half-way"), atomic_file(target, "w") as f:
        f.write("half")
        raise RuntimeError("half-way")
    assert target.read_bytes() == b"\x00\x01" and [p.name for p in tmp_path.iterdir()] == ["x.txt"]
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "missing" / "y.txt", "y")
    with pytest.raises(ValueError, match="mode"):
        atomic_file(target, "a")  # type: ignore[call-overload]


def write_lines(path, lines):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt") as f:
        f.write("\n".join(lines) + "\n")


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_malformed_lines_reported_with_file_and_line(tmp_path, all_examples, suffix):
    good = [ex.to_line() for ex in all_examples[:30]]
    lines, bad_lines = list(good), {}
    for k, kind in enumerate(KINDS):
        row, message = broken(all_examples[10 + k].to_json(), kind)
        at = 3 + 3 * k  # 0-based line index
        lines.insert(at, json.dumps(row))
        bad_lines[at + 1] = message
    lines.insert(33, '["' + "d" * 128 + '", "qw", 1, 0')  # truncated JSON
    bad_lines = {(k if k <= 33 else k + 1): m for k, m in bad_lines.items()}
    bad_lines[34] = r"invalid JSON: Expecting ',' delimiter at the end of the line \(cut short\?\)"
    lines.insert(12, "   ")  # blank lines are not data
    bad_lines = {(k if k <= 12 else k + 1): m for k, m in bad_lines.items()}
    path = tmp_path / f"mixed{suffix}"
    write_lines(path, lines)

    first = min(bad_lines)
    with pytest.raises(ExampleError, match=f"^{path}:{first}: {bad_lines[first]}") as info:
        read_examples(path)
    assert info.value.line == first and info.value.path == str(path) and isinstance(info.value, ValueError)

    examples, report = read_examples(path, on_error="skip")
    assert report.on_error == "skip" and report.skipped == len(bad_lines) and report.blank == 1
    assert report.lines == len(lines) - 1 and report.examples == len(examples) == len(good)
    assert [ex.to_json() for ex in examples] == [ex.to_json() for ex in all_examples[:30]]
    assert report.error_lines == sorted(bad_lines)[:ERRORS_KEPT]  # every one counted, the first few kept
    for line, text in zip(report.error_lines, report.errors):
        assert text.startswith(f"{path}:{line}: ")
        assert re.search(bad_lines[line], text), (text, bad_lines[line])
    assert "on_error='skip'" in str(report) and f"{len(bad_lines)} bad lines skipped" in str(report)
    # read in chunks of 5 lines, as a large file is read in chunks of 4,096: the same lines named
    whole, _ = decode_file(path, "skip")
    chunked, chunked_report = decode_file(path, "skip", chunk_lines=5)
    assert chunked_report.error_lines == report.error_lines and chunked_report.errors == report.errors
    assert np.array_equal(chunked.index, whole.index)
    with pytest.raises(ExampleError, match=f"^{path}:{first}: "):
        decode_file(path, chunk_lines=5)


def test_truncated_gzip_is_not_silently_short(tmp_path, all_examples):
    path = tmp_path / "t.jsonl.gz"
    write_examples(path, all_examples, {})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(
        ExampleError, match=r"t.jsonl.gz:\d+: (the file ends after \d+ of the \d+ examples|invalid JSON)"
    ):
        read_examples(path)
    examples, report = read_examples(path, on_error="skip")
    assert report.warnings and 0 < len(examples) < len(all_examples)
    assert len(examples) + report.dropped == len(all_examples)  # every lost example counted
    assert [ex.to_json() for ex in examples] == [ex.to_json() for ex in all_examples[: len(examples)]]
    path.with_name("t.meta.json").unlink()  # without a sidecar, the lost end is one unreadable line
    examples, report = read_examples(path, on_error="skip")
    assert report.skipped >= 1 and any("cannot read line" in e for e in report.errors)


def test_a_damaged_gzip_stream_is_named_not_raised_as_a_zlib_error(tmp_path, all_examples):
    path = tmp_path / "t.jsonl.gz"
    write_examples(path, all_examples, {})
    whole = path.read_bytes()
    bad_block = bytearray(whole)
    bad_block[10] |= 0b110  # the first deflate block's type: 3, reserved (zlib: "invalid block type")
    path.write_bytes(bad_block)
    with pytest.raises(ExampleError, match=r"t.jsonl.gz:1: the file ends after 0 of the \d+ examples"):
        read_examples(path)
    examples, report = read_examples(path, on_error="skip")
    assert len(examples) == 0 and report.dropped == len(all_examples) and report.warnings
    bad_crc = bytearray(whole)
    bad_crc[-8] ^= 0xFF  # every line reads, then the stream fails its check
    path.write_bytes(bad_crc)
    with pytest.raises(
        ExampleError, match=r"t.jsonl.gz:\d+: every line was read, but the gzip stream failed its check"
    ):
        read_examples(path)
    examples, report = read_examples(path, on_error="skip")
    assert len(examples) == len(all_examples) and any("failed its check" in w for w in report.warnings)


def test_a_line_nested_too_deep_or_a_sidecar_not_an_object_is_named(tmp_path, all_examples):
    path = tmp_path / "t.jsonl"
    path.write_text("[" * 100_000 + "\n")
    with pytest.raises(ExampleError, match=r"t.jsonl:1: invalid JSON: maximum recursion depth"):
        read_examples(path)
    assert read_examples(path, on_error="skip")[1].skipped == 1
    with pytest.raises(ExampleError, match=r"<example>: invalid JSON: maximum recursion depth"):
        Example.from_json("[" * 100_000)
    write_examples(path, all_examples[:3], {})
    path.with_name("t.meta.json").write_text("[]")
    with pytest.raises(ValueError, match=r"t.meta.json: the sidecar must be a JSON object, not list"):
        read_sidecar(path)
    assert len(read_examples(path)[0]) == 3  # the examples themselves still read


# ---------------------------------------------------------------- colour augmentation


def test_colour_permutations():
    assert len(COLOUR_PERMUTATIONS) == 6 and len(set(COLOUR_PERMUTATIONS)) == 6
    assert COLOUR_PERMUTATIONS[0] == (dm.Colour.RED, dm.Colour.YELLOW, dm.Colour.BLUE)
    swap = colour_table((dm.Colour.YELLOW, dm.Colour.RED, dm.Colour.BLUE))
    assert swap[0] == 0 and chr(swap[ord("a") - 0x60] | 0x60) == "b" and chr(swap[ord("w") - 0x60] | 0x60) == "w"
    assert chr(swap[ord("q") - 0x60] | 0x60) == "r"
    with pytest.raises(ValueError, match="permutation"):
        colour_table((1, 1, 2))


def test_augmentation_keeps_positions_legal(all_examples):
    for ex in all_examples[::3]:
        legal = dm.legal_mask(ex.board, ex.pill)
        for perm in COLOUR_PERMUTATIONS:
            p = permute_colours(ex, perm)
            assert p.board.virus_count == ex.board.virus_count
            assert p.pill.same_colour == ex.pill.same_colour
            for renamed, pill in ((p.pill, ex.pill), (p.preview, ex.preview)):
                assert renamed == dm.Pill(dm.Colour(perm[pill.left - 1]), dm.Colour(perm[pill.right - 1]))
            assert np.array_equal(dm.legal_mask(p.board, p.pill), legal)
            assert set(dm.legal_moves(p.board, p.pill)) == set(dm.legal_moves(ex.board, ex.pill))
            assert np.array_equal(p.moves, ex.moves)
            p.validate()
            inverse = [0, 0, 0]
            for c, new in enumerate(perm):
                inverse[new - 1] = c + 1
            assert permute_colours(p, inverse) == ex


@pytest.mark.parametrize("perm", COLOUR_PERMUTATIONS[1:])
def test_permuted_game_replays_to_the_same_result(games, perm):
    """Renaming colours of the level (board and all pills) and replaying the same moves gives the
    same clears and outcome: the targets of a permuted example are exact."""
    record, examples = games[2]
    start = dm.new_level(record.seed, record.level)
    table = colour_table(perm)
    pills = tuple(dm.Pill(dm.Colour(perm[p.left - 1]), dm.Colour(perm[p.right - 1])) for p in start.pills)
    level = Level(start.seed, start.level, dm.Board._wrap(table[start.board.cells]), pills, start.rng_after_pills)
    game = dm.Game(record.seed, record.level, _level=level)
    for move, ex in zip(record.moves, examples):
        assert game.board == permute_colours(ex, perm).board
        game.play(move)
    assert game.outcome.value == record.outcome and game.viruses_cleared == record.viruses_cleared


def test_nes_pill_list_is_not_colour_symmetric():
    """The finding in the examples module docstring, on a sample of seeds: the right half of NES
    pills is yellow about 37.6 % of the time, red and blue about 31.2 % each; the left is even."""
    pills = np.array([(p.left, p.right) for s in range(2, 0x10000, 97) for p in dm.new_level(s, 0).pills])
    left = np.bincount(pills[:, 0], minlength=4)[1:] / len(pills)
    right = np.bincount(pills[:, 1], minlength=4)[1:] / len(pills)
    assert np.abs(left - 1 / 3).max() < 0.01
    assert 0.365 < right[1] < 0.385 and 0.30 < right[0] < 0.325 and 0.30 < right[2] < 0.325
