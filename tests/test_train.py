"""The training loop on CPU with tiny networks: learning, resumption, non-finite losses, files."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from test_net import real_examples

import drmario.learn.train as train_module
from drmario.learn.checkpoint import CheckpointError, checkpoint_config, load_net, read_checkpoint, save_checkpoint
from drmario.learn.dataset import Batch
from drmario.learn.net import NetConfig
from drmario.learn.train import COLUMNS, TrainConfig, Trainer, _permutation, drop_expert_planes, lr_factor, train


@pytest.fixture(scope="module")
def examples():
    return real_examples(n_games=12, seed=1)


def tiny(**kw) -> TrainConfig:
    base = {
        "net": NetConfig(filters=8, blocks=1),
        "optimizer": "adamw",
        "lr": 3e-3,
        "schedule": "constant",
        "batch_size": 16,
        "steps": 20,
        "log_every": 5,
        "eval_every": 10,
        "checkpoint_every": 10,
        "device": "cpu",
        "progress": False,
    }
    return TrainConfig(**{**base, **kw})


def rows(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def entropy(examples) -> float:
    """Mean entropy of the moves targets: the floor of the moves term."""
    p = examples.move_prob.astype(np.float64)
    return float(-np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0).sum(axis=1).mean())


def test_tiny_network_overfits(tmp_path, examples):
    few = examples.subset(np.arange(64))
    cfg = tiny(test_fraction=0, batch_size=64, steps=150, log_every=10)
    result = train(cfg, tmp_path, few)
    assert result.stopped is None and result.step == 150 and result.n_train == 64
    train_rows = [r for r in rows(result.metrics) if r["split"] == "train"]
    floor = entropy(few)  # what is left of the loss when every target is matched (plus reg)
    first, last = float(train_rows[0]["loss"]) - floor, float(train_rows[-1]["loss"]) - floor
    assert last < first / 20, (first, last)


@pytest.mark.parametrize("head", ["design", "alphago"])
def test_both_heads_train(tmp_path, examples, head):
    cfg = tiny(net=NetConfig(filters=8, blocks=1, head=head), steps=40, log_every=10, eval_every=40)
    result = train(cfg, tmp_path, examples)
    train_rows = [r for r in rows(result.metrics) if r["split"] == "train"]
    assert float(train_rows[-1]["loss"]) < 0.7 * float(train_rows[0]["loss"])
    assert result.test and np.isfinite(result.test["loss"])


def test_cpu_bf16_trains_in_bf16_on_the_cpu_as_float32_does(tmp_path, examples, monkeypatch):
    """cpu_bf16 runs the network under CPU bf16 autocast and learns as float32 does (its default on
    the CPU) from the same start."""
    from drmario.learn.net import DrMarioNet

    autocast: dict[bool, set[bool]] = {}
    losses: dict[bool, list[float]] = {}
    forward = DrMarioNet.forward
    for bf16 in (False, True):
        seen = autocast.setdefault(bf16, set())

        def spied(net, planes, *rest, seen=seen):
            seen.add(torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16)
            return forward(net, planes, *rest)

        monkeypatch.setattr(DrMarioNet, "forward", spied)
        result = train(tiny(steps=40, log_every=10, eval_every=40, cpu_bf16=bf16), tmp_path / str(bf16), examples)
        losses[bf16] = [float(r["loss"]) for r in rows(result.metrics) if r["split"] == "train"]
    assert autocast == {False: {False}, True: {True}}
    assert losses[True][-1] < losses[True][0] - 0.3  # it learns (float32: 7.26 to 6.72 on these examples)
    assert np.allclose(losses[True], losses[False], rtol=0.02), losses


def test_files_and_columns(tmp_path, examples):
    cfg = tiny(keep_checkpoints=1)
    result = train(cfg, tmp_path, examples)
    with open(result.metrics) as f:
        assert f.readline().strip() == ",".join(COLUMNS)
        assert f.readline().strip()
    table = rows(result.metrics)
    assert [(r["step"], r["split"]) for r in table] == [
        ("5", "train"),
        ("10", "train"),
        ("10", "test"),
        ("15", "train"),
        ("20", "train"),
        ("20", "test"),
    ]
    for r in table:
        loss = sum(float(r[k]) for k in ("won", "cleared", "duration", "moves", "reg"))
        assert float(r["loss"]) == pytest.approx(loss, rel=1e-5)
        assert int(r["samples"]) == 16 * int(r["step"]) and float(r["lr"]) == 3e-3
    assert result.train["loss"] == float(table[-2]["loss"]) and result.test["moves"] == float(table[-1]["moves"])
    assert result.n_train + result.n_test == len(examples) and result.n_test > 0
    ckpts = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert ckpts == ["latest.pt", "step-000020.pt"]  # keep_checkpoints=1 removed step-000010.pt
    state = read_checkpoint(result.checkpoint)
    assert state["step"] == 20 and state["config"] == cfg.to_dict()
    assert set(state) >= {"model", "optimizer", "scheduler", "position", "rng", "net_config"}
    assert TrainConfig.load(tmp_path / "config.json") == cfg
    assert load_net(result.checkpoint).cfg == cfg.net
    again = train(cfg, tmp_path, examples)  # a finished run: nothing to do, the same answer
    assert (again.step, again.train, again.test) == (20, result.train, result.test) and rows(again.metrics) == table


@pytest.mark.parametrize("optimizer,schedule", [("sgd", "constant"), ("adamw", "cosine")])
def test_resume_gives_the_same_run(tmp_path, examples, optimizer, schedule):
    lr = 0.02 if optimizer == "sgd" else 3e-3
    cfg = tiny(optimizer=optimizer, lr=lr, schedule=schedule, warmup_steps=3, grad_clip=1.0)
    whole = train(cfg, tmp_path / "whole", examples)
    parts = tmp_path / "parts"
    if schedule == "constant":  # 10 steps, then the same run extended to 20 (steps may change)
        assert train(tiny(**{**cfg.to_dict(), "steps": 10}), parts, examples).step == 10
    else:  # the cosine schedule depends on steps: run to the end, then rewind to step 10 as after a crash
        train(cfg, parts, examples)
        (parts / "checkpoints" / "step-000020.pt").unlink()
        (parts / "checkpoints" / "latest.pt").write_bytes((parts / "checkpoints" / "step-000010.pt").read_bytes())
    with open(parts / "metrics.csv", "a") as f:  # a row logged after the checkpoint, then a crash
        f.write("11,0,176,1.0,train,0.003,1,9,9,9,9,9,9\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing changed that matters: no warning
        resumed = train(cfg, parts, examples)
    assert resumed.step == 20
    a, b = read_checkpoint(whole.checkpoint), read_checkpoint(resumed.checkpoint)
    for k, v in a["model"].items():
        assert torch.equal(v, b["model"][k]), k
    assert a["position"] == b["position"] and 10 < whole.n_train // 16 < 20  # epoch 1 begins after the resumption

    def strip(table):
        return [{k: v for k, v in r.items() if k not in ("time_s", "samples_per_s")} for r in table]

    assert strip(rows(whole.metrics)) == strip(rows(resumed.metrics))
    assert resumed.train == whole.train and resumed.test == whole.test


def test_resume_with_another_network_is_refused(tmp_path, examples):
    train(tiny(steps=10), tmp_path, examples)
    with pytest.raises(CheckpointError, match=r"latest.pt holds a run of another network \(filters: 8 -> 16\)"):
        train(tiny(steps=20, net=NetConfig(filters=16, blocks=1)), tmp_path, examples)
    other = dataclasses.replace(examples, duration=examples.duration + 1)  # other targets, the same positions
    with pytest.raises(CheckpointError, match=r"latest.pt trained on other examples than these [0-9,]+: its position"):
        train(tiny(steps=20), tmp_path, other)
    with pytest.warns(UserWarning, match=r"changed settings \['lr', 'betas'\]"):
        changed = train(tiny(steps=20, lr=1e-3, betas=(0.8, 0.99)), tmp_path, examples)
    state = read_checkpoint(changed.checkpoint)  # ... and they take effect, not the checkpoint's
    assert [(g["lr"], g["betas"]) for g in state["optimizer"]["param_groups"]] == [(1e-3, (0.8, 0.99))]
    assert [r["lr"] for r in rows(changed.metrics) if r["split"] == "train"][-1] == "0.001"
    cosine = tiny(schedule="cosine", steps=10, warmup_steps=2)
    train(cosine, tmp_path / "cosine", examples)
    with pytest.warns(
        UserWarning, match=r"at step 10 with steps 10 -> 20: the cosine schedule now runs to step 20, so"
    ):
        train(cosine.replace(steps=20), tmp_path / "cosine", examples)


def test_a_resumed_runs_rows_match_where_a_checkpoint_cut_a_log_window(tmp_path, examples):
    cfg = tiny(steps=20, log_every=4, checkpoint_every=10, eval_every=20)  # step 10 is mid-window (9 to 12)
    whole = train(cfg, tmp_path / "whole", examples)
    parts = tmp_path / "parts"
    train(cfg, parts, examples)  # then back to step 10, as after a crash there
    (parts / "checkpoints" / "step-000020.pt").unlink()
    (parts / "checkpoints" / "latest.pt").write_bytes((parts / "checkpoints" / "step-000010.pt").read_bytes())
    resumed = train(cfg, parts, examples)

    def strip(table):
        return [{k: v for k, v in r.items() if k not in ("time_s", "samples_per_s")} for r in table]

    assert strip(rows(whole.metrics)) == strip(rows(resumed.metrics))
    (parts / "checkpoints" / "latest.pt").write_bytes((parts / "checkpoints" / "step-000010.pt").read_bytes())
    other = train(cfg.replace(log_every=3), parts, examples)  # another log_every: the cut window is not carried
    assert other.step == 20 and [r["step"] for r in rows(other.metrics) if r["split"] == "train"][-3:] == [
        "15",
        "18",
        "20",
    ]


def test_a_run_begun_before_a_network_setting_existed_resumes(tmp_path, examples):
    train(tiny(steps=10), tmp_path, examples)
    latest = tmp_path / "checkpoints" / "latest.pt"
    state = read_checkpoint(latest)
    for config in (state["config"]["net"], state["net_config"]):
        del config["value_weight"]  # as written before the setting existed: its default, 1
    del state["config"]["learn"]  # likewise: "all"
    save_checkpoint(latest, state)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert train(tiny(steps=20), tmp_path, examples).step == 20
    # a network from before the preview planes and the scaled count error: 18 planes, relative errors
    first = NetConfig(filters=8, blocks=1, planes=18, count_error="relative")
    train(tiny(steps=10, net=first), tmp_path / "first", examples)
    latest = tmp_path / "first" / "checkpoints" / "latest.pt"
    state = read_checkpoint(latest)
    for config in (state["config"]["net"], state["net_config"]):
        del config["planes"], config["count_error"]
    save_checkpoint(latest, state)
    assert checkpoint_config(read_checkpoint(latest)) == first
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert train(tiny(steps=20, net=first), tmp_path / "first", examples).step == 20


def test_a_run_killed_between_its_step_file_and_latest_restores_latest(tmp_path, examples):
    """Killed after writing step-N.pt but before latest.pt, at the last step: the run resumed has
    nothing left to train, and still leaves latest.pt (the file a pipeline and every reader load)."""
    done = train(tiny(steps=10), tmp_path, examples)
    latest = tmp_path / "checkpoints" / "latest.pt"
    want = read_checkpoint(latest)
    latest.unlink()
    again = train(tiny(steps=10), tmp_path, examples)
    assert again.step == done.step == 10 and again.checkpoint == latest
    got = read_checkpoint(latest)
    assert got["step"] == 10 and all(torch.equal(got["model"][k], v) for k, v in want["model"].items())


def poisoned(examples, index: int):
    bad = examples.subset(np.arange(len(examples)))
    bad.move_prob = bad.move_prob.copy()
    bad.move_prob[index, 0] = np.nan
    return bad


def batches_holding(example: int, cfg: TrainConfig, n: int) -> list[int]:
    """The steps (1-based) whose batch holds example, replaying the trainer's batch order."""
    per_epoch = n // cfg.batch_size
    steps = []
    for s in range(cfg.steps):
        epoch, i = divmod(s, per_epoch)
        perm = _permutation(n, cfg.seed, epoch, torch.device("cpu"))
        if example in perm[i * cfg.batch_size : (i + 1) * cfg.batch_size]:
            steps.append(s + 1)
    return steps


