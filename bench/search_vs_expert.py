"""The shipped network with search against the expert, paired on the same games, and where the
search's pills go.

Plays the expert, the network alone (``policy``) and the network with search (``net-mcts-N``, and
optionally variants of its utility or PUCT settings, no retraining, and with --against the same
search and network-alone agents with other networks; with --alone the networks alone only; with
--colour-average also the network alone with its outputs averaged over the 6 colour renamings) on the
same games at one level: by
default the rounds bench's 100 evaluation games (`EvalConfig` with its seed 2024: NES rules, the
2,000-pill cap counting as a failure); with ``--tuning`` as many games drawn from the training seeds
(never evaluation seeds, `is_evaluation_seed`), for trying search settings. For each agent: wins
with the Wilson 95% interval, pills per virus over all games (sum of pills / sum of viruses cleared,
the arena's and rounds bench's figure, bootstrap 95% interval over games) and over the won games
only, the outcomes (won, topped out, cut at the pill cap) with the pills the lost games took, and ms
per move. Paired tests (`play.gate.compare`: McNemar's exact test on wins; pills per virus on the
games both won, paired bootstrap 95% interval of the difference) of every search agent against the
expert, and of each variant against the default search.

Writes bench/results/NAME-MACHINE.json (figures) and NAME-MACHINE.csv (one row per agent and game).

Run: `python bench/search_vs_expert.py` (net-mcts-100 on the 100 evaluation games at level 20);
`python bench/search_vs_expert.py --tuning --games 50 --variant k4=pills_per_virus:4 --name
search100-tuning` to try a utility setting on tuning games.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import pandas as pd
from common import RESULTS, machine_info, machine_slug, paired_text, report

from drmario.engine import kernels as K
from drmario.engine.game import GameRecord
from drmario.engine.level import TRAINING_SEEDS, is_evaluation_seed, virus_count
from drmario.engine.rules import MOVES_SHAPE
from drmario.files import write_atomic
from drmario.play.agents import Agent, PolicyAgent, SearchAgent
from drmario.play.arena import EvalConfig, arena, wilson
from drmario.play.gate import compare
from drmario.play.lockstep import GameSpec
from drmario.run.agents import DTYPE_HELP, DTYPES, make_agents
from drmario.run.rounds import ppv_interval
from drmario.search.core import Evaluator, Prediction
from drmario.search.expert import expert_scores, load_weights
from drmario.search.utility import Utility
from drmario.settings import load_yaml


def tuning_games(level: int, n: int, seed: int) -> list[GameSpec]:
    """n distinct training seeds (never evaluation seeds) at level, drawn by a generator seeded with seed."""
    seeds = np.random.default_rng(seed).choice(TRAINING_SEEDS, n, replace=False)
    assert not any(is_evaluation_seed(int(s)) for s in seeds)
    return [GameSpec(i, int(s), level) for i, s in enumerate(seeds)]


def variant(base: SearchAgent, text: str) -> SearchAgent:
    """NAME=FIELD:VALUE[,FIELD:VALUE...]: base's search with those fields of its `Utility` or of the
    settings its mode reads (`PuctSettings` or `GumbelSettings`) changed, each value read as YAML (e.g.
    ``k4=pills_per_virus:4``, ``s05=min_spread:0.05``, ``m8=m:8`` for a Gumbel search)."""
    name, _, fields = text.partition("=")
    mode = base.config.mode  # "puct" or "gumbel": the section of settings this search reads
    overrides = {}
    for item in fields.split(","):
        key, _, value = item.partition(":")
        if key in Utility.__dataclass_fields__:
            overrides[f"utility.{key}"] = load_yaml(value)
        elif key in type(getattr(base.config, mode)).__dataclass_fields__:
            overrides[f"{mode}.{key}"] = load_yaml(value)
        else:
            raise ValueError(
                f"--variant {text!r}: {key!r} is neither a Utility setting nor a {mode} setting of {base.name}"
            )
    return SearchAgent(base.config.with_overrides(overrides), base.evaluator, name=f"{base.name} {name}")


class ExpertMoves:
    """A diagnostic evaluator: the network's values with the expert's moves as the prior, softmax of
    its depth-2 scores / temperature. If the search with it beats the expert on pills, the values are
    good enough and the network's moves are what holds the search back; if not, the values are."""

    def __init__(self, network: Evaluator, temperature: float) -> None:
        self.network, self.temperature, self.weights = network, temperature, load_weights()

    def evaluate(self, cells: np.ndarray, pills: np.ndarray, previews: np.ndarray) -> Prediction:
        pred = self.network.evaluate(cells, pills, previews)
        moves = np.empty((K.MAX_MOVES, 3), np.int8)
        scores = np.empty(K.MAX_MOVES)
        prior = np.zeros((len(cells), *MOVES_SHAPE), np.float32)
        for i in range(len(cells)):  # a bench diagnostic: one compiled call per leaf is fast enough
            a, b, pa, pb = (int(v) for v in (*pills[i], *previews[i]))
            n = expert_scores(cells[i], a, b, pa, pb, self.weights, moves, scores)
            if n:
                w = np.exp((scores[:n] - scores[:n].max()) / self.temperature)
                rows = moves[:n].astype(np.intp)
                prior[i, rows[:, 0], rows[:, 1], rows[:, 2]] = w / w.sum()
        return pred._replace(moves=prior)


