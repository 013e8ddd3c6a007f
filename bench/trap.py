"""The end-game trap: one of the search's games that stalls, and whether more search gets it out.

Every game the shipped network's search lost at the pill cap stopped with one virus left, most often
a virus high in the bottle under a pill half of another colour. This bench plays the search
(--search, with --variant settings as `search_vs_expert.py` reads them) on one game from the
training seeds (--seed) until it has gone --stall pills without clearing a virus. From that
position (the trap) it reports the network's prediction (P(win) as won in [-1, 1], viruses it
expects to clear, pills to the end) and continues the game with the expert, the network alone and
the search at each --simulations, each for at most --max-pills pills (same pills, NES rules),
reporting the pills each needed to win or that it did not.

Run: `python bench/trap.py --seed 64471 --variant c15=kind:centred,width:1.5 --simulations 100,400,1600`.
Writes bench/results/NAME-MACHINE.json.
"""

from __future__ import annotations

import argparse

import numpy as np
from common import report
from search_vs_expert import variant

from drmario.engine.game import Game
from drmario.play.agents import Agent, SearchAgent
from drmario.play.lockstep import GameSpec, play_lockstep
from drmario.run.agents import make_agents
from drmario.search.core import Position


def finish(agent: Agent, game: Game, max_pills: int) -> str:
    """Play game on with agent (a copy) for at most max_pills pills; how it ended."""
    start, game = game.pills_used, game.copy()
    for i in range(max_pills):
        if game.over:
            break
        (decision,) = agent.choose([Position.of(game)], [1_000 + i])
        game.play(decision.move)
    if game.outcome is None:
        return f"not finished after {max_pills} pills ({game.viruses_left} viruses left)"
    return f"{game.outcome.value} after {game.pills_used - start} pills"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--search", default="net-mcts-100")
    parser.add_argument("--network", default="small")
    parser.add_argument("--variant", default=None, help="NAME=FIELD:VALUE,...: the search that falls in the trap")
    parser.add_argument("--seed", type=int, required=True, help="a game seed from the training seeds")
    parser.add_argument("--level", type=int, default=20)
    parser.add_argument("--stall", type=int, default=40, help="pills without a clear that make a trap")
    parser.add_argument("--simulations", default="100,400,1600", help="the searches that try to get out")
    parser.add_argument("--max-pills", type=int, default=150)
    parser.add_argument("--name", default="trap")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    expert, policy, base = make_agents(["expert", "policy", args.search], network=args.network)
    assert isinstance(base, SearchAgent)
    trapper = variant(base, args.variant) if args.variant else base
    (record,) = play_lockstep(trapper, [GameSpec(0, args.seed, args.level)], stall_limit=args.stall, max_pills=2000)
    if record.outcome != "stalemate":
        raise SystemExit(f"{trapper.name} did not stall on seed {args.seed}: {record.outcome}")
    game = Game(args.seed, args.level, stall_limit=None)
    for move in record.moves:
        game.play(move)
    pos = Position.of(game)
    pred = policy.evaluator.evaluate(  # type: ignore[attr-defined]
        pos.cells[None],
        np.array([[pos.pill.left, pos.pill.right]], np.uint8),
        np.array([[pos.preview.left, pos.preview.right]], np.uint8),  # type: ignore[union-attr]
    )
    figures: dict = {
        "trap": f"after {game.pills_used} pills, {game.viruses_left} viruses left, {args.stall} pills without a clear",
        "board": str(game.board).splitlines(),
        "network's prediction (won, cleared, pills to the end)": [
            round(float(v[0]), 3) for v in (pred.won, pred.cleared, pred.duration)
        ],
        "expert": finish(expert, game, args.max_pills),
        "policy": finish(policy, game, args.max_pills),
    }
    for sims in (int(s) for s in args.simulations.split(",")):
        (search,) = make_agents([f"{args.search.rsplit('-', 1)[0]}-{sims}"], network=args.network)
        if args.variant:
            search = variant(search, args.variant)  # type: ignore[arg-type]
        figures[search.name] = finish(search, game, args.max_pills)
    report(args.name, vars(args), figures)


if __name__ == "__main__":
    main()
