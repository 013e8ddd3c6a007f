"""Tune the expert's evaluation weights by self-play on TRAINING seeds; write drmario/search/expert_weights.json.

Procedure (reproducible: every random choice comes from numpy generators seeded by --seed):

* Games: NES rules, no stalemate rule, a cap of --max-pills pills (a capped game is lost). Training
  seeds are NES seeds 2..65535 that are NOT multiples of 8 (evaluation uses the multiples of 8, so
  tuning and evaluation never share a game). Levels cycle through --levels (default 15..24).
* Objective of a weight vector on a set of games: the mean over games of
  ``0.5 * won + 0.5 * (viruses cleared / viruses) - 0.01 * min(pills used / viruses, 20)``.
  Wins and cleared viruses dominate; the small pills term breaks ties between weight vectors that
  win everything (fewer pills per virus: fewer chances to top out).
* Optimiser: a (1 + lambda) evolution strategy with common random numbers. Each iteration draws
  --games fresh training games; the parent and --children mutants all play exactly those games
  (same boards, pills and tie-break seeds), so the comparison is paired. The best child replaces the
  parent only if it scores strictly higher on them. A mutant adds ``sigma * max(|w|, 1) * N(0, 1)``
  to every weight except ``viruses``, which stays at its start value and fixes the scale (the
  player only compares scores). sigma grows by 1.25 after a success and shrinks by 0.85 otherwise.
* Final check: the start weights and the final weights on --validation games drawn separately
  from the training pool (never used during the search).

Run: ``python bench/tune_expert.py`` (default budget about 15 minutes on one core). The weights go
to ``drmario/search/expert_weights.json`` and the full record (settings, seeds, objective per iteration,
validation, wall time) to ``bench/results/tune-expert-MACHINE.json``. After each iteration the search's
state (parent, sigma, the mutation generator, the log) goes to ``--checkpoint``: an interrupted tuning rerun
with the same settings goes on from its last finished iteration and ends with the same weights.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from common import RESULTS, machine_info, machine_slug  # noqa: E402

from drmario.engine.level import TRAINING_SEEDS, new_level, virus_count  # noqa: E402
from drmario.files import write_atomic  # noqa: E402
from drmario.search import expert as E  # noqa: E402

VALIDATION_STREAM = 1_000_000  # the validation games' generator key, apart from the iterations'


class GameSet:
    """A batch of (seed, level) games in the array form `expert.play_games` takes."""

    def __init__(self, seeds: np.ndarray, levels: np.ndarray) -> None:
        if np.any(seeds % 8 == 0):
            raise ValueError("tuning games must not use evaluation seeds (multiples of 8)")
        self.seeds, self.levels = seeds.astype(np.int64), levels.astype(np.int64)
        made = [new_level(int(s), int(lv)) for s, lv in zip(self.seeds, self.levels)]
        self.starts = np.stack([m.board.cells for m in made])
        self.pills = np.stack([m.pill_array for m in made])
        self.viruses = np.array([virus_count(int(lv)) for lv in self.levels], np.float64)

    @classmethod
    def draw(cls, rng: np.random.Generator, games: int, levels: list[int]) -> GameSet:
        """games training games: distinct seeds, levels cycling through levels."""
        seeds = rng.choice(TRAINING_SEEDS, games, replace=False)
        return cls(seeds, np.array([levels[i % len(levels)] for i in range(games)]))


def play(weights: np.ndarray, games: GameSet, depth: int, max_pills: int) -> dict[str, float]:
    """Play every game with weights; the objective and its parts."""
    out = np.zeros((len(games.seeds), 3), np.int64)
    E.play_games(games.starts, games.pills, weights, depth, games.seeds, max_pills, out)
    won = (out[:, 0] == E.WON).astype(np.float64)
    cleared = out[:, 1] / games.viruses
    pills_per_virus = np.minimum(out[:, 2] / games.viruses, 20.0)
    return {
        "objective": float(np.mean(0.5 * won + 0.5 * cleared - 0.01 * pills_per_virus)),
        "win_rate": float(won.mean()),
        "cleared": float(cleared.mean()),
        "pills_per_virus": float(pills_per_virus.mean()),
        "topped_out": float(np.mean(out[:, 0] == E.TOPPED_OUT)),
    }


def mutate(rng: np.random.Generator, weights: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian step scaled to each weight's size (at least 1, so a zero weight can move)."""
    child = weights + sigma * np.maximum(np.abs(weights), 1.0) * rng.standard_normal(len(weights))
    child[E.F_VIRUSES] = weights[E.F_VIRUSES]
    return np.round(child, 6)  # the precision the weights file keeps


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=18, help="ES iterations (default 18)")
    ap.add_argument("--games", type=int, default=40, help="games per iteration, shared by all candidates")
    ap.add_argument("--children", type=int, default=4, help="mutants per iteration (lambda)")
    ap.add_argument("--sigma", type=float, default=0.3, help="initial relative mutation step")
    ap.add_argument("--levels", type=int, nargs="+", default=list(range(15, 25)))
    ap.add_argument("--depth", type=int, default=2, choices=(1, 2), help="search depth the weights are tuned for")
    ap.add_argument("--max-pills", type=int, default=2000)
    ap.add_argument("--validation", type=int, default=100, help="held-out training games for the final check")
    ap.add_argument("--seed", type=int, default=2025, help="seed of every numpy generator used")
    ap.add_argument("--start", type=Path, default=None, help="start weights JSON (default: expert.DEFAULT_WEIGHTS)")
    ap.add_argument("--out", type=Path, default=E.WEIGHTS_FILE, help="weights JSON to write")
    ap.add_argument(
        "--checkpoint",
        type=Path,
        default=RESULTS / "tune-expert-checkpoint.json",
        help="the search's state after each iteration; a rerun with the same settings resumes from it",
    )
    return ap.parse_args(argv)