def test_nonfinite_loss_stops_and_says_where(tmp_path, examples):
    cfg = tiny(test_fraction=0, steps=30, log_every=4, checkpoint_every=4)
    bad = int(_permutation(len(examples), cfg.seed, 0, torch.device("cpu"))[5 * cfg.batch_size + 3])
    assert batches_holding(bad, cfg, len(examples))[0] == 6
    result = train(cfg, tmp_path, poisoned(examples, bad))
    assert result.stopped.startswith("step 6: non-finite loss (total=nan, moves=nan); training stopped at step 8")
    assert result.stopped.endswith(f"the last checkpoint (step 4) is {result.checkpoint}")
    state = read_checkpoint(result.checkpoint)
    assert state["step"] == 4 and all(torch.isfinite(v).all() for v in state["model"].values())
    assert [r["step"] for r in rows(result.metrics)] == ["4"]  # nothing logged from the bad window


def test_nonfinite_loss_skipped_when_asked(tmp_path, examples):
    cfg = tiny(test_fraction=0, steps=30, log_every=5, eval_every=30, on_nonfinite="skip")
    bad = int(_permutation(len(examples), cfg.seed, 0, torch.device("cpu"))[0])  # in the first batch
    result = train(cfg, tmp_path, poisoned(examples, bad))
    assert result.stopped is None and result.step == 30
    assert result.skipped == len(batches_holding(bad, cfg, len(examples))) >= 1
    assert all(np.isfinite(float(r["loss"])) for r in rows(result.metrics))
    capped = train(tiny(**{**cfg.to_dict(), "max_skips": 0}), tmp_path / "capped", poisoned(examples, bad))
    assert capped.stopped.startswith("1 steps skipped") and capped.step == 1


