"""Agents, the lockstep game loop and the arena table."""

import numpy as np
import pytest

import drmario as dm
from drmario.agents import GameSpec, GreedyAgent, PolicyAgent, RandomAgent, SearchAgent, play_lockstep
from drmario.arena import ARENA_COLUMNS, arena, evaluation_games, load_games, save_games, summarize
from drmario.search import Position, RolloutEvaluator, SearchConfig


def test_evaluation_games_are_fixed(tmp_path):
    a = evaluation_games([0, 5], 3, seed=7)
    assert a == evaluation_games([0, 5], 3, seed=7)
    assert [g.level for g in a] == [0, 0, 0, 5, 5, 5] and [g.index for g in a] == list(range(6))
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
        SearchAgent(SearchConfig(simulations=8, root_rollouts=1)),
        SearchAgent(SearchConfig(mode="gumbel", simulations=8), RolloutEvaluator(seed=2)),
        PolicyAgent(RolloutEvaluator(seed=3)),
    ],
    ids=lambda a: a.name,
)
def test_agents_choose_legal_moves_and_games_replay(agent):
    specs = [GameSpec(i, 1000 + i, level) for i, level in enumerate([0, 3, 6])]
    records = play_lockstep(agent, specs, lockstep=2, base_seed=5, max_pills=40)
    assert [r.meta["index"] for r in records] == [0, 1, 2]
    for record in records:
        game = dm.GameRecord.from_json(record.to_json()).replay() if record.outcome else None
        assert record.pills_used == len(record.moves) <= 40
        if game is not None:
            assert game.over
    again = play_lockstep(agent, specs, lockstep=3, base_seed=5, max_pills=40)
    assert [r.moves for r in again] == [r.moves for r in records]  # seeds per decision, not per slot


def test_greedy_clears_more_than_random():
    games = evaluation_games([5], 6, seed=11)
    table, _ = arena([RandomAgent(), GreedyAgent()], games, progress=False)
    assert list(table.columns) == ARENA_COLUMNS
    cleared = table.set_index("agent")["mean_viruses_cleared"]
    assert cleared["greedy"] > cleared["random"] + 3


def test_summarize_counts():
    records = [
        dm.GameRecord(2, 0, outcome="won", viruses_cleared=4, pills_used=8, meta={"agent": "a", "seconds": 0.8}),
        dm.GameRecord(3, 0, outcome="topped_out", viruses_cleared=0, pills_used=2, meta={"agent": "a", "seconds": 0.2}),
    ]
    row = summarize(records).iloc[0]
    assert (row.games, row.clear_rate, row.topout_rate, row.stalemate_rate) == (2, 0.5, 0.5, 0.0)
    assert row.mean_viruses_cleared == 2 and row.pills_per_virus == 10 / 4
    assert row.ms_per_move == pytest.approx(100.0)


def test_policy_agent_plays_the_most_probable_legal_move():
    class Fixed:
        def evaluate(self, cells, pills):
            moves = np.zeros((len(cells), 4, 8, 16), np.float32)
            moves[:, 0, 0, 15] = 0.9  # illegal on a board whose bottom is free: ignored
            moves[:, 2, 5, 0] = 0.1
            z = np.zeros(len(cells), np.float32)
            return type("P", (), {"won": z, "cleared": z, "duration": z, "moves": moves})

    pos = Position(dm.Board.empty().cells, dm.Pill.from_string("qw"))
    [decision] = PolicyAgent(Fixed()).choose([pos], [0])
    assert decision.move == dm.Move(2, 5, 0)


def test_agents_from_specs(tmp_path):
    from drmario.arena import make_agent
    from drmario.net import DrMarioNet, NetConfig, save_net

    ckpt = str(save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), tmp_path / "net.pt"))
    names = [make_agent(s).name for s in ["random", "greedy", "mcts:40", "mcts-greedy", f"policy:{ckpt}"]]
    assert names == ["random", "greedy", "mcts-40", "mcts-greedy-100", "net-policy"]
    agent = make_agent(f"net-mcts:{ckpt}:12")
    assert agent.name == "net-mcts-12" and agent.config.simulations == 12 and agent.config.mode == "puct"
    for bad in ["alphazero", "dqn", "policy:"]:
        with pytest.raises(ValueError, match="agent"):
            make_agent(bad)
