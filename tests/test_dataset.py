"""Loading example files into the compact ExampleSet: games, split, cache, device batches."""

import json
import os
import sys
import warnings
from dataclasses import fields, replace

import numpy as np
import pytest
import torch

import drmario as dm
from drmario.learn import dataset
from drmario.learn.dataset import ExampleSet, augment_colours, cache_path, example_files, load_examples
from drmario.learn.encode import planes
from drmario.learn.example_files import sidecar_path, write_games
from drmario.learn.examples import COLOUR_PERMUTATIONS, ExampleError, colour_table, game_examples


def random_games(n: int, seed: int) -> list[tuple[dm.GameRecord, list]]:
    """n finished random games (levels 0-20) with uniform targets over the legal moves."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        game = dm.Game(int(rng.integers(2, 0x10000)), int(rng.integers(0, 21)))
        targets = []
        while not game.over:
            mask = game.legal_mask().astype(np.float32)
            targets.append(mask / mask.sum())
            moves = game.legal_moves()
            game.play(moves[rng.integers(len(moves))])
        record = game.record()
        out.append((record, game_examples(record, targets)))
    return out


@pytest.fixture(scope="module")
def game_sets() -> list[list]:
    return [random_games(6, seed) for seed in range(3)]


@pytest.fixture
def folder(tmp_path, game_sets):
    write_games(tmp_path / "a.jsonl", game_sets[0], {"seed": 0})
    write_games(tmp_path / "b.jsonl.gz", game_sets[1], {"seed": 1})
    (tmp_path / "sub").mkdir()
    write_games(tmp_path / "sub" / "c.jsonl", game_sets[2], {"seed": 2})
    return tmp_path


def arrays_equal(a: ExampleSet, b: ExampleSet) -> bool:
    return all(np.array_equal(getattr(a, f.name), getattr(b, f.name)) for f in fields(ExampleSet))


def flat_examples(game_sets):
    return [ex for games in game_sets for _, exs in games for ex in exs]


def test_load_files_with_sidecars(folder, game_sets):
    reports = []
    es = load_examples(folder, progress=False, reports=reports)
    want = flat_examples(game_sets)
    assert len(es) == len(want) and [r.games_from for r in reports] == ["sidecar"] * 3
    assert [os.path.basename(r.path) for r in reports] == ["a.jsonl", "b.jsonl.gz", "c.jsonl"]
    assert len(np.unique(es.game)) == sum(len(g) for g in game_sets)
    # every game id holds one whole game: durations n..1, in file order
    for g in np.unique(es.game):
        d = es.duration[es.game == g]
        assert d.tolist() == list(range(len(d), 0, -1))
    assert np.array_equal(es.cells, np.stack([ex.board.cells for ex in want]))
    assert es.pills.tolist() == [[ex.pill.left, ex.pill.right] for ex in want]
    assert es.won.tolist() == [ex.won for ex in want] and es.cleared.tolist() == [ex.cleared for ex in want]
    dense = es.dense_moves()
    assert np.allclose(dense.sum(axis=(1, 2, 3)), 1, atol=1e-6)  # renormalised
    assert np.abs(dense - np.stack([ex.moves for ex in want])).max() < 2e-6
    legal = es.legal()
    assert all(np.array_equal(legal[i], dm.legal_mask(ex.board, ex.pill)) for i, ex in enumerate(want))
    assert ((dense > 0) <= legal).all()
    assert es.nbytes / len(es) < 1000  # compact: no planes, no dense targets


def test_split_by_game_leaves_no_game_on_both_sides(folder):
    es = load_examples(folder, progress=False)
    n_games = len(np.unique(es.game))
    assert n_games >= 4
    test_sets = set()
    for seed in range(5):
        train, test = es.split_by_game(0.25, seed)
        assert len(train) + len(test) == len(es) and len(test) > 0
        assert not set(train.game.tolist()) & set(test.game.tolist())
        assert sorted(np.concatenate([train.game, test.game]).tolist()) == sorted(es.game.tolist())
        assert 1 <= len(np.unique(test.game)) < n_games
        test_sets.add(tuple(np.unique(test.game)))
        assert np.array_equal(es.split_by_game(0.25, seed)[1].game, test.game)  # the seed decides
    assert len(test_sets) > 1  # ... and other seeds choose other games


def first_boards(examples: ExampleSet) -> set[bytes]:
    """Each game's first example, as bytes: a game's identity across loads (its id depends on the load)."""
    _, first = np.unique(examples.game, return_index=True)
    return {examples.cells[i].tobytes() + examples.pills[i].tobytes() for i in first}


def test_a_games_side_does_not_depend_on_the_other_games_loaded(folder):
    # a later round trains on the earlier rounds' games and new ones, from a network trained on the earlier
    # ones: their held-out games must stay held out, or its test rows measure what the network memorised
    alone = load_examples(folder / "a.jsonl", progress=False, augment=True)
    every = load_examples(folder, progress=False, augment=True)
    for seed in range(4):
        train_a, test_a = alone.split_by_game(0.4, seed)
        train_all, test_all = every.split_by_game(0.4, seed)
        assert first_boards(test_a) <= first_boards(test_all)
        assert first_boards(train_a) <= first_boards(train_all)
        assert not first_boards(train_all) & first_boards(test_all)
    # the same game loaded twice (an NES seed played again) falls on one side
    twice = ExampleSet.concat([alone, replace(alone, game=alone.game + 1000)])
    train, test = twice.split_by_game(0.4, 0)
    assert not first_boards(train) & first_boards(test) and len(test) and len(train)
    one = alone.subset(np.nonzero(alone.game == alone.game[0])[0])  # one game twice: alike, so on one side
    sides = ExampleSet.concat([one, replace(one, game=one.game + 1)]).split_by_game(0.4, 0)
    assert sorted(len(np.unique(side.game)) for side in sides) == [0, 2]


def test_position_keys_are_one_per_decision_whatever_the_colouring_and_the_load(folder):
    alone = load_examples(folder / "a.jsonl", progress=False, augment=True)
    every = load_examples(folder, progress=False, augment=True)
    keys = alone.position_keys(seed=3)
    assert keys.shape == (len(alone),) and ((keys >= 0) & (keys < 1)).all()
    n = len(alone) // 6  # six colour renamings, in blocks: each decision's copies share its key
    assert np.array_equal(keys.reshape(6, n), np.broadcast_to(keys[:n], (6, n)))
    assert len(np.unique(keys[:n])) == n  # and every decision has its own

    # a decision keeps its key beside other games (a later round's load): match decisions by content
    def by_decision(es: ExampleSet, k: np.ndarray) -> dict[bytes, float]:
        return {
            es.cells[i].tobytes() + es.pills[i].tobytes() + bytes([es.duration[i] % 256]): k[i] for i in range(len(es))
        }

    assert by_decision(alone, keys).items() <= by_decision(every, every.position_keys(seed=3)).items()
    assert not np.array_equal(keys, alone.position_keys(seed=4))
    share = (every.position_keys(seed=0) < 0.3).mean()
    assert 0.2 < share < 0.4  # about the share, from some 300 decisions of 18 games


def test_the_held_out_share_is_test_fraction_of_the_games():
    rng = np.random.default_rng(0)
    n = 4000  # games of one example each, with random boards
    cells = rng.integers(0, 3, (n, 8, 16)).astype(np.uint8)
    pills = rng.integers(1, 4, (n, 2)).astype(np.uint8)
    keys = dataset.game_keys(cells, pills, np.zeros_like(pills), seed=5)
    assert keys.shape == (n,) and ((keys >= 0) & (keys < 1)).all()
    assert abs((keys < 0.1).mean() - 0.1) < 0.02  # binomial sd 0.005
    assert not np.array_equal(keys, dataset.game_keys(cells, pills, np.zeros_like(pills), seed=6))


def test_games_inferred_without_sidecar(folder):
    with_sidecar = load_examples(folder, progress=False, cache=False)
    for f in example_files(folder):
        sidecar_path(f).unlink()
    reports = []
    inferred = load_examples(folder, progress=False, cache=False, reports=reports)
    assert {r.games_from for r in reports} == {"duration countdown"}
    assert np.array_equal(inferred.game, with_sidecar.game)


def test_inconsistent_sidecar(folder):
    side = sidecar_path(folder / "a.jsonl")
    meta = json.loads(side.read_text())
    meta["games"][0]["count"] += 1
    side.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="a.meta.json"):
        load_examples(folder / "a.jsonl", progress=False)
    reports = []
    with pytest.warns(UserWarning, match="duration countdown"):
        es = load_examples(folder / "a.jsonl", progress=False, on_error="skip", reports=reports)
    assert reports[0].games_from == "duration countdown" and reports[0].games == len(np.unique(es.game))
    with pytest.raises(ValueError, match="a.meta.json"):  # the cache made by "skip" does not hide it
        load_examples(folder / "a.jsonl", progress=False)


def test_cache_hit_is_identical_and_invalidated_by_changes(folder, game_sets):
    target = folder / "a.jsonl"
    assert not cache_path(target).exists()
    reports = []
    first = load_examples(folder, progress=False, reports=reports)
    assert all(cache_path(f).exists() for f in example_files(folder)) and not any(r.cached for r in reports)
    reports.clear()
    second = load_examples(folder, progress=False, reports=reports)
    assert all(r.cached for r in reports) and arrays_equal(first, second)
    assert [r.games for r in reports] == [len(g) for g in game_sets]

    # rewrite one file with fewer games: its cache is stale, the others still hit
    write_games(target, game_sets[0][:3], {"seed": 0})
    reports.clear()
    third = load_examples(folder, progress=False, reports=reports)
    assert [r.cached for r in reports] == [False, True, True]
    assert len(third) == len(first) - sum(len(e) for _, e in game_sets[0][3:])
    assert arrays_equal(third, load_examples(folder, progress=False, cache=False))

    # an edit that keeps the size (same length line swapped) changes the mtime
    lines = target.read_text().splitlines(keepends=True)
    lines[0], lines[1] = lines[1], lines[0]
    target.write_text("".join(lines))
    os.utime(target, ns=(10**18, 10**18))
    reports.clear()
    fourth = load_examples(target, progress=False, reports=reports)
    assert not reports[0].cached
    assert np.array_equal(fourth.cells[0], third.cells[1])


def test_cache_is_keyed_by_content_not_size_or_mtime(folder):
    target = folder / "a.jsonl"
    first = load_examples(target, progress=False)
    before = target.stat()
    lines = target.read_text().splitlines(keepends=True)
    assert lines[0] != lines[1]
    lines[0], lines[1] = lines[1], lines[0]  # same size
    target.write_text("".join(lines))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the old modification time
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    reports = []
    second = load_examples(target, progress=False, reports=reports)
    assert not reports[0].cached
    assert np.array_equal(second.cells[0], first.cells[1]) and np.array_equal(second.cells[1], first.cells[0])
    reports.clear()
    load_examples(target, progress=False, reports=reports)
    assert reports[0].cached


def test_cache_is_keyed_by_the_decoding_code(folder, tmp_path, monkeypatch):
    target = folder / "a.jsonl"
    load_examples(target, progress=False)
    key = dataset.cache_key(target)
    # a changed module among the decoding code gives another key, and the cache is not used
    module = tmp_path / "code" / "fake_decoder.py"
    module.parent.mkdir()
    module.write_text("RULE = 1\n")
    monkeypatch.syspath_prepend(str(module.parent))
    monkeypatch.setattr(dataset, "CODE_MODULES", (*dataset.CODE_MODULES, "fake_decoder"))
    dataset.code_digest.cache_clear()
    try:
        changed = dataset.cache_key(target)
        module.write_text("RULE = 2\n")
        dataset.code_digest.cache_clear()
        assert len({key, changed, dataset.cache_key(target)}) == 3
        reports = []
        load_examples(target, progress=False, reports=reports)
        assert not reports[0].cached
    finally:
        dataset.code_digest.cache_clear()
        sys.modules.pop("fake_decoder", None)


def test_cache_remembers_skipped_lines(folder):
    target = folder / "a.jsonl"
    with open(target, "a") as f:
        f.write('["not a board", "qu", 1, 0, 1, [[], [], [], []]]\n')
    sidecar_path(target).unlink()  # the sidecar no longer describes the file
    with pytest.raises(ExampleError, match=r"a.jsonl:\d+: board: expected 128 letters"):
        load_examples(target, progress=False)
    assert not cache_path(target).exists()
    with pytest.warns(UserWarning, match="1 bad lines skipped"):
        skipped = load_examples(target, progress=False, on_error="skip")
    assert cache_path(target).exists()
    with pytest.raises(ExampleError, match=r"a.jsonl:\d+: board: expected 128 letters"):
        load_examples(target, progress=False)  # from the cache, still not silent
    reports = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = load_examples(target, progress=False, on_error="skip", reports=reports)
    assert reports[0].cached and reports[0].skipped == 1 and arrays_equal(skipped, again)


def test_paths_globs_and_errors(folder):
    n_all = len(load_examples(folder, progress=False))
    n_a, n_b, n_c = (len(load_examples(folder / f, progress=False)) for f in ("a.jsonl", "b.jsonl.gz", "sub/c.jsonl"))
    assert len(load_examples(str(folder / "*.jsonl*"), progress=False)) == n_a + n_b
    assert len(load_examples(str(folder / "**" / "*.jsonl"), progress=False)) == n_a + n_c
    assert n_a + n_b + n_c == n_all
    assert len(load_examples([folder / "a.jsonl", folder, folder / "a.jsonl"], progress=False)) == n_all
    assert n_a < n_all
    with pytest.raises(FileNotFoundError):
        load_examples(folder / "missing.jsonl", progress=False)
    with pytest.raises(FileNotFoundError):
        load_examples(str(folder / "*.nothing"), progress=False)
    with pytest.raises(ValueError, match="on_error"):
        load_examples(folder, progress=False, on_error="ignore")


def test_progress_output(folder, capsys):
    load_examples(folder, progress=True)
    out = capsys.readouterr().out
    assert "on_error='raise'" in out and "examples" in out
    load_examples(folder, progress=False)
    assert capsys.readouterr().out == ""
    load_examples(folder, progress=False, summary=True)  # the line alone (train --no-progress)
    assert capsys.readouterr().out.startswith("loaded ")


def test_device_batch_matches_numpy(folder):
    es = load_examples(folder, progress=False)
    dev = es.to_device("cpu")
    idx = np.random.default_rng(0).choice(len(es), 37, replace=False)
    batch = dev.batch(torch.from_numpy(idx))
    assert (es.previews[idx] > 0).all()  # the kit writes the preview
    assert np.array_equal(batch.planes.numpy(), planes(es.cells[idx], es.pills[idx], es.previews[idx]))
    assert np.array_equal(batch.moves.numpy(), es.dense_moves()[idx])
    assert np.array_equal(batch.legal.numpy(), es.legal()[idx])
    assert batch.won.tolist() == es.won[idx].tolist() and batch.duration.tolist() == es.duration[idx].tolist()
    assert batch.cleared.tolist() == es.cleared[idx].tolist()


def test_augment_gives_six_colourings_per_example(folder):
    es = load_examples(folder, progress=False)
    aug = load_examples(folder, progress=False, augment=True)
    n = len(es)
    assert len(aug) == 6 * n and np.array_equal(aug.game, np.tile(es.game, 6))
    assert (es.previews > 0).all() and len(np.unique(es.pills)) == 3  # every colour to rename
    for k, perm in enumerate(COLOUR_PERMUTATIONS):
        block = aug.subset(np.arange(k * n, (k + 1) * n))
        assert np.array_equal(block.cells, colour_table(perm)[es.cells])
        assert np.array_equal(block.legal_bits, es.legal_bits) and np.array_equal(block.move_prob, es.move_prob)
        rename = np.array([0, *perm], np.uint8)  # the pill in hand and the preview renamed as the board is
        assert np.array_equal(block.pills, rename[es.pills]) and np.array_equal(block.previews, rename[es.previews])
        # the engine agrees that the legal moves did not change
        for i in range(0, n, 17):
            board, pill = dm.Board(block.cells[i]), dm.Pill(dm.Colour(block.pills[i, 0]), dm.Colour(block.pills[i, 1]))
            assert np.array_equal(dm.legal_mask(board, pill), es.legal()[i])
    train, test = aug.split_by_game(0.3, 1)
    assert not set(train.game.tolist()) & set(test.game.tolist())
    assert len(augment_colours(es, COLOUR_PERMUTATIONS[:2])) == 2 * n


def test_empty_files(tmp_path):
    (tmp_path / "e.jsonl").write_text("")
    es = load_examples(tmp_path, progress=False)
    assert len(es) == 0 and es.dense_moves().shape == (0, 4, 8, 16)


def test_a_file_cut_short_keeps_its_sidecar_games(folder, game_sets):
    """The sidecar's games still hold for the lines a cut file has: no guessing from the countdown
    (which splits a game whose durations skip, as playout cap randomisation's do)."""
    target = folder / "a.jsonl"
    lines = target.read_text().splitlines(keepends=True)
    target.write_text("".join(lines[:-3]))
    with pytest.raises(ExampleError, match="cut short"):
        load_examples(target, progress=False, cache=False)
    reports = []
    with pytest.warns(UserWarning, match="3 examples missing"):
        es = load_examples(target, progress=False, on_error="skip", reports=reports, cache=False)
    assert reports[0].games_from == "sidecar"
    sizes = [len(exs) for _, exs in game_sets[0]]
    assert sizes[-1] > 3 and np.bincount(es.game).tolist() == [*sizes[:-1], sizes[-1] - 3]


def test_a_file_longer_than_its_sidecar_says_so(folder):
    target = folder / "a.jsonl"
    lines = target.read_text().splitlines(keepends=True)
    target.write_text("".join(lines + lines[:2]))
    listed = len(lines)
    with pytest.raises(
        ExampleError, match=rf"a.jsonl:{listed + 1}: .*holds {listed + 2} examples, its sidecar lists {listed}"
    ):
        load_examples(target, progress=False, cache=False)
    with pytest.warns(UserWarning, match=f"its sidecar lists {listed}"):
        load_examples(target, progress=False, on_error="skip", cache=False)


def test_sidecar_games_survive_blank_and_skipped_lines(folder, game_sets):
    target = folder / "a.jsonl"
    lines = target.read_text().splitlines(keepends=True)
    lines[5] = '["corrupted"]\n'  # example 5 is lost, in place
    lines.insert(3, "\n")  # a blank line is not an example: the sidecar's line index skips it
    target.write_text("".join(lines))
    reports = []
    with pytest.warns(UserWarning, match="1 bad lines skipped"):
        es = load_examples(target, progress=False, on_error="skip", reports=reports)
    assert reports[0].games_from == "sidecar" and reports[0].error_lines == [7] and reports[0].blank == 1
    sizes = [len(exs) for _, exs in game_sets[0]]
    assert np.bincount(es.game).tolist() == [sizes[0] - 1, *sizes[1:]]
    want = [ex for _, exs in game_sets[0] for ex in exs]
    del want[5]
    assert es.duration.tolist() == [ex.duration for ex in want]


def test_target_spread_counts_a_same_colour_placement_once():
    pills = np.array([[1, 1], [1, 2]], np.uint8)
    moves = np.zeros((2, 4, 8, 16), np.float32)
    moves[0, 0, 3, 0] = moves[0, 2, 3, 0] = 0.5  # a same-colour pill: one placement, its two slots
    moves[1, 0, 3, 0], moves[1, 1, 5, 0] = 0.75, 0.25
    ones = np.ones(2, np.int64)
    es = ExampleSet.from_dense(np.zeros((2, 8, 16), np.uint8), pills, ones, 0 * ones, ones, moves, np.arange(2))
    spread = dataset.target_spread(es)
    assert spread["placements with mass"].tolist() == [1, 2]
    assert np.allclose(spread["top placement share"], [1.0, 0.75])
    one = es.example(1)
    assert str(one.pill) == str(dm.Pill(1, 2)) and one.preview is None and one.moves[1, 5, 0] == 0.25
    assert one.board == dm.Board(np.zeros((8, 16), np.uint8)) and (one.won, one.cleared, one.duration) == (1, 0, 1)
