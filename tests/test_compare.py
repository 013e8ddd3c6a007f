"""Comparing runs (drmario.run.compare and ``drmario compare``) on small hand-made run directories."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")  # this process only: the notebooks the tests run get the kernel's own backend

import numpy as np
import pandas as pd
import pytest

from drmario.files import file_sha256
from drmario.play.arena import ARENA_COLUMNS, wilson
from drmario.run import compare
from drmario.run.cli import main
from drmario.viz.plots import METRIC_COLUMNS

LEVELS = (0, 5)


def arena_rows(agent: str, wins: dict[int, int], games: int = 10, cleared: float = 0.5) -> list[dict]:
    rows = []
    for level in LEVELS:
        lo, hi = wilson(wins[level], games)
        rows.append(
            dict(agent=agent, level=level, games=games, wins=wins[level], win_rate=wins[level] / games)
            | dict(ci_low=float(lo), ci_high=float(hi), cleared_fraction=cleared, pills_per_virus=3.0)
            | dict(topout_rate=1 - wins[level] / games, capped_rate=0.0, stalemate_rate=0.0, ms_per_move=1.0)
        )
    return rows


def write_arena(path, *agents: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([row for rows in agents for row in rows], columns=ARENA_COLUMNS).to_csv(path, index=False)


def write_metrics(folder, steps: int, final: float) -> pd.DataFrame:
    """A metrics.csv whose last train loss is `final` and last test loss `final` + 0.5."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for step in range(10, steps + 1, 10):
        for split in ("train", "test") if step % 20 == 0 else ("train",):
            loss = final + (steps - step) / steps + (0.5 if split == "test" else 0.0)
            terms = dict(won=loss / 4, cleared=loss / 4, duration=loss / 4, moves=loss / 4, reg=0.0)
            rows.append(
                dict(step=step, epoch=step // 20, samples=step * 32, time_s=step / 10, split=split, lr=1e-3)
                | dict(samples_per_s=320.0, loss=loss, **terms)
            )
    df = pd.DataFrame(rows, columns=list(METRIC_COLUMNS))
    df.to_csv(folder / "metrics.csv", index=False)
    return df


@pytest.fixture
def runs(tmp_path):
    """Two runs: A has 2 analysed rounds and the baselines notebook; B one round and the expert."""
    a, b = tmp_path / "A", tmp_path / "B"
    random_, greedy = arena_rows("random", {0: 1, 5: 0}, cleared=0.1), arena_rows("greedy", {0: 4, 5: 1})
    write_arena(
        a / "analysis0" / "arena.csv",
        random_,
        greedy,
        arena_rows("policy", {0: 2, 5: 0}),
        arena_rows("net-mcts-16", {0: 5, 5: 2}),
    )
    write_arena(
        a / "analysis1" / "arena.csv",
        random_,
        greedy,
        arena_rows("policy", {0: 6, 5: 1}),
        arena_rows("net-mcts-16", {0: 9, 5: 6}),
    )
    write_arena(a / "baselines" / "arena.csv", random_, arena_rows("dqn", {0: 0, 5: 0}, cleared=0.2))
    write_metrics(a / "train0", 60, 1.0)
    write_metrics(a / "train1", 80, 0.5)
    write_arena(
        b / "analysis0" / "arena.csv",
        arena_rows("random", {0: 3, 5: 3}),  # another table's random: A's is kept
        arena_rows("expert", {0: 10, 5: 9}),
        arena_rows("net-mcts-16", {0: 7, 5: 0}),
    )
    write_metrics(b / "train0", 40, 2.0)
    (b / "round0").mkdir()
    return a, b


def test_arena_results_names_every_round_once(runs):
    a, b = runs
    one = compare.arena_results(a)
    agents = list(dict.fromkeys(one["agent"]))
    assert agents == ["random", "greedy", "policy r0", "net-mcts-16 r0", "policy r1", "net-mcts-16 r1", "dqn"]
    assert (one.groupby("agent").size() == len(LEVELS)).all()  # one row per level: baselines once
    assert one.set_index("agent")["round"].dropna().to_dict() == {
        "policy r0": 0,
        "net-mcts-16 r0": 0,
        "policy r1": 1,
        "net-mcts-16 r1": 1,
    }
    assert one.loc[one["agent"] == "net-mcts-16 r1", "spec"].iloc[0] == "net-mcts-16"
    both = compare.arena_results([a, b])
    agents = set(both["agent"])
    assert {"net-mcts-16 (A r0)", "net-mcts-16 (A r1)", "net-mcts-16 (B r0)", "dqn (A)", "expert"} <= agents
    random_rows = both[both["agent"] == "random"]
    assert len(random_rows) == len(LEVELS) and set(random_rows["run"]) == {"A"}  # the first table's
    named = compare.arena_results({"first": a, "second": b})
    assert "net-mcts-16 (second r0)" in set(named["agent"])
    assert compare.arena_results(b / "round0").empty
    c = a.parent / "C"  # random again, and at two levels the others never played
    more = [dict(row, level=row["level"] + 10) for row in arena_rows("random", {0: 2, 5: 2})]
    write_arena(c / "analysis0" / "arena.csv", arena_rows("random", {0: 3, 5: 3}) + more)
    random_rows = compare.arena_results([a, c]).query("agent == 'random'").set_index("level")["run"]
    assert random_rows.to_dict() == {0: "A", 5: "A", 10: "C", 15: "C"}  # C's new levels are kept
    text = compare.format_leaderboard(compare.leaderboard([a, c]))
    assert "note: not every agent played every level" in text


def test_agents_without_a_network_on_other_evaluation_games_keep_their_own_rows(runs):
    a, b = runs
    (a / "analysis0" / "evaluation.json").write_text(json.dumps({"levels": [0, 5], "max_pills": 400}))
    (a / "analysis1" / "evaluation.json").write_text(json.dumps({"levels": [0, 5], "max_pills": 400}))
    (a / "baselines" / "evaluation.json").write_text(json.dumps({"levels": [0, 5], "max_pills": 400}))
    (b / "analysis0" / "evaluation.json").write_text(json.dumps({"levels": [0, 5], "max_pills": 100}))
    both = compare.arena_results([a, b])
    random_rows = both[both["spec"] == "random"].groupby("agent")["run"].first().to_dict()
    assert random_rows == {"random": "A", "random (B r0)": "B"}  # B's random played other games: not A's
    assert len(both[both["agent"] == "greedy"]) == len(LEVELS)  # A's rounds: the same games, once
    (a / "analysis1" / "evaluation.json").write_text(json.dumps({"levels": [0, 5], "max_pills": 2000}))
    assert {"greedy", "greedy r1"} <= set(compare.arena_results(a)["agent"])
    # a third table of round 1's games (played 4 at a time: the same games) repeats it, not shown again
    write_arena(a / "analysis2" / "arena.csv", arena_rows("greedy", {0: 4, 5: 1}))
    (a / "analysis2" / "evaluation.json").write_text(json.dumps({"levels": [0, 5], "max_pills": 2000, "lockstep": 4}))
    assert "greedy r2" not in set(compare.arena_results(a)["agent"])
    table = compare.rounds_table(a)
    assert table.loc[table["agent"] == "greedy", "round"].tolist() == [-1] * len(LEVELS)  # the first table's


def test_leaderboard_is_best_first_with_wilson_intervals(runs):
    a, b = runs
    board = compare.leaderboard([a, b])
    assert list(board.index[:2]) == ["expert", "net-mcts-16 (A r1)"]
    assert board["win_rate"].is_monotonic_decreasing
    assert {"L0", "L5", "games", "wins", "win_rate", "ci_low", "ci_high", "cleared_fraction"} <= set(board.columns)
    row = board.loc["net-mcts-16 (A r1)"]
    assert (row["L0"], row["L5"], row["games"], row["wins"]) == (0.9, 0.6, 20, 15)
    lo, hi = wilson(15, 20)
    assert row["ci_low"] == pytest.approx(lo) and row["ci_high"] == pytest.approx(hi)
    assert row["run"] == "A" and row["round"] == 1
    assert board.index[-1] == "dqn (A)"
    text = compare.format_leaderboard(board)
    assert "net-mcts-16 (A r1)" in text and "15/20" in text and "75.0% [" in text and "note:" not in text
    same = compare.leaderboard(compare.arena_results([a, b]))
    pd.testing.assert_frame_equal(board, same)
    assert compare.leaderboard(pd.DataFrame(columns=ARENA_COLUMNS)).empty
    assert compare.format_leaderboard(compare.leaderboard(pd.DataFrame(columns=ARENA_COLUMNS))) == "(no arena results)"


def test_leaderboard_tie_break():
    rows = arena_rows("x", {0: 0, 5: 0}, cleared=0.2) + arena_rows("y", {0: 0, 5: 0}, cleared=0.6)
    board = compare.leaderboard(pd.DataFrame(rows))
    assert list(board.index) == ["y", "x"]


def test_training_curves_and_final_losses(runs):
    a, b = runs
    curves = compare.training_curves([a, b])
    assert list(dict.fromkeys(curves["run"])) == ["A train0", "A train1", "B train0"]
    assert set(compare.training_curves(a)["run"]) == {"train0", "train1"}
    losses = compare.final_losses(curves)
    assert list(losses.index) == [
        (run, split) for run in ("A train0", "A train1", "B train0") for split in ("train", "test")
    ]
    assert losses.loc[("A train1", "train"), "step"] == 80 and losses.loc[("A train1", "test"), "step"] == 80
    assert losses.loc[("A train1", "train"), "loss"] == pytest.approx(0.5)
    assert losses.loc[("A train1", "test"), "loss"] == pytest.approx(1.0)
    assert losses.loc[("B train0", "train"), "loss"] == pytest.approx(2.0)
    assert list(losses.columns) == ["step", "loss", "won", "cleared", "duration", "moves", "reg"]
    # A step logged twice (a resumed trainer): the later row counts.
    df = pd.read_csv(a / "train0" / "metrics.csv")
    again = df[df["step"] == 60].assign(loss=9.0)
    pd.concat([df, again]).to_csv(a / "train0" / "metrics.csv", index=False)
    assert compare.final_losses(compare.training_curves(a)).loc[("train0", "train"), "loss"] == 9.0
    assert compare.training_curves(b / "round0").empty and compare.final_losses(pd.DataFrame()).empty


def test_figures(runs, tmp_path):
    a, b = runs
    figs = compare.figures([a, b])
    assert set(figs) == {"leaderboard", "arena", "curves"}
    texts = [t.get_text() for legend in figs["leaderboard"].legends for t in legend.get_texts()]
    assert "Wilson 95% interval (by level)" in texts and "net-mcts-16 (B r0)" in texts
    for fig in figs.values():
        for ax in (ax for ax in fig.axes if ax.get_visible()):
            assert ax.get_ylabel() and ax.get_xlabel()
    paths = compare.save_figures(a, tmp_path / "plots")
    assert sorted(p.name for p in paths) == ["arena.png", "curves.png", "leaderboard.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)
    assert set(compare.figures(b / "round0")) == set()


def test_run_names(tmp_path):
    for name in ("x/run", "y/run"):
        write_metrics(tmp_path / name / "train0", 20, 1.0)
    named = compare.run_dirs_by_name([tmp_path / "x" / "run", tmp_path / "y" / "run"])
    assert list(named) == [str(tmp_path / "x" / "run"), str(tmp_path / "y" / "run")]
    assert list(compare.run_dirs_by_name(str(tmp_path / "x" / "run"))) == ["run"]
    with pytest.raises(FileNotFoundError, match="no directory"):
        compare.run_dirs_by_name([tmp_path / "missing"])
    with pytest.raises(ValueError, match="no run"):
        compare.run_dirs_by_name([])


def test_compare_command(runs, tmp_path, capsys):
    a, b = runs
    out = tmp_path / "plots"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Leaderboard" in printed and "expert" in printed and "net-mcts-16 (A r1)" in printed
    assert "Final losses" in printed and "A train1" in printed and "moves" in printed
    assert sorted(p.name for p in out.iterdir()) == ["arena.png", "curves.png", "leaderboard.png"]
    assert main(["compare", str(b / "round0")]) == 2
    assert "no arena tables" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "missing")]) == 2
    assert np.isfinite(compare.leaderboard(a)["win_rate"]).all()


