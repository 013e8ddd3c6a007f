"""Does a training's won output predict held-out games better than a constant?

For each training run directory (config.json, metrics.csv): its examples split as it split them
(`ExampleSet.split_by_game` with its test_fraction and seed), the constant that predicts the train
rows' won share everywhere, scored on the test rows as the training scores its won output (the log
loss of P(win) with won_loss = "log", the squared error in -1..+1 units with "squared"), beside the
training's last test row (won and moves). A won output above its constant has learnt which training
games were lost, not what loses (bench/README.md, "Fewer positions per game for the values").

Run: `python bench/heldout_values.py --name NAME runs/a/train1 runs/b/train1 ...`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from common import report

from drmario.learn.dataset import load_examples


def constant_error(train_won: np.ndarray, test_won: np.ndarray, won_loss: str) -> float:
    """The won term on test_won (int8[n], -1 or +1) of the constant fitted on train_won."""
    if won_loss == "squared":
        return float(np.square(test_won - train_won.mean()).mean())
    p = (1 + train_won.astype(np.float64).mean()) / 2
    y = (1 + test_won.astype(np.float64)) / 2
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


def last_test_row(run_dir: Path) -> dict:
    rows = pd.read_csv(run_dir / "metrics.csv")
    tests = rows[rows.split == "test"]
    if tests.empty:
        raise SystemExit(f"{run_dir / 'metrics.csv'}: no test row (test_fraction 0, or no evaluation yet)")
    return tests.iloc[-1].to_dict()


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="training run directories")
    parser.add_argument("--name", default="heldout-values", help="result file name (bench/results/NAME-MACHINE.json)")
    args = parser.parse_args(argv)
    figures: dict[str, dict] = {}
    loaded: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # (data, augment, fraction, seed) -> won of each side
    for run in args.runs:
        cfg = json.loads((run / "config.json").read_text())
        key = (tuple(cfg["data"]), cfg["augment"], cfg["test_fraction"], cfg["seed"])
        if key not in loaded:
            examples = load_examples(cfg["data"], augment=cfg["augment"], progress=False, summary=False)
            train, test = examples.split_by_game(cfg["test_fraction"], cfg["seed"])
            loaded[key] = train.won, test.won
        train_won, test_won = loaded[key]
        won_loss = cfg["net"].get("won_loss", "squared")
        row = last_test_row(run)
        figures[str(run)] = {
            "won_loss": won_loss,
            "value_share": cfg.get("value_share", 1.0),
            "value_weight": cfg["net"].get("value_weight", 1.0),
            "step": int(row["step"]),
            "test_rows": len(test_won),
            "train_won_share": round(float((train_won > 0).mean()), 4),
            "test_won_share": round(float((test_won > 0).mean()), 4),
            "won": round(float(row["won"]), 4),
            "constant": round(constant_error(train_won, test_won, won_loss), 4),
            "moves": round(float(row["moves"]), 4),
        }
        f = figures[str(run)]
        better = "below" if f["won"] < f["constant"] else "not below"
        print(
            f"{run}: won {f['won']:.3f} against the constant's {f['constant']:.3f} ({better}); moves {f['moves']:.3f}"
        )
    path = report(args.name, {"runs": [str(r) for r in args.runs]}, figures, echo=False)
    print(f"-> {path}")
    return path


if __name__ == "__main__":
    main()
