"""The gate: paired tests on made-up records, the decision, and the run's best network."""

import json

import numpy as np
import pytest

from drmario.engine.game import GameRecord
from drmario.engine.level import EVALUATION_SEEDS, GATING_SEEDS, SELFPLAY_SEEDS
from drmario.files import file_sha256, played_network
from drmario.play.gate import GateConfig, bootstrap_interval, compare, mcnemar_fewer_p, mcnemar_p, sign_flip_p
from drmario.run.rounds import (
    GATE_FILE,
    best_checkpoint,
    best_network_before,
    best_round,
    checkpoint_path,
    clear_stale_refit,
    gate_round,
    in_run,
    next_round_network,
    ppv_interval,
    read_gate,
    round_of,
    stale_refit,
    train_dir,
    values_dir,
)


def records(outcomes: list[bool], pills: list[int], level: int = 20) -> list[GameRecord]:
    """Made-up records of games 0..n-1 at one level: won or topped out, with these pill counts."""
    viruses = 84
    return [
        GameRecord(
            seed=4 + 8 * i,
            level=level,
            outcome="won" if won else "topped_out",
            viruses_cleared=viruses if won else viruses // 2,
            pills_used=p,
        )
        for i, (won, p) in enumerate(zip(outcomes, pills))
    ]


def test_gating_seeds_are_apart_from_evaluation_and_selfplay():
    assert not set(GATING_SEEDS) & set(EVALUATION_SEEDS)
    assert not set(GATING_SEEDS) & set(SELFPLAY_SEEDS)
    assert all(s % 8 == 4 for s in GATING_SEEDS)
    games = GateConfig(levels=[10, 20], games_per_level=30).games()
    assert len({g.seed for g in games if g.level == 20}) == 30 and {g.level for g in games} == {10, 20}
    assert games == GateConfig(levels=[10, 20], games_per_level=30).games()  # fixed games


def test_exact_tests():
    assert mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(5, 5) == 1.0
    assert mcnemar_p(9, 1) == pytest.approx(2 * 11 / 1024)  # two-sided binomial: P(X <= 1), n = 10
    assert mcnemar_p(1, 9) == mcnemar_p(9, 1)
    assert mcnemar_fewer_p(1, 9) == pytest.approx(11 / 1024) and mcnemar_fewer_p(9, 1) == pytest.approx(1 - 1 / 1024)
    assert mcnemar_fewer_p(0, 0) == 1.0 and mcnemar_fewer_p(2, 9) == pytest.approx(67 / 2048)  # (1 + 11 + 55) / 2^11
    rng = np.random.default_rng(0)
    assert sign_flip_p(rng.normal(1.0, 0.5, 40)) < 0.001  # clearly more
    assert sign_flip_p(rng.normal(-1.0, 0.5, 40)) > 0.99  # clearly less
    low, high = bootstrap_interval(np.full(10, 2.5))
    assert low == high == 2.5
    # the mean of 400 draws of sd 1: a 95% interval about 2 * 1.96 / sqrt(400) = 0.196 wide, around the mean
    values = rng.normal(0.3, 1.0, 400)
    low, high = bootstrap_interval(values)
    assert low < values.mean() < high and 0.17 < high - low < 0.22
    assert bootstrap_interval(values) == (low, high) and bootstrap_interval(values, seed=1) != (low, high)
    assert np.isnan(bootstrap_interval(np.array([]))[0])


def test_more_wins_with_the_same_pills_is_promoted():
    old = records([True] * 40 + [False] * 10, [160] * 50)
    new = records([True] * 48 + [False] * 2, [160] * 50)
    result = compare(new, old)
    assert result.promoted and (result.new_wins, result.old_wins) == (48, 40)
    assert (result.new_only, result.old_only) == (8, 0) and result.wins_p == pytest.approx(2 / 2**8)
    assert result.both_won == 40 and result.ppv_diff == 0


def test_fewer_wins_is_refused_whatever_the_pills():
    old = records([True] * 45 + [False] * 5, [160] * 50)
    new = records([True] * 44 + [False] * 6, [120] * 50)
    result = compare(new, old)
    assert not result.promoted and "wins fewer games (44 against 45)" in result.reason
    assert result.ppv_diff < 0  # it did use fewer pills