def test_huge_learning_rate_is_caught(tmp_path, examples):
    net = NetConfig(filters=8, blocks=1, head="design")
    result = train(tiny(net=net, optimizer="sgd", lr=10.0, steps=50, log_every=50, eval_every=50), tmp_path, examples)
    # detected at the first sync point (a checkpoint is due at step 10), naming the first bad step
    assert re.match(r"step [1-9]: non-finite (loss \(total=(nan|inf)|gradient norm)", result.stopped), result.stopped
    assert result.step == 10 and result.stopped.endswith("no checkpoint was written")
    assert not (tmp_path / "checkpoints" / "latest.pt").exists()


def test_train_rows_are_window_means_at_the_steps_rate_and_epoch(tmp_path, examples):
    """A row every 5 steps is the mean of the 5 steps' terms (the same run logged every step), with
    the rate the window's last step used and the epochs done."""
    cfg = tiny(steps=10, schedule="cosine", warmup_steps=4, eval_every=100, checkpoint_every=100)
    every_step = train(cfg.replace(log_every=1), tmp_path / "every", examples)
    every_fifth = train(cfg.replace(log_every=5), tmp_path / "fives", examples)
    every = [r for r in rows(every_step.metrics) if r["split"] == "train"]
    fives = [r for r in rows(every_fifth.metrics) if r["split"] == "train"]
    assert [int(r["step"]) for r in fives] == [5, 10]
    per_epoch = every_fifth.n_train // cfg.batch_size
    for row in fives:
        step = int(row["step"])
        window = [r for r in every if step - 5 < int(r["step"]) <= step]
        assert len(window) == 5
        for term in ("loss", "won", "moves"):
            assert float(row[term]) == pytest.approx(np.mean([float(r[term]) for r in window]), rel=1e-4)
        assert float(row["lr"]) == pytest.approx(cfg.lr * lr_factor(step - 1, cfg))
        assert float(row["epoch"]) == pytest.approx(step / per_epoch, abs=1e-4)
    assert len({row["lr"] for row in every}) > 5  # warm-up and cosine: the rate moved


