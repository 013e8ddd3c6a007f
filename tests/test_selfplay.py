"""Self-play runs: examples that validate, exact replays, and interruption without loss or duplicates."""

import gzip
import json

import numpy as np
import pytest

import drmario.play.selfplay as sp
from drmario.learn.dataset import load_examples
from drmario.learn.example_files import read_examples
from drmario.play.shards import done_games
from drmario.search import PuctSettings, Round0Settings, SearchConfig

SETTINGS = dict(
    games=6,
    levels=[0, 4],
    seed=3,
    games_per_shard=2,
    search=SearchConfig(mode="round0", simulations=6, round0=Round0Settings(root_rollouts=1)),
)


def shard_texts(run_dir):
    return {p.name: gzip.decompress(p.read_bytes()) for p in sorted((run_dir / "examples").glob("*.jsonl.gz"))}


def test_selfplay_writes_valid_examples_and_replayable_records(tmp_path):
    cfg = sp.SelfPlayConfig(**SETTINGS)
    table = sp.generate(cfg, tmp_path, progress=False)
    assert table.loc["all", "games"] == 6
    assert "search_kl" not in table and not table.isna().any().any()  # no network: no KL, no NaN column
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
    assert done_games(broken) == {0, 1}
    monkeypatch.setattr(sp, "play_shard", real)
    sp.generate(sp.SelfPlayConfig(**{**SETTINGS, "workers": 2}), broken, progress=False)  # resumed on more cores
    assert done_games(broken) == set(range(6))
    assert shard_texts(broken) == shard_texts(whole)
    assert [r.moves for r in sp.read_records(broken)] == [r.moves for r in sp.read_records(whole)]


def test_a_run_goes_on_only_with_the_weights_that_began_it(tmp_path, monkeypatch):
    from drmario.learn.checkpoint import save_net
    from drmario.learn.net import DrMarioNet, NetConfig

    net = tmp_path / "net.pt"
    save_net(DrMarioNet(NetConfig(filters=4, blocks=0)), net)
    cfg = sp.SelfPlayConfig(games=1, levels=[0], search=SearchConfig(mode="puct", simulations=2), network=str(net))
    monkeypatch.setattr(sp, "play_shard", lambda *args, **kwargs: None)  # the check, not the games
    sp.generate(cfg, tmp_path / "run", progress=False)
    record = json.loads((tmp_path / "run" / sp.NETWORK_FILE).read_text())
    assert record["checkpoint"] == str(net.resolve()) and len(record["sha256"]) == 64
    sp.generate(cfg, tmp_path / "run", progress=False)  # the same weights: goes on
    save_net(DrMarioNet(NetConfig(filters=4, blocks=0)), net)  # retrained in place (fresh weights)
    with pytest.raises(ValueError, match=r"holds other weights .* than the ones this run's games were played with"):
        sp.generate(cfg, tmp_path / "run", progress=False)


def test_other_settings_in_the_same_run_directory_are_refused(tmp_path):
    sp.generate(sp.SelfPlayConfig(**{**SETTINGS, "games": 2}), tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"selfplay.json holds other settings \(seed: \d+ -> 4\)"):
        sp.generate(sp.SelfPlayConfig(**{**SETTINGS, "games": 2, "seed": 4}), tmp_path, progress=False)
    (tmp_path / "selfplay.json").write_text('{"games": 2,')  # cut short
    with pytest.raises(ValueError, match=r"selfplay.json: cannot read the run's settings \(.*\); use a new run"):
        sp.generate(sp.SelfPlayConfig(**{**SETTINGS, "games": 2}), tmp_path, progress=False)


def test_a_run_begun_before_a_setting_existed_resumes(tmp_path):
    """selfplay.json written before Utility.rest_scale existed (the key absent) holds the same
    settings as its default; a value it never had is still refused."""
    cfg = sp.SelfPlayConfig(**{**SETTINGS, "games": 2})
    sp.generate(cfg, tmp_path, progress=False)
    stored = json.loads((tmp_path / "selfplay.json").read_text())
    del stored["search"]["utility"]["rest_scale"]
    (tmp_path / "selfplay.json").write_text(json.dumps(stored))
    sp.generate(cfg, tmp_path, progress=False)  # resumes (nothing left to play)
    stored["search"]["utility"]["no_such_setting"] = 1
    (tmp_path / "selfplay.json").write_text(json.dumps(stored))
    with pytest.raises(ValueError, match="cannot read the run's settings .*no_such_setting"):
        sp.generate(cfg, tmp_path, progress=False)


