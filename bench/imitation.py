"""Which move head learns the expert? Held-out agreement and policy-alone play, per head.

1. Data: the expert (`SearchConfig(mode="expert")`) plays --games games on training seeds (levels
   cycling through --levels), written by the kit's self-play as example files; each decision's
   target is the expert's tied best moves (--temperature 0) or softmax(score / T).
2. Games are split into train and held-out (--test-fraction of the games, never both sides).
3. For each head, the same trunk (--filters x --blocks) is trained with AdamW on the train games
   (--steps x --batch-size; with --small-games, once more on only that many train games).
4. Reported per head: parameters; train and held-out cross-entropy; agreement = the share of
   positions where the network's most probable legal move is one of the teacher's best moves
   (train and held-out); the same on the held-out games within 1 and 10 points of the expert's
   best score (a virus is worth 100: near-equal moves); and the network alone (`policy`, no
   search) on the evaluation ladder (evaluation seeds, NES rules), next to the expert and greedy.

Run: `python bench/imitation.py` (about an hour on 2 CPU cores with the defaults);
`--heads conv --games 200 --steps 600` for a quick look. Writes bench/results/imitation-MACHINE.json.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np
import torch
from common import report

from drmario.engine import kernels as K
from drmario.learn.checkpoint import load_net
from drmario.learn.dataset import ExampleSet, augment_colours, load_examples
from drmario.learn.net import NetConfig
from drmario.learn.player import Player
from drmario.learn.train import TrainConfig, move_agreement, train
from drmario.play.agents import GreedyAgent, PolicyAgent, SearchAgent
from drmario.play.arena import EvalConfig, arena
from drmario.play.selfplay import SelfPlayConfig, generate, read_records
from drmario.search import ExpertSettings, SearchConfig, expert

ROOT = Path(__file__).resolve().parent.parent
HEADS = {
    "design": NetConfig(head="design"),
    "conv": NetConfig(head="conv"),
    "conv3x3": NetConfig(head="conv", policy_kernel=3),
    "alphago": NetConfig(head="alphago"),
}


def teacher_data(
    games: int, levels: list[int], temperature: float, preview: bool, folder: Path, seed: int
) -> ExampleSet:
    """The expert's games as examples (remade only when the settings change)."""
    cfg = SelfPlayConfig(
        games=games,
        levels=levels,
        seed=seed,
        stall_limit=None,
        max_pills=1000,
        search=SearchConfig(mode="expert", expert=ExpertSettings(temperature=temperature, depth=2 if preview else 1)),
        games_per_shard=64,
    )
    try:
        generate(cfg, folder, progress=True)
    except ValueError as e:  # other settings in the folder: start again (any other problem is raised)
        if "holds other settings" not in str(e):
            raise
        print(f"{e}: its games are made again")
        shutil.rmtree(folder)
        generate(cfg, folder, progress=True)
    return load_examples(folder / "examples", progress=False)


def near_best_agreement(player: Player, records: list, tolerances: tuple[float, ...]) -> dict[float, float]:
    """For every decision of the games: is the network's most probable legal move one the expert
    (depth 2, with the game's real preview) scores within `tol` of its best? tol 0 is the tie set;
    the expert's scores are in its own units (a virus is 100). {tol: share of decisions}."""
    hits = dict.fromkeys(tolerances, 0)
    total = 0
    weights = expert.load_weights()
    moves, scores = np.empty((K.MAX_MOVES, 3), np.int8), np.empty(K.MAX_MOVES)
    for record in records:
        steps = list(record.steps())
        if not steps:
            continue
        cells = np.stack([g.board.cells for g, _, _ in steps])
        pills = np.array([(g.pill.left, g.pill.right) for g, _, _ in steps], np.uint8)
        previews = np.array([(g.next_pill.left, g.next_pill.right) for g, _, _ in steps], np.uint8)
        legal = np.zeros((len(steps), 4, K.WIDTH, K.HEIGHT), np.uint8)
        K.legal_masks_batch(cells, pills, legal)
        moves_out = player.evaluate(cells, pills, previews, legal=legal.astype(bool)).moves
        chosen = moves_out.reshape(len(steps), -1).argmax(axis=1)
        for i, (game, _, _) in enumerate(steps):
            a, b, pa, pb = (int(c) for c in (*game.pill, *game.next_pill))
            n = expert.expert_scores(game.board.cells, a, b, pa, pb, weights, moves, scores)
            r, x, y = np.unravel_index(chosen[i], (4, K.WIDTH, K.HEIGHT))
            r = r % 2 if a == b else r
            match = np.nonzero((moves[:n, 0] == r) & (moves[:n, 1] == x) & (moves[:n, 2] == y))[0]
            score = scores[match[0]] if len(match) else -np.inf
            for tol in tolerances:
                hits[tol] += int(score >= scores[:n].max() - tol - 1e-9)
            total += 1
    return {tol: h / max(total, 1) for tol, h in hits.items()}


