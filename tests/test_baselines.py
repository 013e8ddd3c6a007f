"""Baseline learners (drmario.baselines): replay memory, Q targets, TD updates and search, learning,
agents in the lockstep loop, checkpoints and resumption."""

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import drmario as dm
from drmario.baselines import DQNAgent, DQNConfig, QNet, Replay, TDAgent, TDConfig, ValueNet, train_dqn, train_td
from drmario.baselines.common import PILLS, legal_slots, legal_slots_all_pills
from drmario.baselines.dqn import q_targets
from drmario.baselines.features import FEATURES, board_features
from drmario.baselines.td import td_search, td_update
from drmario.engine import kernels as K
from drmario.engine.rules import move_index
from drmario.files import MetricsCSV, append_csv
from drmario.learn.checkpoint import CheckpointError
from drmario.play.agents import RandomAgent
from drmario.play.arena import arena, evaluation_games
from drmario.play.lockstep import GameSpec, play_lockstep
from drmario.search.core import Position, legal_mask_of


def board(cells: dict[tuple[int, int], int]) -> np.ndarray:
    b = np.zeros((8, 16), np.uint8)
    for xy, code in cells.items():
        b[xy] = code
    return b


def virus(colour: int) -> int:
    return K.VIRUS << 2 | colour


def half(colour: int) -> int:
    return K.DISCONNECTED << 2 | colour


# ------------------------------------------------------------------------------------------------
# Replay memory


def transitions(start: int, n: int) -> dict[str, np.ndarray]:
    i = np.arange(start, start + n)
    return {
        "cells": np.repeat(i.astype(np.uint8)[:, None, None], 128, 1).reshape(n, 8, 16),
        "pill": np.stack([i % 3 + 1, i % 3 + 1], 1).astype(np.uint8),
        "move": i.astype(np.int16),
        "reward": i.astype(np.float32),
        "next_cells": np.zeros((n, 8, 16), np.uint8),
        "next_pill": np.ones((n, 2), np.uint8),
        "done": i % 2 == 0,
    }


def test_replay_overwrites_the_oldest_and_samples_filled_slots():
    memory = Replay(5)
    memory.add(**transitions(0, 3))
    assert len(memory) == 3
    assert set(memory.sample(200, np.random.default_rng(0))["move"].tolist()) == {0, 1, 2}  # only filled slots
    memory.add(**transitions(3, 4))  # 7 added: 0 and 1 are overwritten
    assert len(memory) == 5 and memory.pos == 2
    assert sorted(memory.move.tolist()) == [2, 3, 4, 5, 6]
    batch = memory.sample(300, np.random.default_rng(1))
    assert set(batch["move"].tolist()) == {2, 3, 4, 5, 6}
    assert (batch["cells"][:, 0, 0] == batch["move"]).all() and (batch["done"] == (batch["move"] % 2 == 0)).all()
    again = memory.sample(300, np.random.default_rng(1))
    assert all(np.array_equal(batch[k], again[k]) for k in batch)  # reproducible with a seed
    copy = Replay(5)
    copy.load_state_dict(memory.state_dict())
    assert (copy.pos, copy.size) == (2, 5) and np.array_equal(copy.move, memory.move)
    memory.add(**transitions(10, 12))  # more than the capacity at once: the last 5 remain
    assert sorted(memory.move.tolist()) == [17, 18, 19, 20, 21]
    with pytest.raises(ValueError, match="empty"):
        Replay(3).sample(1, np.random.default_rng(0))


# ------------------------------------------------------------------------------------------------
# Q targets