def test_as_many_wins_but_more_pills_per_virus_is_refused():
    rng = np.random.default_rng(1)
    base = rng.integers(140, 180, 50)
    old = records([True] * 50, list(base))
    new = records([True] * 50, list(base + rng.integers(5, 15, 50)))  # 5-15 pills more in every game
    result = compare(new, old, alpha=0.05)
    assert not result.promoted and "more pills per virus" in result.reason
    assert result.ppv_worse_p < 0.001 and result.ppv_diff_low > 0
    cheaper = compare(old, new)  # the other way round: fewer pills, as many wins
    assert cheaper.promoted and cheaper.ppv_diff < 0 and cheaper.ppv_diff_high < 0
    noise = records([True] * 50, list(base + rng.integers(-3, 4, 50)))  # no real difference
    assert compare(noise, old).promoted


def records_lost(cleared: list[int], level: int = 20) -> list[GameRecord]:
    """Made-up records of lost games 0..n-1 at one level, with these viruses cleared."""
    return [
        GameRecord(seed=4 + 8 * i, level=level, outcome="topped_out", viruses_cleared=v, pills_used=40)
        for i, v in enumerate(cleared)
    ]


def test_a_gate_with_no_game_both_won_weighs_the_viruses_cleared():
    old = records([False] * 10, [30] * 10)  # 42 of 84 viruses cleared in every game
    result = compare(records([False] * 9 + [True], [30] * 10), old)
    assert result.promoted and result.both_won == 0 and np.isnan(result.ppv_diff)
    assert result.reason == "wins more games (1 against 0); none won by both, so no pills to weigh"
    assert result.cleared_fewer_p == 1  # the one game that differs clears more
    assert (result.new_cleared, result.old_cleared) == pytest.approx((0.55, 0.5))
    record = result.to_dict()  # NaN (nothing to measure) is written as null: JSON has no NaN
    assert record["ppv_diff"] is None and record["new_ppv"] is None and json.loads(json.dumps(record)) == record
    # more wins promote even where the losses cleared fewer viruses (they topped out sooner): outcome first
    weak = records_lost([40] * 30)
    won = [
        GameRecord(seed=4 + 8 * i, level=20, outcome="won", viruses_cleared=84, pills_used=30) for i in range(27, 30)
    ]
    sooner = records_lost([5] * 27) + won
    bolder = compare(sooner, weak)
    assert bolder.promoted and bolder.new_wins == 3 and bolder.cleared_fewer_p < 0.05
    assert not compare(weak, sooner).promoted  # the other way round: fewer wins
    with pytest.raises(ValueError, match=r"\(29 games against 30; first difference at game 29: \(seed, level\) none"):
        compare(weak[:-1], sooner)
    with pytest.raises(ValueError, match=r"first difference at game 0: \(seed, level\) \(4, 20\) against \(4, 19\)"):
        compare(weak, records_lost([40] * 30, level=19))
    rng = np.random.default_rng(3)
    base = rng.integers(20, 60, 30)
    old = records_lost(list(base))
    new = records_lost(list(base - rng.integers(3, 10, 30)))  # 3-9 viruses fewer in every game
    fewer = compare(new, old)
    assert not fewer.promoted and fewer.cleared_fewer_p < 0.001
    assert fewer.reason.startswith("wins 0 against 0, none won by both, so the viruses weigh: clears ")
    assert fewer.reason.endswith(f"(fewer, one-sided p = {fewer.cleared_fewer_p:.3g} < 0.05)")
    assert compare(old, new).promoted  # the other way round
    lenient = compare(new, old, alpha=1e-9)  # not significant at this alpha
    assert lenient.promoted and lenient.reason.endswith(f"(fewer, one-sided p = {fewer.cleared_fewer_p:.3g} >= 1e-09)")
    same = compare(old, old)
    assert same.promoted and same.cleared_fewer_p == 1 and "0 against 0" in same.reason


