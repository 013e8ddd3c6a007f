"""Command line: ``python -m drmario <command>`` (or ``drmario <command>`` once installed)."""

from __future__ import annotations

import argparse
import sys

import numpy as np


def cmd_play(args: argparse.Namespace) -> int:
    """Play one game with uniformly random legal moves and print it."""
    from .game import Game

    rng = np.random.default_rng(args.rng_seed)
    game = Game(args.seed, args.level, pill_mode=args.pills, stall_limit=args.stall_limit or None)
    print(f"seed {args.seed}, level {args.level}, {game.viruses_left} viruses, {args.pills} pills\n{game.board}\n")
    while not game.over:
        pill, moves = game.pill, game.legal_moves()
        move = moves[rng.integers(len(moves))]
        result = game.play(move)
        if args.verbose or result.viruses_cleared:
            print(
                f"pill {game.pills_used:3d} {pill}  move {tuple(move)}  cleared {result.viruses_cleared} "
                f"virus(es), {game.viruses_left} left"
            )
    print(
        f"\n{game.board}\n\n{game.outcome.value} after {game.pills_used} pills, {game.viruses_cleared} viruses cleared"
    )
    if args.record:
        print(game.record(agent="random", rng_seed=args.rng_seed).to_json())
    return 0


def _ints(text: str) -> list[int]:
    """'0,5,10' or '0-20:5' (start-stop:step, stop included) or a mix: '0,3-6'."""
    out: list[int] = []
    for part in text.split(","):
        if "-" in part:
            span, _, step = part.partition(":")
            lo, hi = span.split("-")
            out += list(range(int(lo), int(hi) + 1, int(step or 1)))
        elif part:
            out.append(int(part))
    return out


def cmd_generate(args: argparse.Namespace) -> int:
    """Self-play games with search, written as training examples into a run directory."""
    from .search import SearchConfig
    from .selfplay import SelfPlayConfig, generate

    search = SearchConfig(
        mode=args.mode,
        simulations=args.simulations,
        root_rollouts=args.root_rollouts,
        rollout_policy=args.rollout_policy,
    )
    cfg = SelfPlayConfig(
        games=args.games,
        levels=args.levels,
        seed=args.seed,
        search=search,
        network=args.network,
        device=args.device,
        workers=args.workers,
        games_per_shard=args.games_per_shard,
        temperature_moves=args.temperature_moves,
    )
    print(generate(cfg, args.run_dir).to_string())
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Agents play the same fixed games; prints (and optionally writes) the arena table."""
    from .agents import GreedyAgent, RandomAgent, SearchAgent
    from .arena import arena, evaluation_games
    from .search import SearchConfig

    agents = []
    for name in args.agents.split(","):
        kind, _, sims = name.partition(":")
        if kind == "random":
            agents.append(RandomAgent())
        elif kind == "greedy":
            agents.append(GreedyAgent())
        elif kind in ("mcts", "mcts-greedy"):
            n, policy = int(sims or 100), "greedy" if kind == "mcts-greedy" else "random"
            cfg = SearchConfig(simulations=n, root_rollouts=1, rollout_policy=policy)
            agents.append(SearchAgent(cfg, name=f"{kind}-{n}"))
        else:
            raise ValueError(f"unknown agent {name!r}: use random, greedy, mcts[:simulations] or mcts-greedy[:sims]")
    games = evaluation_games(args.levels, args.games_per_level, seed=args.seed)
    table, _ = arena(agents, games, lockstep=args.lockstep, stall_limit=args.stall_limit or None)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="drmario", description="drmario-kit: Dr. Mario AlphaZero-style")
    sub = parser.add_subparsers(dest="command", required=True)

    play = sub.add_parser("play", help=cmd_play.__doc__, description=cmd_play.__doc__)
    play.add_argument("--seed", type=int, default=1234, help="NES RNG seed, 2..65535")
    play.add_argument("--level", type=int, default=0, help="level 0..24")
    play.add_argument("--pills", choices=["nes", "iid"], default="nes", help="pill sequence mode")
    play.add_argument("--stall-limit", type=int, default=20, help="stalemate after this many idle pills (0: off)")
    play.add_argument("--rng-seed", type=int, default=0, help="seed of the random player")
    play.add_argument("--verbose", "-v", action="store_true", help="print every move")
    play.add_argument("--record", action="store_true", help="print the game record as JSON")
    play.set_defaults(func=cmd_play)

    gen = sub.add_parser("generate", help=cmd_generate.__doc__, description=cmd_generate.__doc__)
    gen.add_argument("run_dir", help="run directory (resumes if it holds this run already)")
    gen.add_argument("--games", type=int, default=64)
    gen.add_argument("--levels", type=_ints, default=[0, 2, 4, 6, 8, 10], help="e.g. 0,5,10 or 0-20:2")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--mode", choices=["round0", "puct", "gumbel"], default="round0")
    gen.add_argument("--simulations", type=int, default=200)
    gen.add_argument("--root-rollouts", type=int, default=2)
    gen.add_argument("--rollout-policy", choices=["random", "greedy"], default="random")
    gen.add_argument("--network", help="checkpoint for round N (puct/gumbel)")
    gen.add_argument("--device", default="cpu")
    gen.add_argument("--workers", type=int, default=1)
    gen.add_argument("--games-per-shard", type=int, default=16)
    gen.add_argument("--temperature-moves", type=int, default=0, help="sample moves for this many first pills")
    gen.set_defaults(func=cmd_generate)

    ev = sub.add_parser("evaluate", help=cmd_evaluate.__doc__, description=cmd_evaluate.__doc__)
    ev.add_argument(
        "--agents", default="random,greedy,mcts:100", help="random, greedy, mcts[:simulations], mcts-greedy[:sims]"
    )
    ev.add_argument("--levels", type=_ints, default=[0, 5, 10, 15, 20])
    ev.add_argument("--games-per-level", type=int, default=20)
    ev.add_argument("--seed", type=int, default=2024, help="fixes the evaluation games")
    ev.add_argument("--lockstep", type=int, default=16)
    ev.add_argument("--stall-limit", type=int, default=20, help="0: no stalemates")
    ev.add_argument("--out", help="write the table as CSV")
    ev.set_defaults(func=cmd_evaluate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as e:
        print(f"drmario {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
