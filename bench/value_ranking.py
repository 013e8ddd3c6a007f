"""Does the network's value pick good moves? A held-out metric of the value head as the search uses it.

The search's expert-prior diagnostic (`search_vs_expert.py --expert-prior 20`: the expert's moves as
the prior, the network's values) used as many more pills than the expert as the network's own
search, so the values, not the moves, hold the search back. This bench measures the values one ply
deep, without play: the expert plays --games games at each --levels from training seeds (drawn with
--seed, never evaluation seeds); at each of its decisions every legal move is placed, and the
position after it is valued as a search leaf is (the network's won, cleared and pills-to-the-end
with the pill just placed and the viruses it cleared counted along the path, `expected_utility`
with the default utility; the next pill is the preview, the new preview the game's real one).
Each chooser (the value's best move; the same with the network's outputs averaged over the 6
renamings of the colours ("value x6", test-time augmentation); the move with the highest predicted
P(win) alone ("won"); the move with the fewest predicted pills to the end alone ("pills"); the move
output's best move; the search's choice (--search, the network's); a uniformly random legal move;
"won" and "pills" take a winning move first and a top-out last) is scored by the expert's depth-2
score of the move it picks:

- agreement: the share of decisions where its move is one of the expert's tied best;
- regret: the expert's best score minus the chosen move's (the expert's units: a virus is 100), its
  median over decisions, and the share of blunders (a regret of 100 or more; a top-out is scored
  so low that a mean would be meaningless);
- for the value, the rank of the expert's best move among the value's (1 = first), mean.

Run: `python bench/value_ranking.py --network small --games 20 --levels 12,20`.
Writes bench/results/NAME-MACHINE.json.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from common import report

from drmario.engine import kernels as K
from drmario.engine.game import Game
from drmario.engine.level import TRAINING_SEEDS, virus_count
from drmario.engine.rules import Move
from drmario.learn.examples import COLOUR_PERMUTATIONS, colour_table
from drmario.play.agents import Agent, PolicyAgent
from drmario.run.agents import make_agents
from drmario.search.core import Position
from drmario.search.expert import expert_scores, load_weights
from drmario.search.utility import Utility, expected_utility, utility


class ColourAveraged:
    """The evaluator's outputs averaged over the 6 renamings of the colours (test-time augmentation:
    the rules only compare colours, and the kit's networks train on all 6 renamings)."""

    def __init__(self, evaluator) -> None:
        self.evaluator = evaluator
        self.tables = [colour_table(p) for p in COLOUR_PERMUTATIONS]

    def evaluate(self, cells: np.ndarray, pills: np.ndarray, previews: np.ndarray):
        preds = [self.evaluator.evaluate(t[cells], t[pills], t[previews]) for t in self.tables]
        return type(preds[0])(*(np.mean([getattr(p, f) for p in preds], axis=0) for f in preds[0]._fields))


def candidates(game: Game, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[Game], tuple]:
    """Every legal move at game's decision: the expert's scores float[n], the moves int8[n, 3], the
    games after each, and their positions as a search leaf sees them (cells, pills, previews)."""
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    scores = np.empty(K.MAX_MOVES)
    a, b, pa, pb = (int(c) for c in (*game.pill, *game.next_pill))
    n = expert_scores(game.board.cells, a, b, pa, pb, weights, moves, scores)
    afters = []
    for m in moves[:n].tolist():
        after = game.copy()
        after.play(Move(*m))
        afters.append(after)
    leaves = (
        np.stack([g.board.cells for g in afters]),
        np.array([tuple(g.pill) for g in afters], np.uint8),
        np.array([tuple(g.next_pill) for g in afters], np.uint8),
    )
    return scores[:n].copy(), moves[:n].copy(), afters, leaves


def expert_decisions(games: list[tuple[int, int]], expert: Agent) -> Iterator[Game]:
    """The game at each of the expert's decisions in the games (seed, level), NES rules, at most
    1,000 pills; each is played on once the caller has looked at it."""
    for seed, level in games:
        game = Game(seed, level, stall_limit=None)
        while not game.over and game.pills_used < 1000:
            yield game
            (decision,) = expert.choose([Position.of(game)], [game.pills_used])
            game.play(decision.move)


def leaf_utility(up: np.ndarray, pred, i: int, cleared: int, root_left: int) -> float:
    """Leaf i's value as the search sees it one pill after a decision: the pill placed and the
    `cleared` viruses, plus the network's predicted rest (pred: its outputs over the leaves)."""
    p_win = min(max((float(pred.won[i]) + 1.0) / 2.0, 0.0), 1.0)
    win_pills, loss_cleared, loss_pills = (max(float(a[i]), 0.0) for a in pred.by_outcome())
    return expected_utility(up, p_win, 1.0 + win_pills, cleared + loss_cleared, 1.0 + loss_pills, root_left)


