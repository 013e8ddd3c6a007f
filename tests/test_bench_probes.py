"""The value probes' arithmetic (bench/value_ranking.py, bench/short_targets.py) on made-up data:
the short-horizon target stops at each game's end, and a chooser's agreement and regret are read
against the expert's scores; one_round.py's paired table of two networks' games; td_targets.py's
n-step targets; endgame.py's branches; pair.py's tables; rollout_oracle.py's futures and rollouts; relabel.py's
shards; tune_expert.py's resume; the GPU benchmarks' training paths, small on the CPU; and every benchmark's
`--help`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from drmario.engine import kernels as K
from drmario.engine.level import MAX_SEED, MIN_SEED, is_evaluation_seed

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import endgame  # noqa: E402
import heldout_values  # noqa: E402
import one_round  # noqa: E402
import pair  # noqa: E402
import relabel  # noqa: E402
import rollout_oracle  # noqa: E402
import short_targets  # noqa: E402
import td_targets  # noqa: E402
import tune_expert  # noqa: E402
import value_ranking  # noqa: E402


def test_the_short_horizon_target_counts_the_next_decisions_of_the_same_game_only():
    data = {"game": np.array([0, 0, 0, 0, 0, 1, 1]), "cleared": np.array([1, 0, 2, 0, 1, 0, 3])}
    to_end, short = short_targets.targets(data, horizon=2)
    np.testing.assert_array_equal(to_end, [5, 4, 3, 2, 1, 2, 1])
    np.testing.assert_array_equal(short, [1, 2, 2, 1, 1, 3, 3])


def test_choosers_are_scored_by_the_expert_regret_of_the_move_they_pick():
    rows = [
        {"expert": np.array([10.0, 5.0, -200.0]), "value": np.array([0.1, 0.9, 0.5])},  # picks 5: regret 5
        {"expert": np.array([0.0, 50.0, 50.0]), "value": np.array([0.0, 0.2, 0.7])},  # a tied best: regret 0
        {"expert": np.array([300.0, 0.0]), "value": np.array([0.0, 1.0])},  # a blunder: regret 300
    ]
    out = value_ranking.summarise(rows, np.random.default_rng(0))
    assert out["value"]["agreement"] == round(1 / 3, 4)
    assert out["value"]["regret median"] == 5.0
    assert out["value"]["blunders (regret of a virus or more)"] == round(1 / 3, 4)
    assert out["value"]["rank of the expert's best, mean"] == round((3 + 2 + 2) / 3, 2)
    assert out["decisions"] == 3


def test_the_ranking_games_are_distinct_training_seeds():
    games = value_ranking.ranking_games([12, 20], 5, seed=5)
    assert [level for _, level in games] == [12] * 5 + [20] * 5
    assert len({seed for seed, _ in games}) == 10
    assert not any(is_evaluation_seed(seed) for seed, _ in games)


def test_the_one_round_table_pairs_the_same_games_whatever_their_order():
    import pandas as pd

    rows = [  # agent, seed, outcome, pills, viruses cleared
        ("new", 1, "won", 20, 10),
        ("new", 2, "won", 30, 10),
        ("new", 3, "pill_cap", 2000, 9),
        ("new", 4, "won", 40, 10),
        ("old", 4, "won", 30, 10),  # another order: the table pairs by seed
        ("old", 3, "won", 25, 10),
        ("old", 2, "won", 20, 10),
        ("old", 1, "topped_out", 5, 2),
    ]
    frames = pd.DataFrame(rows, columns=["agent", "seed", "outcome", "pills", "viruses_cleared"])
    t = one_round.paired(frames, "new", "old")
    assert t["wins"] == "3-3 of 4" and t["pill caps"] == "1-0" and t["both won"] == 2  # seeds 2 and 4
    assert t["pills per virus"] == [3.5, 2.5] and t["difference, 95%"][0] == 1.0
    assert t["wins_p"] == 1.0  # one game each way


def test_the_gpu_benchmarks_run_their_training_on_the_cpu():
    """bench/gpu.py and bench/net.py run on a GPU machine only now and then: their training paths
    (which once broke when TrainConfig became frozen) are run here small, on the CPU."""
    import gpu
    import net
    import torch

    from drmario.learn.net import NetConfig
    from drmario.learn.train import TrainConfig

    rate = gpu.training_rate(NetConfig(filters=8, blocks=1), "cpu", batch=16, steps=2)
    assert rate["samples_per_s"] > 0 and rate["tflops"] > 0
    cfg = TrainConfig(device="cpu", optimizer="sgd", progress=False)
    for channels_last in (True, False):
        figures = net.bench_size(
            "small", [8], net.synthetic_examples(8), torch.device("cpu"), cfg, False, 0.01, None, channels_last
        )
        assert figures["small_train_b8_samples_per_s"] > 0 and figures["small_infer_b8_positions_per_s"] > 0
        assert ("small_player_b8_positions_per_s" in figures) == channels_last


def test_n_step_targets_bootstrap_from_the_same_game_n_decisions_on():
    game = np.array([0, 0, 0, 0, 1, 1, 1])
    duration = np.array([4, 3, 2, 1, 3, 2, 1])
    np.testing.assert_array_equal(td_targets.later_index(game, duration, 2), [2, 3, -1, -1, 6, -1, -1])
    examples = SimpleNamespace(game=game, duration=duration, cleared=np.array([3, 2, 2, 0, 2, 1, 0]))
    cleared, pills, has = td_targets.n_step_targets(examples, np.full(7, 10.0), np.full(7, 100.0), 2)
    np.testing.assert_array_equal(has, [1, 1, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(pills, [102, 102, 2, 1, 102, 2, 1])  # Monte-Carlo where the game ends first
    np.testing.assert_array_equal(cleared, [3 - 2 + 10, 2 - 0 + 10, 2, 0, 2 - 0 + 10, 1, 0])


def test_value_consistency_measures_the_fall_of_predictions_within_each_game():
    game = np.array([0, 0, 0, 1, 1])
    duration = np.array([3, 2, 1, 2, 1])
    examples = SimpleNamespace(game=game, duration=duration, cleared=np.array([2, 1, 0, 1, 1]))
    # predictions fall 0.5 and 1 in game 0, 1 in game 1; never across the two games
    pred = SimpleNamespace(duration=np.array([3.5, 3.0, 2.0, 9.0, 8.0]), cleared=np.array([2.0, 2.0, 1.0, 1.0, 0.0]))
    figures = td_targets.value_consistency(examples, pred)
    assert figures["predicted pills to the end: fall per pill placed (1 if consistent)"] == (0.5 + 1 + 1) / 3
    assert figures["predicted viruses to clear: fall per pill placed"] == (0 + 1 + 1) / 3
    assert figures["true viruses to clear: fall per pill placed"] == (1 + 1 + 0) / 3


def test_an_end_game_played_on_from_its_branch_is_the_rest_of_the_same_game():
    from drmario.engine.game import Game
    from drmario.play.lockstep import GameSpec, play_lockstep
    from drmario.run.agents import make_agent

    expert = make_agent("expert")
    spec = GameSpec(0, 1234, 6)
    start = endgame.branch(spec, expert, 3, base_seed=5)
    assert start is not None and start.viruses_left <= 3 < Game(1234, 6).viruses_left
    [row] = endgame.finish(expert, [(spec, start)], max_pills=2000, base_seed=5)
    [whole] = play_lockstep(expert, [spec], base_seed=5)  # the same game played through in one go
    assert row["outcome"] == whole.outcome == "won"
    assert row["pills_before"] + row["pills"] == whole.pills_used
    assert start.pills_used == row["pills_before"]  # the branch itself is not played on


def test_two_runs_tables_pair_game_by_game(tmp_path):
    header = "agent,seed,level,outcome,pills,viruses_cleared,viruses,seconds\n"
    (tmp_path / "new.csv").write_text(header + "a,5,20,won,150,84,84,1\na,9,20,won,160,84,84,1\n")
    (tmp_path / "old.csv").write_text(header + "b,5,20,won,168,84,84,1\nb,9,20,pill_cap,2000,83,84,1\n")
    new, old = pair.records(tmp_path / "new.csv", "a"), pair.records(tmp_path / "old.csv", "b")
    assert old[1].outcome is None  # a game cut at the pill cap is not won
    result = pair.compare(new, old)
    assert (result.new_wins, result.old_wins, result.both_won) == (2, 1, 1)
    assert abs(result.ppv_diff - (150 - 168) / 84) < 1e-9


def test_the_held_out_constant_is_scored_as_the_training_scores_its_won_output(tmp_path):
    train_won, test_won = np.array([1, 1, 1, -1], np.int8), np.array([1, -1], np.int8)
    # log: P(win) = 0.75 from the train rows; squared: the mean 0.5 in -1..+1 units
    expect = -(np.log(0.75) + np.log(0.25)) / 2
    assert heldout_values.constant_error(train_won, test_won, "log") == pytest.approx(expect)
    assert heldout_values.constant_error(train_won, test_won, "squared") == pytest.approx((0.25 + 2.25) / 2)
    header = "step,split,won,moves\n"
    (tmp_path / "metrics.csv").write_text(header + "0,test,0.9,2.0\n50,train,0.3,1.9\n100,test,0.5,1.8\n")
    assert heldout_values.last_test_row(tmp_path)["won"] == 0.5


def test_rollout_futures_throw_the_preview_first_then_the_nes_draws_of_a_random_state():
    futures = rollout_oracle.futures((K.RED, K.BLUE), 3, np.random.default_rng(4))
    state = int(np.random.default_rng(4).integers(MIN_SEED, MAX_SEED + 1))
    drawn = np.empty((128, 2), np.uint8)
    K.generate_pills(state, drawn)
    assert futures.shape == (3, 128, 2)
    assert (futures[:, 0] == (K.RED, K.BLUE)).all()
    np.testing.assert_array_equal(futures[0, 1:], drawn[:-1])
    assert not np.array_equal(futures[0, 1:], futures[1, 1:])  # each future its own draws


def test_a_rollout_counts_the_pills_to_a_win_and_a_loss_as_lost_pills():
    one_virus = np.zeros((K.WIDTH, K.HEIGHT), np.uint8)
    one_virus[0, 0] = K.RED  # two red pills on it clear it
    full = np.array([[1 + (x + 2 * y) % 3 for y in range(K.HEIGHT)] for x in range(K.WIDTH)], np.uint8)  # no move
    pills = np.full((2, 128, 2), K.RED, np.uint8)
    taken = rollout_oracle.rollouts((np.stack([one_virus, full]), pills, np.array([5, 7])))
    np.testing.assert_array_equal(taken, [2.0, rollout_oracle.LOST_PILLS])


def test_relabelling_keeps_the_positions_values_and_games_and_agrees_with_itself(tmp_path):
    from drmario.learn.example_files import read_examples, read_sidecar

    source = Path(__file__).resolve().parent.parent / "data" / "round0-sample" / "examples" / "shard-000000.jsonl.gz"
    once, twice = tmp_path / "once.jsonl.gz", tmp_path / "twice.jsonl.gz"
    n, agree = relabel.relabel((str(source), str(once), 3))
    assert relabel.agreement(source, once) == (n, agree)  # the same figure read back from the two files
    assert (n, n) == relabel.relabel((str(once), str(twice), 3))  # the same teacher agrees everywhere
    old, new, again = (read_examples(f)[0] for f in (source, once, twice))
    assert len(old) == len(new) == n > 100
    for a, b, c in zip(old, new, again):
        assert (a.board, a.pill, a.preview, a.won, a.cleared, a.duration) == (
            b.board,
            b.pill,
            b.preview,
            b.won,
            b.cleared,
            b.duration,
        )
        np.testing.assert_allclose(b.moves, c.moves, atol=1e-6)
    assert any(not np.allclose(a.moves, b.moves, atol=1e-6) for a, b in zip(old, new))  # depth 3 differs from 2
    side, old_side = read_sidecar(once), read_sidecar(source)
    assert side["games"] == old_side["games"] and side["meta"]["relabelled"] == {"depth": 3, "from": str(source)}


HELP_ALL = """
import contextlib, io, json, re, runpy, sys
from pathlib import Path