def test_the_gates_table_shows_each_decision_and_its_figures():
    from IPython.lib.pretty import pretty

    from drmario.viz import gates_table

    old = records([True] * 45 + [False] * 5, [160] * 50)
    first = {"round": 0, "network": "train0/checkpoints/latest.pt", "against": None, "promoted": True}
    first |= {"reason": "the first network: nothing to beat", "wins": 45, "games": 50}
    second = {"round": 1, "network": "train1/checkpoints/latest.pt", "against": 0}
    second |= compare(records([True] * 44 + [False] * 6, [120] * 50), old).to_dict()
    table = gates_table([first, second]).data
    assert list(table.loc[0, ["against", "promoted", "wins", "McNemar p"]]) == ["-", "yes", "45 of 50", "-"]
    row = table.loc[1]
    assert list(row[["against", "promoted", "wins", "McNemar p"]]) == ["round 0", "no", "44 vs 45 of 50", "1"]
    assert row["pills per virus, games both won"] == "1.43 vs 1.90" and row["new − old [95%]"].startswith("-0.48 [")
    assert row["reason"] == "wins fewer games (44 against 45)"
    assert row["viruses cleared"] == "94.0% vs 95.0%" and table.loc[0, "viruses cleared"] == "-"  # not recorded
    text = pretty(gates_table([first, second])).splitlines()  # the notebook's plain text: caption, header, rows
    assert text[0].startswith("Gates:") and "44 vs 45 of 50" in text[3] and "Styler" not in text[0]
    first["new_cleared"] = 0.95
    assert gates_table([first, second]).data.loc[0, "viruses cleared"] == "95.0%"


def test_wins_first_promotes_more_wins_whatever_the_pills():
    rng = np.random.default_rng(2)
    base = rng.integers(140, 180, 50)
    old = records([True] * 45 + [False] * 5, list(base))
    more_wins = records([True] * 47 + [False] * 3, list(base + 12))  # two wins more, 12 pills more a game
    assert not compare(more_wins, old).promoted  # the default weighs the pills too
    result = compare(more_wins, old, rule="wins-first")
    assert result.promoted and "wins more games (47 against 45" in result.reason and result.ppv_worse_p < 0.001
    same_wins = records([True] * 45 + [False] * 5, list(base + 12))  # as many wins: the pills decide
    assert not compare(same_wins, old, rule="wins-first").promoted
    assert compare(records([True] * 45 + [False] * 5, list(base)), old, rule="wins-first").promoted
    fewer = records([True] * 44 + [False] * 6, list(base - 30))
    assert not compare(fewer, old, rule="wins-first").promoted
    with pytest.raises(ValueError, match="rule = 'most-wins'"):
        compare(old, old, rule="most-wins")


def test_wins_or_pills_lets_significantly_fewer_pills_make_up_for_a_win_or_two():
    rng = np.random.default_rng(3)
    base = rng.integers(140, 180, 50)
    old = records([True] * 45 + [False] * 5, list(base))
    thriftier = records([True] * 44 + [False] * 6, list(base - 30))  # one win fewer, 30 pills fewer a game
    assert not compare(thriftier, old).promoted  # the default: one win fewer is enough to stay
    result = compare(thriftier, old, rule="wins-or-pills")
    assert (
        result.promoted
        and result.wins_p == 1
        and "wins fewer games (44 against 45), not significantly" in result.reason
    )
    assert "uses fewer pills per virus (one-sided p = " in result.reason
    assert result.wins_fewer_p == 0.5 and result.ppv_fewer_p < 0.05  # 0 against 1: P(X <= 0), n = 1
    as_thrifty = records([True] * 44 + [False] * 6, list(base + rng.integers(-3, 4, 50)))  # pills level
    level = compare(as_thrifty, old, rule="wins-or-pills")
    assert not level.promoted and "does not use significantly fewer pills per virus" in level.reason
    # 2 games won only by the new one against 9 only by the old: two-sided p = 0.065, but fewer wins is
    # the question, one-sided p = 67 / 2048 = 0.033 < 0.05
    fewer = records([False] * 9 + [True] * 38 + [False] * 3, list(base - 30))
    result = compare(fewer, old, rule="wins-or-pills")
    assert (result.new_only, result.old_only) == (2, 9) and result.wins_p > 0.05
    assert not result.promoted and result.wins_fewer_p == pytest.approx(67 / 2048)
    assert "wins fewer games (38 against 45), significantly (one-sided McNemar p = 0.0327 < 0.05)" in result.reason
    assert result.ppv_fewer_p is None  # not tested: the wins decide
    # otherwise as wins-and-pills
    for new in (records([True] * 45 + [False] * 5, list(base + 12)), records([True] * 46 + [False] * 4, list(base))):
        assert compare(new, old, rule="wins-or-pills").promoted == compare(new, old).promoted


