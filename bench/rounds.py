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

import numpy as np
import pandas as pd
from common import RESULTS, machine_info, machine_slug, report
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from drmario.files import write_atomic
from drmario.run.compare import arena_results

COLUMNS = ["round", "agent", "level", "games", "wins", "win_rate", "ci_low", "ci_high"]


def rounds_table(run_dir: Path, levels: list[int]) -> pd.DataFrame:
    """COLUMNS, one row per round, agent (its name without the round) and level; the agents
    without a network have round -1."""
    results = arena_results(run_dir)
    results = results[results["level"].isin(levels)].copy()
    results["agent"] = [
        spec if isinstance(spec, str) else agent for agent, spec in zip(results["agent"], results["spec"])
    ]
    results["round"] = results["round"].fillna(-1).astype(int)
    return results[COLUMNS].sort_values(["level", "agent", "round"], ignore_index=True)


def plot_rounds(table: pd.DataFrame) -> Figure:
    levels = sorted(table["level"].unique())
    fig = Figure(figsize=(4.2 * len(levels), 3.6), layout="constrained")
    axes = fig.subplots(1, len(levels), squeeze=False)[0]
    networks = sorted(table.loc[table["round"] >= 0, "agent"].unique())
    others = sorted(table.loc[table["round"] < 0, "agent"].unique())
    for ax, level in zip(axes, levels):
        here = table[table["level"] == level]
        for k, agent in enumerate(networks):
            rows = here[here["agent"] == agent].sort_values("round")
            err = np.array([rows["win_rate"] - rows["ci_low"], rows["ci_high"] - rows["win_rate"]])
            ax.errorbar(rows["round"], rows["win_rate"], yerr=err, fmt="-o", capsize=3, color=f"C{k}", label=agent)
        for k, agent in enumerate(others):
            row = here[here["agent"] == agent]
            if len(row):
                ax.axhline(float(row["win_rate"].iloc[0]), ls="--", lw=1, color=f"C{len(networks) + k}", label=agent)
        ax.set_title(f"level {level}")
        ax.set_xlabel("round (the network trained after it)")
        ax.set_ylabel("win rate (every virus cleared)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xticks(sorted(table.loc[table["round"] >= 0, "round"].unique()))
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(Patch(color="none"))
    labels.append("bars: Wilson 95% intervals; dashed: no network")
    axes[0].legend(handles, labels, fontsize=7)
    return fig


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
