"""Self-play runs: examples that validate, exact replays, and interruption without loss or duplicates."""

import gzip

import pytest

import drmario.play.selfplay as sp
from drmario.learn.dataset import load_examples
from drmario.learn.example_files import read_examples
from drmario.search.searcher import SearchConfig

SETTINGS = dict(games=6, levels=[0, 4], seed=3, games_per_shard=2, search=SearchConfig(simulations=6, root_rollouts=1))


def shard_texts(run_dir):
    return {p.name: gzip.decompress(p.read_bytes()) for p in sorted((run_dir / "examples").glob("*.jsonl.gz"))}


def test_selfplay_writes_valid_examples_and_replayable_records(tmp_path):
    cfg = sp.SelfPlayConfig(**SETTINGS)
    table = sp.generate(cfg, tmp_path, progress=False)
    assert table.loc["all", "games"] == 6
    records = sp.read_records(tmp_path)
    assert [r.meta["index"] for r in records] == list(range(6))
    assert [(r.seed, r.level) for r in records] == [(s.seed, s.level) for s in cfg.game_specs()]
    total = 0
    for path in sorted((tmp_path / "examples").glob("*.jsonl.gz")):
        examples, report = read_examples(path)  # validates every line
        assert report.skipped == 0
        total += len(examples)
    for record in records:
        game = record.replay()
        assert game.over and game.viruses_cleared == record.viruses_cleared
    assert total == sum(r.pills_used for r in records) == table.loc["all", "positions"]
    examples = load_examples(tmp_path / "examples", progress=False)
    assert len(set(examples.game.tolist())) == 6


def test_interrupted_run_resumes_without_losing_or_duplicating(tmp_path, monkeypatch):
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    sp.generate(sp.SelfPlayConfig(**SETTINGS), whole, progress=False)

    real, calls = sp.play_shard, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # stopped while the second shard was being played
        return real(*args, **kwargs)

    monkeypatch.setattr(sp, "play_shard", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sp.generate(sp.SelfPlayConfig(**SETTINGS), broken, progress=False)
    assert sp.done_games(broken) == {0, 1}
    monkeypatch.setattr(sp, "play_shard", real)
    sp.generate(sp.SelfPlayConfig(**SETTINGS), broken, progress=False)
    assert sp.done_games(broken) == set(range(6))
    assert shard_texts(broken) == shard_texts(whole)
    assert [r.moves for r in sp.read_records(broken)] == [r.moves for r in sp.read_records(whole)]


def test_other_settings_in_the_same_run_directory_are_refused(tmp_path):
    sp.generate(sp.SelfPlayConfig(**{**SETTINGS, "games": 2}), tmp_path, progress=False)
    with pytest.raises(ValueError, match="other settings"):
        sp.generate(sp.SelfPlayConfig(**{**SETTINGS, "games": 2, "seed": 4}), tmp_path, progress=False)


def test_bad_settings():
    with pytest.raises(ValueError, match="levels"):
        sp.SelfPlayConfig(levels=[30])
    with pytest.raises(ValueError, match="needs a network"):
        sp.SelfPlayConfig(search=SearchConfig(mode="puct"))
    with pytest.raises(ValueError, match="SelfPlayConfig: gmaes: not a setting"):
        sp.SelfPlayConfig.from_dict({"gmaes": 3})


def test_worker_processes_give_the_same_games(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    sp.generate(sp.SelfPlayConfig(**{**SETTINGS, "games": 4}), one, progress=False)
    sp.generate(sp.SelfPlayConfig(**{**SETTINGS, "games": 4, "workers": 2}), two, progress=False)
    assert shard_texts(one) == shard_texts(two)


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_counts_each_game_as_it_ends(tmp_path, monkeypatch, workers):
    updates: list[int] = []

    class Bar:  # records what the self-play bar would show
        def __init__(self, *args, **kwargs):
            self.mine = kwargs.get("desc") == "self-play games"
            if self.mine:
                updates.append(kwargs.get("initial", 0))

        def update(self, n=1):
            if self.mine:
                updates.append(n)

        def close(self):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr("tqdm.auto.tqdm", Bar)
    sp.generate(sp.SelfPlayConfig(**{**SETTINGS, "games": 4, "workers": workers}), tmp_path, progress=False)
    assert updates == [0, 1, 1, 1, 1]  # one step per game, not one per shard of 2