def describe(records: Sequence[GameRecord]) -> dict:
    """The figures of one agent's games (module docstring)."""
    won = [r for r in records if r.outcome == "won"]
    lost = [r for r in records if r.outcome != "won"]
    low, high = wilson(len(won), len(records))
    ppv_low, ppv_high = ppv_interval(records)
    won_low, won_high = ppv_interval(won)
    pills = sum(r.pills_used for r in records)
    seconds = sum(r.meta.get("seconds", 0.0) for r in records)
    won_ppv = sum(r.pills_used for r in won) / max(sum(r.viruses_cleared for r in won), 1)
    per_game = np.array([r.pills_used / max(r.viruses_cleared, 1) for r in won])
    return {
        "wins": f"{len(won)}/{len(records)} ({float(low):.1%}-{float(high):.1%})",
        "pills per virus, all games": f"{pills / max(sum(r.viruses_cleared for r in records), 1):.3f} "
        f"({ppv_low:.3f}-{ppv_high:.3f})",
        "pills per virus, won games": f"{won_ppv:.3f} ({won_low:.3f}-{won_high:.3f})",
        "won games' pills per virus: median, p90, max": [
            round(float(v), 3) for v in np.percentile(per_game, [50, 90, 100])
        ]
        if len(per_game)
        else None,
        "outcomes": {
            "won": len(won),
            "topped out": sum(r.outcome == "topped_out" for r in records),
            "pill cap": sum(r.outcome is None for r in records),
            "stalemate": sum(r.outcome == "stalemate" for r in records),
        },
        "lost games (seed: outcome, pills, viruses cleared)": {
            str(r.seed): f"{r.outcome or 'pill cap'}, {r.pills_used}, {r.viruses_cleared}" for r in lost
        },
        "share of all pills in lost games": round(sum(r.pills_used for r in lost) / max(pills, 1), 3),
        "ms per move": round(1000 * seconds / max(pills, 1), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--search", default="net-mcts-100", help="the search agent (a network kind)")
    parser.add_argument("--network", default="small", help="checkpoint, or a shipped network's name")
    parser.add_argument("--others", default="expert,policy", help="the agents to compare with (expert first)")
    parser.add_argument(
        "--variant", action="append", default=[], help="NAME=FIELD:VALUE,...: a utility or PUCT setting"
    )
    parser.add_argument(
        "--expert-prior",
        type=float,
        action="append",
        default=[],
        help="T: also the search with the expert's moves (softmax of its scores / T) as prior, the network's values",
    )
    parser.add_argument(
        "--short-horizon", default=None, help="FILE: also the search valuing pills with short_targets.py's head"
    )
    parser.add_argument("--short-rate", type=float, default=2.0, help="its pills per virus left after the horizon")
    parser.add_argument(
        "--against",
        action="append",
        default=[],
        metavar="LABEL=CHECKPOINT",
        help="the same search, and the network alone if policy is in --others, with another network (paired with "
        "the default network's)",
    )
    parser.add_argument(
        "--colour-average",
        action="store_true",
        help="also the default network alone with its outputs averaged over the 6 colour renamings (policy x6)",
    )
    parser.add_argument("--no-default", action="store_true", help="play only the variants, not the default search")
    parser.add_argument(
        "--alone", action="store_true", help="no search: the default network and --against's alone (with --others)"
    )
    parser.add_argument("--level", type=int, default=20)
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--seed", type=int, default=2024, help="draws the games")
    parser.add_argument("--tuning", action="store_true", help="games from training seeds, not evaluation seeds")
    parser.add_argument("--lockstep", type=int, default=16, help="games each agent plays at once")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument(
        "--device", default="cpu", help="where the networks run (cuda: raise --lockstep, so each call is a batch)"
    )
    parser.add_argument("--dtype", choices=DTYPES, default="auto", help=DTYPE_HELP)
    parser.add_argument("--name", default="search100", help="result file name")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    cfg = EvalConfig(
        levels=[args.level],
        games_per_level=args.games,
        top_level_games=args.games,
        seed=args.seed,
        lockstep=args.lockstep,
    )
    games = tuning_games(args.level, args.games, args.seed) if args.tuning else cfg.games()
    others = [s for s in args.others.split(",") if s]
    specs = [*others, args.search]
    agents: list[Agent] = make_agents(specs, network=args.network, device=args.device, dtype=args.dtype)
    base = agents.pop()
    assert isinstance(base, SearchAgent)
    if not (args.no_default or args.alone):
        agents.append(base)
    agents += [variant(base, v) for v in args.variant]
    for t in args.expert_prior:
        if base.evaluator is None:
            raise SystemExit(f"--expert-prior keeps the network's values: --search {args.search} has no network")
        agents.append(SearchAgent(base.config, ExpertMoves(base.evaluator, t), name=f"{base.name} expert-prior T{t:g}"))
    if args.short_horizon:
        from short_targets import ShortHorizon  # (it imports this module)

        short = ShortHorizon(args.short_horizon, args.short_rate)
        agents.append(SearchAgent(base.config, short, name=f"{base.name} short-horizon r{args.short_rate:g}"))
    if args.colour_average:
        from value_ranking import ColourAveraged

        agents.append(PolicyAgent(ColourAveraged(base.evaluator), name="policy x6"))
    for text in args.against:
        label, _, checkpoint = text.partition("=")
        kinds = [*([] if args.alone else [args.search]), *(["policy"] if "policy" in others or args.alone else [])]
        for agent in make_agents(kinds, network=checkpoint, device=args.device, dtype=args.dtype):
            agent.name = f"{agent.name} {label}"
            agents.append(agent)
    _, records = arena(agents, games, cfg)

    figures: dict = {name: describe(r) for name, r in records.items()}
    tests: dict = {}
    searches = [a.name for a in agents if isinstance(a, SearchAgent) and a.config.needs_network]
    alone = [name for name in records if name == "policy" or name.startswith("policy ")]
    for name in searches + alone:
        if "expert" in records:
            tests[f"{name} vs expert"] = compare(records[name], records["expert"]).to_dict()
        if name in searches and name != base.name and base.name in records:
            tests[f"{name} vs {base.name}"] = compare(records[name], records[base.name]).to_dict()
    for name in records:  # the other networks alone against the default network alone
        if name.startswith("policy ") and "policy" in records:
            tests[f"{name} vs policy"] = compare(records[name], records["policy"]).to_dict()
    figures["paired tests"] = tests
    for label, t in tests.items():
        print(paired_text(label, t, digits=3))

    rows = [
        {
            "agent": name,
            "seed": r.seed,
            "level": r.level,
            "outcome": r.outcome or "pill_cap",
            "pills": r.pills_used,
            "viruses_cleared": r.viruses_cleared,
            "viruses": virus_count(r.level),
            "seconds": round(r.meta.get("seconds", float("nan")), 3),
        }
        for name, rs in records.items()
        for r in rs
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_atomic(RESULTS / f"{args.name}-{machine_slug(machine_info())}.csv", pd.DataFrame(rows).to_csv(index=False))
    settings = {
        "search": args.search,
        "network": args.network,
        "agents": list(records),
        "variants": {
            a.name: {"utility": a.config.utility.to_dict(), a.config.mode: getattr(a.config, a.config.mode).to_dict()}
            for a in agents
            if isinstance(a, SearchAgent)
        },
        "default utility": Utility().to_dict(),
        "games": f"{args.games} at level {args.level} from the "
        + ("training seeds (tuning)" if args.tuning else f"evaluation seeds, drawn with seed {args.seed}"),
        "evaluation": cfg.to_dict(),
        "tuning": args.tuning,
        "threads": args.threads,
        "device": args.device,
        "dtype": args.dtype,
    }
    report(args.name, settings, figures)


if __name__ == "__main__":
    main()