class FixedQ(nn.Module):
    """A stand-in Q-network: Q(s, pill, slot) = scale * (slot % 7) + 10 * pill index (read back
    from the pill planes 12-17), whatever the board."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.dummy = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        left = x[:, 12:15, 0, 0].argmax(1)
        right = x[:, 15:18, 0, 0].argmax(1)
        slots = torch.arange(512, dtype=torch.float32)
        return self.scale * (slots % 7)[None] + 10.0 * (3 * left + right)[:, None].float()


def hand_max(net: FixedQ, cells: np.ndarray, pill: dm.Pill, chooser: FixedQ | None = None) -> float:
    """max over the legal moves (rules.legal_moves, canonical) of Q, written out by hand."""
    moves = dm.legal_moves(dm.Board(cells), pill)

    def q(n, m):
        return n.scale * (move_index(m) % 7) + 10.0 * pill.number

    if chooser is None:
        return max(q(net, m) for m in moves)
    best = max(moves, key=lambda m: (q(chooser, m), -move_index(m)))  # argmax: the first of the best
    return q(net, best)


def q_batch() -> tuple[dict, list[np.ndarray]]:
    game = dm.Game(4321, 5)
    after = []
    for k in (3, 10):
        game.play(game.legal_moves()[k])
        after.append(game.board.cells.copy())
    batch = {
        "reward": np.array([0.5, -1.0, 2.0], np.float32),
        "next_cells": np.stack([after[0], after[1], after[1]]),
        "next_pill": np.array([[1, 3], [2, 2], [3, 1]], np.uint8),
        "done": np.array([False, False, True]),
    }
    return batch, after


@pytest.mark.parametrize("next_pill", ["expected", "sampled"])
def test_q_target_matches_a_hand_computation(next_pill):
    batch, after = q_batch()
    probs = np.arange(1, 10) / 45.0  # not uniform, so the weights are checked too
    cfg = DQNConfig(gamma=0.9, next_pill=next_pill, pill_probs=tuple(probs))
    target, online = FixedQ(1.0), FixedQ(-3.0)
    got = q_targets(target, batch, cfg, "cpu").numpy()
    want = []
    for i in range(2):
        if next_pill == "expected":
            v = sum(p * hand_max(target, after[i], dm.ALL_PILLS[k]) for k, p in enumerate(probs))
        else:
            v = hand_max(target, after[i], dm.Pill(*map(dm.Colour, batch["next_pill"][i])))
        want.append(batch["reward"][i] + 0.9 * v)
    want.append(2.0)  # terminal: the reward alone
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # the online network does not enter the target unless double DQN: then it picks, the target values
    double = q_targets(target, batch, cfg, "cpu", online=online).numpy()
    for i in range(2):
        if next_pill == "expected":
            v = sum(p * hand_max(target, after[i], dm.ALL_PILLS[k], online) for k, p in enumerate(probs))
        else:
            v = hand_max(target, after[i], dm.Pill(*map(dm.Colour, batch["next_pill"][i])), online)
        assert double[i] == pytest.approx(batch["reward"][i] + 0.9 * v, rel=1e-6)
    assert double[2] == 2.0


def test_legal_slots_follow_the_rules():
    game = dm.Game(99, 12)
    cells = np.stack([game.board.cells] * 9)
    one = np.empty((9, 512), np.uint8)
    legal_slots(cells, PILLS, one)
    every = np.empty((1, 9, 512), np.uint8)
    legal_slots_all_pills(cells[:1], every)
    assert np.array_equal(one, every[0])
    for k, pill in enumerate(dm.ALL_PILLS):
        assert set(np.flatnonzero(one[k]).tolist()) == {move_index(m) for m in dm.legal_moves(game.board, pill)}


# ------------------------------------------------------------------------------------------------
# TD learner


def test_td_update_is_one_sgd_step_toward_the_target():
    torch.manual_seed(0)
    net = ValueNet(hidden=5)
    x = np.random.default_rng(0).random(len(FEATURES)).astype(np.float32)
    before = [p.detach().clone() for p in net.parameters()]
    v = net(torch.from_numpy(x[None]))[0]
    grads = torch.autograd.grad(v, list(net.parameters()))
    v = float(v.detach())
    target, lr = 0.95, 0.01
    assert td_update(net, x, target, lr) == pytest.approx(v)
    for p, p0, g in zip(net.parameters(), before, grads):  # every parameter moved by -lr (V - t) dV/dp
        torch.testing.assert_close(p.detach(), p0 - lr * (v - target) * g, rtol=0, atol=1e-7)
    after = float(net(torch.from_numpy(x[None]))[0].detach())
    assert abs(after - target) < abs(v - target)
    # to first order V moves by -lr (V - t) |dV/dp|^2
    step = -lr * (v - target) * sum(float((g**2).sum()) for g in grads)
    assert after - v == pytest.approx(step, rel=1e-2)


def test_features_of_a_hand_built_board():
    cells = board({(0, 0): virus(K.RED), (0, 1): half(K.RED), (0, 2): half(K.RED), (3, 0): virus(K.BLUE)})
    f = np.empty((1, len(FEATURES)), np.float32)
    board_features(cells[None], f)
    got = dict(zip(FEATURES, f[0].tolist()))
    assert got["height_0"] == pytest.approx(3 / 16) and got["height_3"] == pytest.approx(1 / 16)
    assert got["viruses_red"] == pytest.approx(0.1) and got["viruses"] == pytest.approx(2 / 30)
    assert got["virus_run3_v"] == pytest.approx(0.25) and got["virus_run2_v"] == 0
    assert got["pairs_v"] == pytest.approx(2 / 16) and got["holes"] == 0 and got["pill_cells"] == pytest.approx(2 / 32)
    assert got["buried"] == 0 and got["pairs_h"] == 0 and got["spawn_area"] == 0  # a virus under its own colour
    # a buried blue virus beside another, a horizontal run, a yellow half up in the spawn area
    cells = board({(3, 0): virus(K.BLUE), (4, 0): virus(K.BLUE), (3, 1): half(K.RED), (2, 13): half(K.YELLOW)})
    board_features(cells[None], f)
    got = dict(zip(FEATURES, f[0].tolist()))
    want = {"buried": 1 / 10, "pairs_h": 1 / 16, "pairs_v": 0, "virus_run2_h": 1 / 4, "virus_run3_h": 0}
    want |= {"spawn_area": 1 / 16, "max_height": 14 / 16, "holes": 13 / 32, "viruses_blue": 2 / 10}
    want |= {"viruses_red": 0, "viruses_yellow": 0, "viruses": 2 / 30, "pill_cells": 2 / 32, "virus_run2_v": 0}
    assert {k: got[k] for k in want} == pytest.approx(want)


@pytest.mark.parametrize("value", ["share", "win"])
def test_td_search_takes_a_win_and_values_it_exactly(value):
    cells = board({(0, 0): virus(K.RED), (0, 1): half(K.RED), (0, 2): half(K.RED), (5, 0): virus(K.BLUE)})
    cfg = TDConfig(value=value, top_k=3)
    red_red = np.array([K.RED, K.RED], np.uint8)
    res = td_search(ValueNet(), cells, red_red, 0, cfg)
    after = cells.copy()
    K.place_and_resolve(after, K.RED, K.RED, *res.moves[res.best])
    if value == "share":  # clearing 1 of 2 viruses is worth (1 + 1 * V(board after)) / 2 >= 1/2
        assert K.count_viruses(after) == 1 and res.values[res.best] >= 0.5
    cells[5, 0] = 0
    res = td_search(ValueNet(), cells, red_red, 0, cfg)  # now the clear wins the game
    after = cells.copy()
    K.place_and_resolve(after, K.RED, K.RED, *res.moves[res.best])
    assert K.count_viruses(after) == 0 and res.values[res.best] == 1.0
    assert res.candidates.sum() >= 3


def test_td_search_sees_stalemates_and_top_outs():
    cells = board({(0, 0): virus(K.RED)})
    cfg = TDConfig(stalemate=0.25, depth=1)
    res = td_search(ValueNet(), cells, np.array([K.BLUE, K.BLUE], np.uint8), 19, cfg)
    assert np.all(res.values == 0.25)  # the 20th pill without a clear ends the game whatever it does
    full = np.zeros((8, 16), np.uint8)
    full[:, :14] = half(K.BLUE)
    full[0, :14] = half(K.YELLOW)  # a wall of singles that cannot clear; only the top rows are free
    full[1:, 0:14:2] = half(K.RED)
    res = td_search(ValueNet(), full, np.array([K.YELLOW, K.RED], np.uint8), 0, TDConfig(depth=1))
    assert res.values.min() == 0.0  # placements that top out are worth `topout`


# ------------------------------------------------------------------------------------------------
# Agents, training, checkpoints


def test_untrained_agents_play_legal_moves_in_lockstep():
    torch.manual_seed(0)
    agents = [DQNAgent(QNet(8, 1)), DQNAgent(QNet(8, 1), name="dqn-eps", epsilon=0.5), TDAgent(ValueNet(), top_k=2)]
    specs = [GameSpec(i, 500 + i, level) for i, level in enumerate([0, 3, 6])]
    for agent in agents:
        records = play_lockstep(agent, specs, lockstep=2, base_seed=3, max_pills=30)
        for record in records:
            assert record.pills_used == len(record.moves) <= 30
            if record.outcome:
                dm.GameRecord.from_json(record.to_json()).replay()  # legal moves, exact replay
        again = play_lockstep(agent, specs, lockstep=3, base_seed=3, max_pills=30)
        assert [r.moves for r in again] == [r.moves for r in records]


def test_baseline_agents_play_the_games_rules_not_their_trainings():
    """Under NES timing they choose among the moves reachable at the game's speed (an unreachable one
    stops the game as illegal), and the TD agent's search follows the game's stall rule (NES: none),
    not its training's (20 pills), which scores every move that clears nothing as a lost game."""
    torch.manual_seed(0)
    agents = [DQNAgent(QNet(8, 1)), TDAgent(ValueNet(), top_k=2)]
    game, positions = dm.Game(4321, 20), []
    while len(positions) < 24 and not game.over:
        position = Position.of(game)._replace(speed_index=75, parity=0)  # 2 frames a row: a fifth unreachable
        positions.append(position)
        game.play(game.legal_moves()[len(positions) % len(game.legal_moves())])
    unreachable = 0
    for position in positions:
        reachable = legal_mask_of(position)
        reachable_moves = reachable[:2].sum() if position.pill.same_colour else reachable.sum()
        unreachable += len(dm.legal_moves(dm.Board(position.cells), position.pill)) > reachable_moves
        for agent in agents:
            assert reachable[tuple(agent.choose([position], [0])[0].move)], agent.name
    assert unreachable > 0  # positions where the timing-free moves are not all reachable
    position = Position.of(dm.Game(1234, 20))._replace(stall=19, stall_limit=None)  # NES rules; the training's: 20
    td = agents[1]
    cells, pill = position.cells, np.array([position.pill.left, position.pill.right], np.uint8)
    as_nes, as_trained = (td_search(td.net, cells, pill, 19, td.cfg.replace(stall_limit=s)) for s in (None, 20))
    assert td.cfg.stall_limit == 20 and not np.allclose(as_nes.values, as_trained.values)
    assert td.choose([position], [0])[0].move == dm.Move(*as_nes.moves[as_nes.best].tolist())


