"""Agents under NES timing against free timing, on the same games (issue 20, points 3 and 6).

The arena's protocol (`drmario.play.arena.EvalConfig`) at some levels and one speed, played twice by
each agent: with `timing="free"` (a pill goes wherever the controls reach at any speed) and with
`timing="nes"` (only where a player with a standard controller reaches in time at the speed
setting's real speed, and the game counts its frames: `drmario.engine.nes_timing`). Same seeds,
same decision seeds. An agent is any spec of the command line (`python -m drmario evaluate
--agents`): the default ``expert`` (depth 2, the shipped weights), or a network agent such as
``policy@small`` or ``net-mcts-32@small`` (the shipped network, data/networks/small.pt).

Figures per agent, level and timing: wins with the Wilson 95% interval, pills per virus, median
and 90th percentile of the frames a won game took to clear (NES timing only: free timing counts
no frames), ms per move; and, paired, how many games went differently, and how often NES timing
removed moves from the agent's choice.

Writes bench/results/NAME-MACHINE.json (NAME: --name). With one agent at one level the figures are
flat (as in timing-arena-cpu2-amd-epyc.json); otherwise they are grouped by "AGENT level L".
--append adds this run's agents to an existing NAME file (another agent, other levels) instead of
replacing it. Runs:

    python bench/timing_arena.py --games 800                      # the expert, level 20, HI
    python bench/timing_arena.py --name timing-arena-network --agent policy@small \\
        --levels 10 15 20 --games-per-level 50 --games 100
    python bench/timing_arena.py --name timing-arena-network --append --agent net-mcts-32@small --games 100
    python bench/timing_arena.py --name timing-arena-levels --agent expert --agent net-mcts-32@small \\
        --levels 10 15 --games-per-level 50 --games 50
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from common import RESULTS, machine_info, machine_slug, report

from drmario.engine import timing as T
from drmario.engine.rules import legal_moves
from drmario.play.arena import EvalConfig, arena


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


def timing_figures(row, seconds: float) -> dict:
    """One timing's figures from its arena row (agent, level)."""
    return {
        "wins": f"{row.wins}/{row.games} (95% CI {row.ci_low:.1%}-{row.ci_high:.1%})",
        "win rate": round(float(row.win_rate), 4),
        "win rate ci": [round(float(row.ci_low), 4), round(float(row.ci_high), 4)],
        "pills per virus": round(float(row.pills_per_virus), 4),
        "frames to clear median": None if np.isnan(row.frames_median) else float(row.frames_median),
        "frames to clear p90": None if np.isnan(row.frames_p90) else round(float(row.frames_p90), 1),
        "top-out rate": round(float(row.topout_rate), 4),
        "capped rate": round(float(row.capped_rate), 4),
        "ms per move": round(float(row.ms_per_move), 3),
        "seconds": round(seconds, 1),
    }


def paired_figures(free, nes) -> dict:
    """The same games under both timings: outcomes paired, identical games, the moves timing removed."""
    won = [(f.outcome == "won", n.outcome == "won") for f, n in zip(free, nes)]
    figures = {
        "games won under both": sum(a and b for a, b in won),
        "games won only under free": sum(a and not b for a, b in won),
        "games won only under nes": sum(b and not a for a, b in won),
        "games lost under both": sum(not a and not b for a, b in won),
        "games with the same moves": sum(f.moves == n.moves for f, n in zip(free, nes)),
    }
    positions, touched, total, lost = removed_moves(nes)
    figures["nes positions"] = positions
    figures["nes positions where timing removed a move"] = touched
    figures["nes share of timing-free moves removed"] = round(lost / max(total, 1), 6)
    seconds = [r.frames / 60.0988 for r in nes if r.outcome == "won"]
    if seconds:
        figures["nes seconds to clear median (60.0988 fps)"] = round(float(np.median(seconds)), 1)
    return figures


def measure(spec: str, base: EvalConfig, threads: int) -> tuple[dict, dict]:
    """Play the protocol under both timings with one agent: (figures by level, settings)."""
    from drmario.run.agents import TORCH_KINDS, make_agent, network_name, parse_spec

    kind = parse_spec(spec)[0]
    if kind in TORCH_KINDS:
        import torch

        torch.set_num_threads(threads)
    agent = make_agent(spec)
    agent.name = network_name(spec)
    tables, records = {}, {}
    seconds = {}
    for timing in ("free", "nes"):
        start = time.perf_counter()
        tables[timing], played = arena([agent], config=base.replace(timing=timing), progress=False)
        seconds[timing] = time.perf_counter() - start
        records[timing] = played[agent.name]
        print(f"{agent.name} {timing}: {seconds[timing]:.0f} s", flush=True)
    out = {}
    for level in base.levels:
        figures = {}
        for timing in ("free", "nes"):
            table = tables[timing]
            [row] = table[table["level"] == level].itertuples()
            for key, value in timing_figures(row, seconds[timing]).items():
                if key != "seconds" or len(base.levels) == 1:  # several levels: the run's seconds in settings
                    figures[f"{timing} {key}"] = value
        free = [r for r in records["free"] if r.level == level]
        nes = [r for r in records["nes"] if r.level == level]
        figures.update(paired_figures(free, nes))
        out[level] = figures
    settings = {"protocol": base.to_dict(), "agent": spec, "timings": ["free", "nes"], "threads": threads}
    settings["seconds"] = {timing: round(s, 1) for timing, s in seconds.items()}
    settings["command"] = " ".join(["python", *sys.argv])
    if kind == "expert":
        settings["agent"] = "expert (depth 2, shipped weights)"
    return out, settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", action="append", help="an agent spec (repeatable; default expert)")
    parser.add_argument("--games", type=int, default=300, help="games under each timing at the highest level")
    parser.add_argument("--games-per-level", type=int, default=40, help="games under each timing at the others")
    parser.add_argument("--level", type=int, default=20, help="the level (without --levels)")
    parser.add_argument("--levels", type=int, nargs="+", help="several levels (the highest gets --games)")
    parser.add_argument("--speed", default="hi", choices=["low", "med", "hi"])
    parser.add_argument("--lockstep", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="torch's CPU threads for network agents")
    parser.add_argument("--name", default="timing-arena", help="the result file's name (before the machine)")
    parser.add_argument("--append", action="store_true", help="add to the NAME file instead of replacing it")
    args = parser.parse_args()
    specs = args.agent or ["expert"]
    levels = args.levels or [args.level]
    base = EvalConfig(
        levels=levels,
        games_per_level=args.games_per_level,
        top_level_games=args.games,
        speed=args.speed,
        lockstep=args.lockstep,
    )
    runs = {spec: measure(spec, base, args.threads) for spec in specs}
    if len(runs) == 1 and len(levels) == 1 and not args.append:  # the flat layout of the first result file
        [(figures_by_level, settings)] = runs.values()
        report(args.name, settings, figures_by_level[levels[0]])
        return
    settings, figures = {"runs": {}}, {}
    path = RESULTS / f"{args.name}-{machine_slug(machine_info())}.json"
    if args.append and path.exists():
        old = json.loads(path.read_text())
        if "runs" not in old["settings"]:
            raise SystemExit(f"{path}: a one-agent, one-level file (flat figures): --append needs a grouped one")
        settings, figures = old["settings"], old["figures"]
    for spec, (by_level, run_settings) in runs.items():
        settings["runs"][spec] = run_settings
        for level, level_figures in by_level.items():
            figures[f"{spec} level {level}"] = level_figures
    report(args.name, settings, figures)


if __name__ == "__main__":
    main()
