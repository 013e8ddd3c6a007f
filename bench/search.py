"""Search throughput: simulations/s and decisions/s for round 0 (rollouts, 1 and 2 worker
processes) and round N (a network evaluating the leaves of many lockstep games in one call).
Run: `python bench/search.py` (CPU: a small network; with CUDA also the design-size one).

`python bench/search.py --network apprentice` instead times one network (a shipped network's name
or a checkpoint) with the evaluation agents' search (PUCT, 100 simulations, 16 lockstep games, one
thread) in each play dtype, float32 and bfloat16 (`--dtype`): written as search-dtype-NETWORK."""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import report  # noqa: E402

import drmario as dm  # noqa: E402
from drmario.search import Position, Round0Settings, SearchConfig  # noqa: E402

POSITIONS = "levels 5/10/15, 0-7 random pills in"


def positions(count: int, seed: int = 0, levels=(5, 10, 15)) -> list[Position]:
    """Positions a few pills into games (random low placements) at mid levels."""
    rng = np.random.default_rng(seed)
    out: list[Position] = []
    while len(out) < count:
        game = dm.Game(int(rng.integers(2, 0x10000)), int(rng.choice(levels)))
        for _ in range(int(rng.integers(0, 8))):
            moves = game.legal_moves()
            trial = game.copy()
            trial.play(moves[rng.integers(len(moves))])
            if trial.over:
                break
            game = trial
        out.append(Position.of(game))
    return out


def round0_rate(cfg: SearchConfig, count: int, seed: int) -> tuple[int, int, float]:
    """(simulations, decisions, seconds) for `count` searches; simulations include the root
    placement evaluations (each a rollout)."""
    batch = positions(count, seed)
    cfg.run(batch[:1], [0])  # compile / warm up
    start = time.perf_counter()
    sims = 0
    for i, pos in enumerate(batch):
        [result] = cfg.run([pos], [i])
        sims += cfg.simulations + cfg.round0.root_rollouts * len(result.moves)
    return sims, count, time.perf_counter() - start


def network_rate(player, cfg: SearchConfig, games: int, decisions: int) -> dict:
    """Round N: `games` lockstep searches at once with player, `decisions` rounds of them."""
    timed = TimedEvaluator(player)
    batch = positions(games * decisions, seed=1)
    cfg.run(batch[:games], list(range(games)), timed)  # warm up
    timed.seconds = 0.0
    start = time.perf_counter()
    for k in range(decisions):
        cfg.run(batch[k * games : (k + 1) * games], list(range(games)), timed)
    elapsed = time.perf_counter() - start
    sims = games * decisions * cfg.simulations
    return {
        "simulations_per_s": sims / elapsed,
        "decisions_per_s": games * decisions / elapsed,
        "ms_per_decision": 1000 * elapsed / (games * decisions),
        "evaluator_busy_fraction": timed.seconds / elapsed,
        "mean_batch": timed.positions / max(timed.calls, 1),
    }


class TimedEvaluator:
    def __init__(self, player) -> None:
        self.player, self.seconds, self.calls, self.positions = player, 0.0, 0, 0

    def evaluate(self, cells, pills, previews):
        start = time.perf_counter()
        out = self.player.evaluate(cells, pills, previews)
        if self.player.device.type == "cuda":
            torch.cuda.synchronize()
        self.seconds += time.perf_counter() - start
        self.calls += 1
        self.positions += len(cells)
        return out


def random_player(net_cfg: dict, device: str):
    from drmario.learn.net import DrMarioNet, NetConfig
    from drmario.learn.player import Player

    torch.manual_seed(0)
    return Player.from_module(DrMarioNet(NetConfig(**net_cfg)), device)


def dtype_rates(network: str, games: int, decisions: int) -> None:
    """One network's PUCT search as the evaluation agents play it, in each CPU play dtype."""
    from drmario.learn.device import INFERENCE_DTYPES
    from drmario.learn.player import load_player
    from drmario.run.agents import resolve_checkpoint

    cfg = SearchConfig(mode="puct", simulations=100)
    figures: dict = {}
    for name, dtype in INFERENCE_DTYPES.items():
        player = load_player(resolve_checkpoint(network), "cpu", dtype)
        for key, value in network_rate(player, cfg, games, decisions).items():
            figures[f"{name}_{key}"] = value
    figures["bfloat16_speedup"] = figures["float32_ms_per_decision"] / figures["bfloat16_ms_per_decision"]
    settings = {"network": network, "search": cfg.to_dict(), "lockstep_games": games, "decisions": decisions}
    report(f"search-dtype-{Path(network).stem}", {**settings, "threads": 1, "positions": POSITIONS}, figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--searches", type=int, default=20, help="round-0 searches per worker")
    parser.add_argument("--simulations", type=int, default=200)
    parser.add_argument("--network", help="time only this network's search in float32 and bfloat16 (above)")
    parser.add_argument("--decisions", type=int, default=4, help="with --network: lockstep rounds timed per dtype")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.network:
        dtype_rates(args.network, 16, args.decisions)
        return

    r0 = SearchConfig(mode="round0", simulations=args.simulations, round0=Round0Settings(root_rollouts=1))
    figures: dict = {}
    sims, decisions, seconds = round0_rate(r0, args.searches, 0)
    figures["round0_1worker_simulations_per_s"] = sims / seconds
    figures["round0_1worker_decisions_per_s"] = decisions / seconds
    with ProcessPoolExecutor(2) as pool:
        start = time.perf_counter()
        parts = list(pool.map(round0_rate, [r0, r0], [args.searches] * 2, [10, 11]))
        wall = time.perf_counter() - start  # includes process start and compile-cache loading
    figures["round0_2workers_simulations_per_s"] = sum(p[0] / p[2] for p in parts)
    figures["round0_2workers_decisions_per_s"] = sum(p[1] / p[2] for p in parts)
    figures["round0_2workers_wall_s"] = wall

    device = "cuda" if torch.cuda.is_available() else "cpu"
    small = {"filters": 32, "blocks": 4}
    rn = SearchConfig(mode="puct", simulations=32)
    for games in (16, 64) if device == "cpu" else (256, 1024, 4096):
        for key, value in network_rate(random_player(small, device), rn, games, decisions=2).items():
            figures[f"roundN_small_{games}games_{key}"] = value
    if device == "cuda":
        for games in (256, 1024, 4096):
            for key, value in network_rate(random_player({}, device), rn, games, decisions=2).items():
                figures[f"roundN_design_{games}games_{key}"] = value
    report(
        "search",
        {
            "round0": r0.to_dict(),
            "roundN": rn.to_dict(),
            "small_net": small,
            "device": device,
            "positions": POSITIONS,
            "threads_per_process": 1,
        },
        figures,
        targets={"roundN_design_4096games_simulations_per_s": 20_000} if device == "cuda" else None,
    )


if __name__ == "__main__":
    main()