def decision_rows(
    game: Game, evaluator, averaged: ColourAveraged, search: Agent | None, weights: np.ndarray, up: np.ndarray
) -> dict[str, np.ndarray]:
    """One decision: every legal move's expert score, its value as a search leaf, and whether it is
    the move output's choice."""
    scores, moves, afters, leaves = candidates(game, weights)
    root_left = game.viruses_left
    pred, pred6 = evaluator.evaluate(*leaves), averaged.evaluate(*leaves)
    values, values6, won_only, pills_only = (np.empty(len(afters)) for _ in range(4))
    for i, after in enumerate(afters):
        cleared = root_left - after.viruses_left
        if after.over:  # a win or a top-out: its utility is known
            values[i] = utility(up, cleared, 1.0, K.WON if after.viruses_left == 0 else K.TOPPED_OUT, root_left)
            values6[i] = values[i]
            won_only[i] = pills_only[i] = 1e6 if after.viruses_left == 0 else -1e6  # a win first, a top-out last
            continue
        values[i], values6[i] = (leaf_utility(up, p, i, cleared, root_left) for p in (pred, pred6))
        won_only[i] = float(pred.won[i])
        pills_only[i] = -max(float(pred.duration[i]), 0.0)
    rows = {"expert": scores, "value": values, "value x6": values6, "won": won_only, "pills": pills_only}
    half = 2 if game.pill.same_colour else 4  # a same-colour pill's rotations 2 and 3 are 0 and 1
    for name, agent in (("policy", PolicyAgent(evaluator)), ("search", search)):
        if agent is not None:  # its choice, as a one-hot row over the moves
            (decision,) = agent.choose([Position.of(game)], [game.pills_used])
            r, x, y = decision.move
            rows[name] = np.array([(m[0] % half, m[1], m[2]) == (r % half, x, y) for m in moves.tolist()], float)
            if not rows[name].any():
                raise RuntimeError(f"{name}'s move {decision.move} is not among the expert's legal moves")
    return rows


def ranking_games(levels: list[int], games: int, seed: int) -> list[tuple[int, int]]:
    """(seed, level) of the games: `games` distinct training seeds per level, drawn with seed."""
    seeds = np.random.default_rng(seed).choice(TRAINING_SEEDS, games * len(levels), replace=False)
    return [(int(s), level) for i, level in enumerate(levels) for s in seeds[i * games : (i + 1) * games]]


def summarise(rows: list[dict[str, np.ndarray]], rng: np.random.Generator) -> dict:
    """The choosers' agreement and regret over decisions (module docstring)."""
    picks: dict[str, list[float]] = {name: [] for name in [*rows[0], "random"] if name != "expert"}
    ranks = []
    for r in rows:
        expert, best = r["expert"], r["expert"].max()
        choice = {name: int(np.argmax(r[name])) for name in picks if name != "random"}
        choice["random"] = int(rng.integers(len(expert)))
        for name, i in choice.items():
            picks[name].append(best - expert[i])
        if "value" in r:
            ranks.append(1 + int(np.sum(r["value"] > r["value"][int(np.argmax(expert))])))
    out: dict[str, Any] = {}
    for name, regret in picks.items():
        reg = np.array(regret)
        out[name] = {
            "agreement": round(float(np.mean(reg <= 1e-9)), 4),
            "regret median": round(float(np.median(reg)), 2),
            "blunders (regret of a virus or more)": round(float(np.mean(reg >= 100)), 4),
        }
    if ranks:
        out["value"]["rank of the expert's best, mean"] = round(float(np.mean(ranks)), 2)
    out["decisions"] = len(rows)
    out["legal moves per decision, mean"] = round(float(np.mean([len(r["expert"]) for r in rows])), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--network", default="small", help="a checkpoint or a shipped network's name")
    parser.add_argument("--levels", default="12,20")
    parser.add_argument("--games", type=int, default=20, help="expert games per level")
    parser.add_argument("--seed", type=int, default=5, help="draws the training seeds the games are on")
    parser.add_argument("--search", default="net-mcts-100", help="also the search's choice ('' for none)")
    parser.add_argument("--name", default="value-ranking")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    specs = ["expert", "policy", args.search] if args.search else ["expert", "policy"]
    expert, policy, *search = make_agents(specs, network=args.network)
    evaluator = policy.evaluator  # type: ignore[attr-defined]
    averaged = ColourAveraged(evaluator)
    weights, up = load_weights(), Utility().params
    rng = np.random.default_rng(args.seed)
    figures: dict = {}
    start = time.perf_counter()
    levels = [int(v) for v in args.levels.split(",")]
    games = ranking_games(levels, args.games, args.seed)
    for level in levels:
        rows = [
            decision_rows(game, evaluator, averaged, search[0] if search else None, weights, up)
            for game in expert_decisions([g for g in games if g[1] == level], expert)
        ]
        figures[f"level {level} ({virus_count(level)} viruses)"] = summarise(rows, rng)
    figures["seconds"] = round(time.perf_counter() - start, 1)
    report(args.name, vars(args), figures)


if __name__ == "__main__":
    main()
