"""Do n-step bootstrapped count targets give the search better values than Monte-Carlo ones?

The value head is what holds the search back (`search_vs_expert.py --expert-prior`: the expert's
moves as the prior and the network's values still used more pills than the expert), and its
pills-to-the-end output misses by about 44 pills (root mean square, round 0's test split) while the
moves it must tell apart differ by one or two. Most of that error is the noise of the target: the
pills of the whole rest of the game, every future pill a random draw. An n-step target (MuZero's,
TD(n)) keeps the first n pills as played and takes the rest from a network's prediction n
decisions later in the same game:

    duration' = n + duration^(s_{t+n})      cleared' = (cleared_t - cleared_{t+n}) + cleared^(s_{t+n})

(the Monte-Carlo target where the game ends within n). The won target stays Monte-Carlo.

`prepare` reads a round-0 run's examples (2,000 expert games), predicts every position with that
run's round-0 network (trained on the Monte-Carlo targets), builds the n-step targets and trains
a network with the round-0 training's own settings and seed on them (6 colour renamings, as it
was). Compare the two networks with `search_vs_expert.py --against` and `value_ranking.py`.

`consistency` measures what the search relies on when it adds a path's placed pills to a leaf's
predicted rest: along games (the expert's), how much each network's predicted pills to the end fall
per pill placed (1 if consistent), the slope of its predictions on the truth, their root mean
square error, and the same fall of the predicted viruses still to clear against the truth's.

`live` trains round 0 again with `TrainConfig.bootstrap`: one-step targets mixed into the game's,
from the network being trained (its prediction one decision later), so they improve as it does.

Run: `python bench/td_targets.py prepare --run runs/cpu-noise0 --n 8 --out runs/exp/td8`;
`python bench/td_targets.py live --run runs/exp/boot --weight 0.5 --out runs/exp/boot-live05`;
`python bench/td_targets.py consistency --examples runs/cpu-noise0/round0/examples --games 300
--networks r0=runs/cpu-noise0/train0/checkpoints/latest.pt shipped=data/networks/small.pt`.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from common import report

from drmario.files import write_atomic
from drmario.learn.dataset import ExampleSet, augment_colours, later_index, load_examples
from drmario.learn.player import load_player
from drmario.learn.train import TrainConfig, train
from drmario.run.rounds import train_dir, trained_checkpoint
from drmario.search.core import Prediction


def n_step_targets(examples: ExampleSet, pred_cleared: np.ndarray, pred_duration: np.ndarray, n: int):
    """(cleared', duration') float32[N]: the n-step targets (module docstring)."""
    j = later_index(examples.game, examples.duration, n)
    has = j >= 0
    jj = np.where(has, j, 0)
    cleared = examples.cleared.astype(np.float32)
    duration = examples.duration.astype(np.float32)
    cleared_n = np.where(has, cleared - cleared[jj] + pred_cleared[jj], cleared)
    duration_n = np.where(has, n + pred_duration[jj], duration)
    return cleared_n.astype(np.float32), duration_n.astype(np.float32), has


def prepare(run: Path, n: int, out: Path, steps: int | None) -> None:
    base = json.loads((train_dir(run, 0) / "config.json").read_text())
    examples = load_examples(base["data"], augment=False, progress=False)
    player = load_player(trained_checkpoint(run, 0))
    torch.set_num_threads(2)
    t = time.perf_counter()
    pred = player.evaluate(examples.cells, examples.pills, examples.previews)
    print(f"predicted {len(examples):,} positions in {time.perf_counter() - t:.0f} s", flush=True)
    cleared_n, duration_n, has = n_step_targets(examples, pred.cleared, pred.duration, n)
    mc_err = pred.duration - examples.duration
    stats = {
        "examples": len(examples),
        "bootstrapped": float(has.mean()),
        "n": n,
        "mc_duration_target_std": float(examples.duration.std()),
        "n_step_duration_target_std": float(duration_n.std()),
        "round0_net_duration_rmse_vs_mc_all_examples": float(np.sqrt(np.mean(mc_err**2))),
        "mean_abs_change_of_duration_target": float(np.abs(duration_n - examples.duration).mean()),
        "mean_abs_change_of_cleared_target": float(np.abs(cleared_n - examples.cleared).mean()),
    }
    print(json.dumps(stats, indent=1), flush=True)
    examples = replace(examples, cleared=cleared_n, duration=duration_n)
    if base["augment"]:
        examples = augment_colours(examples)
    cfg = TrainConfig.from_dict({**base, "data": [], "augment": False, **({"steps": steps} if steps else {})})
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "n_step.json", json.dumps({"run": str(run), **stats}, indent=1) + "\n")
    result = train(cfg, out, examples)
    print(f"trained {result.step} steps: {result.checkpoint}; stopped: {result.stopped}", flush=True)


def live(run: Path, weight: float, out: Path) -> None:
    """Round 0's training again (its settings, data and seed) with `TrainConfig.bootstrap` = weight:
    the targets bootstrap one decision on from the network being trained, not a frozen one."""
    base = json.loads((train_dir(run, 0) / "config.json").read_text())
    torch.set_num_threads(2)
    cfg = TrainConfig.from_dict({**base, "bootstrap": weight, "progress": False})
    result = train(cfg, out)
    print(f"trained {result.step} steps: {result.checkpoint}; stopped: {result.stopped}", flush=True)


def value_consistency(examples: ExampleSet, pred: Prediction) -> dict[str, float]:
    """The consistency figures (module docstring) of predictions on whole games' examples."""
    j = later_index(examples.game, examples.duration, 1)
    has, nxt = j >= 0, j[j >= 0]
    true_pills, true_cleared = examples.duration.astype(float), examples.cleared.astype(float)
    return {
        "predicted pills to the end: fall per pill placed (1 if consistent)": float(
            (pred.duration[has] - pred.duration[nxt]).mean()
        ),
        "slope of the predicted pills on the true": float(np.polyfit(true_pills, pred.duration, 1)[0]),
        "predicted pills: root mean square error": float(np.sqrt(np.mean((pred.duration - true_pills) ** 2))),
        "predicted viruses to clear: fall per pill placed": float((pred.cleared[has] - pred.cleared[nxt]).mean()),
        "true viruses to clear: fall per pill placed": float((true_cleared[has] - true_cleared[nxt]).mean()),
    }