def train_head(name: str, net: NetConfig, data: ExampleSet, args: argparse.Namespace, tag: str) -> dict:
    cfg = TrainConfig(
        net=net.replace(filters=args.filters, blocks=args.blocks),
        optimizer="adamw",
        lr=args.lr,
        warmup_steps=min(200, args.steps // 10),
        batch_size=args.batch_size,
        steps=args.steps,
        test_fraction=0.0,
        augment=args.augment,
        log_every=max(1, args.steps // 20),
        eval_every=args.steps,
        checkpoint_every=args.steps,
        device="cpu",
        seed=args.seed,
        progress=False,
    )
    folder = ROOT / "runs" / "bench-imitation" / f"{tag}-{name}"
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    result = train(cfg, folder, augment_colours(data) if args.augment else data)
    seconds = time.perf_counter() - start
    return {"result": result, "seconds": seconds, "samples_per_s": args.steps * args.batch_size / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heads", default=",".join(HEADS), help=f"some of {', '.join(HEADS)}")
    parser.add_argument(
        "--planes", default="24", help="input planes: 24 (with the preview), 18 (the design's), or both"
    )
    parser.add_argument("--games", type=int, default=1500, help="expert games (train + held out)")
    parser.add_argument("--levels", default="0,2,4,6,8,10,12,14,16,18,20")
    parser.add_argument("--temperature", type=float, default=0.0, help="the expert target's temperature")
    parser.add_argument("--teacher-depth", type=int, default=2, choices=[1, 2], help="2: the expert sees the preview")
    parser.add_argument("--test-fraction", type=float, default=0.15)
    parser.add_argument("--small-games", type=int, default=90, help="also train on only this many games (0: no)")
    parser.add_argument("--filters", type=int, default=32)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--augment", action="store_true", help="train on the 6 colour renamings of every example")
    parser.add_argument("--play-games", type=int, default=20, help="policy-alone games per ladder level")
    parser.add_argument("--play-levels", default="0,5,10,15")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--name", default="imitation", help="results file: bench/results/NAME-MACHINE.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    levels = [int(v) for v in args.levels.split(",")]
    tag = f"T{args.temperature:g}-d{args.teacher_depth}"
    folder = ROOT / "runs" / "bench-imitation" / f"data-{tag}"
    data = teacher_data(args.games, levels, args.temperature, args.teacher_depth == 2, folder, 7)
    train_set, test_set = data.split_by_game(args.test_fraction, args.seed)
    games = np.unique(train_set.game)
    records = read_records(folder)  # game id k of the examples is records[k] (one shard after another)
    held_out = [records[k] for k in np.unique(test_set.game)]
    small = train_set.subset(np.nonzero(np.isin(train_set.game, games[: args.small_games]))[0])
    print(f"{len(data):,} examples; train {len(train_set):,} ({len(games)} games), held out {len(test_set):,}")

    protocol = EvalConfig(
        levels=[int(v) for v in args.play_levels.split(",")],
        games_per_level=args.play_games,
        top_level_games=args.play_games,
        lockstep=args.play_games,
    )
    baselines, _ = arena([SearchAgent(SearchConfig(mode="expert"), name="expert"), GreedyAgent()], config=protocol)
    figures: dict = {}
    for row in baselines.itertuples():
        figures[f"{row.agent} L{row.level} wins"] = f"{row.wins}/{row.games}"
    plane_counts = [int(p) for p in args.planes.split(",")]
    for head in args.heads.split(","):
        for planes in plane_counts:
            name = head if len(plane_counts) == 1 else f"{head}-{planes}planes"
            net = HEADS[head].replace(planes=planes)
            run = train_head(name, net, train_set, args, tag)
            player = Player(load_net(run["result"].checkpoint))
            train_agree, train_ce = move_agreement(player, train_set)
            test_agree, test_ce = move_agreement(player, test_set)
            table, _ = arena([PolicyAgent(player, name=f"policy-{name}")], config=protocol, progress=False)
            for tol, share in near_best_agreement(player, held_out, (0.0, 1.0, 10.0)).items():
                figures[f"{name} held-out agreement within {tol:g} of the best"] = round(share, 4)
            figures[f"{name} parameters"] = load_net(run["result"].checkpoint).num_parameters()
            figures[f"{name} train agreement"] = round(train_agree, 4)
            figures[f"{name} held-out agreement"] = round(test_agree, 4)
            figures[f"{name} train cross-entropy"] = round(train_ce, 4)
            figures[f"{name} held-out cross-entropy"] = round(test_ce, 4)
            figures[f"{name} training samples/s"] = round(run["samples_per_s"], 1)
            for row in table.itertuples():
                figures[f"{name} policy L{row.level} wins"] = f"{row.wins}/{row.games}"
            if args.small_games:
                run = train_head(name, net, small, args, f"{tag}-small")
                player = Player(load_net(run["result"].checkpoint))
                few = f"{name} ({args.small_games} games)"
                figures[f"{few} train agreement"] = round(move_agreement(player, small)[0], 4)
                figures[f"{few} held-out agreement"] = round(move_agreement(player, test_set)[0], 4)
            print({k: v for k, v in figures.items() if k.startswith(name)})
    settings = {k: v for k, v in vars(args).items()} | {"examples": len(data), "train_games": len(games)}
    report(args.name, settings, figures)


if __name__ == "__main__":
    main()
