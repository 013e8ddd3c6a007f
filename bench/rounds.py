"""The rounds of a pipeline run: does each round's network beat the last, and the student its teacher?

Plays every trained round's network alone (``policy rK``), the agents without a network (greedy
and the expert, the round-0 teacher) and the run's best network with search (``net-mcts-N best``)
on the same evaluation games (NES rules, seeds that no round trained or gated on; paired: the same
seeds and pills for every agent). Writes, per agent and level, games, wins, win rate with its
Wilson 95% interval and pills per virus (sum of pills over sum of viruses, every game) with a bootstrap
95% interval to bench/results/rounds-MACHINE.csv (and, under the default name, RUN_DIR/rounds.csv,
which `export` puts in the network's card), the plot to rounds-MACHINE.png, and to rounds-MACHINE.json
the paired tests (McNemar's exact test on wins; pills per virus as the mean per game on the games both
won, paired bootstrap) of every later round's network against round 0's and of the best network with
search against the expert, with the run's settings. ``--name NAME`` writes NAME-MACHINE.* instead (an
experiment's run beside the shipped one's).

Run: `python bench/rounds.py runs/cpu` after `python -m drmario pipeline --profile cpu --run-dir
runs/cpu --rounds 4`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from common import RESULTS, machine_info, machine_slug, paired_text, report

from drmario.files import atomic_file, write_atomic
from drmario.play.arena import EvalConfig
from drmario.play.gate import compare
from drmario.run.rounds import ROUNDS_FILE, play_rounds
from drmario.viz import plot_rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--levels", default="20", help="comma-separated levels (default 20)")
    parser.add_argument("--games", type=int, default=100, help="games at each level")
    parser.add_argument("--seed", type=int, default=2024, help="draws the evaluation games")
    parser.add_argument("--search", default="net-mcts-100", help="the best network's search agent ('' for none)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--name", default="rounds", help="results: NAME-MACHINE.csv, .json, .png")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    levels = [int(v) for v in args.levels.split(",")]
    evaluation = EvalConfig(levels=levels, games_per_level=args.games, top_level_games=args.games, seed=args.seed)
    best = [args.search] if args.search else []
    table, records = play_rounds(args.run_dir, evaluation, best_agents=best)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))

    policies = [name for name in records if name.startswith("policy r")]
    tests = {}
    for later in policies[1:]:  # every round against round 0, paired on the same games
        tests[f"{later} vs {policies[0]}"] = compare(records[later], records[policies[0]]).to_dict()
    if best:
        name = next(n for n in records if n.endswith(" best"))  # the best network with search
        tests[f"{name} vs expert"] = compare(records[name], records["expert"]).to_dict()
    for label, t in tests.items():
        print(paired_text(label, t))

    slug = machine_slug(machine_info())
    try:  # read before anything is written: the files of one call belong together
        profile = json.loads((args.run_dir / "pipeline.json").read_text()).get("profile", {})
    except (OSError, ValueError) as e:
        raise SystemExit(f"{args.run_dir}: cannot read its pipeline.json ({e}): not a pipeline run") from e
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_atomic(RESULTS / f"{args.name}-{slug}.csv", table.to_csv(index=False, float_format="%.4f"))
    if args.name == "rounds":  # the run's own table, for the exported network's card (not an experiment's)
        write_atomic(args.run_dir / ROUNDS_FILE, table.to_csv(index=False))
    with atomic_file(RESULTS / f"{args.name}-{slug}.png") as f:
        plot_rounds(table).savefig(f, dpi=110, format="png")
    figures: dict[str, object] = {
        f"{r.agent} L{r.level}": f"{r.wins}/{r.games} ({r.ci_low:.0%}-{r.ci_high:.0%}), "
        f"{r.pills_per_virus:.2f} pills/virus ({r.ppv_low:.2f}-{r.ppv_high:.2f})"
        for r in table.itertuples()
    }
    figures["paired tests"] = tests
    settings = {"run_dir": str(args.run_dir), "evaluation": evaluation.to_dict(), "search": args.search}
    report(args.name, {**settings, "threads": args.threads, "profile": profile}, figures)


if __name__ == "__main__":
    main()
