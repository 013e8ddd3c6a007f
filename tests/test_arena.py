"""Agents, the lockstep game loop and the arena table."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import drmario as dm
from drmario.engine.level import is_evaluation_seed
from drmario.play.agents import Decision, GreedyAgent, PolicyAgent, RandomAgent, SearchAgent
from drmario.play.arena import (
    ARENA_COLUMNS,
    EvalConfig,
    all_levels,
    arena,
    evaluation_games,
    load_games,
    save_games,
    summarize,
    wilson,
)
from drmario.play.lockstep import GameSpec, play_lockstep
from drmario.play.selfplay import SelfPlayConfig
from drmario.search import Position, RolloutEvaluator, Round0Settings, SearchConfig


def test_evaluation_games_are_fixed(tmp_path):
    a = evaluation_games([0, 5], 3, seed=7)
    assert a == evaluation_games([0, 5], 3, seed=7)
    assert [g.level for g in a] == [0, 0, 0, 5, 5, 5] and [g.number for g in a] == list(range(6))
    save_games(a, tmp_path / "games.json")
    assert load_games(tmp_path / "games.json") == a
    (tmp_path / "bad.json").write_text("[[1, 2]]")
    with pytest.raises(ValueError, match="bad.json"):
        load_games(tmp_path / "bad.json")


@pytest.mark.parametrize(
    "agent",
    [
        RandomAgent(),
        GreedyAgent(),
        SearchAgent(SearchConfig(mode="round0", simulations=8, round0=Round0Settings(root_rollouts=1))),
        SearchAgent(SearchConfig(mode="gumbel", simulations=8), RolloutEvaluator(seed=2)),
        PolicyAgent(RolloutEvaluator(seed=3)),
    ],
    ids=lambda a: a.name,
)
def test_agents_choose_legal_moves_and_games_replay(agent):
    specs = [GameSpec(i, 1000 + i, level) for i, level in enumerate([0, 3, 6])]
    records = play_lockstep(agent, specs, lockstep=2, base_seed=5, max_pills=40)
    assert [r.meta["index"] for r in records] == [0, 1, 2]
    for record in records:  # replay checks the outcome (None at the pill cap), viruses cleared and pills
        game = dm.GameRecord.from_json(record.to_json()).replay()
        assert record.pills_used == len(record.moves) <= 40
        assert game.over == (record.outcome is not None) and (game.over or record.pills_used == 40)
    again = play_lockstep(agent, specs, lockstep=3, base_seed=5, max_pills=40)
    assert [r.moves for r in again] == [r.moves for r in records]  # seeds per decision, not per slot


def test_a_bad_move_names_its_game_and_agent_and_numbers_must_differ():
    class Wrong:
        name = "wrong"

        def choose(self, positions, seeds):
            return [Decision(dm.Move(0, 0, 15)) for _ in positions]  # the top row: nothing below holds it

    specs = [GameSpec(0, 1000, 3), GameSpec(1, 1001, 3)]
    with pytest.raises(ValueError, match=r"^game 0 \(seed 1000, level 3\), wrong: illegal move \(0, 0, 15\)"):
        play_lockstep(Wrong(), specs, lockstep=2)
    with pytest.raises(ValueError, match=r"games numbered \[1\] more than once"):
        play_lockstep(GreedyAgent(), [*specs, GameSpec(1, 1002, 3)])


def test_greedy_clears_more_than_random():
    games = evaluation_games([5], 6, seed=11)
    table, _ = arena([RandomAgent(), GreedyAgent()], games, progress=False)
    assert list(table.columns) == ARENA_COLUMNS
    cleared = table.set_index("agent")["cleared_fraction"] * 24  # viruses of level 5
    assert cleared["greedy"] > cleared["random"] + 3


def test_summarize_counts_the_pill_cap_as_a_failure():
    meta = {"agent": "a", "seconds": 0.5}
    records = [
        dm.GameRecord(2, 0, outcome="won", viruses_cleared=4, pills_used=8, meta=meta),
        dm.GameRecord(3, 0, outcome="topped_out", viruses_cleared=0, pills_used=2, meta=meta),
        dm.GameRecord(4, 0, outcome=None, viruses_cleared=2, pills_used=10, meta={**meta, "unfinished": "cap"}),
        dm.GameRecord(5, 0, outcome="won", viruses_cleared=4, pills_used=20, meta=meta),
    ]
    row = summarize(records).iloc[0]
    assert (row.games, row.wins, row.win_rate) == (4, 2, 0.5)  # the capped game is not a win
    assert (row.topout_rate, row.capped_rate, row.stalemate_rate) == (0.25, 0.25, 0.0)
    assert row.cleared_fraction == pytest.approx((1 + 0 + 0.5 + 1) / 4)  # level 0 has 4 viruses
    assert row.pills_per_virus == 40 / 10 and row.ms_per_move == pytest.approx(1000 * 2 / 40)
    assert (row.ci_low, row.ci_high) == pytest.approx(wilson(2, 4))


def test_wilson_interval_values():
    # Wilson 95% intervals, checked against the closed form by hand (z = 1.96)
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)  # not the degenerate [0, 0]
    assert wilson(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson(95, 100) == pytest.approx((0.8882, 0.9785), abs=1e-4)
    lo, hi = wilson(np.array([1, 50]), np.array([100, 100]))
    assert lo[0] < 0.01 < hi[0] and lo[1] < 0.5 < hi[1]
    # exactly 1 at n of n (the closed form rounds to 0.9999999999999999 at 100 and 300 games, below the win rate)
    for n in (10, 100, 300):
        assert wilson(n, n)[1] == 1.0 and wilson(0, n)[0] == 0.0


def test_the_protocol_plays_evaluation_seeds_under_nes_rules():
    cfg = EvalConfig(levels=[0, 20], games_per_level=3, top_level_games=5)
    games = cfg.games()
    assert [g.level for g in games] == [0] * 3 + [20] * 5 and games == cfg.games()
    assert all(is_evaluation_seed(g.seed) for g in games)
    assert cfg.stall_limit is None and cfg.max_pills == 2000  # NES rules, a 2,000-pill cap
    assert not any(is_evaluation_seed(s.seed) for s in SelfPlayConfig(games=200).game_specs())
    with pytest.raises(ValueError, match="levels"):
        EvalConfig(levels=[0, 30])


def test_a_game_at_the_pill_cap_is_a_failure():
    table, records = arena([RandomAgent()], config=EvalConfig(levels=[10], top_level_games=2, max_pills=3))
    assert [r.outcome for r in records["random"]] == [None, None]  # still running at the cap
    assert table.loc[0, "wins"] == 0 and table.loc[0, "capped_rate"] == 1.0


def test_policy_agent_plays_the_most_probable_legal_move():
    class Fixed:
        def evaluate(self, cells, pills, previews):
            moves = np.zeros((len(cells), 4, 8, 16), np.float32)
            moves[:, 0, 0, 15] = 0.9  # illegal on a board whose bottom is free: ignored
            moves[:, 2, 5, 0] = 0.1
            z = np.zeros(len(cells), np.float32)
            return type("P", (), {"won": z, "cleared": z, "duration": z, "moves": moves})

    pos = Position(dm.Board.empty().cells, dm.Pill.from_string("qw"))
    [decision] = PolicyAgent(Fixed()).choose([pos], [0])
    assert decision.move == dm.Move(2, 5, 0)


def test_policy_agent_weighs_a_same_colour_placement_by_both_its_slots():
    class Split:
        def evaluate(self, cells, pills, previews):
            moves = np.zeros((len(cells), 4, 8, 16), np.float32)
            moves[:, 0, 2, 0] = moves[:, 2, 2, 0] = 0.3  # for a same-colour pill: one placement, 0.6 in all
            moves[:, 1, 5, 0], moves[:, 3, 5, 0] = 0.35, 0.05  # the largest slot, but 0.4 in all
            z = np.zeros(len(cells), np.float32)
            return type("P", (), {"won": z, "cleared": z, "duration": z, "moves": moves})

    board = dm.Board.empty().cells
    same, mixed = Position(board, dm.Pill.from_string("rv")), Position(board, dm.Pill.from_string("rw"))
    assert [d.move for d in PolicyAgent(Split()).choose([same, mixed], [0, 0])] == [dm.Move(0, 2, 0), dm.Move(1, 5, 0)]


def test_agents_from_specs(tmp_path):
    from drmario.learn.checkpoint import save_net
    from drmario.learn.net import DrMarioNet, NetConfig
    from drmario.run.agents import agent_name, make_agent, make_agents

    ckpt = str(save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), tmp_path / "net.pt"))
    names = [make_agent(s).name for s in ["random", "greedy", "mcts-40", "mcts-greedy", f"policy@{ckpt}"]]
    assert names == ["random", "greedy", "mcts-40", "mcts-greedy-100", "policy"]
    agent = make_agent("net-mcts-12", network=ckpt)
    assert agent.name == "net-mcts-12" == agent_name(f"net-mcts-12@{ckpt}")
    assert agent.config.simulations == 12 and agent.config.mode == "puct" and agent.config.puct.dirichlet_fraction == 0
    policy, search = make_agents(["policy", "net-gumbel-8"], network=ckpt)
    assert policy.evaluator is search.evaluator and search.config.mode == "gumbel"  # one network loaded
    expert, expert3, expert4 = make_agents(["expert", "expert3", "expert4"])
    assert (expert.name, expert.config.expert.depth) == ("expert", 2)
    assert (expert3.name, expert3.config.expert.depth) == ("expert3", 3)
    assert (expert4.name, expert4.config.expert.depth) == ("expert4", 4)
    for bad in ["alphazero", "greedy-5", "mcts-0", "policy", "expert3-5", "expert5"]:
        with pytest.raises(ValueError, match="agent"):
            make_agent(bad)
    with pytest.raises(ValueError, match="greedy plays without a network; only policy, net-mcts"):
        make_agent(f"greedy@{ckpt}")  # a checkpoint it would ignore


def test_every_agent_kind_is_made_under_its_name_and_documented(tmp_path, monkeypatch):
    """A kind added to KINDS must get its own branch in make_agent (it once fell through to the
    network searches and played as PUCT under the new name) and a line in the three agent lists."""
    import re

    from drmario.learn.checkpoint import save_net
    from drmario.learn.net import DrMarioNet, NetConfig
    from drmario.run import agents

    ckpt = str(save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), tmp_path / "net.pt"))
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    readme = readme[readme.index("**Agents** have one name") :][:1200]
    for kind in agents.KINDS:
        if kind not in ("dqn", "td"):  # (their own checkpoints: tests/test_baselines.py)
            network = ckpt if kind in agents.TORCH_KINDS else None
            assert agents.make_agent(kind, network=network).name == agents.agent_name(kind)
        assert re.search(rf"(?<![\w-]){re.escape(kind)}(?![\w-])", agents.AGENT_HELP), kind
        for where, text in (("docstring", agents.__doc__ or ""), ("README", readme)):  # as `kind`, `kind-N`
            assert re.search(rf"`{re.escape(kind)}(-N|-\d+)?`", text), (kind, where)
    monkeypatch.setattr(agents, "KINDS", (*agents.KINDS, "lowest"))
    with pytest.raises(NotImplementedError, match="'lowest' is in KINDS, but make_agent has no branch"):
        agents.make_agent("lowest", network=ckpt)


def test_evaluate_command_prints_each_agents_own_interval(tmp_path, capsys):
    from drmario.run.cli import main

    out = tmp_path / "arena.csv"
    args = ["evaluate", "--agents", "random,greedy", "--levels", "[0]", "--games-per-level", "3"]
    assert main([*args, "--top-level-games", "3", "--max-pills", "200", "--no-progress", "--out", str(out)]) == 0
    board = capsys.readouterr().out.split("win rate [Wilson 95%]")[1]
    table = pd.read_csv(out).set_index("agent")
    for agent in ("random", "greedy"):  # the interval printed on an agent's line is its own
        row = table.loc[agent]
        line = next(line for line in board.splitlines() if f" {agent} " in line)
        assert f"{int(row.wins)}/{int(row.games)}" in line and f"[{row.ci_low:.1%}, {row.ci_high:.1%}]" in line


def test_the_arena_refuses_two_agents_of_one_name_no_games_and_more_games_than_seeds():
    games = evaluation_games([0], 1)
    with pytest.raises(ValueError, match=r"agents share the names \['random'\]"):
        arena([RandomAgent(), GreedyAgent(), RandomAgent()], games, progress=False)
    with pytest.raises(ValueError, match="no games to play"):
        arena([RandomAgent()], [], progress=False)
    with pytest.raises(ValueError, match="top_level_games = 8192"):
        EvalConfig(top_level_games=8192)
    assert len(EvalConfig(levels=[20], top_level_games=8191).games()) == 8191


def test_all_levels_weighs_each_level_by_its_games():
    table = pd.DataFrame(
        [
            {"agent": "a", "level": 0, "games": 10, "wins": 2, "cleared_fraction": 0.2},
            {"agent": "a", "level": 20, "games": 30, "wins": 18, "cleared_fraction": 0.6},
            {"agent": "b", "level": 20, "games": 5, "wins": 5, "cleared_fraction": 1.0},
        ]
    )
    out = all_levels(table).set_index("agent")
    assert out.loc["a", "games"] == 40 and out.loc["a", "wins"] == 20 and out.loc["a", "win_rate"] == 0.5
    assert out.loc["a", "cleared_fraction"] == pytest.approx(0.5)  # (10 * 0.2 + 30 * 0.6) / 40, not 0.4
    low, high = wilson(np.array([20]), np.array([40]))
    assert (out.loc["a", "ci_low"], out.loc["a", "ci_high"]) == pytest.approx((low[0], high[0]))
    assert list(out.index) == ["a", "b"] and out.loc["b", "cleared_fraction"] == 1.0