def test_records_of_other_games_are_refused():
    with pytest.raises(ValueError, match="not of the same games"):
        compare(records([True], [100], level=20), records([True], [100], level=15))


def test_best_round_reads_the_gates(tmp_path):
    def gate(k: int, promoted: bool) -> None:
        train_dir(tmp_path, k).mkdir(parents=True, exist_ok=True)
        (train_dir(tmp_path, k) / GATE_FILE).write_text(json.dumps({"round": k, "promoted": promoted}))

    assert best_round(tmp_path, 3) is None
    assert best_checkpoint(tmp_path, 3) == checkpoint_path(tmp_path, 2)  # no gates: the newest
    gate(0, True)
    gate(1, True)
    gate(2, False)
    assert best_round(tmp_path, 3) == 1 and best_round(tmp_path, 2) == 1 and best_round(tmp_path, 1) == 0
    assert best_checkpoint(tmp_path, 3) == checkpoint_path(tmp_path, 1)
    # a gate of other weights than the round's file holds now (retrained since) promotes nothing
    network = checkpoint_path(tmp_path, 1)
    network.parent.mkdir(parents=True)
    network.write_bytes(b"weights")
    (train_dir(tmp_path, 1) / GATE_FILE).write_text(json.dumps({"promoted": True, "sha256": file_sha256(network)}))
    assert best_round(tmp_path, 3) == 1 and best_network_before(tmp_path, 3) == network.resolve()
    network.write_bytes(b"weights trained again")
    assert best_round(tmp_path, 3) == 0 and best_network_before(tmp_path, 3) is None  # round 0's file: none here
    (train_dir(tmp_path, 0) / GATE_FILE).unlink()  # and no round left promoted: said, not round 2's network
    with pytest.raises(ValueError, match="no round before 3 stands promoted by its gate"):
        best_checkpoint(tmp_path, 3)
    assert best_network_before(tmp_path, 3) is None


def test_the_next_round_plays_the_best_network_unless_told_another(tmp_path):
    """04's network "best" is the newest promoted round's; another checkpoint is played with a warning."""
    for k, promoted in ((0, True), (1, True), (2, False)):
        checkpoint_path(tmp_path, k).parent.mkdir(parents=True)
        checkpoint_path(tmp_path, k).write_bytes(b"weights %d" % k)
        gate = {"round": k, "promoted": promoted, "sha256": file_sha256(checkpoint_path(tmp_path, k))}
        (train_dir(tmp_path, k) / GATE_FILE).write_text(json.dumps(gate))
    warnings: list[str] = []
    assert next_round_network(tmp_path, 3, "best", warnings.append) == checkpoint_path(tmp_path, 1)
    assert next_round_network(tmp_path, 3, str(checkpoint_path(tmp_path, 1)), warnings.append)
    assert warnings == []
    assert next_round_network(tmp_path, 3, str(checkpoint_path(tmp_path, 0)), warnings.append)
    assert warnings == [
        f"warning: {checkpoint_path(tmp_path, 0)} is not the best network of the rounds before 3, "
        f"{checkpoint_path(tmp_path, 1).resolve()}"
    ]
    with pytest.raises(FileNotFoundError, match="no network checkpoint .*round4"):
        next_round_network(tmp_path, 3, str(tmp_path / "round4.pt"))
    checkpoint_path(tmp_path, 1).write_bytes(b"weights trained again")  # not what its gate promoted
    assert next_round_network(tmp_path, 3, "best") == checkpoint_path(tmp_path, 0)
    (train_dir(tmp_path, 0) / GATE_FILE).unlink()  # no round left promoted: said, not another network played
    with pytest.raises(ValueError, match="no round before 3 stands promoted"):
        next_round_network(tmp_path, 3, "best")


