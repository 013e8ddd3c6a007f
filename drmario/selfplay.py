"""Self-play generation: games searched move by move, written as training examples.

A run directory holds ``selfplay.json`` (the settings) and, per shard of games, under
``examples/``: ``shard-NNNNNN.jsonl.gz`` (the examples) and its ``.meta.json`` sidecar (settings,
code version, and one entry per game: index, seed, level, outcome, first line, count); and under
``records/``: ``shard-NNNNNN.jsonl`` (the game records, for replay). Shards are written atomically, so an
interrupted run loses at most the shards in progress; running again skips the games already written
and plays the rest, with the same seeds, so the result is the same as an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
import queue
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .agents import GameSpec, SearchAgent, play_lockstep
from .config import Settings
from .examples import game_examples, read_sidecar, write_examples
from .files import append_csv, write_atomic
from .game import DEFAULT_STALL_LIMIT, GameRecord
from .level import MAX_LEVEL, MAX_SEED, MIN_SEED
from .search import SearchConfig

SHARDS = "examples"
RECORDS = "records"


@dataclass
class SelfPlayConfig(Settings):
    """Settings of a self-play run (recorded in selfplay.json and in every shard's sidecar)."""

    games: int = 64  # games in the run
    levels: list[int] = field(default_factory=lambda: [0, 2, 4, 6, 8, 10])  # game i plays levels[i % len]
    seed: int = 0  # fixes every game's NES seed and every search
    pill_mode: str = "nes"
    stall_limit: int | None = DEFAULT_STALL_LIMIT
    max_pills: int = 400  # a game still running after this many pills is stopped (no examples)
    search: SearchConfig = field(default_factory=SearchConfig)
    network: str | None = None  # checkpoint for round N (search.mode "puct" or "gumbel")
    device: str = "cpu"
    temperature: float = 1.0  # move sampling from the target for the first temperature_moves pills
    temperature_moves: int = 0
    games_per_shard: int = 16  # also the lockstep width inside a shard
    workers: int = 1  # search processes
    inference: str = "local"  # "local": each process evaluates with its own network copy;
    # "server": one inference process on `device` serves every search process (a GPU, many cores)

    def __post_init__(self) -> None:
        if isinstance(self.search, dict):
            self.search = SearchConfig.from_dict(self.search)
        if not self.levels or any(not 0 <= lv <= MAX_LEVEL for lv in self.levels):
            raise ValueError(f"levels must be a non-empty list of levels in 0..{MAX_LEVEL}, got {self.levels}")
        if self.games < 1 or self.games_per_shard < 1 or self.workers < 1:
            raise ValueError("games, games_per_shard and workers must be >= 1")
        if self.search.mode != "round0" and not self.network:
            raise ValueError(f"search mode {self.search.mode!r} needs a network checkpoint")
        if self.inference not in ("local", "server"):
            raise ValueError(f"inference must be 'local' or 'server', got {self.inference!r}")
        if self.inference == "server" and (self.search.mode == "round0" or self.games_per_shard > 4096):
            raise ValueError("inference='server' needs a network search and games_per_shard <= 4096")

    def game_specs(self) -> list[GameSpec]:
        """Game i: level levels[i % len(levels)], NES seed drawn from (seed, i)."""
        specs = []
        for i in range(self.games):
            nes_seed = int(np.random.default_rng([self.seed, i]).integers(MIN_SEED, MAX_SEED + 1))
            specs.append(GameSpec(i, nes_seed, self.levels[i % len(self.levels)]))
        return specs


def _shard_path(run_dir: Path, first: int) -> Path:
    return run_dir / SHARDS / f"shard-{first:06d}.jsonl.gz"


def _records_path(shard: Path) -> Path:
    return shard.parent.parent / RECORDS / shard.name.replace(".jsonl.gz", ".jsonl")


def done_games(run_dir: str | Path) -> set[int]:
    """Indices of the games already written in run_dir, from the sidecars of the shards present
    (a shard's data file is renamed into place after its sidecar, so both are complete)."""
    done = set()
    for shard in sorted((Path(run_dir) / SHARDS).glob("shard-*.jsonl.gz")):
        done.update(int(g["index"]) for g in (read_sidecar(shard) or {}).get("games", []))
    return done


def _make_agent(cfg: SelfPlayConfig) -> SearchAgent:
    evaluator = None
    if cfg.workers > 1:
        import torch

        torch.set_num_threads(1)  # one core per worker: oversubscribed OpenMP threads crawl
    if cfg.network:
        from .net import load_net, load_player

        if cfg.device.startswith("cuda"):  # fixed shapes, CUDA graphs, overlapped halves
            from .inference import BatchedInference

            evaluator = BatchedInference(load_net(cfg.network), cfg.device)
        else:
            evaluator = load_player(cfg.network, device=cfg.device)
    return SearchAgent(cfg.search, evaluator, temperature=cfg.temperature, temperature_moves=cfg.temperature_moves)


def play_shard(
    cfg_dict: dict, specs: list[GameSpec], run_dir: str, agent: SearchAgent | None = None, meta: dict | None = None
) -> dict:
    """Play one shard's games in lockstep and write it (meta: extra sidecar fields). Returns a
    small summary."""
    cfg = SelfPlayConfig.from_dict(cfg_dict)
    agent = agent or _make_agent(cfg)
    start = time.perf_counter()
    finished: dict[int, tuple[GameRecord, list]] = {}

    def keep(record: GameRecord, decisions: list) -> None:
        targets = [d.target for d in decisions]
        examples = game_examples(record, targets) if record.outcome else []
        finished[record.meta["index"]] = (record, examples)

    driver = play_lockstep
    if hasattr(agent.evaluator, "submit"):  # an asynchronous evaluator: overlap two halves
        from .inference import play_pipelined as driver
    driver(
        agent,
        specs,
        lockstep=len(specs),
        base_seed=cfg.seed,
        pill_mode=cfg.pill_mode,
        stall_limit=cfg.stall_limit,
        max_pills=cfg.max_pills,
        on_finish=keep,
    )
    ordered = [finished[s.index] for s in specs]
    shard = _shard_path(Path(run_dir), specs[0].index)
    records = _records_path(shard)
    for folder in (shard.parent, records.parent):
        folder.mkdir(parents=True, exist_ok=True)
    write_atomic(records, "".join(r.to_json() + "\n" for r, _ in ordered))  # before the shard marks them done

    games = [
        {"seed": r.seed, "level": r.level, "index": r.meta["index"], "outcome": r.outcome, "count": len(e)}
        for r, e in ordered
    ]
    meta = {"selfplay": cfg.to_dict(), "seconds": round(time.perf_counter() - start, 3), **(meta or {})}
    write_examples(shard, (ex for _, e in ordered for ex in e), meta, games=games)
    return {"games": len(specs), "positions": sum(len(e) for _, e in ordered)}


def generate(cfg: SelfPlayConfig, run_dir: str | Path, *, progress: bool = True) -> pd.DataFrame:
    """Play the run's games not yet written in run_dir and write their shards. Returns `summary`."""
    from tqdm.auto import tqdm

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    settings = run_dir / "selfplay.json"
    if settings.exists():
        previous = json.loads(settings.read_text())
        if previous != json.loads(json.dumps(cfg.to_dict())):
            raise ValueError(f"{settings} holds other settings; use a new run directory or the same settings")
    else:
        write_atomic(settings, json.dumps(cfg.to_dict(), indent=1) + "\n")
    done = done_games(run_dir)
    todo = [s for s in cfg.game_specs() if s.index not in done]
    shards = [todo[i : i + cfg.games_per_shard] for i in range(0, len(todo), cfg.games_per_shard)]
    bar = tqdm(total=cfg.games, initial=cfg.games - len(todo), desc="self-play games", disable=not progress)
    cfg_dict = cfg.to_dict()
    if cfg.inference == "server":
        _generate_with_server(cfg, shards, run_dir, bar)
    elif cfg.workers == 1:
        agent = _make_agent(cfg)
        for specs in shards:
            bar.update(play_shard(cfg_dict, specs, str(run_dir), agent)["games"])
    else:
        with ProcessPoolExecutor(cfg.workers, mp_context=_spawn()) as pool:
            futures = [pool.submit(play_shard, cfg_dict, specs, str(run_dir)) for specs in shards]
            for future in as_completed(futures):
                bar.update(future.result()["games"])
    bar.close()
    return summary(run_dir)


def _server_worker(cfg_dict: dict, shards: list[list[GameSpec]], run_dir: str, handle: dict, done) -> None:
    """A search process of `_generate_with_server`: its shards, evaluated by the server."""
    import torch

    from .inference import RemoteEvaluator

    torch.set_num_threads(1)
    cfg = SelfPlayConfig.from_dict(cfg_dict)
    remote = RemoteEvaluator(handle)
    agent = SearchAgent(cfg.search, remote, temperature=cfg.temperature, temperature_moves=cfg.temperature_moves)
    try:
        for specs in shards:
            done.put(play_shard(cfg_dict, specs, run_dir, agent)["games"])
    finally:
        remote.close()


def _generate_with_server(cfg: SelfPlayConfig, shards: list[list[GameSpec]], run_dir: Path, bar) -> None:
    """cfg.workers search processes feed one inference process; its stats go to metrics.csv."""
    from .inference import InferenceServer
    from .net import load_net

    ctx = _spawn()
    done = ctx.Queue()
    metrics = run_dir / "metrics.csv"
    with InferenceServer(load_net(cfg.network), cfg.workers, device=cfg.device) as server:
        procs = [
            ctx.Process(
                target=_server_worker,
                args=(cfg.to_dict(), shards[w :: cfg.workers], str(run_dir), server.handle(w), done),
            )
            for w in range(cfg.workers)
        ]
        for p in procs:
            p.start()
        while any(p.is_alive() for p in procs) or not done.empty():
            with contextlib.suppress(queue.Empty):
                bar.update(done.get(timeout=0.5))
            for row in server.stats():
                append_csv(metrics, row)
        for row in server.close():
            append_csv(metrics, row)
        failed = [p.exitcode for p in procs if p.exitcode]
        if failed:
            raise RuntimeError(f"{len(failed)} search process(es) failed (exit codes {failed}); see their output")


def _spawn():
    import multiprocessing

    return multiprocessing.get_context("spawn")


def read_records(run_dir: str | Path) -> list[GameRecord]:
    """Every game record written in run_dir, in game order."""
    records = []
    for path in sorted((Path(run_dir) / RECORDS).glob("shard-*.jsonl")):
        if not _shard_path(Path(run_dir), int(path.name[6:12])).exists():
            continue  # an interrupted shard: its examples were never written
        with open(path) as f:
            records += [GameRecord.from_json(line) for line in f if line.strip()]
    return sorted(records, key=lambda r: r.meta["index"])


def summary(run_dir: str | Path) -> pd.DataFrame:
    """Per level and overall: games, positions (examples), wins, top outs, stalemates,
    unfinished games, viruses cleared and pills per virus."""
    rows = []
    for r in read_records(run_dir):
        rows.append(
            {
                "level": r.level,
                "games": 1,
                "positions": r.pills_used if r.outcome else 0,
                "wins": r.outcome == "won",
                "topped_out": r.outcome == "topped_out",
                "stalemates": r.outcome == "stalemate",
                "unfinished": r.outcome is None,
                "viruses_cleared": r.viruses_cleared,
                "pills": r.pills_used,
            }
        )
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows).groupby("level").sum(numeric_only=True)
    df.loc["all"] = df.sum()
    df["pills_per_virus"] = df["pills"] / df["viruses_cleared"].where(df["viruses_cleared"] > 0)
    return df.astype({c: int for c in df.columns if c != "pills_per_virus"})
