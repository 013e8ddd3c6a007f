"""Label a folder of examples again with the expert at another depth: the same positions, values and
games, only the moves targets new (the expert's tied best moves, as DAgger labels them).

For a DAgger round labelled by a stronger teacher without replaying its games (`expert4` on a
round that `expert3` labelled, say), and to see how often the two teachers agree. Each shard is
read whole, labelled in a worker process and written atomically under --out with its games table
and its meta plus ``relabelled`` (the depth and the source file); a shard already written is
skipped, so an interrupted run resumes (or a run shared between machines: `--limit` takes the first
shards only). Writes the share of positions where the old target's best moves include one of the new
target's (agreement of the two teachers), over every shard relabelled so far, to
bench/results/NAME-MACHINE.json.

Run: ``python bench/relabel.py runs/ap-r1/round1/examples --out runs/ap-r1/round1-d4/examples --depth 4``.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import get_args

import numpy as np
from common import report

from drmario.learn.example_files import read_examples, read_sidecar, write_examples
from drmario.search.core import Position
from drmario.search.expert import ExpertDepth, expert_search


def agreeing(old: list[np.ndarray], new: list[np.ndarray]) -> int:
    """Positions whose old moves target's best moves include one of the new target's."""
    return sum(bool(np.any((a > 0) & (b > 0))) for a, b in zip(old, new, strict=True))


def relabel(job: tuple[str, str, int]) -> tuple[int, int]:
    """One shard (source, destination, depth): write it relabelled; (positions, agreeing)."""
    source, dest, depth = job
    examples, _ = read_examples(source)
    positions = [Position(ex.board.cells, ex.pill, preview=ex.preview) for ex in examples]
    results = expert_search(positions, list(range(1, len(positions) + 1)), depth=depth)
    new = [dataclasses.replace(ex, moves=r.target) for ex, r in zip(examples, results)]
    side = read_sidecar(source) or {}
    meta = {**side.get("meta", {}), "relabelled": {"depth": depth, "from": source}}
    write_examples(dest, new, meta, games=side.get("games"))
    return len(examples), agreeing([ex.moves for ex in examples], [ex.moves for ex in new])


def agreement(source: Path, dest: Path) -> tuple[int, int]:
    """A shard relabelled before: (positions, agreeing), from the two files."""
    old, new = (read_examples(path)[0] for path in (source, dest))
    return len(old), agreeing([ex.moves for ex in old], [ex.moves for ex in new])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="a folder of example shards (*.jsonl.gz)")
    parser.add_argument("--out", type=Path, required=True, help="the folder the relabelled shards go to")
    parser.add_argument("--depth", type=int, choices=get_args(ExpertDepth), default=4, help="the expert's depth")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, help="only the first LIMIT shards (by name)")
    parser.add_argument("--name", default="relabel", help="result file name")
    args = parser.parse_args()
    shards = sorted(args.source.glob("*.jsonl.gz"))[: args.limit]
    if not shards:
        raise SystemExit(f"{args.source}: no example shards (*.jsonl.gz)")
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(str(s), str(args.out / s.name), args.depth) for s in shards if not (args.out / s.name).exists()]
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        done = list(pool.map(relabel, jobs))
    seconds = time.perf_counter() - start
    positions = sum(n for n, _ in done)
    fresh = {dest for _, dest, _ in jobs}
    counts = done + [agreement(s, args.out / s.name) for s in shards if str(args.out / s.name) not in fresh]
    total, agree = sum(n for n, _ in counts), sum(a for _, a in counts)
    figures = {
        "shards": len(shards),
        "relabelled now": len(jobs),
        "positions relabelled now": positions,
        "ms per position (one core)": round(1000 * seconds * args.workers / positions, 2) if positions else None,
        "positions relabelled": total,
        "old best moves include a new best move": round(agree / max(total, 1), 4),
    }
    report(args.name, {**vars(args), "source": str(args.source), "out": str(args.out)}, figures)


if __name__ == "__main__":
    main()