def test_rounds_table_names_agents_by_spec_and_baselines_round_minus_one(runs):
    table = compare.rounds_table(runs[0], levels=[5])
    assert list(table.columns) == compare.ROUNDS_COLUMNS
    nets = table[table["agent"] == "net-mcts-16"].sort_values("round")
    assert nets["round"].tolist() == [0, 1] and nets["wins"].tolist() == [2, 6]
    assert table.loc[table["agent"] == "greedy", "round"].tolist() == [-1]  # once, not per round
    assert set(table["level"]) == {5}
    # 05's network agents are the run's best network on 05's games: no round's row, nor a baseline's
    write_arena(runs[0] / "baselines" / "arena.csv", arena_rows("net-mcts-16", {0: 9, 5: 9}))
    assert compare.rounds_table(runs[0]).query("agent == 'net-mcts-16'")["round"].tolist() == [0, 1, 0, 1]
    empty = runs[0].parent / "empty"
    empty.mkdir()
    assert compare.rounds_table(empty).empty


def test_export_writes_the_best_rounds_network_and_its_card(runs, tmp_path):
    from drmario.learn.checkpoint import load_net, save_checkpoint
    from drmario.learn.net import DrMarioNet, NetConfig
    from drmario.run import export

    run = runs[0]
    for k in (0, 1):  # round 1 has the better arena results (net-mcts-16: 15 wins against 7)
        net = DrMarioNet(NetConfig(filters=8, blocks=1))  # as training leaves it: with its step
        state = {"net_config": net.cfg.to_dict(), "model": net.state_dict(), "step": 80}
        save_checkpoint(run / f"train{k}" / "checkpoints" / "latest.pt", state)
    assert export.shipped_round(run) == 1
    init = run.resolve() / "train0" / "checkpoints" / "latest.pt"  # as the pipeline writes it: absolute
    (run / "train1" / "config.json").write_text(json.dumps({"init": str(init), "steps": 80}))
    out = main(["export", str(run), "--out", str(tmp_path / "nets" / "mine.pt")])
    assert out == 0
    card = export.read_card(tmp_path / "nets" / "mine.pt")
    assert card["run"]["round"] == 1 and card["net"]["filters"] == 8
    assert card["train"] == {"init": "train0/checkpoints/latest.pt", "steps": 80}  # no path of this machine
    assert {r["agent"] for r in card["arena"]} >= {"policy", "net-mcts-16"}
    assert sum(r["wins"] for r in card["arena"] if r["agent"] == "net-mcts-16") == 15  # round 1's arena, not 0's
    shipped, trained = tmp_path / "nets" / "mine.pt", run / "train1" / "checkpoints" / "latest.pt"
    assert card["sha256"] == file_sha256(shipped) != file_sha256(trained)  # of the file shipped (weights only)
    assert {(r["agent"], r["round"]) for r in card["rounds"]} >= {("net-mcts-16", 0), ("net-mcts-16", 1)}
    assert load_net(tmp_path / "nets" / "mine.pt").cfg.filters == 8
    with pytest.raises(FileNotFoundError, match="no card"):
        export.read_card(run / "train0" / "checkpoints" / "latest.pt")
    (tmp_path / "nets" / "swapped.pt").write_bytes(trained.read_bytes())  # a network beside another's card
    (tmp_path / "nets" / "swapped.json").write_bytes((tmp_path / "nets" / "mine.json").read_bytes())
    with pytest.raises(ValueError, match=r"swapped.json is of other weights than .*swapped.pt holds"):
        export.read_card(tmp_path / "nets" / "swapped.pt")
    with pytest.raises(ValueError, match="no analysed round"):
        export.shipped_round(tmp_path)
    # with gates, the newest promoted round is shipped whatever the arena says, and the card has the gates
    for k, promoted in ((0, True), (1, False)):
        (run / f"train{k}" / "gate.json").write_text(json.dumps({"round": k, "promoted": promoted, "config": {}}))
    assert export.shipped_round(run) == 0
    main(["export", str(run), "--out", str(tmp_path / "nets" / "gated.pt")])
    assert [g["promoted"] for g in export.read_card(tmp_path / "nets" / "gated.pt")["gates"]] == [True, False]
    gated_arena = export.read_card(tmp_path / "nets" / "gated.pt")["arena"]
    assert sum(r["wins"] for r in gated_arena if r["agent"] == "net-mcts-16") == 7  # round 0's
    assert export.read_card(tmp_path / "nets" / "gated.pt")["values_refit"] is None
    # an arena 03 played with other weights (another network it was given) is not this network's
    from drmario.files import record_network

    record_network(run / "analysis0", run / "train1" / "checkpoints" / "latest.pt")
    main(["export", str(run), "--out", str(tmp_path / "nets" / "other.pt")])
    assert export.read_card(tmp_path / "nets" / "other.pt")["arena"] == []


