"""Paired tests of two agents from result tables of the same games, played in different runs.

`search_vs_expert.py` writes one row per agent and game (NAME-MACHINE.csv). A search with a new
network need not replay the old one's games: each game's moves follow from its seeds, so this pairs
the new agent's rows with the old agent's rows of another table, game by game (the same seeds and
level, in the same order), and applies the arena's paired test (`play.gate.compare`: McNemar's exact
test on wins; pills per virus on the games both won, paired bootstrap 95% interval). Each pairing is
written as ``LABEL: NEW vs OLD`` to bench/results/NAME-MACHINE.json, with each table's sha256 and the command,
date and machine of the result file beside it (the games' own provenance: the pairing may run elsewhere).

Run: `python bench/pair.py --name NAME "new vs old=results/a.csv:net-mcts-100,results/b.csv:net-mcts-100"`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
from common import report

from drmario.engine.game import GameRecord
from drmario.files import file_sha256
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


def provenance(table: Path, agent: str) -> dict:
    """Which games a side holds: the table, its sha256, and the command, date and machine of the result
    file written beside it (search_vs_expert.py writes NAME-MACHINE.csv and .json together)."""
    out: dict = {"table": f"{table}:{agent}", "sha256": file_sha256(table)}
    try:
        made = json.loads(table.with_suffix(".json").read_text())
        out.update(command=made.get("command"), date=made.get("date"), machine=(made.get("machine") or {}).get("cpu"))
    except (OSError, ValueError):
        out["made"] = "no readable result file beside it"
    return out


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
        settings[label] = {"new": provenance(Path(new_table), new_agent), "old": provenance(Path(old_table), old_agent)}
    report(args.name, settings, figures)


if __name__ == "__main__":
    main()