def consistency(examples_dir: str, games: int, networks: list[str], name: str = "value-consistency") -> None:
    """The consistency figures (module docstring) of each LABEL=CHECKPOINT on the first `games`
    games of the examples."""
    examples = load_examples(examples_dir, progress=False)
    keep = np.unique(examples.game)[:games]
    examples = examples.subset(np.nonzero(np.isin(examples.game, keep))[0])
    figures = {}
    for item in networks:
        label, _, path = item.partition("=")
        pred = load_player(path).evaluate(examples.cells, examples.pills, examples.previews)
        figures[label] = value_consistency(examples, pred)
        print(label, json.dumps(figures[label], indent=1), flush=True)
    settings = {"examples": examples_dir, "games": len(keep), "positions": len(examples), "networks": networks}
    report(name, settings, figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="n-step targets from a run's round-0 network, and a training on them")
    p.add_argument("--run", type=Path, required=True, help="a pipeline run directory (its round0, train0)")
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--steps", type=int, help="training steps (default: round 0's)")
    b = sub.add_parser("live", help="round 0's training with targets bootstrapped from the network being trained")
    b.add_argument("--run", type=Path, required=True, help="a pipeline run directory (its train0)")
    b.add_argument("--weight", type=float, default=0.5, help="TrainConfig.bootstrap")
    b.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("consistency", help="how each network's predictions fall along the examples' games")
    c.add_argument("--examples", required=True, help="an example folder (whole games, e.g. a round-0 run's)")
    c.add_argument("--games", type=int, default=300, help="the first this many games")
    c.add_argument("--networks", nargs="+", required=True, help="LABEL=CHECKPOINT ...")
    c.add_argument("--name", default="value-consistency", help="result file name")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.run, args.n, args.out, args.steps)
    elif args.command == "live":
        live(args.run, args.weight, args.out)
    else:
        consistency(args.examples, args.games, args.networks, args.name)


if __name__ == "__main__":
    main()
