"""Where do the pills go: the end game, played from the same positions by each agent.

Held-out expert games spend about 30% of their pills after only 5 viruses are left, and 11% on the
last one (the viruses left at the end are the buried ones), so the end game is where a player could
save most pills per virus. This bench measures the end game on its own, paired:

- the expert plays each game (tuning games: training seeds, never evaluation seeds) until at most
  ``--viruses`` viruses are left; that position is the game's **branch**;
- every agent plays the rest of the game from the branch (a copy of the game, so the same pills
  follow), each decision seeded by (game, pill) as in the arena, up to ``--max-pills`` more pills;
- per agent: the games it finished, the pills it took from the branch (mean, bootstrap 95%
  interval), and paired against the expert on the games both finished (mean difference of pills,
  paired bootstrap 95% interval, two-sided sign-flip p), with ms per move.

Measured (`endgame-f64b6`, 40 games at level 20): the 64×6 network's search, with 100 or 400
simulations, finishes as the expert does within noise (the game-to-game spread, about 15 pills,
swamps differences of 2).

Agents are named as the arena names them (`run.agents`: ``expert``, ``policy``, ``net-mcts-N``,
``mcts-N``, ...). Writes bench/results/NAME-MACHINE.json and NAME-MACHINE.csv (one row per agent
and game).

Run: `python bench/endgame.py --network runs/big/nets/f64b6.pt --agents expert,net-mcts-100,net-mcts-400`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from common import RESULTS, machine_info, machine_slug, report
from search_vs_expert import tuning_games

from drmario.engine.game import Game
from drmario.files import write_atomic
from drmario.play.agents import Agent
from drmario.play.gate import bootstrap_interval, sign_flip_p
from drmario.play.lockstep import GameSpec, decision_seed
from drmario.run.agents import make_agents
from drmario.search.core import Position


def branch(spec: GameSpec, expert: Agent, viruses: int, base_seed: int, max_pills: int = 2000) -> Game | None:
    """The game after the expert has played it down to at most `viruses` viruses (None if it ended,
    or reached max_pills, first)."""
    game = Game(spec.seed, spec.level, stall_limit=None)
    while not game.over and game.viruses_left > viruses and game.pills_used < max_pills:
        seed = decision_seed(base_seed, spec.number, game.pills_used)
        game.play(expert.choose([Position.of(game)], [seed])[0].move)
    return None if game.over or game.viruses_left > viruses else game


def finish(agent: Agent, starts: list[tuple[GameSpec, Game]], max_pills: int, base_seed: int) -> list[dict]:
    """Each game played on from its branch by the agent, all games in lockstep (one batched choice per step)."""
    games = [start.copy() for _, start in starts]
    limits = [start.pills_used + max_pills for _, start in starts]
    seconds, moves = 0.0, 0
    while running := [k for k, g in enumerate(games) if not g.over and g.pills_used < limits[k]]:
        positions = [Position.of(games[k]) for k in running]
        seeds = [decision_seed(base_seed, starts[k][0].number, games[k].pills_used) for k in running]
        t = time.perf_counter()
        decisions = agent.choose(positions, seeds)
        seconds += time.perf_counter() - t
        moves += len(running)
        for k, decision in zip(running, decisions):
            games[k].play(decision.move)
    return [
        {
            "agent": agent.name,
            "seed": spec.seed,
            "level": spec.level,
            "viruses_at_branch": start.viruses_left,
            "pills_before": start.pills_used,
            "outcome": game.outcome.value if game.outcome else "pill_cap",
            "pills": game.pills_used - start.pills_used,
            "ms_per_move": round(1000 * seconds / max(moves, 1), 2),
        }
        for (spec, start), game in zip(starts, games)
    ]


def summarise(table: pd.DataFrame) -> dict:
    """Per agent (the rows of one agent and game each): finished games, pills from the branch, and
    paired against the expert on the games both finished."""
    figures: dict = {}
    expert = table[table.agent == "expert"].set_index("seed")
    for name, part in table.groupby("agent", sort=False):
        part = part.set_index("seed")
        done = part.outcome == "won"
        low, high = bootstrap_interval(part.pills.to_numpy(float))
        entry = {
            "finished (won)": f"{int(done.sum())}/{len(part)}",
            # every game, a lost or capped one with the pills it took (the outcomes are beside them)
            "pills from the branch, all games: mean (bootstrap 95%)": f"{part.pills.mean():.2f} ({low:.2f}-{high:.2f})",
            "median, p90": [float(v) for v in np.percentile(part.pills, [50, 90])],
            "ms per move": float(part.ms_per_move.iloc[0]),
        }
        both = done & (expert.outcome == "won")
        if name != "expert" and both.any():
            diff = (part.pills[both] - expert.pills[both]).to_numpy(float)
            dlow, dhigh = bootstrap_interval(diff)
            entry["against the expert, games both won"] = {
                "games": int(both.sum()),
                "mean difference of pills": round(float(diff.mean()), 3),
                "95% interval": [round(dlow, 3), round(dhigh, 3)],
                "sign-flip p, two-sided": round(min(1.0, 2 * min(sign_flip_p(diff), sign_flip_p(-diff))), 4),
                "fewer / same / more": [int((diff < 0).sum()), int((diff == 0).sum()), int((diff > 0).sum())],
            }
        figures[name] = entry
        print(name, entry, flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", default="expert,net-mcts-100", help="agents to play the end games (expert first)")
    parser.add_argument("--network", default="small", help="checkpoint, or a shipped network's name")
    parser.add_argument("--viruses", type=int, default=5, help="the branch: the first position with at most this many")
    parser.add_argument("--level", type=int, default=20)
    parser.add_argument("--games", type=int, default=40)
    parser.add_argument("--seed", type=int, default=11, help="draws the tuning games")
    parser.add_argument("--max-pills", type=int, default=500, help="pills after the branch before a game is cut")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--name", default="endgame", help="result file name")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    agents = make_agents(args.agents.split(","), network=args.network)
    if agents[0].name != "expert":
        raise SystemExit("--agents must start with expert (it plays every game to its branch)")
    base_seed = args.seed
    starts = []
    for spec in tuning_games(args.level, args.games, args.seed):
        game = branch(spec, agents[0], args.viruses, base_seed)
        if game is not None:
            starts.append((spec, game))
    print(f"{len(starts)} of {args.games} games reach {args.viruses} viruses or fewer", flush=True)

    rows = []
    for agent in agents:
        rows += finish(agent, starts, args.max_pills, base_seed)
        got = [r for r in rows if r["agent"] == agent.name]
        print(f"{agent.name}: {np.mean([r['pills'] for r in got]):.1f} pills from the branch", flush=True)
    table = pd.DataFrame(rows)
    figures = summarise(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_atomic(RESULTS / f"{args.name}-{machine_slug(machine_info())}.csv", table.to_csv(index=False))
    settings = {
        "agents": args.agents,
        "network": args.network,
        "games": f"{args.games} tuning games (training seeds, drawn with seed {args.seed}) at level {args.level}",
        "branch": f"the first position with at most {args.viruses} viruses left, the expert playing until then",
        "reached the branch": len(starts),
        "max pills after the branch": args.max_pills,
        "rules": "NES (no stalemate rule)",
        "threads": args.threads,
    }
    report(args.name, settings, figures)


if __name__ == "__main__":
    main()
