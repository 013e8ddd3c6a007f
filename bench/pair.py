"""Paired tests of two agents from result tables of the same games, played in different runs.

`search_vs_expert.py` writes one row per agent and game (NAME-MACHINE.csv). A search with a new
network need not replay the old one's games: each game's moves follow from its seeds, so this pairs
the new agent's rows with the old agent's rows of another table, game by game (the same seeds and
level, in the same order), and applies the arena's paired test (`play.gate.compare`: McNemar's exact
test on wins; pills per virus on the games both won, paired bootstrap 95% interval). Each pairing is
written as ``LABEL: NEW vs OLD`` to bench/results/NAME-MACHINE.json.

Run: `python bench/pair.py --name NAME "new vs old=results/a.csv:net-mcts-100,results/b.csv:net-mcts-100"`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from common import report

from drmario.engine.game import GameRecord
from drmario.play.gate import compare


def records(table: Path, agent: str) -> list[GameRecord]:
    """The agent's games of a search_vs_expert table, in its order."""
    rows = pd.read_csv(table)
    rows = rows[rows.agent == agent]
    if rows.empty:
        raise SystemExit(f"{table}: no rows of agent {agent!r} (agents: {sorted(set(pd.read_csv(table).agent))})")
    return [
        GameRecord(
            seed=int(r["seed"]),
            level=int(r["level"]),
            outcome=None if r["outcome"] == "pill_cap" else str(r["outcome"]),
            pills_used=int(r["pills"]),
            viruses_cleared=int(r["viruses_cleared"]),
        )
        for r in rows.to_dict("records")
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pairs", nargs="+", help="LABEL=NEW_CSV:AGENT,OLD_CSV:AGENT")
    parser.add_argument("--name", required=True, help="result file name")
    args = parser.parse_args()
    figures, settings = {}, {}
    for text in args.pairs:
        label, _, sides = text.partition("=")
        (new_table, new_agent), (old_table, old_agent) = (side.rsplit(":", 1) for side in sides.split(","))
        new, old = records(Path(new_table), new_agent), records(Path(old_table), old_agent)
        result = compare(new, old).to_dict()
        figures[label] = result
        settings[label] = {"new": f"{new_table}:{new_agent}", "old": f"{old_table}:{old_agent}"}
    report(args.name, settings, figures)


if __name__ == "__main__":
    main()
