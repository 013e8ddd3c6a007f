"""Is there a better move than the expert's, one step ahead, and do the network's values see it?

The search with an imitating network uses as many pills as its teacher (README). This bench asks
two questions of the expert's own decisions at one level (training seeds, NES rules), without
any search: at each sampled decision, the expert's --top best moves (by its depth-2 score; moves
that end the game are left out) are each followed by the expert to the game's end (the compiled
`play_games`, at most 1,000 pills) on --futures pill sequences drawn as the NES draws them (the
pill in hand is the known preview; the same sequences for every candidate, so that their
differences are not swamped by the pills' luck). Q(move) is the mean of the pills the whole game
then takes from that decision (a game that is not won counts 1,000).

- **headroom**: the move with the lowest Q on the first half of the futures, measured on the other
  half, against the expert's own move (the best-scored), in pills to the end: the pills a
  one-step rollout improvement of the expert would save at that decision (a policy improvement
  step; selecting and measuring on separate futures keeps the figure unbiased);
- **the network's pick**: the move with the fewest predicted pills to the end among the same
  candidates (its `duration` output, as a search leaf sees it), and the default utility's choice,
  measured the same way on the second half;
- the correlation, within each decision, of the network's predicted pills with the rollouts' Q
  (all futures), and the spread of Q across the candidates.

Run: `python bench/rollout_oracle.py --network runs/big/nets/f64b6.pt --games 4 --every 6`.
Writes bench/results/NAME-MACHINE.json.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from common import report
from value_ranking import candidates, expert_decisions, leaf_utility, ranking_games

from drmario.engine import kernels as K
from drmario.engine.level import MAX_SEED, MIN_SEED
from drmario.run.agents import make_agents
from drmario.search.expert import load_weights, play_games
from drmario.search.utility import Utility

LOST_PILLS = 1000.0  # a rollout that is not won counts this many pills


def rollouts(job: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """Pills each (board, pill list) rollout takes to the end: float[N] (LOST_PILLS if not won)."""
    starts, pills, seeds = job
    out = np.empty((len(starts), 3), np.int64)
    play_games(starts, pills, load_weights(), 2, seeds, int(LOST_PILLS), out)
    return np.where(out[:, 0] == K.WON, out[:, 2], LOST_PILLS).astype(np.float64)


def futures(preview: tuple[int, ...], n: int, rng: np.random.Generator) -> np.ndarray:
    """n pill lists uint8[n, 128, 2]: the known preview first, then NES draws from random RNG states."""
    out = np.empty((n, 128, 2), np.uint8)
    for i in range(n):
        K.generate_pills(int(rng.integers(MIN_SEED, MAX_SEED + 1)), out[i])
        out[i, 1:] = out[i, :-1].copy()  # the draws after the preview
        out[i, 0] = preview
    return out


def _mean_se(x: np.ndarray) -> list[float | None]:
    return [round(float(np.mean(x)), 2), round(float(np.std(x, ddof=1) / np.sqrt(len(x))), 2) if len(x) > 1 else None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--network", required=True, help="a checkpoint or a shipped network's name")
    parser.add_argument("--level", type=int, default=20)
    parser.add_argument("--games", type=int, default=4, help="expert games (training seeds)")
    parser.add_argument("--every", type=int, default=6, help="one decision in this many")
    parser.add_argument("--top", type=int, default=5, help="the expert's best moves compared")
    parser.add_argument("--futures", type=int, default=16, help="pill sequences (half select, half measure)")
    parser.add_argument("--seed", type=int, default=13, help="draws the games and the futures")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--name", default="rollout-oracle")
    args = parser.parse_args()

    expert, policy = make_agents(["expert", "policy"], network=args.network)
    evaluator, weights, up = policy.evaluator, load_weights(), Utility().params  # type: ignore[attr-defined]
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    decisions, jobs = [], []
    for k, game in enumerate(expert_decisions(ranking_games([args.level], args.games, args.seed), expert)):
        if k % args.every:
            continue
        scores, _, afters, leaves = candidates(game, weights)
        live = [i for i in np.argsort(-scores, kind="stable") if not afters[i].over][: args.top]
        if len(live) < 2:
            continue
        pred = evaluator.evaluate(*leaves)
        left = game.viruses_left
        utilities = [leaf_utility(up, pred, i, left - afters[i].viruses_left, left) for i in live]
        pills = futures(tuple(int(c) for c in game.next_pill), args.futures, rng)
        seeds = rng.integers(1, 2**62, args.futures)
        starts = np.stack([afters[i].board.cells for i in live for _ in range(args.futures)])
        jobs.append((starts, np.tile(pills, (len(live), 1, 1)), np.tile(seeds, len(live))))
        decisions.append((left, np.array([pred.duration[i] for i in live], np.float64), np.array(utilities)))
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(rollouts, jobs))

    half = args.futures // 2
    rows = []
    for (left, predicted, values), taken in zip(decisions, results):
        q = 1.0 + taken.reshape(len(predicted), args.futures)  # the decision's pill too
        select, measure = q[:, :half].mean(1), q[:, half:].mean(1)
        base = measure[0]  # the expert's best-scored move that does not end the game (its move unless that one wins)
        corr = np.corrcoef(predicted, q.mean(1))[0, 1] if np.ptp(predicted) > 0 and np.ptp(q.mean(1)) > 0 else np.nan
        rows.append(
            (
                left,
                measure[int(np.argmin(select))] - base,
                measure[int(np.argmin(predicted))] - base,
                measure[int(np.argmax(values))] - base,
                corr,
                np.std(q.mean(1)),
                float(np.mean(taken >= LOST_PILLS)),
            )
        )
    r = np.array(rows)
    figures: dict = {"decisions": len(r), "seconds": round(time.perf_counter() - start, 1)}
    for lo, hi in ((40, 200), (10, 40), (0, 10)):
        s = r[(r[:, 0] > lo) & (r[:, 0] <= hi)]
        if len(s) == 0:
            continue
        figures[f"viruses left {lo + 1}-{hi}"] = {
            "decisions": len(s),
            "rollout-best minus expert's move, pills to the end (mean, s.e.)": _mean_se(s[:, 1]),
            "network's fewest predicted pills minus expert's move": _mean_se(s[:, 2]),
            "network's default utility minus expert's move": _mean_se(s[:, 3]),
            "correlation of predicted pills with Q, median": round(float(np.nanmedian(s[:, 4])), 3),
            "spread of Q over the candidates (std), median": round(float(np.median(s[:, 5])), 2),
            "rollouts not won": round(float(np.mean(s[:, 6])), 4),
        }
    report(args.name, vars(args), figures)


if __name__ == "__main__":
    main()