bench = Path(sys.argv[1])
sys.path.insert(0, str(bench))
done = []
for path in [*sorted(bench.glob("*.py")), bench.parent / "docs" / "figures.py"]:
    if "ArgumentParser" not in path.read_text():
        continue
    todo = [["--help"]]
    while todo:
        argv = todo.pop()
        text = io.StringIO()
        try:
            with contextlib.redirect_stdout(text):
                sys.argv = [path.name, *argv]  # (a long path would wrap the usage line)
                runpy.run_path(str(path), run_name="__main__")
            code = "ran"
        except SystemExit as e:
            code = e.code
        done.append([path.name, argv, code, "usage:" in text.getvalue()])
        if argv == ["--help"] and (sub := re.search(r"usage: \\S+ (?:\\[-h\\] )?\\{([\\w,-]+)\\}", text.getvalue())):
            todo += [[name, "--help"] for name in sub.group(1).split(",")]
print(json.dumps(done))
"""


def test_every_benchmark_script_and_subcommand_answers_help():
    """The benchmarks are the commands bench/README.md quotes: each must still import and build its
    options (mypy checks their calls into the package); one process runs every `--help`."""
    import json
    import subprocess

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", HELP_ALL, str(root / "bench")], capture_output=True, text=True, timeout=300, cwd=root
    )
    assert done.returncode == 0, done.stderr[-3000:]
    runs = json.loads(done.stdout.splitlines()[-1])
    assert {name for name, *_ in runs} >= {"capacity.py", "rounds.py", "search_vs_expert.py", "figures.py"}
    assert ["dagger_round.py", ["train", "--help"], 0, True] in runs  # a subcommand's own help
    assert [r for r in runs if r[2:] != [0, True]] == []
    for script in (root / "bench").glob("*.sh"):
        assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0, script


def _tune(tmp_path: Path, *extra: str) -> None:
    tune_expert.main(
        ["--iterations", "3", "--games", "2", "--children", "1", "--levels", "0", "--depth", "1", "--max-pills", "12"]
        + ["--validation", "2", "--out", str(tmp_path / "weights.json"), *extra]
    )


def test_an_interrupted_expert_tuning_resumes_to_the_same_weights(tmp_path, monkeypatch):
    monkeypatch.setattr(tune_expert, "RESULTS", tmp_path)
    record_file = tmp_path / f"tune-expert-{tune_expert.machine_slug(tune_expert.machine_info())}.json"
    _tune(tmp_path)
    whole = json.loads((tmp_path / "weights.json").read_text())
    whole_record = json.loads(record_file.read_text())
    assert not (tmp_path / "tune-expert-checkpoint.json").exists()  # a finished tuning leaves none
    (tmp_path / "weights.json").unlink()

    calls = []
    real_play = tune_expert.play

    def play_then_stop(*args, **kwargs):
        calls.append(1)
        if len(calls) == 5:  # the compile call, iteration 0's two, then into iteration 1
            raise KeyboardInterrupt
        return real_play(*args, **kwargs)

    monkeypatch.setattr(tune_expert, "play", play_then_stop)
    with pytest.raises(KeyboardInterrupt):
        _tune(tmp_path)
    saved = json.loads((tmp_path / "tune-expert-checkpoint.json").read_text())
    assert len(saved["log"]) == 1 and not (tmp_path / "weights.json").exists()
    monkeypatch.setattr(tune_expert, "play", real_play)
    _tune(tmp_path)
    resumed = json.loads((tmp_path / "weights.json").read_text())
    assert resumed["weights"] == whole["weights"]
    assert resumed["tuning"]["validation"] == whole["tuning"]["validation"]
    record = json.loads(record_file.read_text())

    def without_times(iterations: list[dict]) -> list[dict]:
        return [{k: v for k, v in it.items() if k != "seconds"} for it in iterations]

    assert without_times(record["iterations"]) == without_times(whole_record["iterations"])


def test_an_expert_tuning_with_other_settings_does_not_resume(tmp_path, monkeypatch):
    monkeypatch.setattr(tune_expert, "RESULTS", tmp_path)
    (tmp_path / "tune-expert-checkpoint.json").write_text(json.dumps({"settings": {"games": 40}, "log": []}))
    with pytest.raises(SystemExit, match="tune-expert-checkpoint.json: an interrupted tuning with other settings"):
        _tune(tmp_path)
