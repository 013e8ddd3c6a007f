"""How long a fresh install compiles before it plays.

The kit's hot loops are numba kernels, compiled on first use and cached next to their sources; a
user's first game, and CI on a clean clone, pay that compilation once. This bench plays one short
arena (one level-0 game each for expert, expert3, mcts-16, net-mcts-16 and net-gumbel-16 with the
shipped small network, then expert and net-mcts-16 under NES timing) twice, each time in a fresh
process with NUMBA_CACHE_DIR set to the same new folder: first cold (everything compiles), then warm
(the cache loads). It reports both wall times and the seconds numba spent compiling (its compile
events, nested compiles counted once). `--source DIR` compiles another checkout's package (say, an
older commit's `git worktree`) for a before/after on the same machine. Writes
bench/results/compile-MACHINE.json (`--name`).

Run: `python bench/compile.py` (about 2 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import report

ROOT = Path(__file__).resolve().parent.parent
FREE = ["expert", "expert3", "mcts-16", "net-mcts-16", "net-gumbel-16"]
TIMED = ["expert", "net-mcts-16"]


def child(source: Path) -> None:
    """The workload, in this process: prints {"wall_s", "compile_s", "compiles"} as JSON."""
    from numba.core import event

    depth, total, count, start = [0], [0.0], [0], [0.0]

    class Timer(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            if depth[0] == 0:
                start[0] = time.perf_counter()
            depth[0] += 1
            count[0] += 1

        def on_end(self, ev: event.Event) -> None:
            depth[0] -= 1
            if depth[0] == 0:
                total[0] += time.perf_counter() - start[0]

    event.register("numba:compile", Timer())
    t0 = time.perf_counter()
    from drmario.play.arena import EvalConfig, arena
    from drmario.run.agents import make_agents

    network = str(source / "data" / "networks" / "small.pt")
    for specs, timing in ((FREE, "free"), (TIMED, "nes")):
        cfg = EvalConfig(levels=[0], games_per_level=1, top_level_games=1, timing=timing)  # type: ignore[arg-type]
        arena(make_agents(specs, network=network), config=cfg, progress=False)
    print(json.dumps({"wall_s": time.perf_counter() - t0, "compile_s": total[0], "compiles": count[0]}))


def run(source: Path, cache: str) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(source), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--source", str(source)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout whose drmario is compiled")
    parser.add_argument("--name", default="compile", help="results file: bench/results/NAME-MACHINE.json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    source = args.source.resolve()
    if args.child:
        child(source)
        return
    commit = subprocess.run(["git", "-C", str(source), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
        cold, warm = run(source, cache), run(source, cache)
    figures = {
        "first run (empty cache): seconds": round(cold["wall_s"], 1),
        "first run: seconds compiling": round(cold["compile_s"], 1),
        "first run: compilations (nested included)": cold["compiles"],
        "second run (cached): seconds": round(warm["wall_s"], 1),
        "second run: seconds compiling": round(warm["compile_s"], 1),
    }
    settings = {"source commit": commit.stdout.strip(), "free timing": FREE, "NES timing": TIMED, "level": 0}
    report(args.name, settings, figures)


if __name__ == "__main__":
    main()