def small_dqn(**kw) -> DQNConfig:
    base = dict(
        levels=(4, 6, 8, 10, 12, 14),
        envs=8,
        steps=400,
        filters=8,
        layers=2,
        batch_size=16,
        buffer_size=300,
        learning_starts=64,
        train_every=8,
        target_every=10,
        eps_decay_steps=200,
        next_pill="sampled",
        log_every=80,
        checkpoint_every=160,
        progress=False,
        seed=3,
        device="cpu",  # bit-exact resumption is a CPU promise (cuDNN's fastest kernels are not deterministic)
    )
    return DQNConfig(**(base | kw))


def test_dqn_checkpoint_resume_matches_an_uninterrupted_run(tmp_path):
    whole = train_dqn(small_dqn(next_pill="expected"), tmp_path / "whole")
    half = train_dqn(small_dqn(next_pill="expected", steps=200), tmp_path / "split")
    assert half.step == 200 and (tmp_path / "split/checkpoints/latest.pt").exists()
    resumed = train_dqn(small_dqn(next_pill="expected"), tmp_path / "split")
    assert (resumed.step, resumed.updates, resumed.games) == (whole.step, whole.updates, whole.games)
    a = DQNAgent.load(whole.checkpoint).net.state_dict()
    b = DQNAgent.load(resumed.checkpoint).net.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)  # replay memory, games in progress and RNGs restored
    # the same rows (timings aside), plus the interrupted run's last one; the row after the
    # interruption covers a shorter window
    whole_rows, split_rows = (pd.read_csv(tmp_path / d / "metrics.csv").set_index("step") for d in ("whole", "split"))
    assert list(whole_rows.index) == [80, 160, 240, 320, 400]
    assert list(split_rows.index) == [80, 160, 200, 240, 320, 400]
    same = ["updates", "games", "epsilon", "loss", "q_mean", "mean_reward", "viruses_per_game"]
    steps = [80, 160, 320, 400]
    pd.testing.assert_frame_equal(whole_rows.loc[steps, same], split_rows.loc[steps, same])
    assert len(list((tmp_path / "whole/checkpoints").glob("step-*.pt"))) == 3
    with pytest.raises(
        CheckpointError, match=r"other settings \(gamma: 0.9 -> 0.5, next_pill: .*\).*delete .*whole to train afresh"
    ):
        train_dqn(small_dqn(gamma=0.5, steps=500), tmp_path / "whole")
    with pytest.raises(CheckpointError, match="not a td"):
        TDAgent.load(whole.checkpoint)


