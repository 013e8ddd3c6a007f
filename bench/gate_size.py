"""Is the gate large enough? A run's gate decisions replayed on more gating games.

The CPU profile gates each round on 100 games (50 at levels 15 and 20), and a network that wins one
game fewer is not promoted. This plays every trained round's network of each run alone on a larger
draw of gating games (the run's own `GateConfig` with the largest of --sizes games per level, and
--levels in place of its levels if given; the first G of each level are a draw of G) and on
evaluation games that no gate and no training used (level 20, --eval-games, --eval-seed), then
replays each run's sequence of gate decisions (round k against the best before it) with every rule
in --rules at every gate size in --sizes, and compares each decision's pair of networks on the
evaluation games too (paired: McNemar's exact test on wins; pills per virus on the games both won).

Writes bench/results/NAME-MACHINE.json: per run, rule and gate size the decisions and the best
network, every round's wins and pills per virus on the gating and evaluation games, and the run's
own decisions (on its own draw of gating games).

Run: `python bench/gate_size.py runs/ctl runs/fut --sizes 50,200 --rules wins-and-pills,wins-or-pills`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import cast, get_args

from common import report

from drmario.engine.game import GameRecord
from drmario.play.arena import evaluation_games
from drmario.play.gate import GateConfig, GateRule, compare, play_gate
from drmario.play.lockstep import play_lockstep
from drmario.run.agents import make_agent
from drmario.run.rounds import checkpoint_path, read_gate, trained_rounds


def first_per_level(records: list[GameRecord], n: int) -> list[GameRecord]:
    """The first n records of each level (records in the gate's order: level by level)."""
    seen: dict[int, int] = {}
    out = []
    for r in records:
        seen[r.level] = seen.get(r.level, 0) + 1
        if seen[r.level] <= n:
            out.append(r)
    return out


def replay(gating: dict[int, list[GameRecord]], rule: GateRule, alpha: float) -> tuple[list[dict], int]:
    """The run's sequence of gate decisions on these records: each round against the best before it."""
    decisions, best = [], min(gating)
    for k in sorted(gating)[1:]:
        result = compare(gating[k], gating[best], alpha=alpha, rule=rule)
        decisions.append({"round": k, "against": best, **result.to_dict()})
        if result.promoted:
            best = k
    return decisions, best


def summary(records: list[GameRecord]) -> str:
    """Wins, and pills per virus pooled over the network's own won games (the gate's figure is the mean
    per-game difference on the games both won)."""
    won = [r for r in records if r.outcome == "won"]
    ppv = sum(r.pills_used for r in won) / max(sum(r.viruses_cleared for r in won), 1)
    return f"{len(won)}/{len(records)}, {ppv:.2f} pills per virus on its won games"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", type=Path, nargs="+")
    parser.add_argument("--sizes", default="50,200", help="gate sizes to replay: games per level, comma-separated")
    parser.add_argument("--rules", default="wins-and-pills,wins-or-pills", help="gate rules to replay, comma-separated")
    parser.add_argument("--levels", default="", help="gating levels, comma-separated ('': each run's own)")
    parser.add_argument("--eval-games", type=int, default=300, help="evaluation games at level 20")
    parser.add_argument("--eval-seed", type=int, default=7, help="draws the evaluation games")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--name", default="gate-size", help="results: NAME-MACHINE.json")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    sizes, names = [int(v) for v in args.sizes.split(",")], args.rules.split(",")
    if set(names) - set(get_args(GateRule)) or min(sizes) < 1:  # before hours of games, not after
        raise SystemExit(
            f"--rules {args.rules} --sizes {args.sizes}: rules are {', '.join(get_args(GateRule))}; sizes >= 1"
        )
    if len({run.resolve().name for run in args.run_dirs}) < len(args.run_dirs):
        raise SystemExit("the runs' folder names must differ: they name the results")
    rules = [cast(GateRule, name) for name in names]
    levels = {"levels": [int(v) for v in args.levels.split(",")]} if args.levels else {}
    evaluation = evaluation_games([20], args.eval_games, seed=args.eval_seed)
    figures: dict[str, object] = {}
    seconds: dict[str, float] = {}
    for run in args.run_dirs:
        first = read_gate(run, 1)
        if first is None:
            raise SystemExit(f"{run}: round 1 has no gate record (train1/gate.json): not a gated run")
        config = first["config"]  # the run's own gate settings
        cfg = GateConfig.from_dict({**config, "games_per_level": max(sizes), **levels})
        gating, evaluated = {}, {}
        for k in trained_rounds(run):
            agent = make_agent(cfg.agent, network=checkpoint_path(run, k))
            start = time.perf_counter()
            gating[k] = play_gate(agent, cfg)
            seconds[f"{run.name} r{k} gate, {len(gating[k])} games"] = round(time.perf_counter() - start, 1)
            evaluated[k] = play_lockstep(agent, evaluation, lockstep=cfg.lockstep, max_pills=cfg.max_pills)
        out: dict[str, object] = {
            f"r{k}": {"gating": summary(gating[k]), "evaluation": summary(evaluated[k])} for k in gating
        }
        actual = [g for k in sorted(gating)[1:] if (g := read_gate(run, k))]  # the run's own decisions, its own games
        out["the run's gate"] = [f"r{g['round']} against r{g['against']}: {g['reason']}" for g in actual]
        bests = []
        for rule in rules:
            for n in sizes:
                decisions, best = replay({k: first_per_level(v, n) for k, v in gating.items()}, rule, cfg.alpha)
                for d in decisions:  # the same pair on the evaluation games
                    truth = compare(evaluated[d["round"]], evaluated[d["against"]]).to_dict()
                    d["evaluation"] = {
                        k: truth[k]
                        for k in ("new_wins", "old_wins", "wins_p", "ppv_diff", "ppv_diff_low", "ppv_diff_high")
                    }
                out[f"{rule}, {n} games per level"] = {"best": best, "decisions": decisions}
                bests.append(f"{rule} {n}/level: r{best}")
        figures[run.name] = out
        print(f"{run}: best {'; '.join(bests)}")
    figures["seconds"] = seconds
    settings = {
        "runs": [str(r) for r in args.run_dirs],
        "sizes": sizes,
        "rules": rules,
        "levels": levels.get("levels", "each run's own"),
        "eval_games": args.eval_games,
        "eval_seed": args.eval_seed,
        "threads": args.threads,
    }
    report(args.name, settings, figures)


if __name__ == "__main__":
    main()
