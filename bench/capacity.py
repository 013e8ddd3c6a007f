"""Does a bigger network imitate the expert better, and does it play better?

The network alone uses about 2.3 pills per virus at level 20 where its teacher, the expert, uses 1.8,
and search with 100 simulations does not close the gap (`search_vs_expert.py`): the CPU profile's
network (32 filters, 4 blocks) agrees with the expert's move on only about half of held-out positions,
and its predicted pills to the end fall by only 0.7 per pill placed. Both may be the limit of its
size rather than of the method. This bench separates size from data and steps:

- `train` (on a GPU machine) trains networks of several sizes on the same example folders with the
  same settings and seed (the CPU profile's round-0 settings, with the batch, steps and learning rate
  given; with --value-weights, each size also with lighter value terms in the loss, as AlphaGo Zero's
  network learning from experts' games had), all at once, one process each; every run directory gets
  its checkpoint, metrics and train_result.json (with --export, the network alone and its curves go to
  one folder); the figures (time, samples/s, held-out losses of the training's own split) go to
  bench/results/capacity-train-MACHINE.json.
- `held-out` measures LABEL=CHECKPOINT networks on examples of games none of them trained on (expert
  games from another seed): agreement with the expert's move, the cross-entropy of its moves, the
  errors of the value outputs, how often it plays the expert's one-ply best move (and how often that
  move alone agrees with the teacher), and the consistency figures of `td_targets.py` (how much the predicted
  pills to the end fall per pill placed) -> bench/results/capacity-held-out-MACHINE.json.

Play them with `search_vs_expert.py --against LABEL=CHECKPOINT`.

Run: `python bench/capacity.py train --data runs/big/data --sizes 32x4,64x6,128x10 --out runs/big/nets
--device cuda`; `python bench/capacity.py held-out --examples runs/big/held-out/examples --networks
f32b4=runs/big/nets/f32b4/checkpoints/latest.pt ...` (or `--split runs/cpu/train0/config.json`: the
games that training held out).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from common import report
from td_targets import value_consistency

from drmario.learn.checkpoint import load_net, save_net
from drmario.learn.dataset import load_examples
from drmario.learn.encode import one_ply_planes
from drmario.learn.player import load_player
from drmario.learn.train import TrainConfig, held_out_examples, move_agreement, value_errors

ROOT = Path(__file__).resolve().parent.parent

# The CPU profile's round-0 training (params/cpu.yaml), less what `train` sets per run.
BASE_FLAGS = [
    "--planes", "24", "--count-error", "scaled", "--head", "conv", "--optimizer", "adamw",
    "--schedule", "cosine", "--augment", "true", "--test-fraction", "0.05", "--seed", "0",
]  # fmt: skip


def _decode(path: str) -> int:
    return len(load_examples(path, augment=False, progress=False))


def train_sizes(args: argparse.Namespace) -> None:
    files = sorted(str(f) for folder in args.data for f in Path(folder).glob("*.jsonl.gz"))
    if not files:
        raise SystemExit(f"no example files (*.jsonl.gz) in {args.data}")
    start = time.perf_counter()
    with ProcessPoolExecutor(min(len(files), os.cpu_count() or 1)) as pool:  # builds every file's cache once
        examples = sum(pool.map(_decode, files))
    decode_s = time.perf_counter() - start
    print(f"{len(files)} files, {examples} examples decoded in {decode_s:.0f} s", flush=True)

    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    runs = {}
    for size, weight in [(s, float(w)) for s in args.sizes.split(",") for w in args.value_weights.split(",")]:
        filters, blocks = (int(x) for x in size.split("x"))
        light = "" if weight == 1 else f"-vw{weight:g}"  # the value terms' weight, where not the design's 1
        run_dir = args.out / f"f{filters}b{blocks}{light}"
        run_dir.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "drmario", "train", str(run_dir), *args.data, "--no-progress",
            "--threads", str(args.threads), *BASE_FLAGS, "--filters", str(filters), "--blocks", str(blocks),
            "--batch-size", str(args.batch_size), "--steps", str(args.steps), "--lr", str(args.lr),
            "--warmup-steps", str(args.warmup_steps), "--reg", str(args.reg), "--value-weight", str(weight),
            "--device", args.device,
            "--amp", str(args.amp).lower(), "--cpu-bf16", str(args.cpu_bf16).lower(), "--compile", "false",
            "--log-every", str(max(args.steps // 40, 1)),
            "--eval-every", str(max(args.steps // 8, 1)), "--checkpoint-every", str(max(args.steps // 4, 1)),
            "--keep-checkpoints", "1",
        ]  # fmt: skip
        with open(run_dir / "train.log", "w") as log:  # the child keeps its own copy of the file
            runs[size + light] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env), run_dir)
    figures = {}
    deadline = start + args.limit_s
    for size, (process, run_dir) in runs.items():
        try:
            rc = process.wait(timeout=max(deadline - time.perf_counter(), 1))
        except subprocess.TimeoutExpired:
            process.kill()
            rc = process.wait()
        result_file = run_dir / "train_result.json"
        result = json.loads(result_file.read_text()) if rc == 0 and result_file.exists() else {}
        metrics = run_dir / "metrics.csv"
        rows = list(csv.DictReader(metrics.read_text().splitlines())) if metrics.exists() else []
        last = next((row for row in reversed(rows) if row["split"] == "train"), None)
        figures[size] = {
            "exit": rc,
            "steps": result.get("step"),
            "seconds": float(last["time_s"]) if last else None,
            "samples per s (last log)": float(last["samples_per_s"]) if last else None,
            "held-out losses (the training's own 5% of games)": result.get("test"),
            "train losses": result.get("train"),
            "examples": [result.get("n_train"), result.get("n_test")],
        }
        print(size, json.dumps(figures[size]), flush=True)
        if args.export and result:  # the network alone (no optimizer) and its curves, small enough to fetch
            args.export.mkdir(parents=True, exist_ok=True)
            save_net(load_net(result["checkpoint"]), args.export / f"{run_dir.name}.pt")
            shutil.copyfile(run_dir / "metrics.csv", args.export / f"{run_dir.name}-metrics.csv")
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "func"}
    settings.update(files=len(files), examples=examples, decode_s=round(decode_s, 1), base_flags=BASE_FLAGS)
    report(args.name, settings, figures)


def held_out(args: argparse.Namespace) -> None:
    if args.split:  # the games a training held out (its data, seed and test fraction), without colour renamings
        examples = held_out_examples(TrainConfig.load(args.split).replace(augment=False))
    else:
        examples = load_examples(args.examples, augment=False, progress=False)
    # the expert's one-ply preference (the 28-plane networks' extra input): how far its best move
    # alone agrees with the teacher, and how often each network plays it
    rows = np.arange(len(examples))
    one_ply = one_ply_planes(examples.cells, examples.pills).reshape(len(examples), -1)
    target = examples.dense_moves().reshape(len(examples), -1)
    figures = {
        "one-ply expert": {
            "agreement with the expert's move": round(float(np.mean(target[rows, one_ply.argmax(1)] > 0)), 4)
        }
    }
    for item in args.networks:
        label, _, path = item.partition("=")
        player = load_player(path)
        pred = player.evaluate(examples.cells, examples.pills, examples.previews, legal=examples.legal())
        agreement, cross_entropy = move_agreement(player, examples)
        errors = value_errors(player, examples, pred)
        figures[label] = {
            "parameters": sum(p.numel() for p in player.module.parameters()),
            "agreement with the expert's move": round(agreement, 4),
            "moves cross-entropy (nats)": round(cross_entropy, 4),
            "plays the one-ply expert's best move": round(
                float(np.mean(one_ply[rows, pred.moves.reshape(len(rows), -1).argmax(1)] == 1)), 4
            ),
            "won: mean squared error (targets -1, 1)": round(errors["won: mean squared error"], 4),
            "viruses to clear: root mean square error": round(errors["viruses cleared: RMSE"], 3),
            "pills to the end: root mean square error": round(errors["pills to the end: RMSE"], 3),
            "won games' pills to the end: root mean square error": round(
                errors["won games' pills to the end: RMSE"], 3
            ),
            "lost games' viruses cleared: root mean square error": round(
                errors["lost games' viruses cleared: RMSE"], 3
            ),
            **{k: round(v, 4) for k, v in value_consistency(examples, pred).items()},
        }
        print(label, json.dumps(figures[label], indent=1), flush=True)
    games = len(np.unique(examples.game))
    settings = {"examples": args.examples, "split": args.split, "games": games, "positions": len(examples)}
    settings["networks"] = args.networks
    report(args.name, settings, figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train networks of several sizes on the same data, at once")
    t.add_argument("--data", nargs="+", required=True, help="example folders")
    t.add_argument("--sizes", default="32x4,64x6,128x10", help="FILTERSxBLOCKS,...")
    t.add_argument("--out", type=Path, required=True, help="one run directory per size is made here")
    t.add_argument("--steps", type=int, default=8000)
    t.add_argument("--batch-size", type=int, default=1024)
    t.add_argument("--lr", type=float, default=0.002)
    t.add_argument("--warmup-steps", type=int, default=500)
    t.add_argument("--reg", type=float, default=1e-4, help="weight of the L2 regulariser")
    t.add_argument("--value-weights", default="1", help="W,...: each size also with these weights of the value terms")
    t.add_argument("--device", default="cuda")
    t.add_argument("--amp", action=argparse.BooleanOptionalAction, default=True, help="bf16 autocast on CUDA")
    t.add_argument("--cpu-bf16", action="store_true", help="bf16 autocast on CPU (fast with AMX or AVX512-BF16)")
    t.add_argument("--threads", type=int, default=2, help="torch CPU threads per training")
    t.add_argument("--export", type=Path, help="copy each network (weights only) and its metrics.csv here")
    t.add_argument("--limit-s", type=float, default=480, help="every training is stopped after this long")
    t.add_argument("--name", default="capacity-train", help="result file name")
    t.set_defaults(func=train_sizes)
    h = sub.add_parser("held-out", help="agreement and value errors on games none of the networks trained on")
    where = h.add_mutually_exclusive_group(required=True)
    where.add_argument("--examples", help="an example folder of whole games")
    where.add_argument("--split", help="a training's config.json: the games it held out (no colour renamings)")
    h.add_argument("--networks", nargs="+", required=True, help="LABEL=CHECKPOINT ...")
    h.add_argument("--name", default="capacity-held-out", help="result file name")
    h.set_defaults(func=held_out)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
