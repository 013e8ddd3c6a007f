"""Encoder and dataset throughput: input planes per second (single `encode` calls, batched
`planes` and `planes_torch`), loading 100,000 examples cold (JSON parse and validation) and from the
decoded cache, and memory. The examples are made here from random games (uniform targets over the
legal moves) in a temporary folder. Run: `python bench/data.py`."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import rate, report

import drmario as dm
from drmario.learn.encode import encode, planes, planes_torch
from drmario.learn.example_files import write_games
from drmario.learn.examples import game_examples

PER_FILE = 10_000


def make_file(args: tuple[str, int, int, int]) -> tuple[int, int]:
    """Play random games (levels 0-20, NES pills) until `count` examples, write them to path.
    Every random choice comes from np.random.default_rng([seed, index])."""
    path, count, seed, index = args
    rng = np.random.default_rng([seed, index])
    games, made = [], 0
    while made < count:
        game = dm.Game(int(rng.integers(2, 0x10000)), int(rng.integers(0, 21)))
        targets = []
        while not game.over:
            mask = game.legal_mask().astype(np.float32)
            targets.append(mask / mask.sum())  # uniform over legal moves (same-colour pairs split)
            moves = game.legal_moves()
            game.play(moves[rng.integers(len(moves))])
        record = game.record(agent="random")
        examples = game_examples(record, targets)
        games.append((record, examples))
        made += len(examples)
    write_games(path, games, {"seed": seed, "file": index, "agent": "random", "levels": "0-20", "targets": "uniform"})
    return made, len(games)


def generate(folder: Path, examples: int, seed: int) -> tuple[int, int]:
    jobs = [
        (str(folder / f"random-{i:03d}.jsonl"), min(PER_FILE, examples - i * PER_FILE), seed, i)
        for i in range((examples + PER_FILE - 1) // PER_FILE)
    ]
    with multiprocessing.Pool(min(len(jobs), os.cpu_count() or 1)) as pool:
        done = pool.map(make_file, jobs)
    return sum(d[0] for d in done), sum(d[1] for d in done)


def measure_load(folder: str) -> dict:
    """Run in a fresh process so that ru_maxrss is the loader's own peak."""
    from drmario.learn.dataset import cache_path, example_files, load_examples

    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for f in example_files(folder):
        cache_path(f).unlink(missing_ok=True)
    start = time.perf_counter()
    uncached = load_examples(folder, cache=False, progress=False)
    parse_s = time.perf_counter() - start
    del uncached
    start = time.perf_counter()
    load_examples(folder, progress=False)  # parses again and writes the caches
    cold_s = time.perf_counter() - start
    start = time.perf_counter()
    examples = load_examples(folder, progress=False)
    cached_s = time.perf_counter() - start
    n = len(examples)
    return {
        "examples": n,
        "width": int(examples.move_index.shape[1]),
        "parse_s": parse_s,
        "cold_s": cold_s,
        "cached_s": cached_s,
        "bytes_per_example": examples.nbytes / n,
        "rss_after_import_mib": base_rss,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "json_bytes": sum(f.stat().st_size for f in example_files(folder)),
        "cache_bytes": sum(cache_path(f).stat().st_size for f in example_files(folder)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=100_000, help="examples to generate and load")
    parser.add_argument("--batch", type=int, default=1024, help="positions per batched planes call")
    parser.add_argument("--seconds", type=float, default=1.0, help="minimum time per rate figure")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random games")
    parser.add_argument("--measure-load", metavar="FOLDER", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_load:
        print(json.dumps(measure_load(args.measure_load)))
        return

    import torch

    with tempfile.TemporaryDirectory(prefix="drmario-bench-data-") as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        made, games = generate(folder, args.examples, args.seed)
        generate_s = time.perf_counter() - start
        child = subprocess.run(
            [sys.executable, __file__, "--measure-load", str(folder)], capture_output=True, text=True, check=True
        )
        load = json.loads(child.stdout.strip().splitlines()[-1])

        from drmario.learn.dataset import load_examples

        examples = load_examples(folder, progress=False)
    k = min(len(examples), 4 * args.batch)
    cells, pills = examples.cells[:k], examples.pills[:k]
    boards = [dm.Board._wrap(c.copy()) for c in cells[:1000]]
    pill_objs = [dm.ALL_PILLS[3 * (int(a) - 1) + int(b) - 1] for a, b in pills[:1000]]
    t_cells, t_pills = torch.from_numpy(cells), torch.from_numpy(pills)
    b = args.batch
    offsets = range(0, k - b + 1, b)
    t = args.seconds
    figures = {
        "encode_single_per_s": rate(lambda: sum(1 for bo, p in zip(boards, pill_objs) if encode(bo, p) is not None), t),
        "planes_batched_per_s": rate(lambda: sum(len(planes(cells[o : o + b], pills[o : o + b])) for o in offsets), t),
        "planes_torch_cpu_per_s": rate(
            lambda: sum(len(planes_torch(t_cells[o : o + b], t_pills[o : o + b])) for o in offsets), t
        ),
        "examples": load["examples"],
        "games": games,
        "generate_s": generate_s,
        "load_parse_only_s": load["parse_s"],
        "load_cold_s": load["cold_s"],
        "load_cached_s": load["cached_s"],
        "load_cold_examples_per_s": load["examples"] / load["cold_s"],
        "load_cached_examples_per_s": load["examples"] / load["cached_s"],
        "bytes_per_example": load["bytes_per_example"],
        "moves_width": load["width"],
        "rss_after_import_mib": load["rss_after_import_mib"],
        "peak_rss_load_mib": load["peak_rss_mib"],
        "json_mib": load["json_bytes"] / 2**20,
        "cache_mib": load["cache_bytes"] / 2**20,
    }
    report(
        "data",
        {
            "examples": args.examples,
            "batch": args.batch,
            "files": (args.examples + PER_FILE - 1) // PER_FILE,
            "games": "random play, levels 0-20, NES pills, uniform targets over legal moves",
            "torch_threads": torch.get_num_threads(),
            "seed": args.seed,
        },
        figures,
    )


if __name__ == "__main__":
    main()
