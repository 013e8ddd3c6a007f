"""Throughput of the GPU paths against the targets of spec/design.md section 6 (H100, f=256, r=19,
bf16): inference >= 60,000 positions/s; training >= 40% of the bf16 peak; self-play >= 20,000
simulations/s with the device >= 70% busy, and simulations/s and busy fraction for 256, 1024 and
4096 lockstep games.

Run `python bench/gpu.py` on a GPU machine. Without CUDA the same code runs on the CPU with a small
network and small lockstep counts, so the script and its figures can be checked anywhere; CPU
figures say nothing about the GPU targets.

- inference: `BatchedInference` (fixed buckets, CUDA graphs, pinned memory, two batches in
  flight) from numpy positions to numpy outputs.
- training: `Trainer` steps on synthetic compact examples on the device (expansion on the device,
  bf16 autocast, channels_last), eager and with torch.compile (the GPU profile's setting); FLOPs
  per sample = 3x the forward.
- self-play: `play_lockstep` (two halves overlapping) over real games with PUCT search, and the
  same with `inference="server"`: all CPU cores as search processes feeding one inference process.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable

import numpy as np
import torch
from common import report
from net import bf16_peak, synthetic_examples

from drmario.learn.checkpoint import save_net
from drmario.learn.net import DrMarioNet, NetConfig, flops_per_position
from drmario.learn.train import TrainConfig, Trainer
from drmario.play.agents import SearchAgent
from drmario.play.inference import BatchedInference
from drmario.play.lockstep import GameSpec, play_lockstep
from drmario.play.selfplay import SelfPlayConfig, generate
from drmario.search import SearchConfig


def inference_rate(net: DrMarioNet, device: str, batch: int, seconds: float) -> dict:
    engine = BatchedInference(net, device, buckets=(batch,))
    rng = np.random.default_rng(0)
    cells = rng.choice(np.array([0, 1, 2, 3, 5, 6, 7, 17, 21], np.uint8), (batch, 8, 16))
    pills = rng.integers(1, 4, (batch, 2)).astype(np.uint8)
    previews = rng.integers(1, 4, (batch, 2)).astype(np.uint8)
    engine.evaluate(cells, pills, previews)  # capture / warm up
    engine.stats.reset()
    done, start = 0, time.perf_counter()
    pending = [engine.submit(cells, pills, previews)]
    while time.perf_counter() - start < seconds:
        pending.append(engine.submit(cells, pills, previews))
        engine.wait(pending.pop(0))
        done += batch
    engine.wait(pending.pop(0))
    done += batch
    elapsed = time.perf_counter() - start
    return {"positions_per_s": done / elapsed, "device_busy": engine.stats.row()["device_busy"]}


def training_rate(cfg: NetConfig, device: str, batch: int, steps: int, compile: bool = False) -> dict:
    tmp = tempfile.mkdtemp()
    try:
        tc = TrainConfig(
            net=cfg,
            batch_size=batch,
            steps=steps + 5,
            log_every=steps + 5,
            eval_every=10**9,
            checkpoint_every=10**9,
            progress=False,
            device=device,
            test_fraction=0.0,
            compile=compile,
        )
        trainer = Trainer(tc, tmp)
        trainer.set_data(synthetic_examples(max(4 * batch, 4096)))
        trainer.run(5)  # warm up
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        sync()
        start = time.perf_counter()
        trainer.run(5 + steps)
        sync()
        rate = steps * batch / (time.perf_counter() - start)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    flops = 3 * flops_per_position(cfg) * rate
    out = {"samples_per_s": rate, "tflops": flops / 1e12}
    peak = bf16_peak(torch.cuda.get_device_name(0)) if device == "cuda" else None
    if peak:
        out["fraction_of_bf16_peak"] = flops / peak
    return out


def selfplay_rate(net: DrMarioNet, device: str, games: int, simulations: int, decisions: int) -> dict:
    engine = BatchedInference(net, device)
    agent = SearchAgent(SearchConfig(mode="puct", simulations=simulations), engine)
    specs = [GameSpec(i, 1000 + i, (i * 7) % 21) for i in range(games)]
    play_lockstep(agent, specs[: min(games, 8)], lockstep=min(games, 8), max_pills=1)  # warm up
    engine.stats.reset()
    start = time.perf_counter()
    records = play_lockstep(agent, specs, lockstep=games, max_pills=decisions)
    elapsed = time.perf_counter() - start
    made = sum(r.pills_used for r in records)
    return {
        "simulations_per_s": made * simulations / elapsed,
        "decisions_per_s": made / elapsed,
        "device_busy": engine.stats.row()["device_busy"],
        "mean_batch": engine.stats.row()["mean_batch"],
    }


def server_rate(net: DrMarioNet, device: str, games: int, simulations: int, workers: int, pills: int) -> dict:
    tmp = tempfile.mkdtemp()
    try:
        ckpt = save_net(net, os.path.join(tmp, "net.pt"))
        cfg = SelfPlayConfig(
            games=games * workers,
            levels=list(range(0, 21, 4)),
            games_per_shard=games,
            max_pills=pills,
            workers=workers,
            inference="server",
            device=device,
            network=str(ckpt),
            search=SearchConfig(mode="puct", simulations=simulations),
        )
        start = time.perf_counter()
        table = generate(cfg, os.path.join(tmp, "run"), progress=False)
        elapsed = time.perf_counter() - start
        import pandas as pd

        rows = pd.read_csv(os.path.join(tmp, "run", "metrics.csv"))
        made = int(table.loc["all"].to_dict()["pills"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "simulations_per_s": made * simulations / elapsed,
        "device_busy_last_row": float(rows["device_busy"].iloc[-1]),
        "mean_batch": float(rows["mean_batch"].iloc[-1]),
        "wall_s_including_start": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--simulations", type=int, default=32)
    parser.add_argument("--server-pills", type=int, default=8, help="pills per game, server part")
    parser.add_argument("--parts", nargs="+", help="only the parts whose names start so (inference, training, ...)")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    if cuda:
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    net_cfg = NetConfig() if cuda else NetConfig(filters=32, blocks=4)
    net = DrMarioNet(net_cfg)
    lockstep = (256, 1024, 4096) if cuda else (16, 64)
    workers = max(1, (os.cpu_count() or 2) - 1) if cuda else 2
    parts: list[tuple[str, Callable[[], dict]]] = [
        ("inference", lambda: inference_rate(net, device, 4096 if cuda else 256, args.seconds)),
        ("training", lambda: training_rate(net_cfg, device, 1024 if cuda else 64, 50 if cuda else 10)),
        ("training_compiled", lambda: training_rate(net_cfg, device, 1024 if cuda else 64, 50 if cuda else 10, True)),
    ]
    for games in lockstep:  # 2 decisions per game at the widest: the rate, not the game, is measured
        decisions = 2 if games >= 4096 else 4
        run = lambda g=games, d=decisions: selfplay_rate(net, device, g, args.simulations, d)  # noqa: E731
        parts.append((f"selfplay_{games}games", run))
    server_games = lockstep[-1] // workers or 8
    serve = lambda: server_rate(net, device, server_games, args.simulations, workers, args.server_pills)  # noqa: E731
    parts.append((f"server_{workers}workers", serve))
    settings = {
        "device": device,
        "net": net_cfg.to_dict(),
        "dtype": "bfloat16" if cuda else "float32",
        "simulations": args.simulations,
        "lockstep": lockstep,
        "server_pills_per_game": args.server_pills,
        "note": "" if cuda else "CPU run with a small network: checks the code path, not the GPU targets",
    }
    targets = {
        "inference_positions_per_s": 60_000,
        "training_fraction_of_bf16_peak": 0.4,
        "selfplay_4096games_simulations_per_s": 20_000,
        "selfplay_4096games_device_busy": 0.7,
    }
    if args.parts:
        parts = [(name, part) for name, part in parts if name.startswith(tuple(args.parts))]
    name_of_run = "gpu" if not args.parts else "gpu_" + "_".join(args.parts)  # a part run keeps the whole run's file
    figures: dict = {}
    errors: dict[str, str] = {}
    for i, (name, part) in enumerate(parts):  # each on its own: one failing (or the run cut short) keeps the rest
        start = time.perf_counter()
        try:
            for key, value in part().items():
                figures[f"{name}_{key}"] = value
        except Exception as e:  # noqa: BLE001 -- recorded in the result file and printed, not hidden
            errors[name] = f"{type(e).__name__}: {e}"
            print(f"{name} failed: {errors[name]}", flush=True)
        print(f"{name}: {time.perf_counter() - start:.1f} s", flush=True)
        last = i == len(parts) - 1  # the file after every part, the table once
        report(name_of_run, {**settings, "errors": errors}, figures, targets=targets if cuda else None, echo=last)
    if errors:
        raise SystemExit(f"parts failed: {', '.join(errors)}")


if __name__ == "__main__":
    main()