def test_export_ships_a_rounds_refitted_values_and_says_so(runs, tmp_path):
    from drmario.learn.checkpoint import load_net, save_net
    from drmario.learn.net import DrMarioNet, NetConfig
    from drmario.run import export
    from drmario.run.rounds import checkpoint_path, values_dir

    run = runs[0]
    trained = run / "train0" / "checkpoints" / "latest.pt"
    save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), trained)
    (run / "train0" / "train_result.json").write_text(json.dumps({"step": 80}))
    assert checkpoint_path(run, 0) == trained
    refit = values_dir(run, 0)
    save_net(DrMarioNet(NetConfig(filters=8, blocks=1, leak=0.2)), refit / "checkpoints" / "latest.pt")
    (refit / "config.json").write_text(json.dumps({"init": str(trained.resolve()), "learn": "values", "steps": 20}))
    (refit / "train_result.json").write_text(json.dumps({"step": 20}))
    assert checkpoint_path(run, 0) == refit / "checkpoints" / "latest.pt"  # the round's network is the refit's
    export.export_network(run, tmp_path / "refit.pt", round=0)
    card = export.read_card(tmp_path / "refit.pt")
    assert load_net(tmp_path / "refit.pt").cfg.leak == 0.2
    assert card["steps"] == 80  # the training's
    assert card["values_refit"]["train"] == {"init": "train0/checkpoints/latest.pt", "learn": "values", "steps": 20}
    assert card["values_refit"]["steps"] == 20
    with pytest.raises(ValueError, match=r"export to .*refit.json: expected a .pt file"):
        export.export_network(run, tmp_path / "refit.json", round=0)  # its card would overwrite it


