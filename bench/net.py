"""Network throughput: inference positions/s and training samples/s of the design-size network
(f=256, r=19), a small one (f=64, r=6) and gpu-quick's apprentice (f=128, r=10), with the FLOPs per
position counted from the layers and, on a GPU, the share of its dense bf16 peak reached. Run:
`python bench/net.py` (it uses CUDA when there is a GPU: bf16, batch sizes 256/1024/4096; `--compile`
adds torch.compile; `--cpu-bf16` trains under CPU bf16 autocast, written as net-bf16; channels_last,
as the kit runs, unless `--no-channels-last`, written with -nchw, which times no `player` figure;
`--sizes` other than all three add their names, e.g. net-small-apprentice, so that a partial run does
not replace a whole one).

Inference is timed twice: the network alone on planes already on the device (`infer`), and
`Player.evaluate` from numpy positions to numpy outputs, transfers included (`player`). Training
is whole optimiser steps as `train` runs them: batch expansion on the device, forward, loss,
backward, SGD step. FLOPs: 2 per multiply-add of the convolutions and linear layers; a training
step counts 3x the forward.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import cast

import numpy as np
import torch
from common import report

from drmario.engine import kernels as K
from drmario.engine.rules import MOVES_SHAPE
from drmario.learn.dataset import ExampleSet
from drmario.learn.encode import planes_torch
from drmario.learn.net import DrMarioNet, NetConfig, flops_per_position
from drmario.learn.player import Player
from drmario.learn.train import TrainConfig, forward_backward, make_optimizer, uses_bf16

# Dense bf16 tensor-core peaks (FLOP/s, without sparsity), matched in order against the GPU's name.
PEAK_BF16 = [
    ("H100 PCIe", 756e12),
    ("H100 NVL", 835e12),
    ("H100", 989e12),  # SXM ("NVIDIA H100 80GB HBM3")
    ("H200", 989e12),  # also GH200
    ("H800", 989e12),
    ("B200", 2250e12),
    ("A100", 312e12),
    ("A800", 312e12),
    ("L40S", 362e12),
    ("L4", 121e12),
    ("A10G", 70e12),
    ("A10", 125e12),
    ("RTX 4090", 165e12),
    ("RTX 3090", 71e12),
    ("V100", None),  # no bf16 tensor cores
]

SIZES = {
    "design": NetConfig(),
    "small": NetConfig(filters=64, blocks=6),
    "apprentice": NetConfig(filters=128, blocks=10),
}


def bf16_peak(name: str) -> float | None:
    return next((peak for key, peak in PEAK_BF16 if key in name), None)


def synthetic_examples(n: int, seed: int = 0) -> ExampleSet:
    """n positions of random cells (about half the board filled) and random targets. The network's
    speed does not depend on the values; the batch expansion runs exactly as in training."""
    rng = np.random.default_rng(seed)
    codes = np.array([shape << 2 | colour for shape in range(6) for colour in (1, 2, 3)], np.uint8)
    cells = np.where(rng.random((n, K.WIDTH, K.HEIGHT)) < 0.5, rng.choice(codes, (n, K.WIDTH, K.HEIGHT)), 0)
    moves = rng.dirichlet(np.ones(20), n)  # 20 candidate moves per position
    dense = np.zeros((n, 512), np.float32)
    np.put_along_axis(dense, rng.integers(0, 512, (n, 20)), moves.astype(np.float32), axis=1)
    return ExampleSet.from_dense(
        cells=cells.astype(np.uint8),
        pills=rng.integers(1, 4, (n, 2)),
        won=rng.choice([-1, 1], n),
        cleared=rng.integers(0, 40, n),
        duration=rng.integers(1, 100, n),
        moves=dense.reshape(n, *MOVES_SHAPE),
        game=np.arange(n),
        legal=rng.random((n, *MOVES_SHAPE)) < 0.1,
    )


def timed(fn, items: int, min_seconds: float, sync) -> float:
    """items per second of fn after one warm-up call; whole calls until min_seconds have passed."""
    fn()
    sync()
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < min_seconds or done == 0:
        fn()
        sync()
        done += items
    return done / elapsed


def bench_size(
    size: str,
    batch_sizes: list[int],
    data: ExampleSet,
    device: torch.device,
    train_cfg: TrainConfig,
    compile: bool,
    seconds: float,
    peak: float | None,
    channels_last: bool = True,
) -> dict[str, float]:
    """The figures of one network size at each batch size."""
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    cfg = SIZES[size]
    flops = flops_per_position(cfg)
    torch.manual_seed(0)
    model = DrMarioNet(cfg).to(device)
    figures = {f"{size}_parameters": model.num_parameters(), f"{size}_mflop_per_position": round(flops / 1e6, 1)}
    player = Player.from_module(model, device, compile=compile)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)  # type: ignore[call-overload]  # (torch's stubs)
    if not channels_last:  # the Player is always channels_last
        player.module.to(memory_format=memory_format)
    train_cfg = dataclasses.replace(train_cfg, net=cfg, channels_last=channels_last)
    net = cast(torch.nn.Module, torch.compile(model)) if compile else model  # compile keeps a Module a Module
    opt = make_optimizer(model, train_cfg)
    dev = data.to_device(device)
    for b in batch_sizes:
        idx = torch.arange(b, device=device)
        planes = planes_torch(dev.cells[idx], dev.pills[idx], dev.previews[idx], player.config.planes, player.dtype)
        planes = planes.contiguous(memory_format=memory_format)
        legal = data.legal()[:b]

        def infer(planes=planes):
            player.forward(planes)

        def play(b=b, legal=legal):
            player.evaluate(data.cells[:b], data.pills[:b], data.previews[:b], legal=legal)

        def step(idx=idx):
            opt.zero_grad(set_to_none=True)
            forward_backward(net, dev.batch(idx), train_cfg, model, device)
            opt.step()

        rates = {
            "infer": (timed(infer, b, seconds, sync), flops),
            **({"player": (timed(play, b, seconds, sync), flops)} if channels_last else {}),
            "train": (timed(step, b, seconds, sync), 3 * flops),
        }
        for kind, (rate, f) in rates.items():
            unit = "samples" if kind == "train" else "positions"
            figures[f"{size}_{kind}_b{b}_{unit}_per_s"] = round(rate, 1)
            figures[f"{size}_{kind}_b{b}_gflop_per_s"] = round(rate * f / 1e9, 1)
            if peak:
                figures[f"{size}_{kind}_b{b}_bf16_peak_fraction"] = round(rate * f / peak, 4)
        print(f"  {size} batch {b}: " + ", ".join(f"{k} {r:,.0f}/s" for k, (r, _) in rates.items()), flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--batch-sizes", type=int, nargs="+", help="default: 256 1024 4096 on CUDA; small on CPU")
    parser.add_argument("--seconds", type=float, help="minimum time per figure (default 2 on CUDA, 1 on CPU)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the networks (CUDA)")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument("--cpu-bf16", action="store_true", help="train under CPU bf16 autocast (result: net-bf16)")
    parser.add_argument(
        "--no-channels-last", action="store_true", help="the default memory format instead (result: ...-nchw)"
    )
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    device = torch.device(device)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = True
    seconds = args.seconds if args.seconds is not None else (2.0 if cuda else 1.0)
    channels_last = not args.no_channels_last
    peak = bf16_peak(torch.cuda.get_device_name(device)) if cuda else None
    if args.batch_sizes:
        batches = dict.fromkeys(args.sizes, args.batch_sizes)
    elif cuda:
        batches = dict.fromkeys(args.sizes, [256, 1024, 4096])
    else:  # a CPU does a design-size forward in ~0.1 s per position: keep the run near a minute
        batches = {"design": [16, 64], "small": [64, 256], "apprentice": [64, 256]}
    train_cfg = TrainConfig(
        device=str(device), compile=args.compile, optimizer="sgd", cpu_bf16=args.cpu_bf16, progress=False
    )
    data = synthetic_examples(max(max(b) for b in batches.values()))

    figures: dict[str, float] = {}
    targets: dict[str, float] = {}
    for size in args.sizes:
        figures.update(
            bench_size(size, batches.get(size, []), data, device, train_cfg, args.compile, seconds, peak, channels_last)
        )
        if cuda:
            torch.cuda.empty_cache()
    if cuda and "design" in args.sizes:
        b = max(batches["design"])
        targets[f"design_infer_b{b}_positions_per_s"] = 60_000
        if peak:
            targets[f"design_train_b{b}_bf16_peak_fraction"] = 0.4
    sizes = "" if sorted(args.sizes) == sorted(SIZES) else "-" + "-".join(args.sizes)
    report(
        ("net-bf16" if args.cpu_bf16 and not cuda else "net") + sizes + ("" if channels_last else "-nchw"),
        {
            "device": str(device),
            "inference_dtype": "bfloat16" if cuda else "float32",
            "autocast_bf16_training": uses_bf16(device, train_cfg),
            "channels_last": channels_last,
            "compile": args.compile,
            "batch_sizes": batches,
            "bf16_peak_flop_per_s": peak,
            "threads": torch.get_num_threads(),
            "sizes": {s: SIZES[s].to_dict() for s in args.sizes},
            "optimizer": "sgd momentum 0.9 nesterov, reg in the loss",
            "flops": "2 per multiply-add of convs and linears; training = 3x forward",
        },
        figures,
        targets,
    )


if __name__ == "__main__":
    main()