def test_evaluation_is_in_eval_mode_and_leaves_the_mode_as_it_was(examples):
    from drmario.learn.net import DrMarioNet
    from drmario.learn.train import evaluate

    cfg = tiny()
    torch.manual_seed(0)
    model = DrMarioNet(cfg.net)
    test = examples.to_device("cpu", cfg.net.planes)
    model.train()
    in_training = evaluate(model, test, cfg, torch.device("cpu"))
    assert model.training  # restored
    model.eval()
    assert torch.equal(evaluate(model, test, cfg, torch.device("cpu")), in_training)  # batch norms: running statistics


def test_learning_rate_schedules():
    cfg = TrainConfig(lr=1.0, steps=110, warmup_steps=10, schedule="cosine")
    assert [lr_factor(s, cfg) for s in (0, 4, 9)] == [0.1, 0.5, 1.0]
    assert lr_factor(10, cfg) == 1.0 and lr_factor(60, cfg) == pytest.approx(0.5) and lr_factor(110, cfg) == 0
    constant = TrainConfig(schedule="constant", warmup_steps=0)
    assert [lr_factor(s, constant) for s in (0, 99, 100, 250)] == [1.0] * 4
    with pytest.raises(ValueError, match="schedule"):
        TrainConfig(schedule="step")


def test_config_round_trip_and_errors(tmp_path):
    cfg = TrainConfig(data=["a.jsonl"], net=NetConfig(filters=32), optimizer="adamw", betas=(0.8, 0.9))
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="learning_rate: not a setting"):
        TrainConfig.from_dict({"learning_rate": 0.1})
    with pytest.raises(ValueError, match="optimizer"):
        TrainConfig(optimizer="adam")
    with pytest.raises(ValueError, match="no example files"):
        train(TrainConfig(progress=False), tmp_path)


DDP_SCRIPT = """
import hashlib, sys
import torch
from test_net import real_examples
from drmario.learn.net import NetConfig
from drmario.learn.train import TrainConfig, Trainer

run_dir = sys.argv[1]
cfg = TrainConfig(net=NetConfig(filters=8, blocks=1), batch_size=16, steps=12, log_every=4, eval_every=6,
                  checkpoint_every=6, device="cpu", progress=False, lr=0.01)
trainer = Trainer(cfg, run_dir)
trainer.set_data(*real_examples(8, seed=3).split_by_game(cfg.test_fraction, cfg.seed))
trainer.run()
trainer.close()
flat = torch.cat([p.detach().flatten() for p in trainer.model.parameters()]).numpy().tobytes()
open(f"{run_dir}/params-{trainer.rank}-of-{trainer.world}.txt", "w").write(hashlib.sha256(flat).hexdigest())
"""


