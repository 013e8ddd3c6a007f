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
