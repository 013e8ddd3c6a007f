"""Self-play generation: games searched move by move, written as training examples.

A run directory holds ``selfplay.json`` (the settings) and, per shard of games, under
``examples/``: ``shard-NNNNNN.jsonl.gz`` (the examples) and its ``.meta.json`` sidecar (settings,
code version, and one entry per game: index, seed, level, outcome, first line, count); and under
``records/``: ``shard-NNNNNN.jsonl`` (the game records, for replay). Shards are written atomically, so an
interrupted run loses at most the shards in progress; running again skips the games already written
and plays the rest, with the same seeds, so the result is the same as an uninterrupted run.

A shard's sidecar carries the sha256 of its examples file and of its records file (``sha256``). On
resume, a shard whose files do not match (cut short, changed) is not trusted: its files are moved
aside (``*.damaged``) and its games are played again. A run directory has one owner
(`drmario.files.lock_run_dir`): a second ``generate`` on it is refused at once. Worker processes die
with the process that started them, and a dead worker or inference server ends the run with an error
that names it (`drmario.files.RunError`); the shards already written are kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from drmario.engine.game import DEFAULT_STALL_LIMIT, GameRecord
from drmario.engine.level import MAX_LEVEL, TRAINING_SEEDS
from drmario.files import (
    RunError,
    append_csv,
    die_with_parent,
    file_sha256,
    lock_run_dir,
    remove_stray_temp,
    write_atomic,
)
from drmario.learn.example_files import decode_file, read_sidecar, sidecar_path, write_examples
from drmario.learn.examples import game_examples
from drmario.play.agents import SearchAgent
from drmario.play.lockstep import GameSpec, play_lockstep
from drmario.search.searcher import NO_NETWORK, Evaluator, SearchConfig
from drmario.settings import Settings, setting

SHARDS = "examples"
RECORDS = "records"


@dataclass(frozen=True)
class SelfPlayConfig(Settings):
    """Settings of a self-play run (recorded in selfplay.json and in every shard's sidecar)."""

    games: int = setting(64, "games in the run", ge=1, le=10**7)
    levels: list[int] = setting(
        [0, 2, 4, 6, 8, 10], "virus levels; game i plays levels[i % len(levels)]", ge=0, le=MAX_LEVEL
    )
    seed: int = setting(0, "fixes every game's NES seed and every search", ge=0)
    pill_mode: Literal["nes", "iid"] = setting("nes", "the pill sequence: the NES list of the level, or i.i.d. pills")
    stall_limit: int | None = setting(
        DEFAULT_STALL_LIMIT, "a game ends in a stalemate after this many pills that clear no virus (None: never)", ge=1
    )
    stalemate_won: Literal[-1, 1] = setting(
        1, "the won target of a stalemate: +1 as the design note says, or -1 to teach that stalling loses"
    )
    max_pills: int = setting(400, "a game still running after this many pills is stopped (no examples)", ge=1, le=10**5)
    search: SearchConfig = setting(SearchConfig(), "the search that chooses every move")
    network: str | None = setting(None, "network checkpoint for a search with a network (mode puct or gumbel)")
    device: str = setting("cpu", "where the network runs: auto (cuda if available), cpu, cuda or cuda:N")
    temperature: float = setting(1.0, "moves are sampled from target ** (1 / temperature) ...", ge=0)
    temperature_moves: int = setting(
        0, "... for this many first pills of each game, then the best move is played", ge=0
    )
    games_per_shard: int = setting(16, "games per example file (also how many are played in lockstep)", ge=1, le=4096)
    workers: int = setting(1, "search processes", ge=1, le=1024)
    inference: Literal["local", "server"] = setting(
        "local", "local: each process runs its own network copy; server: one inference process on device serves all"
    )

    def check(self) -> list[str]:
        problems = []
        if not self.levels:
            problems.append("levels = []: expected at least one level")
        if self.search.mode not in NO_NETWORK and not self.network:
            problems.append(f"network = None: search mode {self.search.mode!r} needs a network checkpoint")
        if self.inference == "server" and self.search.mode in NO_NETWORK:
            problems.append("inference = 'server': needs a search with a network")
        return problems

    def game_specs(self) -> list[GameSpec]:
        """Game i: level levels[i % len(levels)], NES seed drawn from (seed, i)."""
        specs = []
        for i in range(self.games):
            nes_seed = int(np.random.default_rng([self.seed, i]).choice(TRAINING_SEEDS))
            specs.append(GameSpec(i, nes_seed, self.levels[i % len(self.levels)]))
        return specs


def _shard_path(run_dir: Path, first: int) -> Path:
    return run_dir / SHARDS / f"shard-{first:06d}.jsonl.gz"


def _records_path(shard: Path) -> Path:
    return shard.parent.parent / RECORDS / shard.name.replace(".jsonl.gz", ".jsonl")


def _shard_files(shard: Path) -> dict[str, Path]:
    return {"examples": shard, "records": _records_path(shard)}


def _seal(shard: Path) -> None:
    """Add the sha256 of the shard's examples and records files to its sidecar (written last: a
    shard cut before this is checked by reading it whole, `shard_problem`)."""
    side = read_sidecar(shard) or {}
    side["sha256"] = {kind: file_sha256(path) for kind, path in _shard_files(shard).items()}
    write_atomic(sidecar_path(shard), json.dumps(side, indent=1) + "\n")


def shard_problem(shard: str | Path) -> str | None:
    """What is wrong with a written shard, or None if it can be trusted: its files must match the
    sha256 in its sidecar; a shard without them (written before checksums, or cut off before its
    sidecar was sealed) must read whole, with the example and game counts its sidecar says."""
    shard = Path(shard)
    try:
        side = read_sidecar(shard)
    except ValueError as e:
        return str(e)
    if side is None:
        return f"{sidecar_path(shard)} is missing"
    files = _shard_files(shard)
    sums = side.get("sha256")
    if isinstance(sums, dict):
        for kind, path in files.items():
            if not path.is_file():
                return f"{path} is missing"
            if file_sha256(path) != sums.get(kind):
                return f"{path} does not match the sha256 in {sidecar_path(shard).name} (cut short or changed)"
        return None
    try:
        _, report = decode_file(shard, "skip")
        games = len(files["records"].read_text().splitlines()) if files["records"].is_file() else None
    except (OSError, ValueError) as e:
        return f"{shard} cannot be read: {e}"
    if report.skipped or report.examples != side.get("examples"):
        expected = side.get("examples")
        return f"{shard} reads {report.examples} examples ({report.skipped} bad lines); its sidecar says {expected}"
    if games != len(side.get("games", [])):
        return f"{files['records']} holds {games} game records, the sidecar lists {len(side.get('games', []))} games"
    return None


def set_aside_damaged(run_dir: str | Path, log: Callable[[str], None] = print) -> list[int]:
    """Check every shard in run_dir (`shard_problem`); move the files of a damaged one aside
    (``<name>.damaged``), so that its games are played again. Returns the games to replay."""
    replay: list[int] = []
    for shard in sorted((Path(run_dir) / SHARDS).glob("shard-*.jsonl.gz")):
        problem = shard_problem(shard)
        if problem is None:
            continue
        try:
            games = [int(g["index"]) for g in (read_sidecar(shard) or {}).get("games", [])]
        except (ValueError, KeyError, TypeError):
            games = []
        for path in (*_shard_files(shard).values(), sidecar_path(shard)):
            if path.exists():
                os.replace(path, path.with_name(path.name + ".damaged"))
        log(f"{shard.name} is damaged: {problem}; its {len(games)} game(s) are played again (old files: *.damaged)")
        replay += games
    return replay


def done_games(run_dir: str | Path) -> set[int]:
    """Indices of the games already written in run_dir, from the sidecars of the shards present
    (a shard's data file is renamed into place after its sidecar, so both are complete)."""
    done: set[int] = set()
    for shard in sorted((Path(run_dir) / SHARDS).glob("shard-*.jsonl.gz")):
        done.update(int(g["index"]) for g in (read_sidecar(shard) or {}).get("games", []))
    return done


def _make_agent(cfg: SelfPlayConfig) -> SearchAgent:
    evaluator: Evaluator | None = None
    if cfg.workers > 1:
        import torch

        torch.set_num_threads(1)  # one core per worker: oversubscribed OpenMP threads crawl
    if cfg.network:
        from drmario.learn.net import load_net, load_player
        from drmario.learn.train import resolve_device

        device = resolve_device(cfg.device)
        if device.type == "cuda":  # fixed shapes, CUDA graphs, overlapped halves
            from drmario.play.inference import BatchedInference

            evaluator = BatchedInference(load_net(cfg.network), str(device))
        else:
            evaluator = load_player(cfg.network, device=device)
    return SearchAgent(cfg.search, evaluator, temperature=cfg.temperature, temperature_moves=cfg.temperature_moves)


def play_shard(
    cfg_dict: dict,
    specs: list[GameSpec],
    run_dir: str,
    agent: SearchAgent | None = None,
    meta: dict | None = None,
    on_game: Callable[[], None] | None = None,
) -> dict:
    """Play one shard's games in lockstep and write it (meta: extra sidecar fields). on_game is
    called as each game ends (in a pool worker, by default, it tells the parent's progress bar).
    Returns a small summary."""
    cfg = SelfPlayConfig.from_dict(cfg_dict)
    on_game = on_game or _tell_parent
    agent = agent or _make_agent(cfg)
    start = time.perf_counter()
    finished: dict[int, tuple[GameRecord, list]] = {}

    def keep(record: GameRecord, decisions: list) -> None:
        targets = [d.target for d in decisions]
        examples = game_examples(record, targets, stalemate_won=cfg.stalemate_won) if record.outcome else []
        finished[record.meta["index"]] = (record, examples)
        on_game()

    play_lockstep(
        agent,
        specs,
        lockstep=len(specs),
        base_seed=cfg.seed,
        pill_mode=cfg.pill_mode,
        stall_limit=cfg.stall_limit,
        max_pills=cfg.max_pills,
        on_finish=keep,
    )
    ordered = [finished[s.number] for s in specs]
    shard = _shard_path(Path(run_dir), specs[0].number)
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
    _seal(shard)
    return {"games": len(specs), "positions": sum(len(e) for _, e in ordered)}


def generate(
    cfg: SelfPlayConfig, run_dir: str | Path, *, progress: bool = True, log: Callable[[str], None] = print
) -> pd.DataFrame:
    """Play the run's games not yet written in run_dir and write their shards. Returns `summary`.
    Refuses a run directory that another process works in, or that holds other settings; redoes
    damaged shards (`set_aside_damaged`; log reports them). Raises `RunError` naming the part
    that failed when a worker process or the inference server dies."""
    from tqdm.auto import tqdm

    run_dir = Path(run_dir)
    with lock_run_dir(run_dir, "self-play", log=log):
        remove_stray_temp(run_dir)  # files of writers killed mid-write (this run owns the folder now)
        settings = run_dir / "selfplay.json"
        if settings.exists():
            previous = json.loads(settings.read_text())
            if previous != json.loads(json.dumps(cfg.to_dict())):
                raise ValueError(f"{settings} holds other settings; use a new run directory or the same settings")
        else:
            write_atomic(settings, json.dumps(cfg.to_dict(), indent=1) + "\n")
        set_aside_damaged(run_dir, log)
        done = done_games(run_dir)
        todo = [s for s in cfg.game_specs() if s.number not in done]
        shards = [todo[i : i + cfg.games_per_shard] for i in range(0, len(todo), cfg.games_per_shard)]
        bar = tqdm(total=cfg.games, initial=cfg.games - len(todo), desc="self-play games", disable=not progress)
        cfg_dict = cfg.to_dict()
        if cfg.inference == "server":
            _generate_with_server(cfg, shards, run_dir, bar)
        elif cfg.workers == 1:
            agent = _make_agent(cfg)
            for specs in shards:
                play_shard(cfg_dict, specs, str(run_dir), agent, on_game=lambda: bar.update(1))
        else:
            _generate_with_pool(cfg, shards, run_dir, bar)
        bar.close()
        return summary(run_dir)


def _shard_names(shards: list[list[GameSpec]]) -> str:
    names = [f"shard-{specs[0].number:06d}" for specs in shards]
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


_games_done: Any = None  # in a worker process: the queue on which it tells the parent of each game


def _tell_parent() -> None:
    if _games_done is not None:
        _games_done.put(1)


def _worker_start(parent: int | None, games_done: Any = None) -> None:
    """A worker process: dies with its parent, tells it of each game on games_done, and its
    (silent) progress bars take a thread lock, not tqdm's default process lock, a named semaphore
    that a killed worker would leave to the resource tracker to clean up (with a "leaked
    semaphore" warning)."""
    import threading

    from tqdm.auto import tqdm

    global _games_done
    _games_done = games_done
    die_with_parent(parent)
    tqdm.set_lock(threading.RLock())


def _drain(games_done: Any, bar: Any, timeout: float = 0.0) -> None:
    """Move the games the workers finished onto the progress bar (waiting up to timeout for one)."""
    with contextlib.suppress(queue.Empty):
        bar.update(games_done.get(timeout=timeout) if timeout else games_done.get_nowait())
        while True:
            bar.update(games_done.get_nowait())


def _generate_with_pool(cfg: SelfPlayConfig, shards: list[list[GameSpec]], run_dir: Path, bar) -> None:
    """cfg.workers processes, one shard at a time each; a worker that dies (killed, out of
    memory) ends the run with a `RunError` naming the shards left unfinished."""
    ctx = _spawn()
    games_done = ctx.Queue()
    pool = ProcessPoolExecutor(
        cfg.workers, mp_context=ctx, initializer=_worker_start, initargs=(os.getpid(), games_done)
    )
    futures: dict[Future, list[GameSpec]] = {}
    try:
        futures = {pool.submit(play_shard, cfg.to_dict(), specs, str(run_dir)): specs for specs in shards}
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            _drain(games_done, bar)
            for future in finished:
                future.result()  # a worker's error, raised here
        _drain(games_done, bar, timeout=0.5)  # the last games' notes may still be in the pipe
    except BrokenProcessPool:
        unfinished = [specs for f, specs in futures.items() if not f.done() or f.exception() is not None]
        raise RunError(
            f"a self-play worker process died abruptly (killed, or out of memory?) while playing; "
            f"unfinished: {_shard_names(unfinished)}. The shards written in {run_dir} are kept: "
            "run the same command again to play the rest"
        ) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _server_worker(
    cfg_dict: dict, shards: list[list[GameSpec]], run_dir: str, handle: dict, done, parent: int | None = None
) -> None:
    """A search process of `_generate_with_server`: its shards, evaluated by the server."""
    import torch

    from drmario.play.inference import RemoteEvaluator

    _worker_start(parent, done)
    torch.set_num_threads(1)
    cfg = SelfPlayConfig.from_dict(cfg_dict)
    remote = RemoteEvaluator(handle)
    agent = SearchAgent(cfg.search, remote, temperature=cfg.temperature, temperature_moves=cfg.temperature_moves)
    try:
        for specs in shards:
            play_shard(cfg_dict, specs, run_dir, agent)  # tells done of each game
    except RunError as e:  # the server is gone: one line (the parent names the cause), no traceback
        print(f"drmario self-play: {e}", file=sys.stderr, flush=True)
        sys.exit(3)
    finally:
        remote.close()


def _generate_with_server(cfg: SelfPlayConfig, shards: list[list[GameSpec]], run_dir: Path, bar) -> None:
    """cfg.workers search processes feed one inference process; its stats go to metrics.csv. A
    dead server or worker ends the run with a `RunError` that names it (server first: the workers
    fail when it dies); the shared memory is released either way."""
    from drmario.learn.net import load_net
    from drmario.play.inference import InferenceServer

    ctx = _spawn()
    done = ctx.Queue()
    metrics = run_dir / "metrics.csv"
    assert cfg.network is not None  # checked by SelfPlayConfig: a network search
    with InferenceServer(load_net(cfg.network), cfg.workers, device=cfg.device) as server:
        procs = [
            ctx.Process(
                target=_server_worker,
                args=(cfg.to_dict(), shards[w :: cfg.workers], str(run_dir), server.handle(w), done, os.getpid()),
                name=f"search worker {w}",
                daemon=True,  # never outlives this process
            )
            for w in range(cfg.workers)
        ]
        try:
            for p in procs:
                p.start()
            server_lost = False
            while any(p.is_alive() for p in procs) or not done.empty():
                with contextlib.suppress(queue.Empty):
                    bar.update(done.get(timeout=0.5))
                for row in server.stats():
                    append_csv(metrics, row)
                if not server.process.is_alive():
                    server_lost = True
                    break
            if server_lost:
                server.process.join(1)
                code = server.process.exitcode
                running = sum(p.is_alive() for p in procs)
                raise RunError(
                    f"the inference server (pid {server.process.pid}) died ({_exit_text(code)}) while "
                    f"{running} of {len(procs)} search worker(s) were playing; the shards written in {run_dir} "
                    "are kept: run the same command again to play the rest"
                )
            for row in server.close():
                append_csv(metrics, row)
        finally:
            for p in procs:
                if p.is_alive():
                    p.terminate()
                p.join(5)
        failed = [(p.name, p.exitcode) for p in procs if p.exitcode]
        if failed:
            parts = ", ".join(f"{name} ({_exit_text(code)})" for name, code in failed)
            raise RunError(
                f"{parts} failed while the inference server was running; their traceback is in the output "
                f"above; the shards written in {run_dir} are kept: run the same command again to play the rest"
            )


def _exit_text(code: int | None) -> str:
    """'exit code 1', 'killed by SIGKILL' or 'still running' for a process's exitcode."""
    import signal

    if code is None:
        return "still running"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


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
