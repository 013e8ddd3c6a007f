"""The notebooks' helpers that their runs use (drmario.run.notebook), checked without running a
notebook: the settings table, the steps behind a checkpoint, a training result through JSON, and the
earlier rounds' games a later analysis reuses."""

from __future__ import annotations

import pandas as pd

import drmario as dm
from drmario.learn.checkpoint import save_checkpoint
from drmario.learn.net import DrMarioNet, NetConfig
from drmario.learn.train import TrainResult
from drmario.play.arena import EvalConfig
from drmario.run import notebook as N
from drmario.run import profiles as R
from drmario.run.rounds import analysis_dir


def test_settings_table_names_nested_settings_by_dotted_paths():
    table = N.settings_table({"games": 8, "search": {"mode": "gumbel", "levels": [0, 4], "cap": None}})
    assert table["value"].to_dict() == {
        "games": "8",
        "search.mode": "gumbel",
        "search.levels": "[0, 4]",
        "search.cap": "None",
    }
    search = {"mode": "expert", "expert": {"depth": 2}, "gumbel": {"m": 16}, "round0": {"rollouts": 1}}
    assert N.settings_table({"search": search})["value"].to_dict() == {
        "search.mode": "expert",
        "search.expert.depth": "2",
    }


def test_training_steps_of_a_training_and_of_a_values_refit(tmp_path):
    assert N.training_steps({"step": 30, "config": {}}) == {"training steps": 30}
    net = DrMarioNet(NetConfig(filters=4, blocks=0))
    trained = save_checkpoint(
        tmp_path / "trained.pt", {"net_config": net.cfg.to_dict(), "model": net.state_dict(), "step": 80}
    )
    refit = {"step": 5, "config": {"learn": "values", "init": str(trained)}}
    assert N.training_steps(refit) == {"training steps": 80, "values refit steps": 5}
    gone = {"step": 5, "config": {"learn": "values", "init": str(tmp_path / "gone.pt")}}
    assert N.training_steps(gone) == {"training steps": "-", "values refit steps": 5}


def test_a_training_result_survives_json(tmp_path):
    result = TrainResult(7, {"loss": 1.5}, {}, tmp_path, tmp_path / "metrics.csv", None, 90, 10, 1, "why")
    assert N._result_from_json(N.result_to_json(result)) == result
    with_checkpoint = TrainResult(7, {}, {}, tmp_path, tmp_path / "m.csv", tmp_path / "latest.pt")
    assert N._result_from_json(N.result_to_json(with_checkpoint)) == with_checkpoint


def test_earlier_results_reuse_the_games_of_players_without_a_network(tmp_path):
    game = dm.Game(8, 0)
    while not game.over:
        game.play(game.legal_moves()[0])
    folder = analysis_dir(tmp_path, 0)
    (folder / "games").mkdir(parents=True)
    pd.DataFrame([{"agent": "greedy", "level": 0, "wins": 0}, {"agent": "policy", "level": 0, "wins": 1}]).to_csv(
        folder / "arena.csv", index=False
    )
    for name in ("greedy", "policy"):
        (folder / "games" / f"{name}.jsonl").write_text(game.record().to_json() + "\n")
    evaluation = EvalConfig(levels=[0], games_per_level=1, top_level_games=1)
    assert N.earlier_results(tmp_path, 1, ["greedy"], evaluation)[2] == ["greedy"]  # no evaluation.json: played again
    N.save_arena(folder, pd.read_csv(folder / "arena.csv"), {}, evaluation)  # (the games kept: no records given)
    rows, records, remaining = N.earlier_results(tmp_path, 1, ["greedy", "policy", "expert"], evaluation)
    assert rows["agent"].tolist() == ["greedy"] and list(records) == ["greedy"]
    assert records["greedy"] == [game.record()]
    assert remaining == ["policy", "expert"]  # a network's games are its own round's; expert never played
    assert N.earlier_results(tmp_path, 0, ["greedy"], evaluation)[2] == ["greedy"]  # round 0 has no earlier round
    other = evaluation.replace(max_pills=50)  # other games (or other rules): played again
    assert N.earlier_results(tmp_path, 1, ["greedy"], other)[2] == ["greedy"]
    (folder / "games" / "random.jsonl").write_text(game.record().to_json() + "\n")  # left by an earlier save
    assert N.earlier_results(tmp_path, 1, ["random"], evaluation)[2] == ["random"]  # no row of its own: played again


def test_the_worst_predicted_positions_are_ranked_by_the_networks_own_loss():
    import numpy as np
    import torch

    from drmario.learn.player import Player

    game = dm.Game(8, 0)
    while not game.over:
        game.play(game.legal_moves()[0])
    positions, table = N.played_positions([game.record()])
    for count_error in ("scaled", "relative"):
        torch.manual_seed(0)
        player = Player(DrMarioNet(NetConfig(filters=4, blocks=1, count_error=count_error)).eval())
        errors, moves = N.network_errors(player, positions, table)
        assert moves.shape == (len(table), 4, 8, 16) and errors["pred_duration"].dtype == np.float64
        scale = table["duration"].clip(lower=1) if count_error == "relative" else 100.0
        expected = ((errors["pred_duration"] - table["duration"]) / scale) ** 2
        assert np.allclose(errors["err_duration"], expected) and not np.allclose(errors["err_duration"], 0)
        terms = errors[["err_won", "err_cleared", "err_duration"]].sum(axis=1)
        assert np.allclose(errors["err_value"], terms)


NOT_DQN = ("learning_starts", "eps_decay_steps", "log_every", "checkpoint_every", "device")  # what dqn_run sets


def test_the_settings_the_notebooks_run_with(tmp_path, monkeypatch):
    """04 plays round k on its own seeds (seed + k) with the network at its absolute path; 05's
    learners log and checkpoint a few times whatever their budget, the DQN learning sooner and
    exploring less long in a short run, on the notebook's device."""
    monkeypatch.chdir(tmp_path)
    next_round = R.build("next_round", {"round": 3, "seed": 5, "network": "train2/latest.pt"}, devices=False)
    run = next_round.selfplay_run()
    assert (run.seed, run.network) == (8, str(tmp_path / "train2" / "latest.pt"))
    assert run.replace(seed=5, network="train2/latest.pt") == next_round.selfplay
    for steps, want in ((1500, (300, 750, 75, 750)), (100_000, (500, 5000, 5000, 50_000)), (40, (64, 20, 8, 20))):
        baselines = R.build("baselines", {"dqn_steps": steps, "td_games": 40, "device": "cpu"}, devices=False)
        dqn = baselines.dqn_run()
        assert (dqn.learning_starts, dqn.eps_decay_steps, dqn.log_every, dqn.checkpoint_every) == want
        assert dqn.device == "cpu" and dqn.replace(**{k: getattr(baselines.dqn, k) for k in NOT_DQN}) == baselines.dqn
        td = baselines.td_run()
        assert (td.log_every, td.checkpoint_every) == (2, 20) and td.replace(
            log_every=10, checkpoint_every=100
        ) == baselines.td