def load_checkpoint(path: Path, settings: dict) -> dict | None:
    """The saved state of an interrupted tuning with these settings, or None if there is none."""
    if not path.exists():
        return None
    saved = json.loads(path.read_text())
    differ = sorted(
        k for k in settings.keys() | saved["settings"].keys() if settings.get(k) != saved["settings"].get(k)
    )
    if differ:
        raise SystemExit(
            f"{path}: an interrupted tuning with other settings ({', '.join(differ)}); "
            "rerun with its settings to resume it, or delete the file to start afresh"
        )
    print(f"resuming from {path} after iteration {len(saved['log'])}", flush=True)
    return saved


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    t0 = time.perf_counter()
    start = E.load_weights(args.start) if args.start else E.DEFAULT_WEIGHTS.copy()
    mutations = np.random.default_rng([args.seed, 1])
    parent, sigma = start.copy(), args.sigma
    log: list[dict] = []
    earlier_seconds = 0.0
    saved = load_checkpoint(args.checkpoint, settings)
    if saved is not None:
        parent, sigma, log = np.array(saved["parent"]), saved["sigma"], saved["log"]
        mutations.bit_generator.state = saved["mutations"]
        earlier_seconds = saved["seconds"]
    play(parent, GameSet.draw(np.random.default_rng(0), 1, args.levels), args.depth, 10)  # compile first
    for it in range(len(log), args.iterations):
        tic = time.perf_counter()
        games = GameSet.draw(np.random.default_rng([args.seed, 0, it]), args.games, args.levels)
        children = [mutate(mutations, parent, sigma) for _ in range(args.children)]
        base = play(parent, games, args.depth, args.max_pills)
        results = [play(c, games, args.depth, args.max_pills) for c in children]
        best = int(np.argmax([r["objective"] for r in results]))
        accepted = results[best]["objective"] > base["objective"]
        if accepted:
            parent = children[best]
        sigma = float(np.clip(sigma * (1.25 if accepted else 0.85), 0.02, 1.0))
        log.append(
            {
                "iteration": it,
                "parent": base,
                "children": [r["objective"] for r in results],
                "accepted": accepted,
                "sigma_after": sigma,
                "weights_after": parent.tolist(),
                "seeds": games.seeds.tolist(),
                "levels": games.levels.tolist(),
                "seconds": round(time.perf_counter() - tic, 2),
            }
        )
        state = {
            "settings": settings,
            "parent": parent.tolist(),
            "sigma": sigma,
            "mutations": mutations.bit_generator.state,
            "log": log,
            "seconds": earlier_seconds + time.perf_counter() - t0,
        }
        write_atomic(args.checkpoint, json.dumps(state) + "\n")
        print(
            f"iter {it:3d}  parent {base['objective']:.4f} (won {base['win_rate']:.3f}, "
            f"pills/virus {base['pills_per_virus']:.2f})  best child {results[best]['objective']:.4f}  "
            f"{'accepted' if accepted else 'kept'}  sigma {sigma:.3f}  {log[-1]['seconds']:.0f}s",
            flush=True,
        )

    validation = GameSet.draw(np.random.default_rng([args.seed, VALIDATION_STREAM]), args.validation, args.levels)
    checks = {"start": play(start, validation, args.depth, args.max_pills)}
    checks["final"] = play(parent, validation, args.depth, args.max_pills)
    wall = earlier_seconds + time.perf_counter() - t0
    for name, r in checks.items():
        print(f"validation {name}: " + "  ".join(f"{k} {v:.4f}" for k, v in r.items()))
    print(f"wall time {wall / 60:.1f} min")

    summary = {
        "objective": "mean of 0.5 * won + 0.5 * cleared fraction - 0.01 * min(pills / viruses, 20)",
        "method": "(1 + lambda) ES, common random numbers per iteration, viruses weight fixed",
        "settings": settings,
        "games_played": args.iterations * args.games * (args.children + 1) + 2 * args.validation,
        "validation": checks,
        "wall_seconds": round(wall, 1),
        "git_commit": git_commit(),
        "command": " ".join([Path(sys.executable).name, sys.argv[0], *(sys.argv[1:] if argv is None else argv)]),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    weights_file = {
        "features": list(E.FEATURES),
        "weights": [round(float(w), 6) for w in parent],
        "start_weights": start.tolist(),
        "tuning": summary,
    }
    write_atomic(args.out, json.dumps(weights_file, indent=1) + "\n")
    info = machine_info()
    RESULTS.mkdir(parents=True, exist_ok=True)
    record = RESULTS / f"tune-expert-{machine_slug(info)}.json"
    write_atomic(record, json.dumps({**weights_file, "machine": info, "iterations": log}, indent=1) + "\n")
    args.checkpoint.unlink(missing_ok=True)
    print(f"wrote {args.out} and {record}")


if __name__ == "__main__":
    main()