def test_bad_settings():
    with pytest.raises(ValueError, match="levels"):
        sp.SelfPlayConfig(levels=[30])
    with pytest.raises(ValueError, match="needs a network"):
        sp.SelfPlayConfig(search=SearchConfig(mode="puct"))
    with pytest.raises(ValueError, match="SelfPlayConfig: gmaes: not a setting"):
        sp.SelfPlayConfig.from_dict({"gmaes": 3})


def test_settings_the_self_play_never_reads_are_named_with_why():
    expert = sp.SelfPlayConfig(search=SearchConfig(mode="expert"))
    assert expert.why_unread("search.simulations") == "mode 'expert' does not read it"
    assert expert.why_unread("search.puct.c_puct") == "mode 'expert' does not read it (mode puct's setting)"
    assert expert.why_unread("network") is None  # a network given is still checked and loaded
    assert expert.why_unread("search.expert.depth") is None and expert.why_unread("epsilon") is None
    gumbel = sp.SelfPlayConfig(search=SearchConfig(mode="gumbel"), network="net.pt")
    assert gumbel.why_unread("search.gumbel.noise") is None and gumbel.why_unread("dtype") is None
    assert gumbel.why_unread("search.expert.depth") == "mode 'gumbel' does not read it (mode expert's setting)"
    assert gumbel.replace(labels="expert").why_unread("search.expert.depth") is None  # the labeller's depth
    assert gumbel.replace(rescue_after=10).why_unread("search.expert.depth") is None  # the rescuer's
    assert (
        gumbel.why_unread("fast_simulations") == "not read with full_search_share = 1 (every decision searched in full)"
    )
    assert gumbel.replace(full_search_share=0.5).why_unread("fast_simulations") is None
    assert gumbel.why_unread("temperature") == "not read with temperature_moves = 0 (no move sampled)"
    assert gumbel.replace(temperature_moves=8).why_unread("temperature") is None
    assert gumbel.why_unread("stalemate_won") is None  # the default stall limit ends stalled games
    assert (
        gumbel.replace(stall_limit=None).why_unread("stalemate_won")
        == "not read with stall_limit = None (no stalemates)"
    )
    puct = sp.SelfPlayConfig(search=SearchConfig(mode="puct", puct=PuctSettings(dirichlet_fraction=0)), network="n.pt")
    assert puct.why_unread("search.puct.dirichlet_alpha") == "not read with dirichlet_fraction = 0 (no root noise)"
    assert (
        sp.SelfPlayConfig(search=SearchConfig(mode="puct"), network="n.pt").why_unread("search.puct.dirichlet_alpha")
        is None
    )


