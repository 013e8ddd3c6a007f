"""How far did the old train/test split inflate a warm-started round's held-out figures?

Until this probe's commit a training drew its held-out games afresh among every game it loaded
(`numpy.random.Generator.choice` over game ids), so round k, which loads rounds 0..k and starts
from round k - 1's network, held out games that network had trained on. The split now keeps each
game on one side wherever it is loaded (`ExampleSet.split_by_game`). This probe measures, on a
finished run, what the old rule did:

- the share of round k's old held-out games that round k - 1's network trained on;
- that network's figures on games it trained on (for each of its held-out games a training game of
  the same level: the won head's error depends most on the level) against its own held-out games:
  the gap is what such games add to a held-out figure. Figures: the share of
  decisions whose most probable placement carries target mass (`train.move_scores`, the held-out
  agreement), the moves target's cross-entropy, and the won head's squared error, on the games'
  own colouring.

Run: `python bench/split_leak.py runs/cpuamd --round 2`. Writes bench/results/split-leak-RUN-rK[-sSEED]-MACHINE.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from common import report

from drmario.learn.dataset import ExampleSet, load_examples
from drmario.learn.example_files import read_sidecar
from drmario.learn.player import load_player
from drmario.learn.train import move_scores


def old_test_games(examples: ExampleSet, test_fraction: float, seed: int) -> np.ndarray:
    """The game ids the old rule held out (as `split_by_game` drew them before this probe's commit)."""
    games = np.unique(examples.game)
    n_test = int(round(test_fraction * len(games)))
    if test_fraction > 0 and len(games) > 1:
        n_test = min(max(n_test, 1), len(games) - 1)
    return np.random.default_rng(seed).choice(games, n_test, replace=False)


def game_levels(paths: list[str]) -> tuple[ExampleSet, np.ndarray]:
    """The examples of paths and each game id's level (from the files' sidecars, in load order)."""
    reports: list = []
    examples = load_examples(paths, progress=False, reports=reports)
    if any(r.games_from != "sidecar" for r in reports):
        raise SystemExit("every example file needs its sidecar (the games' levels)")
    levels = np.concatenate([[g["level"] for g in (read_sidecar(r.path) or {})["games"]] for r in reports])
    return examples, levels


def same_levels(held: np.ndarray, pool: np.ndarray, levels: np.ndarray, seed: int) -> np.ndarray:
    """For each held-out game a distinct game of pool at its level."""
    rng, out = np.random.default_rng(seed), []
    for level, n in zip(*np.unique(levels[held], return_counts=True)):
        out.append(rng.choice(pool[levels[pool] == level], n, replace=False))
    return np.concatenate(out)


def figures(network: Path, examples: ExampleSet, games: np.ndarray) -> dict[str, float]:
    """The network's figures on these games' decisions."""
    part = examples.subset(np.nonzero(np.isin(examples.game, games))[0])
    player = load_player(network)
    hits, cross_entropy = move_scores(player, part)
    won = player.evaluate(part.cells, part.pills, part.previews).won
    return {
        "games": len(games),
        "decisions": len(part),
        "agreement": float(hits.mean()),
        "moves_ce": float(cross_entropy.mean()),
        "won_mse": float(np.mean((won - part.won) ** 2)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--round", type=int, default=2, help="a warm-started round (>= 1)")
    parser.add_argument("--sample-seed", type=int, default=0, help="draws the sample of training games")
    args = parser.parse_args()
    configs = [
        json.loads((args.run_dir / f"train{k}" / "config.json").read_text()) for k in (args.round - 1, args.round)
    ]
    before, now = configs
    if not now.get("init"):
        raise SystemExit(f"round {args.round} did not start from another network (no init in its config.json)")
    start = Path(now["init"])
    if now["data"][: len(before["data"])] != before["data"] or sorted(now["data"]) != now["data"]:
        raise SystemExit("round k's data must be round k - 1's and then its own (game ids shared): no replay window")
    data_before, levels = game_levels(before["data"])  # rounds 0..k-1, game ids as in round k's load
    data_now = load_examples(now["data"], progress=False)
    held_before = old_test_games(data_before, before["test_fraction"], before["seed"])
    held_now = old_test_games(data_now, now["test_fraction"], now["seed"])
    earlier = held_now[np.isin(held_now, data_before.game)]  # held out by round k, from rounds 0..k-1
    trained = np.setdiff1d(np.unique(data_before.game), held_before)  # the start network's training games
    seen = np.intersect1d(earlier, trained)
    sample = same_levels(held_before, trained, levels, args.sample_seed)
    on_trained, on_held = figures(start, data_before, sample), figures(start, data_before, held_before)
    out = {
        "round_held_out_games": len(held_now),
        "from_earlier_rounds": len(earlier),
        "trained_on_by_the_start_network": len(seen),
        "share_trained_on": len(seen) / max(len(held_now), 1),
        **{f"start_on_trained_{k}": v for k, v in on_trained.items()},
        **{f"start_on_held_out_{k}": v for k, v in on_held.items()},
    }
    for key in ("agreement", "moves_ce", "won_mse"):
        out[f"gap_{key}"] = on_trained[key] - on_held[key]
    settings = {"run_dir": str(args.run_dir), "round": args.round, "start": str(start), "sample_seed": args.sample_seed}
    draw = f"-s{args.sample_seed}" if args.sample_seed else ""
    report(f"split-leak-{args.run_dir.resolve().name}-r{args.round}{draw}", settings, out)


if __name__ == "__main__":
    main()