def test_the_dqn_bar_ends_full_when_the_last_step_passes_its_total(tmp_path, capsys):
    """8 games a step pass 100 steps at 104: the bar ends on 100/100, not on a count past its total
    (which tqdm shows without a total, as if unfinished)."""
    result = train_dqn(small_dqn(steps=100, learning_starts=16, log_every=100, progress=True), tmp_path / "bar")
    assert result.step == 104
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "100/100" in last, last


def test_dqn_stops_on_a_non_finite_loss(tmp_path, monkeypatch):
    def broken(q, target, batch, cfg, device):
        return (q.board.bias * float("nan")).sum(), torch.zeros(())

    monkeypatch.setattr("drmario.baselines.dqn.td_loss", broken)
    result = train_dqn(small_dqn(), tmp_path / "nan")
    assert result.stopped and "non-finite loss" in result.stopped and result.step == 80
    assert result.checkpoint is None  # nothing was saved after the loss went bad


def test_td_checkpoint_resume_matches_an_uninterrupted_run(tmp_path):
    cfg = dict(levels=(0, 2), depth=2, top_k=2, log_every=1, checkpoint_every=2, progress=False, seed=5)
    whole = train_td(TDConfig(games=4, **cfg), tmp_path / "whole")
    train_td(TDConfig(games=2, **cfg), tmp_path / "split")
    resumed = train_td(TDConfig(games=4, **cfg), tmp_path / "split")
    assert (resumed.step, resumed.games) == (whole.step, whole.games)
    a, b = (TDAgent.load(r.checkpoint).net.state_dict() for r in (whole, resumed))
    assert all(torch.equal(a[k], b[k]) for k in a)
    header, *rows = (tmp_path / "whole/metrics.csv").read_text().splitlines()
    assert header.startswith("step,games,time_s,split,lr,lr_after,loss") and len(rows) == 4
    with pytest.raises(CheckpointError, match="not a dqn"):
        DQNAgent.load(whole.checkpoint)
    with pytest.raises(ValueError, match="depth"):
        TDConfig(depth=3)
    with pytest.raises(ValueError, match="levels"):
        TDConfig(levels=(30,))