def test_every_round_plays_the_same_evaluation_games(tmp_path):
    import torch

    from drmario.learn.checkpoint import save_net
    from drmario.learn.net import DrMarioNet, NetConfig
    from drmario.play.arena import EvalConfig
    from drmario.run.rounds import ROUND_COLUMNS, play_rounds
    from drmario.viz import plot_rounds

    for k, promoted in enumerate([True, False]):
        torch.manual_seed(k)
        save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), checkpoint_path(tmp_path, k))
        (train_dir(tmp_path, k) / GATE_FILE).write_text(json.dumps({"round": k, "promoted": promoted}))
    save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), values_dir(tmp_path, 0) / "checkpoints" / "latest.pt")
    evaluation = EvalConfig(levels=[0, 2], games_per_level=2, top_level_games=2, max_pills=60)
    table, played = play_rounds(tmp_path, evaluation, best_agents=["net-mcts-2"], progress=False)
    assert list(table.columns) == ROUND_COLUMNS
    assert set(played) == {"greedy", "expert", "policy r0", "policy r1", "net-mcts-2 best"}
    seeds = {name: [(r.seed, r.level) for r in rs] for name, rs in played.items()}
    assert all(s == seeds["greedy"] for s in seeds.values())  # paired: the same games for everyone
    best = table[table["agent"] == "net-mcts-2 (best network)"]
    assert set(best["round"]) == {0}  # round 1 was not promoted; round 0's network is its values refit
    policy = table[table["agent"] == "policy"].sort_values(["round", "level"])
    assert list(policy["round"]) == [0, 0, 1, 1] and list(policy["promoted"]) == [True, True, False, False]
    assert table.loc[table["round"] < 0, "promoted"].isna().all()
    won = table[table["wins"] > 0]
    assert (won["ppv_low"] <= won["pills_per_virus"]).all() and (won["pills_per_virus"] <= won["ppv_high"]).all()
    fig = plot_rounds(table)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 4  # win rate and pills per virus at each level
    for ax in panels:  # round 1's hollow marker is drawn over its filled one
        hollow = [line for line in ax.lines if line.get_markerfacecolor() == "white" and len(line.get_xdata())]
        assert len(hollow) == 1 and list(hollow[0].get_xdata()) == [pytest.approx(1, abs=0.1)]
        filled = [line for line in ax.lines if line.get_markerfacecolor() != "white"]
        assert hollow[0].get_zorder() > max(line.get_zorder() for line in filled)


def test_a_rounds_network_is_its_values_refit_once_there_is_one(tmp_path):
    import os

    from drmario.learn.checkpoint import save_net
    from drmario.learn.net import DrMarioNet, NetConfig

    trained, refit = (
        train_dir(tmp_path, 3) / "checkpoints" / "latest.pt",
        values_dir(tmp_path, 3) / "checkpoints" / "latest.pt",
    )
    save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), trained)
    assert checkpoint_path(tmp_path, 3) == trained and in_run(trained) == "train3/checkpoints/latest.pt"
    save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), refit)
    assert checkpoint_path(tmp_path, 3) == refit and round_of(refit) == 3
    assert in_run(refit) == "train3/values/checkpoints/latest.pt" and in_run("/x/nets/a/b.pt") == "nets/a/b.pt"
    with pytest.raises(ValueError, match="no train<k> folder"):
        round_of("data/networks/small.pt")
    # 02 without a refit would leave this one the round's network: refused
    with pytest.raises(ValueError, match="holds a values refit, the round's network, but value_steps = 0"):
        clear_stale_refit(tmp_path, 3, refitting=False)
    assert not stale_refit(tmp_path, 3)  # no record of its start (an older refit): newer than the training's
    later = refit.stat().st_mtime_ns + 10**9
    os.utime(trained, ns=(later, later))  # the training went on after the refit (a refit from before its record)
    assert clear_stale_refit(tmp_path, 3, refitting=True)
    assert checkpoint_path(tmp_path, 3) == trained
    # the refit begun now records the weights it starts from, and file times no longer decide
    assert played_network(values_dir(tmp_path, 3))["sha256"] == file_sha256(trained)
    save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), refit)
    os.utime(refit, ns=(later - 10**9, later - 10**9))  # older than the training's file (a copied run)
    assert not stale_refit(tmp_path, 3) and not clear_stale_refit(tmp_path, 3, refitting=True)
    save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), trained)  # retrained: other weights
    os.utime(trained, ns=(later - 2 * 10**9, later - 2 * 10**9))  # older than the refit's file
    assert stale_refit(tmp_path, 3) and clear_stale_refit(tmp_path, 3, refitting=True)
    assert not refit.exists() and played_network(values_dir(tmp_path, 3))["sha256"] == file_sha256(trained)


