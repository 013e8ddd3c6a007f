"""The rounds of a pipeline run: does each round's network beat the last?

Reads the arena tables that notebook 03 wrote after every round of RUN_DIR (the evaluation games:
NES rules, seeds that no round trained on) and writes, per round, agent and level, the games, wins,
win rate and Wilson 95% interval to bench/results/rounds-MACHINE.csv, a plot of the win rate by
round (the agents without a network as flat references) to rounds-MACHINE.png, and the figures with
the run's settings to rounds-MACHINE.json.

Run: `python bench/rounds.py runs/cpu` after `python -m drmario pipeline --profile cpu --run-dir
runs/cpu --rounds 3`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from common import RESULTS, machine_info, machine_slug, report

from drmario.files import write_atomic
from drmario.run.compare import rounds_table
from drmario.viz import plot_rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--levels", default="10,15,20")
    args = parser.parse_args()
    table = rounds_table(args.run_dir, [int(v) for v in args.levels.split(",")])
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    slug = machine_slug(machine_info())
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_atomic(RESULTS / f"rounds-{slug}.csv", table.to_csv(index=False, float_format="%.4f"))
    plot_rounds(table).savefig(RESULTS / f"rounds-{slug}.png", dpi=110)
    figures = {
        f"{r.agent} r{r.round} L{r.level}": f"{r.wins}/{r.games} ({r.ci_low:.0%}-{r.ci_high:.0%})"
        for r in table.itertuples()
    }
    profile = json.loads((args.run_dir / "pipeline.json").read_text()).get("profile", {})
    report("rounds", {"run_dir": str(args.run_dir), "profile": profile}, figures)


if __name__ == "__main__":
    main()
