"""The CUDA paths on a real GPU: bf16 inference (CUDA graphs, padded buckets) against the CPU's
float32, bf16 training with and without torch.compile, a checkpoint trained on the GPU read on the
CPU, and self-play through the GPU in one process and through the inference server.

Skipped where torch sees no CUDA device (CI's machine); run them on a GPU machine with
`python -m pytest tests/test_cuda.py`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_inference import some_positions
from test_net import real_examples

from drmario.learn.checkpoint import load_net, save_net
from drmario.learn.net import DrMarioNet, NetConfig
from drmario.learn.player import Player, load_player
from drmario.learn.train import TrainConfig, train
from drmario.play.agents import SearchAgent
from drmario.play.inference import BatchedInference
from drmario.play.lockstep import GameSpec, play_lockstep
from drmario.play.selfplay import SelfPlayConfig, generate, read_records
from drmario.search import SearchConfig

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SHIPPED = str(Path(__file__).resolve().parents[1] / "data" / "networks" / "small.pt")  # from any folder


def test_bf16_inference_agrees_with_float32_on_the_cpu():
    """The shipped network in bf16 on the GPU (CUDA graphs, one padded bucket) against float32 on
    the CPU: values within bf16's precision, and the same best move almost everywhere."""
    cells, pills, previews = some_positions(300)
    want = load_player(SHIPPED).evaluate(cells, pills, previews)
    engine = BatchedInference(load_net(SHIPPED), "cuda", buckets=(64, 512))
    assert engine.dtype == torch.bfloat16 and engine.use_graphs
    got = engine.evaluate(cells, pills, previews)
    assert engine.stats.padded == 512 and engine.stats.positions == 300
    np.testing.assert_allclose(got.won, want.won, atol=0.05)
    np.testing.assert_allclose(got.cleared, want.cleared, rtol=0.05, atol=0.5)
    np.testing.assert_allclose(got.duration, want.duration, rtol=0.05, atol=1.0)
    flat_got, flat_want = got.moves.reshape(300, -1), want.moves.reshape(300, -1)
    assert np.allclose(flat_got.sum(1), 1, atol=0.02)
    same_best = (flat_got.argmax(1) == flat_want.argmax(1)).mean()
    assert same_best > 0.9, same_best
    # the graph replays what the eager forward computes
    eager = BatchedInference(load_net(SHIPPED), "cuda", buckets=(512,), cuda_graphs=False)
    eager_out = eager.evaluate(cells, pills, previews)
    np.testing.assert_allclose(got.moves, eager_out.moves, atol=2e-3)


def test_float32_player_on_the_gpu_matches_the_cpu():
    """Within TF32's precision: cuDNN's float32 convolutions use TF32 (a 10-bit mantissa) by default."""
    cells, pills, previews = some_positions(64)
    net = load_net(SHIPPED)
    want = Player(net).evaluate(cells, pills, previews)
    got = Player(net, "cuda", torch.float32).evaluate(cells, pills, previews)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=5e-3, atol=5e-3)


def tiny_cuda_training(**kw) -> TrainConfig:
    """The training of the test below (also bench/cuda_nan_probe.py's): a tiny network, bf16 on CUDA."""
    base = dict(
        net=NetConfig(filters=16, blocks=2, planes=24),
        optimizer="adamw",
        lr=3e-3,
        batch_size=64,
        steps=120,
        log_every=20,
        eval_every=60,
        checkpoint_every=60,
        test_fraction=0.2,
        device="cuda",
        amp=True,
        progress=False,
    )
    return TrainConfig(**(base | kw))


def poison_cache() -> None:
    """Fill the CUDA caching allocator's small (<= 1 MB blocks) and large pools with NaN, then free
    them: later tensors reuse those blocks uncleared, so a kernel that reads memory it never wrote
    yields NaN every time instead of now and then."""
    small = [torch.full((64 * 1024,), float("nan"), device="cuda") for _ in range(2000)]  # 256 KB each
    large = [torch.full((8 * 1024 * 1024,), float("nan"), device="cuda") for _ in range(48)]  # 32 MB each
    torch.cuda.synchronize()
    del small, large


# Before the conv head pooled in float32, the compiled training read uninitialised memory in the bf16
# amax's backward (torch 2.11, H100): NaN weights after step 1 whenever a freed block held NaN, as
# after the inference tests above (found with bench/cuda_nan_probe.py). The poisoned cache makes that
# deterministic.
@pytest.mark.parametrize("compile", [False, True])
def test_bf16_training_learns_and_its_checkpoint_reads_on_the_cpu(tmp_path, compile):
    cfg = tiny_cuda_training(compile=compile)
    poison_cache()
    result = train(cfg, tmp_path, real_examples(n_games=8, seed=3))
    assert result.stopped is None and result.step == 120
    import pandas as pd

    rows = pd.read_csv(result.metrics)
    loss = rows[rows.split == "train"].loss.to_numpy()
    assert np.isfinite(loss).all() and loss[-1] < 0.8 * loss[0], loss
    # the checkpoint holds float32 weights that the CPU reads and plays like the GPU does
    net = load_net(result.checkpoint)
    assert all(p.dtype == torch.float32 and p.device.type == "cpu" for p in net.parameters())
    cells, pills, previews = some_positions(32)
    cpu = Player(net).evaluate(cells, pills, previews)
    gpu = Player(net, "cuda", torch.float32).evaluate(cells, pills, previews)
    np.testing.assert_allclose(gpu.won, cpu.won, atol=5e-3)  # TF32, as above


def test_self_play_through_the_gpu_in_one_process():
    engine = BatchedInference(load_net(SHIPPED), "cuda")
    agent = SearchAgent(SearchConfig(mode="puct", simulations=16), engine)
    specs = [GameSpec(i, 500 + i, 4) for i in range(16)]
    records = play_lockstep(agent, specs, lockstep=16, max_pills=30)
    assert len(records) == 16 and all(0 < r.pills_used <= 30 for r in records)
    assert engine.stats.positions > 0 and 0 < engine.stats.row()["device_busy"] <= 1


def test_self_play_through_the_inference_server(tmp_path):
    net = DrMarioNet(NetConfig(filters=16, blocks=2, planes=24))
    ckpt = save_net(net, tmp_path / "net.pt")
    cfg = SelfPlayConfig(
        games=8,
        levels=[0, 4],
        games_per_shard=4,
        max_pills=6,
        workers=2,
        inference="server",
        device="cuda",
        network=str(ckpt),
        search=SearchConfig(mode="puct", simulations=8),
    )
    table = generate(cfg, tmp_path / "run", progress=False)
    assert int(table.loc["all", "games"]) == 8
    assert len(read_records(tmp_path / "run")) == 8