def test_learners_beat_the_random_agent_on_level_0(tmp_path):
    fast = dict(steps=3200, levels=tuple(range(15)), filters=16, layers=3, batch_size=32, buffer_size=5000)
    fast |= dict(learning_starts=300, train_every=4, target_every=100, eps_decay_steps=1500, lr=1e-3, seed=4)
    dqn = train_dqn(small_dqn(**fast), tmp_path / "dqn")
    td = train_td(TDConfig(games=6, levels=(0, 2, 4), top_k=3, progress=False, seed=1), tmp_path / "td")
    games = evaluation_games([0], 16, seed=7)
    agents = [RandomAgent(), DQNAgent.load(dqn.checkpoint), TDAgent.load(td.checkpoint)]
    table, _ = arena(agents, games, progress=False)
    cleared = table.set_index("agent")["cleared_fraction"] * 4  # viruses of level 0
    # measured: random 0.25; dqn 0.69 to 1.56 over training seeds 3-6; td about 3.5
    assert cleared["dqn"] >= cleared["random"] + 0.4, table
    assert cleared["td"] >= cleared["random"] + 1.5, table


def test_metrics_csv_appends_with_a_header_and_truncates_on_resume(tmp_path):
    csv = MetricsCSV(tmp_path / "m.csv", ("step", "split", "loss"), digits=3)
    csv.truncate(5)  # no file yet: nothing to do
    for step in (10, 20, 30):
        csv.append({"step": step, "split": "a,b" if step == 20 else "train", "loss": 1 / 3, "extra": 0})
    assert csv.path.read_text() == 'step,split,loss\n10,train,0.333\n20,"a,b",0.333\n30,train,0.333\n'
    assert [r["split"] for r in csv.rows()] == ["train", "a,b", "train"]
    csv.truncate(20)
    assert [r["step"] for r in csv.rows()] == ["10", "20"] and csv.format(float("nan")) == "nan"
    csv.append({"step": 30, "split": "test", "loss": 2.0})
    assert csv.path.read_text().splitlines()[-1] == "30,test,2" and [p.name for p in tmp_path.iterdir()] == ["m.csv"]
    with pytest.raises(KeyError):
        csv.append({"step": 40})
    append_csv(tmp_path / "log.csv", {"time": 1712345678.125, "n": 3})
    append_csv(tmp_path / "log.csv", {"time": 0.1, "n": 4})
    assert (tmp_path / "log.csv").read_text() == "time,n\n1712345678.125,3\n0.1,4\n"  # exact values
    other = MetricsCSV(tmp_path / "m.csv", ("step", "split", "loss", "lr"))  # another version's columns
    with pytest.raises(ValueError, match=r"m.csv, line 1: its columns \(step, split, loss\) are not the ones"):
        other.append({"step": 40, "split": "train", "loss": 1.0, "lr": 0.1})
    with pytest.raises(ValueError, match="log.csv, line 1"):
        append_csv(tmp_path / "log.csv", {"time": 0.2, "n": 5, "more": 1})
    assert csv.path.read_text().splitlines()[-1] == "30,test,2"  # nothing appended under the wrong header
    with open(csv.path, "a") as f:  # a run died while writing a row: the row is cut short, no line end
        f.write("40,tra")
    csv.append({"step": 40, "split": "train", "loss": 1.0})  # on a line of its own, not glued to the cut row
    assert csv.path.read_text().splitlines()[-2:] == ["40,tra", "40,train,1"]
    csv.truncate(40)  # the cut row goes, the whole one stays
    assert [(r["step"], r["split"]) for r in csv.rows()][-2:] == [("30", "test"), ("40", "train")]
    with open(csv.path, "a") as f:  # cut just after its last comma: every cell there, but no line end
        f.write("50,train,")
    csv.truncate(60)
    assert [r["step"] for r in csv.rows()][-1] == "40"
    with open(csv.path, "a") as f:
        f.write("4x,train,1\n")
    with pytest.raises(ValueError, match=r"m.csv, line 6: step '4x' is not an integer"):
        csv.truncate(40)


def test_the_metrics_window_counts_viruses_as_a_share_of_each_level():
    from drmario.baselines.common import Window

    win = Window(step=0)
    assert all(np.isnan(v) for v in win.game_means())
    easy, hard = dm.Game(4, 0), dm.Game(4, 20)  # 4 and 84 viruses
    easy.viruses_cleared, hard.viruses_cleared = 4, 21
    win.add_game(1.0, easy)
    win.add_game(float("nan"), hard)  # a game cut at the pill cap has no outcome
    reward, viruses, share, won = win.game_means()
    assert (reward, viruses, share, won) == (1.0, 12.5, pytest.approx((1.0 + 0.25) / 2), 0.0)