def test_worker_processes_give_the_same_games(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    sp.generate(sp.SelfPlayConfig(**{**SETTINGS, "games": 4}), one, progress=False)
    sp.generate(sp.SelfPlayConfig(**{**SETTINGS, "games": 4, "workers": 2}), two, progress=False)
    assert shard_texts(one) == shard_texts(two)


def _no_space_left(cfg_dict, specs, run_dir, on_game):
    """A shard's play in a pool worker that fails as a full disk would (module level: spawn imports it)."""
    raise OSError(28, "No space left on device")


def test_a_pool_worker_s_error_names_the_shard_it_cut_short(tmp_path):
    from drmario.files import RunError
    from drmario.play.lockstep import GameSpec
    from drmario.play.workers import run_pool

    class Bar:
        def update(self, n=1):
            pass

    shards = [[GameSpec(8, 1234, 10)]]
    with pytest.raises(RunError, match=r"self-play shard-000008 failed: OSError: .*No space left on device") as info:
        run_pool(_no_space_left, {}, shards, tmp_path, 1, Bar())
    assert isinstance(info.value.__cause__, OSError) and str(tmp_path) in str(info.value)


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

    monkeypatch.setattr("drmario.progress.tqdm", Bar)
    sp.generate(sp.SelfPlayConfig(**{**SETTINGS, "games": 4, "workers": workers}), tmp_path, progress=False)
    assert updates == [0, 1, 1, 1, 1]  # one step per game, not one per shard of 2


def test_a_main_process_caller_gets_its_progress(tmp_path):
    """play_shard reports each game to the callback it is given, in any process."""
    cfg = sp.SelfPlayConfig(**SETTINGS)
    ended: list[int] = []
    summary = sp.play_shard(cfg.to_dict(), cfg.game_specs()[:2], str(tmp_path), on_game=lambda: ended.append(1))
    assert summary["games"] == 2 and ended == [1, 1]


EXPERT = dict(games=4, levels=[14, 18], seed=5, games_per_shard=4, stall_limit=None, max_pills=600)


def test_epsilon_plays_random_moves_and_keeps_the_teachers_targets(tmp_path):
    """With epsilon = 1 every move is random (the games end fast, in top-outs), and every example
    still holds the expert's choice at that position."""
    cfg = sp.SelfPlayConfig(**EXPERT, search=SearchConfig(mode="expert"), epsilon=1.0)
    sp.generate(cfg, tmp_path, progress=False)
    records = sp.read_records(tmp_path)
    assert all(r.outcome == "topped_out" for r in records)
    examples = load_examples(tmp_path / "examples", progress=False)
    assert (examples.won == -1).all() and len(examples) == sum(r.pills_used for r in records)
    expert_picks = [ex.moves for ex in read_examples(next((tmp_path / "examples").glob("*.gz")))[0]]
    played = [m for r in records for m in r.moves]
    assert sum(bool(t[m] > 0) for t, m in zip(expert_picks, played)) < len(played) / 2  # mostly not its picks


@pytest.mark.parametrize("depth", [2, 3])
def test_expert_labels_on_another_players_games(tmp_path, depth):
    """labels = expert: the games are the search's (here round-0 MCTS), the moves targets the
    expert's at the same positions (DAgger), at the run's expert depth."""
    from drmario.search import ExpertSettings, expert_search

    search = SETTINGS["search"].replace(expert=ExpertSettings(depth=depth))
    cfg = sp.SelfPlayConfig(**{**SETTINGS, "games": 2, "labels": "expert", "search": search})
    sp.generate(cfg, tmp_path, progress=False)
    [record, *_] = sp.read_records(tmp_path)
    examples, _ = read_examples(next((tmp_path / "examples").glob("*.gz")))
    positions = [sp.Position.of(game) for game, _, _ in record.steps()]
    seeds = list(range(len(positions)))
    labels = [set(map(tuple, np.argwhere(ex.moves))) for ex in examples]
    for ex, result in zip(examples, expert_search(positions, seeds, depth=depth)):
        assert ex.preview is not None
        assert set(map(tuple, np.argwhere(ex.moves))) == set(map(tuple, np.argwhere(result.target)))
    if depth == 3:  # not depth 2's labels
        depth2 = [set(map(tuple, np.argwhere(r.target))) for r in expert_search(positions, seeds, depth=2)]
        assert labels != depth2


def test_rescue_agent_hands_only_stalled_positions_to_the_teacher():
    from drmario.engine.board import Move, Pill
    from drmario.play.agents import Decision, RescueAgent

    class Fixed:  # answers every position with one move, and remembers the seeds it was asked
        def __init__(self, name, move):
            self.name, self.move, self.seen = name, move, []

        def choose(self, positions, seeds):
            self.seen += list(seeds)
            return [Decision(self.move) for _ in positions]

    learner, teacher = Fixed("net", Move(0, 0, 0)), Fixed("expert", Move(1, 1, 1))
    cells = np.zeros((8, 16), np.uint8)
    positions = [sp.Position(cells, Pill.from_string("qv"), stall=s) for s in (0, 5, 3, 4)]
    moves = [d.move for d in RescueAgent(learner, teacher, after=4).choose(positions, [10, 11, 12, 13])]
    assert moves == [learner.move, teacher.move, learner.move, teacher.move]
    assert learner.seen == [10, 12] and teacher.seen == [11, 13]
    with pytest.raises(ValueError, match="after"):
        RescueAgent(learner, teacher, after=0)


def test_rescued_stretches_are_the_experts_moves_and_targets(tmp_path):
    """rescue_after = 2: wherever a game has gone 2 pills without a clear, the move and the example's
    target are the expert's (sparse: its best moves), elsewhere round-0 MCTS's (every legal move > 0)."""
    from drmario.search import expert_search

    cfg = sp.SelfPlayConfig(**{**SETTINGS, "games": 2, "levels": [6], "stall_limit": None, "rescue_after": 2})
    table = sp.generate(cfg, tmp_path, progress=False)
    records = sp.read_records(tmp_path)
    examples = [ex for path in sorted((tmp_path / "examples").glob("*.gz")) for ex in read_examples(path)[0]]
    steps = [(game, move) for r in records for game, move, _ in r.steps()]
    rescued = [i for i, (game, _) in enumerate(steps) if game.stall >= 2]
    assert 0 < len(rescued) < len(steps)
    assert table.loc["all", "rescued"] == len(rescued) == sum(r.meta["rescued"] for r in records)
    positions = [sp.Position.of(steps[i][0]) for i in rescued]
    for i, result in zip(rescued, expert_search(positions, list(range(len(positions))))):
        target = examples[i].moves
        assert set(map(tuple, np.argwhere(target))) == set(map(tuple, np.argwhere(result.target)))
        assert target[steps[i][1]] == target.max()  # the move played is one of the expert's best
    others = [i for i in range(len(steps)) if i not in set(rescued)]
    assert all((examples[i].moves > 0).sum() > (examples[rescued[0]].moves > 0).sum() for i in others[:5])
    with pytest.raises(ValueError, match="rescue_after = 40"):
        sp.SelfPlayConfig(stall_limit=40, rescue_after=40)


def test_playout_cap_randomisation_writes_only_the_full_searches(tmp_path):
    """full_search_share 0.4: each decision is searched in full (6 simulations) or fast (1, its
    best move played) as its seed draws, and only the full searches become examples, with the value
    targets of the whole game."""
    from drmario.play.lockstep import decision_seed

    cfg = sp.SelfPlayConfig(**{**SETTINGS, "games": 4, "full_search_share": 0.4, "fast_simulations": 1})
    table = sp.generate(cfg, tmp_path, progress=False)
    agent = sp.make_agent(cfg)
    records = sp.read_records(tmp_path)
    examples = [ex for path in sorted((tmp_path / "examples").glob("*.gz")) for ex in read_examples(path)[0]]
    written = 0
    for record in records:
        n = record.pills_used
        full = [i for i in range(n) if agent.is_full(decision_seed(cfg.seed, record.meta["index"], i))]
        mine = examples[written : written + len(full)]
        assert record.meta["recorded"] == len(full) and [n - ex.duration for ex in mine] == full
        steps = list(record.steps())
        assert [ex.board for ex in mine] == [steps[i][0].board for i in full]
        cleared = [sum(result.viruses_cleared for _, _, result in steps[i:]) for i in full]
        assert [ex.cleared for ex in mine] == cleared  # the whole game's value targets
        written += len(full)
    assert written == len(examples) == table.loc["all", "positions"]
    assert 0.2 < written / table.loc["all", "pills"] < 0.6
    fast = agent.fast  # fewer simulations, no root noise
    assert fast.mode == "round0" and fast.simulations == 1 and fast.gumbel.noise == fast.puct.dirichlet_fraction == 0
    position = sp.Position.of(next(records[0].steps())[0])
    seeds = range(40)
    results = agent.search([position] * 40, seeds)
    assert [r.simulations for r in results] == [6 if agent.is_full(s) else 1 for s in seeds]
    explorer = sp.make_agent(cfg.replace(epsilon=1.0))  # every full search's move at random
    decisions = [explorer.decide(r, s, 0) for r, s in zip(results, seeds)]
    assert [d.recorded for d in decisions] == [agent.is_full(s) for s in seeds]
    assert all(d.move == d.search.best for d in decisions if not d.recorded)  # no exploration when fast
    assert any(d.move != d.search.best for d in decisions if d.recorded)
    full_kl = np.mean([d.search.kl() for d in decisions if d.recorded])  # a game's search_kl: full searches only
    assert (
        sp._mean_kl(decisions)
        == round(float(full_kl), 5)
        != round(float(np.mean([d.search.kl() for d in decisions])), 5)
    )
    with pytest.raises(ValueError, match="needs fast_simulations in"):
        sp.SearchAgent(SETTINGS["search"], full_search_share=0.5)
    with pytest.raises(ValueError, match="fast_simulations = 6"):
        sp.SelfPlayConfig(**{**SETTINGS, "full_search_share": 0.5, "fast_simulations": 6})
    with pytest.raises(ValueError, match="no simulations to cap"):
        sp.SelfPlayConfig(search=SearchConfig(mode="expert"), full_search_share=0.5)


def test_expert_labels_only_the_full_searches(tmp_path):
    """labels = expert with full_search_share 0.5: the expert labels the recorded decisions alone,
    with the targets it gives those positions."""
    from drmario.search import expert_search

    settings = {**SETTINGS, "games": 2, "labels": "expert", "full_search_share": 0.5, "fast_simulations": 1}
    sp.generate(sp.SelfPlayConfig(**settings), tmp_path, progress=False)
    [record, *_] = sp.read_records(tmp_path)
    examples, _ = read_examples(next((tmp_path / "examples").glob("*.gz")))
    examples = examples[: record.meta["recorded"]]
    steps = list(record.steps())
    full = [record.pills_used - ex.duration for ex in examples]
    assert 0 < len(full) < len(steps)
    positions = [sp.Position.of(steps[i][0]) for i in full]
    for ex, result in zip(examples, expert_search(positions, full)):
        assert set(map(tuple, np.argwhere(ex.moves))) == set(map(tuple, np.argwhere(result.target)))


def test_shard_names_are_read_by_number_past_six_digits(tmp_path):
    from drmario.play.shards import shard_first, shard_path

    assert shard_first(shard_path(tmp_path, 12)) == 12
    assert shard_first(shard_path(tmp_path, 1_000_000)) == 1_000_000
    assert shard_first(tmp_path / "records" / "shard-1000000.jsonl") == 1_000_000
    with pytest.raises(ValueError, match="not a shard file name"):
        shard_first(tmp_path / "shard-x.jsonl.gz")


def test_a_damaged_shard_past_game_999999_replays_only_its_own_games(tmp_path):
    import json

    from drmario.play.shards import set_aside_damaged, shard_path

    # Neither shard has a sidecar or records, so each one's games are guessed from its first game up
    # to the next shard's first: by name, shard-1000000 sorts before shard-999990 and the guess spans both.
    (tmp_path / "selfplay.json").write_text(json.dumps({"games": 1_000_010}))
    for first in (999_990, 1_000_000):
        path = shard_path(tmp_path, first)
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"")
    said: list[str] = []
    assert set_aside_damaged(tmp_path, said.append) == ["shard-999990.jsonl.gz", "shard-1000000.jsonl.gz"]
    assert "its 10 game(s) are played again (games 999990..999999;" in said[0]
    assert "its 10 game(s) are played again (games 1000000..1000009;" in said[1]
    assert (tmp_path / "examples" / "shard-1000000.jsonl.gz.damaged").exists()
    shard_path(tmp_path, 1_000_000).write_bytes(b"x")  # played again, damaged again: the first evidence stays
    assert set_aside_damaged(tmp_path, said.append) == ["shard-1000000.jsonl.gz"]
    assert said[-1].endswith("old files: *.damaged2)")
    assert (tmp_path / "examples" / "shard-1000000.jsonl.gz.damaged").read_bytes() == b""
    assert (tmp_path / "examples" / "shard-1000000.jsonl.gz.damaged2").read_bytes() == b"x"


def test_game_specs_cycle_the_levels_and_draw_each_games_seed_from_the_run_seed_and_its_number():
    specs = sp.SelfPlayConfig(seed=3, games=2000, levels=[0, 4, 20]).game_specs()
    assert [s.level for s in specs[:7]] == [0, 4, 20, 0, 4, 20, 0]
    assert [s.number for s in specs] == list(range(2000))
    # independent draws among 49,151 self-play seeds: about 40 of 2,000 repeat an earlier one
    assert 1900 < len({s.seed for s in specs}) < 2000
    assert specs[:5] == sp.SelfPlayConfig(seed=3, games=5, levels=[0, 4, 20]).game_specs()  # a prefix of the run
    other = sp.SelfPlayConfig(seed=4, games=5, levels=[0, 4, 20]).game_specs()
    assert {s.seed for s in specs[:5]}.isdisjoint(s.seed for s in other)  # another run seed, other games
