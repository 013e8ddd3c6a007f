"""Does looking one pill further than the preview save pills? The expert (depth 2: its pill, then the
NES preview) against the same expert with a third ply: the expectation over the unknown pill after
the preview (the NES draws the 9 colour pairs uniformly), on a beam.

Depth 3 (`drmario.search.expert`, its module docstring): the expert's --beam best moves by their
depth-2 score, each with its --keep best preview placements, are scored by max over those placements
of E over the next pill of max over its placements of the evaluation (a third pill that tops out
every way counts -EVAL_CLAMP). Wins and losses within two pills keep the depth-2 ranking; the other
moves rank below the beam.

Both play the same games (training seeds, or with --evaluation the arena's evaluation games; one
level, NES rules, no stalemate rule, a pill cap that counts as a loss), paired: wins with Wilson 95%
intervals, pills per virus (all games and won games, bootstrap 95% over games), and the paired
difference on the games both won (bootstrap 95%).

Depth 4 (``--depths 3,4``) scores each depth-3 chance outcome by the best of the next pill's
`DEPTH4_KEEP` best placements, valued by E over the pill after it of its best placement's evaluation.

Run: ``python bench/expert_depth.py --games 200 --level 20``; ``--evaluation --games 100 --max-pills 2000``
for the evaluation table's games. Writes bench/results/NAME-MACHINE.json.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from common import report

from drmario.engine.game import GameRecord
from drmario.engine.level import TRAINING_SEEDS, new_level, virus_count
from drmario.play.arena import EvalConfig, wilson
from drmario.play.gate import compare
from drmario.search import expert as E


def play(job: tuple[int, int, int, int, int, int]) -> tuple[int, int, int]:
    """One game (seed, level, depth, beam, keep, max_pills): (outcome, viruses cleared, pills used)."""
    seed, level, depth, beam, keep, max_pills = job
    made = new_level(seed, level)
    cells, pills, weights = made.board.cells.copy(), made.pill_array, E.load_weights()
    out = np.empty((1, 3), np.int64)
    E.play_games(cells[None], pills[None], weights, depth, np.array([seed]), max_pills, out, beam, keep)
    return int(out[0, 0]), int(out[0, 1]), int(out[0, 2])


def records(seeds, level: int, out: np.ndarray) -> list[GameRecord]:
    """The games of out int[G, 3] as the arena's records (a capped game has no outcome)."""
    outcomes = {E.WON: "won", E.TOPPED_OUT: "topped_out"}
    return [
        GameRecord(seed=int(s), level=level, outcome=outcomes.get(int(o)), pills_used=int(p), viruses_cleared=int(c))
        for s, (o, c, p) in zip(seeds, out)
    ]


def summary(out: np.ndarray, viruses: int, rng: np.random.Generator) -> dict:
    """Wins (Wilson 95%) and pills per virus (bootstrap 95% over games) of out int[G, 3]."""
    won = out[:, 0] == E.WON
    lo, hi = wilson(int(won.sum()), len(won))
    ppv = out[:, 2].sum() / max(out[:, 1].sum(), 1)
    idx = rng.integers(0, len(out), (2000, len(out)))
    boot = out[idx, 2].sum(1) / np.maximum(out[idx, 1].sum(1), 1)
    won_ppv = out[won, 2].mean() / viruses if won.any() else float("nan")
    return {
        "wins": int(won.sum()),
        "win_rate_95": [round(float(lo), 3), round(float(hi), 3)],
        "pills_per_virus": round(float(ppv), 3),
        "pills_per_virus_95": [round(float(np.quantile(boot, q)), 3) for q in (0.025, 0.975)],
        "pills_per_virus_won": round(float(won_ppv), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--level", type=int, default=20)
    parser.add_argument("--seed", type=int, default=77, help="draws the games (training seeds)")
    parser.add_argument(
        "--evaluation", action="store_true", help="the arena's evaluation games instead (EvalConfig, --eval-seed)"
    )
    parser.add_argument("--eval-seed", type=int, default=2024, help="draws the evaluation games (EvalConfig.seed)")
    parser.add_argument("--beam", type=int, default=E.DEPTH3_BEAM, help="moves rescored at depth 3")
    parser.add_argument("--keep", type=int, default=E.DEPTH3_KEEP, help="preview placements per beam move")
    parser.add_argument("--max-pills", type=int, default=1000, help="pill cap (a capped game is a loss)")
    parser.add_argument("--depths", default="2,3", help="the depths played, each paired with the one before it")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--name", default="expert-depth")
    args = parser.parse_args()

    if args.evaluation:
        cfg = EvalConfig(levels=[args.level], top_level_games=args.games, seed=args.eval_seed)
        seeds = [g.seed for g in cfg.games()]
    else:
        seeds = np.random.default_rng(args.seed).choice(TRAINING_SEEDS, args.games, replace=False)
    figures: dict = {}
    results = {}
    with ProcessPoolExecutor(args.workers) as pool:
        depths = [int(d) for d in args.depths.split(",")]
        for depth in depths:
            start = time.perf_counter()
            jobs = [(int(s), args.level, depth, args.beam, args.keep, args.max_pills) for s in seeds]
            results[depth] = np.array(list(pool.map(play, jobs, chunksize=4)), np.int64)
            seconds = time.perf_counter() - start
            row = summary(results[depth], virus_count(args.level), np.random.default_rng(0))
            row["ms per pill (one core)"] = round(1000 * seconds * args.workers / results[depth][:, 2].sum(), 2)
            figures[f"depth {depth}"] = row
            print(depth, row, flush=True)
    for old, new in zip(depths, depths[1:]):
        paired = compare(records(seeds, args.level, results[new]), records(seeds, args.level, results[old]))
        figures[f"depth {new} against depth {old}, paired (play.gate.compare)"] = paired.to_dict()
    report(args.name, vars(args), figures)


if __name__ == "__main__":
    main()
