"""Playing strength on the fixed evaluation ladder: random, greedy, the expert, and the shipped
network alone and with 100 simulations of search.

The protocol is the arena's (`drmario.play.arena.EvalConfig`): NES rules (no stalemate rule), games
drawn from the evaluation seeds (multiples of 8, never used for training or tuning), a 2,000-pill
cap that counts as a failure, win = every virus cleared, Wilson 95% intervals. Placements are
timing-free. Writes bench/results/strength-MACHINE.json.

Run: `python bench/strength.py` (about 30 minutes on 2 CPU cores with the defaults and --lockstep 50);
`--games-per-level 10 --top-level-games 20` for a quick look.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from common import report

from drmario.play.arena import LADDER, EvalConfig, all_levels, arena
from drmario.run.agents import make_agents

ROOT = Path(__file__).resolve().parent.parent
NETWORK = ROOT / "data" / "networks" / "small.pt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", default="random,greedy,expert,policy,net-mcts-100", help="agent specs")
    parser.add_argument("--network", default=str(NETWORK), help="checkpoint of the network agents")
    parser.add_argument("--levels", default=",".join(map(str, LADDER)), help="the ladder")
    parser.add_argument("--games-per-level", type=int, default=40)
    parser.add_argument("--top-level-games", type=int, default=100, help="games at the highest level")
    parser.add_argument("--lockstep", type=int, default=20, help="games each agent plays at once")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = EvalConfig(
        levels=[int(v) for v in args.levels.split(",")],
        games_per_level=args.games_per_level,
        top_level_games=args.top_level_games,
        lockstep=args.lockstep,
    )
    agents = make_agents(args.agents.split(","), network=args.network)
    table, _ = arena(agents, config=cfg)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    figures: dict = {}
    for row in table.to_dict("records"):
        key = f"{row['agent']} L{row['level']}"
        figures[f"{key} win rate"] = round(float(row["win_rate"]), 4)
        figures[f"{key} wins"] = f"{row['wins']}/{row['games']} (95% CI {row['ci_low']:.0%}-{row['ci_high']:.0%})"
        figures[f"{key} pills per virus"] = round(float(row["pills_per_virus"]), 3)
        figures[f"{key} ms per move"] = round(float(row["ms_per_move"]), 3)
    for total in all_levels(table).itertuples():
        figures[f"{total.agent} all levels"] = f"{total.wins}/{total.games} ({total.ci_low:.0%}-{total.ci_high:.0%})"
    settings = {"agents": args.agents, "network": str(args.network), "protocol": cfg.to_dict()}
    report("strength", settings, figures)


if __name__ == "__main__":
    main()