def test_settings_differences_name_what_the_runs_were_made_with(runs, capsys):
    a, b = runs
    profile = {"name": "a", "train": {"filters": 16, "steps": 60}, "analysis": {"levels": [0, 5]}}
    (a / "pipeline.json").write_text(json.dumps({"profile": profile, "rounds": 2}))
    profile = {"name": "b", "train": {"filters": 32, "steps": 60}}  # B leaves analysis to the notebook
    (b / "pipeline.json").write_text(json.dumps({"profile": profile, "rounds": 1}))
    differ = compare.settings_differences([a, b])
    assert list(differ.columns) == ["A", "B"]
    assert differ.to_dict("index") == {
        "profile": {"A": "a", "B": "b"},
        "rounds": {"A": "2", "B": "1"},
        "train.filters": {"A": "16", "B": "32"},
        "analysis.levels": {"A": "[0, 5]", "B": compare.UNSET},
    }
    assert compare.settings_differences([a, a]).empty and compare.settings_differences(a).empty
    text = compare.differences_text(differ, limit=2)
    assert text == "runs differ in: profile (A: a, B: b); rounds (A: 2, B: 1); and 2 more"
    figs = compare.figures([a, b])
    assert "train.filters (A: 16, B: 32)" in figs["leaderboard"].get_suptitle()
    assert all("runs differ in" in figs[stem].get_suptitle() for stem in ("arena", "curves"))
    assert main(["compare", str(a), str(b)]) == 0
    printed = capsys.readouterr().out
    assert "Settings that differ" in printed and "train.filters" in printed and "analysis.levels" in printed
    # A run of `drmario train` alone: its config.json, without the paths of its data
    (a / "pipeline.json").unlink()
    (b / "pipeline.json").unlink()
    for run, lr in ((a, 0.002), (b, 0.01)):
        config = {"data": [str(run / "round0")], "lr": lr, "net": {"filters": 16}}
        (run / "train0" / "config.json").write_text(json.dumps(config))
    assert compare.settings_differences([a, b]).to_dict("index") == {"train0.lr": {"A": "0.002", "B": "0.01"}}