def test_ddp_with_torchrun_on_cpu(tmp_path):
    """Two processes under torchrun (gloo): parameters stay identical, one metrics file, one checkpoint."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT)
    run_dir = tmp_path / "run"
    tests = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": f"{tests}{os.pathsep}{tests.parent}", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone", str(script)]
    done = subprocess.run([*cmd, str(run_dir)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    hashes = {p.name: p.read_text() for p in run_dir.glob("params-*.txt")}
    assert set(hashes) == {"params-0-of-2.txt", "params-1-of-2.txt"}
    assert len(set(hashes.values())) == 1, "DDP keeps the processes' parameters equal"
    rows = (run_dir / "metrics.csv").read_text().splitlines()
    assert rows[0].startswith("step,") and len([r for r in rows if ",train," in r]) == 3  # steps 4, 8, 12
    assert (run_dir / "checkpoints" / "step-000012.pt").exists()


def test_a_changed_weight_is_caught_by_the_digest(tmp_path):
    from drmario.learn.checkpoint import save_net
    from drmario.learn.net import DrMarioNet

    path = save_net(DrMarioNet(NetConfig(filters=4, blocks=0)), tmp_path / "net.pt")
    state = torch.load(path, weights_only=True)
    name = next(iter(state["model"]))
    state["model"][name].view(-1)[0] += 1961.7  # a flipped byte that still unpickles
    torch.save(state, path)  # keeps the old digest
    with pytest.raises(CheckpointError, match=r"net\.pt is corrupted: its content does not match"):
        load_net(path)
    (tmp_path / "cut.pt").write_bytes(path.read_bytes()[:300])
    with pytest.raises(CheckpointError, match=r"cut\.pt cannot be read"):
        read_checkpoint(tmp_path / "cut.pt")


def test_a_damaged_latest_checkpoint_falls_back_to_the_newest_intact_one(tmp_path, examples):
    cfg = tiny(steps=30, checkpoint_every=10, eval_every=10)
    train(cfg, tmp_path, examples)
    latest = tmp_path / "checkpoints" / "latest.pt"
    latest.write_bytes(latest.read_bytes()[: latest.stat().st_size // 2])  # cut by a crash or a full disk
    (tmp_path / "checkpoints" / "step-000030.pt").unlink()
    # steps 10 and 20 are intact: the newer one
    with pytest.warns(UserWarning, match=r"latest\.pt cannot be read.*resuming from .*step-000020\.pt instead"):
        result = train(cfg.replace(steps=40), tmp_path, examples)
    assert result.step == 40 and result.stopped is None
    with open(tmp_path / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows if r["split"] == "train"] == sorted(
        {int(r["step"]) for r in rows if r["split"] == "train"}
    )


def test_a_warm_start_begins_from_the_given_network(tmp_path, examples):
    first = train(tiny(steps=10), tmp_path / "first", examples)
    started = read_checkpoint(first.checkpoint)["model"]
    second = Trainer(tiny(steps=10, init=str(first.checkpoint)), tmp_path / "second")
    for name, value in second.model.state_dict().items():
        assert torch.equal(value, started[name]), name  # the weights it starts from
    fresh = Trainer(tiny(steps=10), tmp_path / "fresh")
    assert not torch.equal(fresh.model.stem.conv.weight, started["stem.conv.weight"])
    with pytest.raises(CheckpointError, match="does not fit"):
        Trainer(tiny(steps=10, init=str(first.checkpoint), net=NetConfig(filters=4, blocks=1)), tmp_path / "other")


def test_a_warm_start_killed_before_its_first_checkpoint_logs_its_start_once(tmp_path, examples, monkeypatch):
    first = train(tiny(steps=10), tmp_path / "first", examples)
    cfg = tiny(steps=10, init=str(first.checkpoint))

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(train_module, "forward_backward", killed)
        with pytest.raises(KeyboardInterrupt):  # after the step-0 test row, before any checkpoint
            train(cfg, tmp_path / "second", examples)
    result = train(cfg, tmp_path / "second", examples)
    assert [(r["step"], r["split"]) for r in rows(result.metrics)].count(("0", "test")) == 1


def test_auxiliary_heads_log_their_terms_and_a_warm_start_may_add_or_drop_them(tmp_path, examples):
    aux = NetConfig(filters=8, blocks=1, future_pills=2, future_weight=0.5, next_move_weight=0.25)
    result = train(tiny(net=aux, steps=10), tmp_path / "aux", examples)
    table = rows(result.metrics)
    assert list(table[0]) == [*COLUMNS, "future", "next"] and [r["split"] for r in table] == ["train", "train", "test"]
    for r in table:
        loss = sum(float(r[k]) for k in ("won", "cleared", "duration", "moves", "reg"))
        loss += 0.5 * float(r["future"]) + 0.25 * float(r["next"])
        assert float(r["loss"]) == pytest.approx(loss, rel=1e-5)
        assert 0 < float(r["future"]) < 1 and 0 < float(r["next"]) < 10  # near log 512 = 6.2 at the start
    terms = {"loss", "won", "cleared", "duration", "moves", "reg"}
    assert set(result.train) == set(result.test) == terms | {"future", "next"}
    plain = train(tiny(steps=10), tmp_path / "plain", examples)
    assert set(plain.train) == terms and list(rows(plain.metrics)[0]) == list(COLUMNS)
    only_next = Trainer(tiny(net=NetConfig(filters=8, blocks=1, next_move_weight=1.0)), tmp_path / "next")
    assert only_next.metrics.columns[-1] == "next" and "future" not in only_next.metrics.columns
    # warm starts: the trunk and heads carry over; the auxiliary heads are added fresh, or left behind
    added = Trainer(tiny(net=aux, init=str(plain.checkpoint)), tmp_path / "added")
    dropped = Trainer(tiny(init=str(result.checkpoint)), tmp_path / "dropped")
    for trainer, start in ((added, plain), (dropped, result)):
        saved = read_checkpoint(start.checkpoint)["model"]
        for name, value in trainer.model.state_dict().items():
            if not name.startswith(("future_conv.", "next_move_conv.")):
                assert torch.equal(value, saved[name]), name
    assert added.model.future_conv is not None and added.model.next_move_conv is not None
    assert dropped.model.future_conv is None and dropped.model.next_move_conv is None


def test_learning_the_values_only_leaves_the_moves_output_as_it_was(tmp_path, examples):
    first = train(tiny(steps=10), tmp_path / "first", examples)
    started = read_checkpoint(first.checkpoint)["model"]
    refit = train(tiny(steps=10, lr=0.01, init=str(first.checkpoint), learn="values"), tmp_path / "values", examples)
    ended = read_checkpoint(refit.checkpoint)["model"]
    value_head = ("pool.", "value_fc.")
    tests = pd.read_csv(tmp_path / "values" / "metrics.csv").query("split == 'test'")
    assert tests["step"].iloc[0] == 0 and tests["step"].iloc[-1] == 10  # where the refit began, and ended
    assert (pd.read_csv(tmp_path / "first" / "metrics.csv").query("split == 'test'")["step"] > 0).all()  # no init
    changed = {name for name in started if not torch.equal(started[name], ended[name])}
    assert changed and all(name.startswith(value_head) for name in changed)  # batch-norm statistics included
    assert any(name.startswith("value_fc.") for name in changed)
    planes = torch.rand(4, 24, 8, 16)
    before, after = load_net(first.checkpoint).eval(), load_net(refit.checkpoint).eval()
    with torch.no_grad():
        assert torch.equal(before(planes).moves, after(planes).moves)
        assert not torch.equal(before(planes).duration, after(planes).duration)
    with pytest.raises(ValueError, match="learn = values: needs init"):
        tiny(learn="values")
    with pytest.raises(ValueError, match=r"auxiliary heads stay frozen.*net.future_pills = 2"):
        tiny(learn="values", init=str(first.checkpoint), net=NetConfig(filters=8, blocks=1, future_pills=2))
    with pytest.raises(CheckpointError, match="learn = 'values', not 'all'"):  # its optimiser holds other weights
        Trainer(tiny(steps=20, init=str(first.checkpoint)), tmp_path / "values")


def test_value_share_trains_the_values_on_the_kept_decisions_alone(tmp_path, examples):
    """The value targets of the decisions value_share leaves out never reach the weights: flipping
    them changes nothing (and with every decision kept, flipping changes the run)."""
    kept = examples.position_keys(seed=0) < 0.3
    assert 0 < kept.mean() < 1
    flipped = dataclasses.replace(
        examples,
        won=np.where(kept, examples.won, -examples.won).astype(examples.won.dtype),
        cleared=np.where(kept, examples.cleared, examples.cleared + 50).astype(examples.cleared.dtype),
    )  # (not duration: with the game, it names the decision)

    def weights(es, share: float, name: str) -> dict[str, torch.Tensor]:
        result = train(tiny(steps=10, test_fraction=0, value_share=share), tmp_path / name, es)
        return read_checkpoint(result.checkpoint)["model"]

    same, other = weights(examples, 0.3, "a"), weights(flipped, 0.3, "b")
    assert all(torch.equal(same[k], other[k]) for k in same)
    whole, whole_flipped = weights(examples, 1.0, "c"), weights(flipped, 1.0, "d")
    assert not all(torch.equal(whole[k], whole_flipped[k]) for k in whole)
    trainer = Trainer(tiny(value_share=0.3), tmp_path / "e")
    trainer.set_data(*examples.split_by_game(0.2, 0))
    assert trainer.train_dev.value_mask is not None and trainer.test_dev.value_mask is None  # test rows keep all
    trainer.close()


def test_a_values_refit_adds_the_outcome_values_and_logs_their_term(tmp_path, examples):
    from drmario.learn.player import load_player
    from drmario.learn.train import value_errors

    first = train(tiny(steps=10), tmp_path / "first", examples)
    outcome_net = NetConfig(filters=8, blocks=1, outcome_values=True)
    cfg = tiny(steps=20, lr=0.01, init=str(first.checkpoint), learn="values", net=outcome_net)
    refit = train(cfg, tmp_path / "values", examples)
    tests = pd.read_csv(tmp_path / "values" / "metrics.csv").query("split == 'test'")
    assert tests["outcome"].iloc[-1] < tests["outcome"].iloc[0]  # learned from a fresh layer
    assert "outcome" not in pd.read_csv(tmp_path / "first" / "metrics.csv").columns
    planes = torch.rand(4, 24, 8, 16)
    before, after = load_net(first.checkpoint).eval(), load_net(refit.checkpoint).eval()
    with torch.no_grad():
        assert torch.equal(before(planes).moves, after(planes).moves)
        assert after(planes).win_pills is not None
    errors = value_errors(load_player(refit.checkpoint), examples)
    plain_errors = value_errors(load_player(first.checkpoint), examples)
    won = examples.won > 0
    assert 0 < won.sum() < len(examples)  # both outcomes: each count scored on its own games
    assert errors["won games' pills to the end: RMSE"] != plain_errors["won games' pills to the end: RMSE"]
    pred = load_player(first.checkpoint).evaluate(examples.cells, examples.pills, examples.previews)
    want = np.sqrt(np.mean((pred.duration[won] - examples.duration[won]) ** 2))  # no outcome values: the mean's
    assert plain_errors["won games' pills to the end: RMSE"] == pytest.approx(want, rel=1e-6)


def test_held_out_examples_are_what_the_test_rows_measure(tmp_path):
    import shutil
    from pathlib import Path

    from drmario.learn.player import load_player
    from drmario.learn.train import held_out_examples, value_errors

    sample = Path(__file__).resolve().parent.parent / "data" / "round0-sample" / "examples"
    shutil.copy(sample / "shard-000000.jsonl.gz", tmp_path / "shard.jsonl.gz")
    data = [str(tmp_path / "shard.jsonl.gz")]
    first = train(tiny(steps=5, data=data), tmp_path / "first")
    cfg = tiny(steps=1, data=data, augment=True, init=str(first.checkpoint), learn="values")
    train(cfg, tmp_path / "values")
    held_out = held_out_examples(cfg)
    plain = held_out_examples(cfg.replace(augment=False))
    assert len(held_out) == 6 * len(plain) > 0 and set(held_out.game) == set(plain.game)  # the colour renamings
    step0 = pd.read_csv(tmp_path / "values" / "metrics.csv").query("split == 'test' and step == 0").iloc[0]
    errors = value_errors(load_player(first.checkpoint), held_out)
    assert errors["won: mean squared error"] == pytest.approx(step0["won"], rel=1e-5)  # the curve's first point


def test_steps_before_follow_the_warm_starts_back_to_fresh_weights(tmp_path, examples):
    from drmario import viz
    from drmario.learn.train import steps_before

    first = train(tiny(steps=10), tmp_path / "first", examples)
    refit = train(tiny(steps=5, init=str(first.checkpoint), learn="values"), tmp_path / "values", examples)
    train(tiny(steps=5, init=str(refit.checkpoint)), tmp_path / "next", examples)
    assert [steps_before(tmp_path / name) for name in ("first", "values", "next")] == [0, 10, 15]
    df = viz.read_metrics({name: tmp_path / name for name in ("first", "values", "next")}, total_steps=True)
    tests = df[df["split"] == "test"].groupby("run")["total_step"].agg(["min", "max"])
    assert tests.loc["values"].tolist() == [10, 15] and tests.loc["next"].tolist() == [15, 20]  # one timeline
    assert "total_step" in viz.curve_explorer({"first": tmp_path / "first", "next": tmp_path / "next"}).x.options
    (tmp_path / "first" / "checkpoints" / "latest.pt").unlink()  # a link that cannot be read
    assert steps_before(tmp_path / "values") is None and steps_before(tmp_path / "next") is None
    assert steps_before(tmp_path / "nowhere") is None


def test_the_later_decision_of_a_colour_renaming_is_in_the_same_renaming():
    from drmario.learn.dataset import later_index

    game, duration = np.array([0, 0, 0, 1, 1]), np.array([3, 2, 1, 2, 1])
    assert later_index(game, duration, 1).tolist() == [1, 2, -1, 4, -1]
    assert later_index(game, duration, 2).tolist() == [2, -1, -1, -1, -1]
    blocks = later_index(np.tile(game, 3), np.tile(duration, 3), 1)  # three renamings, in blocks of 5
    assert blocks.tolist() == [1, 2, -1, 4, -1, 6, 7, -1, 9, -1, 11, 12, -1, 14, -1]
    assert later_index(np.array([0, 0, 0]), np.array([2, 2, 1]), 1).tolist() == [2, -1, -1]  # one copy of the later
    assert later_index(np.zeros(0, np.int64), np.zeros(0, np.int64), 1).tolist() == []


def test_bootstrapped_targets_add_this_decisions_counts_to_the_prediction_one_decision_later(examples):
    from drmario.learn.dataset import later_index
    from drmario.learn.net import DrMarioNet
    from drmario.learn.train import bootstrapped

    cfg = tiny(bootstrap=0.25)
    model = DrMarioNet(cfg.net).train()
    data = examples.to_device(torch.device("cpu"), cfg.net.planes)
    later = torch.as_tensor(later_index(examples.game, examples.duration, 1))
    idx = torch.arange(len(examples))
    assert (later >= 0).sum() == len(examples) - len(np.unique(examples.game))  # every game's last decision has none
    assert (torch.as_tensor(examples.duration)[later.clamp(min=0)] == torch.as_tensor(examples.duration) - 1)[
        later >= 0
    ].all()
    assert torch.equal(data.next_index, later)  # what bootstrapped looks up
    batch, following = data.batch(idx), data.batch(later.clamp(min=0))
    mixed = bootstrapped(model, batch, data, idx, cfg, torch.device("cpu"))
    assert model.training  # back in training mode
    with torch.no_grad():
        predicted = model.eval()(following.planes)
    td = batch.duration - following.duration + predicted.duration  # 1 pill + the prediction
    want = torch.where(later >= 0, 0.75 * batch.duration + 0.25 * td, batch.duration)
    torch.testing.assert_close(mixed.duration, want)
    want = torch.where(
        later >= 0, 0.75 * batch.cleared + 0.25 * (batch.cleared - following.cleared + predicted.cleared), batch.cleared
    )
    torch.testing.assert_close(mixed.cleared, want)
    assert torch.equal(mixed.won, batch.won) and torch.equal(mixed.moves, batch.moves)


def test_training_with_bootstrapped_targets_learns(tmp_path, examples):
    result = train(tiny(bootstrap=0.5, steps=40, log_every=10, eval_every=20), tmp_path, examples)
    rows = [r for r in csv.DictReader(result.metrics.read_text().splitlines()) if r["split"] == "train"]
    assert result.stopped is None and float(rows[-1]["loss"]) < float(rows[0]["loss"])


def test_expert_plane_dropout_zeroes_only_the_one_ply_planes_of_a_share_of_examples():
    def batch() -> Batch:
        n = 2000
        return Batch(torch.ones(n, 28, 8, 16), *(torch.zeros(n) for _ in range(3)), torch.zeros(n, 4, 8, 16), None)

    first, again, later = batch(), batch(), batch()
    drop_expert_planes(first, 0.3, seed=5, step=7)
    drop_expert_planes(again, 0.3, seed=5, step=7)
    drop_expert_planes(later, 0.3, seed=5, step=8)
    assert (first.planes[:, :24] == 1).all()  # the board, pill and preview planes stay
    dropped = (first.planes[:, 24:] == 0).flatten(1).all(1)
    assert torch.equal(dropped, (first.planes[:, 24:] == 0).flatten(1).any(1))  # all 4 planes or none
    assert 0.25 < dropped.float().mean() < 0.35
    assert torch.equal(first.planes, again.planes) and not torch.equal(first.planes, later.planes)
    with pytest.raises(ValueError, match="expert_plane_dropout: needs net.planes = 28 \\(not 24\\)"):
        TrainConfig(expert_plane_dropout=0.5)
    TrainConfig(expert_plane_dropout=0.5, net=NetConfig(planes=28))


def test_step_checkpoints_are_ordered_by_number_past_their_padding(tmp_path):
    from drmario.learn.checkpoint import prune_steps, step_checkpoints

    for name in ["step-000500.pt", "step-999500.pt", "step-1000000.pt", "step-00001500.pt", "step-x.pt"]:
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in step_checkpoints(tmp_path)] == [
        "step-1000000.pt",
        "step-999500.pt",
        "step-00001500.pt",
        "step-000500.pt",
    ]
    prune_steps(tmp_path, 2)  # the newest two stay
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-1000000.pt", "step-999500.pt", "step-x.pt"]


@pytest.mark.parametrize("mode, grad_clip", [("stop", 0.0), ("skip", 0.0), ("stop", 1.0)])
def test_nonfinite_gradient_with_a_finite_loss(tmp_path, examples, monkeypatch, mode, grad_clip):
    """A NaN gradient under a finite loss (a bf16 backward overflowing) is caught as a non-finite
    loss is: stopped before the checkpoint due at that step, or skipped; never written as weights."""
    unpatched, calls = train_module.forward_backward, []

    def poisoned_backward(net, batch, cfg, model, device):
        terms = unpatched(net, batch, cfg, model, device)
        calls.append(1)
        if len(calls) == 8:  # step 8, when a checkpoint is due
            next(model.parameters()).grad[0] = float("nan")
        return terms

    monkeypatch.setattr(train_module, "forward_backward", poisoned_backward)
    cfg = tiny(test_fraction=0, steps=12, log_every=4, checkpoint_every=4, on_nonfinite=mode, grad_clip=grad_clip)
    result = train(cfg, tmp_path, examples)
    if mode == "stop":
        assert result.stopped.startswith("step 8: non-finite gradient norm (nan)"), result.stopped
        assert read_checkpoint(result.checkpoint)["step"] == 4
    else:
        assert result.stopped is None and result.skipped == 1 and result.step == 12
    assert all(torch.isfinite(v).all() for v in read_checkpoint(result.checkpoint)["model"].values())


def test_a_skipped_step_leaves_the_batch_norm_statistics_as_they_were(tmp_path, examples, monkeypatch):
    """A forward pass that overflows updates batch norm's running statistics before its loss is judged:
    a skipped step must undo that too, or every later evaluation (and the checkpoint) is NaN."""
    unpatched, calls = train_module.forward_backward, []

    def overflowing(net, batch, cfg, model, device):
        terms = unpatched(net, batch, cfg, model, device)
        calls.append(1)
        if len(calls) == 3:
            next(b for b in model.buffers() if b.is_floating_point()).fill_(float("inf"))
            terms = terms * float("nan")
        return terms

    monkeypatch.setattr(train_module, "forward_backward", overflowing)
    result = train(
        tiny(test_fraction=0, steps=8, log_every=4, checkpoint_every=8, on_nonfinite="skip"), tmp_path, examples
    )
    assert result.stopped is None and result.skipped == 1
    assert all(
        torch.isfinite(v).all() for v in read_checkpoint(result.checkpoint)["model"].values() if v.is_floating_point()
    )
