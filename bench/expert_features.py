"""Which features of the expert's evaluation matter: each feature's weight set to 0 in turn, on
held-out TRAINING games (seeds not multiples of 8, a generator stream the tuner never draws from).

Run: ``python bench/expert_features.py [--games 200]``; prints the tuner's objective, win rate,
top-out rate and pills per virus per ablation, and writes bench/results/expert-features-MACHINE.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from common import RESULTS, machine_info, machine_slug  # noqa: E402
from tune_expert import GameSet, play  # noqa: E402

from drmario.files import write_atomic  # noqa: E402
from drmario.search import expert as E  # noqa: E402

ABLATION_STREAM = 2_000_000  # apart from the tuner's iterations and validation streams


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--games", type=int, default=200)
    ap.add_argument("--levels", type=int, nargs="+", default=list(range(15, 25)))
    ap.add_argument("--depth", type=int, default=2, choices=(1, 2))
    ap.add_argument("--max-pills", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=2025)
    ap.add_argument("--weights", type=Path, default=E.WEIGHTS_FILE)
    args = ap.parse_args()

    weights = E.load_weights(args.weights)
    games = GameSet.draw(np.random.default_rng([args.seed, ABLATION_STREAM]), args.games, args.levels)
    rows = {}
    for i, name in enumerate(("none", *E.FEATURES)):
        if name == "viruses":
            continue  # the scale anchor: without it nothing rewards clearing
        w = weights.copy()
        if name != "none":
            w[i - 1] = 0.0
        tic = time.perf_counter()
        rows[name] = play(w, games, args.depth, args.max_pills)
        r = rows[name]
        print(
            f"{'tuned weights' if name == 'none' else name + ' = 0':<18} objective {r['objective']:.4f}  "
            f"won {r['win_rate']:.3f}  topped out {r['topped_out']:.3f}  pills/virus {r['pills_per_virus']:.2f}  "
            f"({time.perf_counter() - tic:.0f}s)",
            flush=True,
        )
    info = machine_info()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"expert-features-{machine_slug(info)}.json"
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    result = {"benchmark": "expert-features", "machine": info, "settings": settings, "ablations": rows}
    write_atomic(path, json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
