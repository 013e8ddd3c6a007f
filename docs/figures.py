"""The README's pictures, remade from one run: `make figures RUN=runs/cpu` (or `python docs/figures.py
runs/cpu`).

- docs/rounds.png: every round's network alone, the best network with search, greedy and the expert
  on the same evaluation games (the table bench/rounds.py wrote into the run as rounds.csv).
- docs/curves.png: the training curves of every round (train and held-out test).
- docs/heatmap.svg: one evaluation position at level 20, the network's move output beside the
  target of its search (net-mcts-32), with the move the search chose.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pandas as pd

from drmario.engine.game import Game
from drmario.files import atomic_file, write_atomic
from drmario.learn.player import load_player
from drmario.play.arena import evaluation_games
from drmario.run.agents import make_agent
from drmario.run.rounds import ROUNDS_FILE, best_checkpoint, train_dir, trained_rounds
from drmario.search.core import Position
from drmario.viz import plot_curves, plot_rounds, read_metrics
from drmario.viz.boards import compare_heatmaps

DOCS = Path(__file__).parent


def _size(svg: str) -> tuple[int, int]:
    found = re.search(r'width="([\d.]+)" height="([\d.]+)"', svg)
    if found is None:
        raise ValueError("an SVG without width and height")
    return int(float(found.group(1))), int(float(found.group(2)))


def svg_grid(rows: list[tuple[str, list[str]]], gap: int = 8, label: int = 18) -> str:
    """One SVG: each row a label above its SVGs side by side (each kept whole as a nested <svg>)."""
    parts, y, width = [], 0, 0
    for title, svgs in rows:
        parts.append(f'<text x="0" y="{y + label - 5}" font-family="sans-serif" font-size="13">{title}</text>')
        y += label
        x = 0
        for svg in svgs:
            w, _ = _size(svg)
            parts.append(re.sub(r"<svg ", f'<svg x="{x}" y="{y}" ', svg, count=1))
            x += w + gap
        width = max(width, x - gap)
        y += max(_size(s)[1] for s in svgs) + gap
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y - gap}">{"".join(parts)}</svg>\n'


def heatmap(network: Path, level: int = 20, after: int = 12) -> str:
    """The network's moves beside its search's target on an evaluation game at `level`, after the
    expert has placed `after` pills."""
    player = load_player(network)
    spec = evaluation_games([level], 1, seed=7)[0]
    game, expert = Game(spec.seed, spec.level), make_agent("expert")
    for _ in range(after):
        game.play(expert.choose([Position.of(game)], [0])[0].move)
    position = Position.of(game)
    decision = make_agent("net-mcts-32", network=player).choose([position], [0])[0]
    pills = np.array([[int(game.pill.left), int(game.pill.right)]], np.uint8)
    preview = np.array([[int(game.next_pill.left), int(game.next_pill.right)]], np.uint8)
    prior = player.evaluate(position.cells[None], pills, preview).moves[0]
    named = {"the network alone": prior, "its search (net-mcts-32)": decision.target}
    view = compare_heatmaps(game.board, game.pill, named, chosen=decision.move)
    per = len(view.svgs) // len(named)  # one small board per rotation
    rows = [
        (f"{name}: move probabilities, one board per rotation", view.svgs[i * per : (i + 1) * per])
        for i, name in enumerate(named)
    ]
    return svg_grid(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args()
    rounds_file = args.run_dir / ROUNDS_FILE
    if not rounds_file.is_file():
        raise SystemExit(f"{rounds_file} is missing: `python bench/rounds.py {args.run_dir}` (no --name) writes it")
    with atomic_file(DOCS / "rounds.png") as f:
        plot_rounds(pd.read_csv(rounds_file)).savefig(f, dpi=80, bbox_inches="tight", format="png")
    runs = {f"round {k}": train_dir(args.run_dir, k) for k in trained_rounds(args.run_dir)}
    curves = plot_curves(read_metrics(runs), terms=["loss", "moves", "won", "duration"])
    with atomic_file(DOCS / "curves.png") as f:
        curves.savefig(f, dpi=70, bbox_inches="tight", format="png")
    best = best_checkpoint(args.run_dir, max(trained_rounds(args.run_dir)) + 1)
    write_atomic(DOCS / "heatmap.svg", heatmap(best))
    print(f"wrote {DOCS / 'rounds.png'}, {DOCS / 'curves.png'}, {DOCS / 'heatmap.svg'}")


if __name__ == "__main__":
    main()