def test_plots_keep_legends_off_the_curves_and_intervals_apart(runs):
    figs = compare.figures(list(runs))
    arena = figs["arena"]
    arena.canvas.draw()
    panels = [ax for ax in arena.axes if ax.get_visible()]
    legends = [ax.get_legend() for ax in panels if ax.get_legend() is not None]
    assert len(legends) == 1  # one legend for every panel
    box = legends[0].get_window_extent()
    assert all(not box.overlaps(ax.get_window_extent()) for ax in panels)  # beside the panels, not on them
    left = figs["leaderboard"].axes[0]
    assert not left.collections or all(type(c).__name__ == "LineCollection" for c in left.collections)  # no bands
    bars = [c for c in left.collections if type(c).__name__ == "LineCollection"]
    assert len(bars) == len(set(compare.arena_results(list(runs))["agent"]))  # an error bar set per agent
    xs = {round(float(seg[0][0]), 3) for c in bars for seg in c.get_segments()}
    assert len(xs) > len(LEVELS)  # side by side at a level, not stacked on one x


@pytest.mark.parametrize("name", ["small", "apprentice"])
def test_each_shipped_network_matches_its_card_and_loads(name):
    from drmario.files import file_sha256
    from drmario.learn.checkpoint import load_net
    from drmario.run import export
    from drmario.run.kit import shipped_network

    path = shipped_network(name)
    card = export.read_card(path)
    assert card["network"] == path.name and card["sha256"] == file_sha256(path)
    net = load_net(path, fallback=False)
    assert (net.cfg.filters, net.cfg.blocks) == (card["net"]["filters"], card["net"]["blocks"])
    assert card["steps"] == card["train"]["steps"] and card["arena"]  # trained as its run said, and analysed
