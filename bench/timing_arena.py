"""The expert under NES timing against free timing, on the same games (issue 20, points 3 and 6).

The arena's protocol (`drmario.play.arena.EvalConfig`) at one level and speed, played twice by the
expert (depth 2, the shipped weights): with `timing="free"` (a pill goes wherever the controls
reach at any speed) and with `timing="nes"` (only where a player with a standard controller
reaches in time at the speed setting's real speed, and the game counts its frames:
`drmario.engine.nes_timing`). Same seeds, same decision seeds. Figures per timing: wins with the
Wilson 95% interval, pills per virus, median and 90th percentile of the frames a won game took to
clear (NES timing only: free timing counts no frames), ms per move; and, paired, how many games
went differently, and how often NES timing removed moves from the expert's choice.

Writes bench/results/timing-arena-MACHINE.json. Run: `python bench/timing_arena.py --games 300`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from common import report

from drmario.engine import timing as T
from drmario.engine.rules import legal_moves
from drmario.play.agents import SearchAgent
from drmario.play.arena import EvalConfig, arena
from drmario.search.config import SearchConfig


def removed_moves(records) -> tuple[int, int, int, int]:
    """Over every position of the NES-timing games: (positions, positions where timing removed a
    move, timing-free moves, moves removed)."""
    positions = touched = total = lost = 0
    for record in records:
        for game, _, _ in record.steps():
            free = len(legal_moves(game.board, game.pill))
            reach = len(T.reachable(game.board, game.pill, game.speed_index, game.parity))
            positions += 1
            touched += reach < free
            total += free
            lost += free - reach
    return positions, touched, total, lost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, default=300, help="games under each timing")
    parser.add_argument("--level", type=int, default=20)
    parser.add_argument("--speed", default="hi", choices=["low", "med", "hi"])
    parser.add_argument("--lockstep", type=int, default=16)
    args = parser.parse_args()
    base = EvalConfig(levels=[args.level], top_level_games=args.games, speed=args.speed, lockstep=args.lockstep)
    agent = SearchAgent(SearchConfig(mode="expert"), name="expert")
    figures: dict = {}
    records = {}
    for timing in ("free", "nes"):
        start = time.perf_counter()
        table, played = arena([agent], config=base.replace(timing=timing), progress=False)
        records[timing] = played["expert"]
        row = table.iloc[0]
        figures[f"{timing} wins"] = f"{row.wins}/{row.games} (95% CI {row.ci_low:.1%}-{row.ci_high:.1%})"
        figures[f"{timing} win rate"] = round(float(row.win_rate), 4)
        figures[f"{timing} win rate ci"] = [round(float(row.ci_low), 4), round(float(row.ci_high), 4)]
        figures[f"{timing} pills per virus"] = round(float(row.pills_per_virus), 4)
        figures[f"{timing} frames to clear median"] = None if np.isnan(row.frames_median) else float(row.frames_median)
        figures[f"{timing} frames to clear p90"] = None if np.isnan(row.frames_p90) else round(float(row.frames_p90), 1)
        figures[f"{timing} top-out rate"] = round(float(row.topout_rate), 4)
        figures[f"{timing} capped rate"] = round(float(row.capped_rate), 4)
        figures[f"{timing} ms per move"] = round(float(row.ms_per_move), 3)
        figures[f"{timing} seconds"] = round(time.perf_counter() - start, 1)
    free, nes = records["free"], records["nes"]
    won = [(f.outcome == "won", n.outcome == "won") for f, n in zip(free, nes)]
    figures["games won under both"] = sum(a and b for a, b in won)
    figures["games won only under free"] = sum(a and not b for a, b in won)
    figures["games won only under nes"] = sum(b and not a for a, b in won)
    figures["games with the same moves"] = sum(f.moves == n.moves for f, n in zip(free, nes))
    positions, touched, total, lost = removed_moves(nes)
    figures["nes positions"] = positions
    figures["nes positions where timing removed a move"] = touched
    figures["nes share of timing-free moves removed"] = round(lost / max(total, 1), 6)
    seconds = [r.frames / 60.0988 for r in nes if r.outcome == "won"]
    if seconds:
        figures["nes seconds to clear median (60.0988 fps)"] = round(float(np.median(seconds)), 1)
    settings = {"protocol": base.to_dict(), "agent": "expert (depth 2, shipped weights)", "timings": ["free", "nes"]}
    report("timing-arena", settings, figures)


if __name__ == "__main__":
    main()
