"""Where do the pills go: the end game, played from the same positions by each agent.

Held-out expert games spend about 30% of their pills after only 5 viruses are left, and 11% on the
last one (the viruses left at the end are the buried ones), so the end game is where a player could
save most pills per virus. This bench measures the end game on its own, paired:

- the expert plays each game (tuning games: training seeds, never evaluation seeds) until at most
  ``--viruses`` viruses are left; that position is the game's **branch**;
- every agent plays the rest of the game from the branch (a copy of the game, so the same pills
  follow), as the arena plays (`play_lockstep`, each decision seeded by game and pill), up to the
  arena's cap of ``--max-pills`` pills in all;
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

import numpy as np
import pandas as pd
from common import RESULTS, machine_info, machine_slug, report
from search_vs_expert import tuning_games

from drmario.engine.game import Game
from drmario.files import write_atomic
from drmario.play.agents import Agent
from drmario.play.gate import bootstrap_interval, sign_flip_p
from drmario.play.lockstep import GameSpec, decision_seed, play_lockstep
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
    """Each game played on from (a copy of) its branch by the agent, all in lockstep as the arena
    plays them, until it ends or has used max_pills pills in all."""
    branches = {spec.number: start for spec, start in starts}
    specs = [spec for spec, _ in starts]
    records = play_lockstep(
        agent,
        specs,
        lockstep=len(specs),
        base_seed=base_seed,
        max_pills=max_pills,
        start_game=lambda spec: branches[spec.number].copy(),
    )
    pills = sum(r.pills_used - branches[s.number].pills_used for s, r in zip(specs, records))
    ms_per_move = round(1000 * sum(r.meta["seconds"] for r in records) / max(pills, 1), 2)
    return [
        {
            "agent": agent.name,
            "seed": spec.seed,
            "level": spec.level,
            "viruses_at_branch": branches[spec.number].viruses_left,
            "pills_before": branches[spec.number].pills_used,
            "outcome": record.outcome or "pill_cap",
            "pills": record.pills_used - branches[spec.number].pills_used,
            "ms_per_move": ms_per_move,
        }
        for spec, record in zip(specs, records)
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
    parser.add_argument("--max-pills", type=int, default=2000, help="a game's pills in all before it is cut")
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
        "max pills of a game in all": args.max_pills,
        "rules": "NES (no stalemate rule)",
        "threads": args.threads,
    }
    report(args.name, settings, figures)


if __name__ == "__main__":
    main()