def test_a_gate_is_played_again_for_another_network_of_the_round(tmp_path):
    from drmario.learn.checkpoint import save_net
    from drmario.learn.net import DrMarioNet, NetConfig

    cfg = GateConfig(levels=[0], games_per_level=2, max_pills=40)
    save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), train_dir(tmp_path, 0) / "checkpoints" / "latest.pt")
    first = gate_round(tmp_path, 0, cfg, log=lambda _: None)
    assert first["network"] == "train0/checkpoints/latest.pt" and first["promoted"]
    records = GameRecord.read_file(train_dir(tmp_path, 0) / "gate_games.jsonl")
    assert first["new_cleared"] == pytest.approx(np.mean([r.viruses_cleared / 4 for r in records]))  # 4 at level 0
    assert gate_round(tmp_path, 0, cfg, log=lambda _: None) == first  # the same network: not played again
    stamp = (train_dir(tmp_path, 0) / GATE_FILE).stat().st_mtime_ns
    save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), values_dir(tmp_path, 0) / "checkpoints" / "latest.pt")
    again = gate_round(tmp_path, 0, cfg, log=lambda _: None)
    assert again["network"] == "train0/values/checkpoints/latest.pt"
    assert (train_dir(tmp_path, 0) / GATE_FILE).stat().st_mtime_ns != stamp
    # other weights (freshly drawn) at the same path, as a refit redone: played again too
    save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), values_dir(tmp_path, 0) / "checkpoints" / "latest.pt")
    third = gate_round(tmp_path, 0, cfg, log=lambda _: None)
    assert third["network"] == again["network"] and third["sha256"] != again["sha256"]


def test_a_round_is_compared_on_the_same_games_whatever_the_rule(tmp_path):
    from drmario.learn.checkpoint import save_net
    from drmario.learn.net import DrMarioNet, NetConfig

    cfg = GateConfig(levels=[0], games_per_level=2, max_pills=40)
    for k in (0, 1, 2):
        save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), train_dir(tmp_path, k) / "checkpoints" / "latest.pt")
    gate_round(tmp_path, 0, cfg, log=lambda _: None)
    second = gate_round(tmp_path, 1, cfg.replace(rule="wins-first", alpha=0.1), log=lambda _: None)
    assert second["against"] == 0 and second["config"]["rule"] == "wins-first" and second["games"] == 2
    with pytest.raises(ValueError, match="the same gating games"):
        gate_round(tmp_path, 2, cfg.replace(games_per_level=3), log=lambda _: None)
    assert not (train_dir(tmp_path, 2) / "gate_games.jsonl").exists()  # refused before playing or writing
    # a record is never left beside games of another gate: round 1 gated anew drops its record before its
    # games are written (here the comparison then fails: round 0's games file is damaged)
    (train_dir(tmp_path, 0) / "gate_games.jsonl").write_text("not a game\n")
    with pytest.raises(ValueError, match="round 1's gating games against"):
        gate_round(tmp_path, 1, cfg, log=lambda _: None)
    assert read_gate(tmp_path, 1) is None


def test_ppv_interval_is_the_95_percent_bootstrap_of_pills_over_viruses():
    pills = np.random.default_rng(3).normal(40, 8, 400).round()
    records = [
        GameRecord(seed=8 * (i + 1), level=20, moves=(), outcome="won", viruses_cleared=20, pills_used=int(p))
        for i, p in enumerate(pills)
    ]
    low, high = ppv_interval(records)
    # per game 2.0 pills per virus with sd 0.4: a 95% interval about 2 * 1.96 * 0.4 / sqrt(400) = 0.078 wide
    assert low < pills.sum() / (20 * 400) < high and 0.068 < high - low < 0.089
    assert ppv_interval(records) == (low, high) and ppv_interval(records, seed=1) != (low, high)
    nothing_cleared = GameRecord(seed=8, level=20, moves=(), outcome="topped_out", viruses_cleared=0, pills_used=3)
    assert np.isnan(ppv_interval([])[0]) and np.isnan(ppv_interval([nothing_cleared])[0])
    # one game of 40 clears 4 viruses with 10 pills: resamples without it have no ratio, not one of 100s of pills
    rare = [
        GameRecord(seed=8 * i, level=20, outcome="topped_out", viruses_cleared=0, pills_used=3) for i in range(1, 40)
    ]
    rare.append(GameRecord(seed=4, level=20, outcome="topped_out", viruses_cleared=4, pills_used=10))
    assert ppv_interval(rare)[1] <= (39 * 3 + 10) / 4  # at most: that game once among the others (not 120 pills / 1)
