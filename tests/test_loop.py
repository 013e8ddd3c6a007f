"""The concurrent loop: self-play and training together, on local processes and on Ray."""

import collections

import pytest

from drmario.learn.example_files import read_sidecar
from drmario.learn.net import NetConfig, load_player
from drmario.learn.train import TrainConfig
from drmario.play.loop import LoopConfig, checkpoint_steps_used, run_loop, shard_games
from drmario.play.selfplay import SelfPlayConfig
from drmario.search.searcher import SearchConfig


def tiny_loop(**overrides) -> LoopConfig:
    settings = dict(
        selfplay=SelfPlayConfig(
            games=16,
            levels=[0, 2],
            seed=1,
            games_per_shard=2,
            max_pills=60,
            search=SearchConfig(mode="puct", simulations=4, dirichlet_fraction=0.25),
            network="set-by-the-loop",
        ),
        train=TrainConfig(
            net=NetConfig(filters=8, blocks=1),
            batch_size=16,
            steps=60,
            log_every=5,
            eval_every=20,
            checkpoint_every=10,
            schedule="constant",
            lr=0.01,
            progress=False,
            device="cpu",
        ),
        bootstrap=SearchConfig(simulations=4, root_rollouts=1),
        window=400,
        min_examples=40,
        steps_per_example=0.2,
        chunk_steps=10,
        actors=2,
        max_seconds=60,
    )
    settings.update(overrides)
    return LoopConfig(**settings)


def check_flow(run_dir, state, cfg):
    games = shard_games(run_dir)
    assert len(games) == len(set(games)), "a game was written twice"
    assert sorted(games) == list(range(len(games))) or len(games) == cfg.selfplay.games
    ingested = (run_dir / "ingested.txt").read_text().split()
    assert len(ingested) == len(set(ingested)), "a shard was read twice"
    shards = sorted(p.name for p in (run_dir / "examples").glob("shard-*.jsonl.gz"))
    assert sorted(ingested) == shards, "every shard written was read, none lost"
    examples = sum(read_sidecar(run_dir / "examples" / n)["examples"] for n in shards)
    assert state["examples_seen"] == examples
    assert 0 < state["step"] <= cfg.steps_per_example * examples  # the cap held
    ckpt = run_dir / "train" / "checkpoints" / "latest.pt"
    assert ckpt.exists()
    load_player(ckpt)
    assert (checkpoint_steps_used(run_dir) > 0).any(), "actors picked up a trained network"


def test_concurrent_loop_with_processes(tmp_path):
    cfg = tiny_loop()
    state = run_loop(cfg, tmp_path, progress=False)
    check_flow(tmp_path, state, cfg)
    # Run again: everything was done, nothing is played or read twice.
    again = run_loop(cfg, tmp_path, progress=False)
    assert again["examples_seen"] == state["examples_seen"]
    check_flow(tmp_path, again, cfg)


def test_concurrent_loop_on_ray(tmp_path):
    ray = pytest.importorskip("ray")
    cfg = tiny_loop(selfplay=tiny_loop().selfplay)
    try:
        state = run_loop(cfg, tmp_path, executor="ray", progress=False)
    finally:
        ray.shutdown()
    check_flow(tmp_path, state, cfg)
    pids = collections.Counter(read_sidecar(p)["meta"]["pid"] for p in (tmp_path / "examples").glob("*.jsonl.gz"))
    assert len(pids) >= 1


def test_bad_loop_settings():
    with pytest.raises(ValueError, match="bootstrap"):
        LoopConfig(bootstrap=SearchConfig(mode="puct"))
    with pytest.raises(ValueError, match="LoopConfig: windw: not a setting .did you mean 'window'"):
        LoopConfig.from_dict({"windw": 3})
