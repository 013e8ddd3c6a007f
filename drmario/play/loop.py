"""The concurrent AlphaZero loop: self-play and training at the same time (the KataGo shape).

Actors play shards of games with the newest checkpoint (round-0 search until the first one exists)
and write them to ``run_dir/examples``; the learner reads each new shard once, trains on a sliding
window of the newest examples, and writes checkpoints to ``run_dir/train/checkpoints`` that the
actors pick up for their next shard. The learner never trains more than `steps_per_example` steps
per example played, so it cannot run far ahead of the data.

Everything passes through files in run_dir (atomic shards and checkpoints), so the same loop runs
with local worker processes (``executor="process"``) or Ray actors (``executor="ray"``, also across
machines when run_dir is on a shared filesystem). ``run_dir/loop.csv`` logs the learner's progress
and ``run_dir/ingested.txt`` every shard it read, in order.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from drmario.files import append_csv, write_atomic
from drmario.learn.dataset import ExampleSet, load_examples
from drmario.learn.example_files import read_sidecar
from drmario.learn.train import TrainConfig, Trainer
from drmario.play.agents import SearchAgent
from drmario.play.selfplay import SHARDS, SelfPlayConfig, done_games, play_shard
from drmario.search.searcher import SearchConfig
from drmario.settings import Settings, setting


@dataclass(frozen=True)
class LoopConfig(Settings):
    """Settings of a concurrent run. selfplay.games is the run's total; train.steps its cap."""

    selfplay: SelfPlayConfig = setting(SelfPlayConfig(), "the actors' self-play (search: the network search)")
    train: TrainConfig = setting(TrainConfig(), "the learner")
    bootstrap: SearchConfig = setting(
        SearchConfig(simulations=50, root_rollouts=1), "the round-0 search played before the first checkpoint"
    )
    window: int = setting(20_000, "train on the newest examples, about this many", ge=1)
    min_examples: int = setting(500, "examples before the first training step", ge=0)
    steps_per_example: float = setting(0.25, "training steps allowed per example played (the cap)", gt=0)
    chunk_steps: int = setting(50, "steps per learner update between looks for new shards", ge=1)
    actors: int = setting(2, "shards played at once", ge=1, le=1024)
    torch_threads: int = setting(1, "torch threads per process (actors and learner share the cores)", ge=0)
    max_seconds: float | None = setting(None, "stop after this long (shards in progress are finished)", gt=0)

    def check(self) -> list[str]:
        if self.bootstrap.mode != "round0":
            return [f"bootstrap.mode = {self.bootstrap.mode!r}: the search before the first checkpoint must be round0"]
        return []


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    path = Path(run_dir) / "train" / "checkpoints" / "latest.pt"
    return path if path.exists() else None


_AGENTS: dict = {}  # per worker process: the agent for the checkpoint last seen


def _agent_for(cfg: LoopConfig, run_dir: str) -> tuple[SearchAgent, int]:
    """The search agent for the newest checkpoint (round 0 before there is one) and its step."""
    from drmario.learn.net import load_player, read_checkpoint

    path = latest_checkpoint(run_dir)
    stamp = path.stat().st_mtime_ns if path else 0
    if _AGENTS.get("stamp") != stamp or _AGENTS.get("run_dir") != run_dir:
        if path is None:
            agent, step = SearchAgent(cfg.bootstrap), 0
        else:
            step = int(read_checkpoint(path)["step"])
            player = load_player(path, device=cfg.selfplay.device)
            sp = cfg.selfplay
            agent = SearchAgent(sp.search, player, temperature=sp.temperature, temperature_moves=sp.temperature_moves)
        _AGENTS.update(stamp=stamp, run_dir=run_dir, agent=agent, step=step)
    return _AGENTS["agent"], _AGENTS["step"]


def play_shard_task(cfg_dict: dict, run_dir: str, shard: int) -> dict:
    """Actor work: play shard `shard` (games shard*G .. shard*G + G - 1) with the newest network."""
    cfg = LoopConfig.from_dict(cfg_dict)
    torch.set_num_threads(cfg.torch_threads)
    sp = cfg.selfplay
    specs = sp.game_specs()[shard * sp.games_per_shard : (shard + 1) * sp.games_per_shard]
    agent, step = _agent_for(cfg, run_dir)
    # The shard's own settings say which search made it (round 0 until the first checkpoint).
    network = str(latest_checkpoint(run_dir)) if step else None
    sp_dict = {**sp.to_dict(), "search": agent.config.to_dict(), "network": network}
    summary = play_shard(sp_dict, specs, run_dir, agent, meta={"checkpoint_step": step, "pid": os.getpid()})
    return {**summary, "shard": shard, "checkpoint_step": step}


class Learner:
    """Reads new shards once each, keeps the newest `window` examples, trains within the cap."""

    def __init__(self, cfg_dict: dict, run_dir: str) -> None:
        self.cfg = LoopConfig.from_dict(cfg_dict)
        torch.set_num_threads(self.cfg.torch_threads)
        self.run_dir = Path(run_dir)
        self.trainer = Trainer(self.cfg.train, self.run_dir / "train")
        self.shards: list[tuple[str, ExampleSet]] = []  # (name, examples), oldest first, within the window
        self.seen = 0  # examples ever ingested (this process and, from ingested.txt, earlier ones)
        self.ingested_path = self.run_dir / "ingested.txt"
        self.ingested: list[str] = self.ingested_path.read_text().split() if self.ingested_path.exists() else []
        self._window_changed = False
        self._next_game_id = 0
        # A resumed run counts every shard read before and reloads the newest ones for its window.
        newest: list[str] = []
        in_window = 0
        for name in reversed(self.ingested):
            count = (read_sidecar(self.run_dir / SHARDS / name) or {}).get("examples", 0)
            self.seen += count
            if in_window < self.cfg.window:
                newest.insert(0, name)
                in_window += count
        for name in newest:
            self._add(name)

    def _add(self, name: str) -> int:
        examples = load_examples(self.run_dir / SHARDS / name, progress=False)
        examples.game = examples.game + self._next_game_id  # distinct game ids across shards
        self._next_game_id = int(examples.game.max(initial=self._next_game_id - 1)) + 1
        self.shards.append((name, examples))
        while len(self.shards) > 1 and sum(len(e) for _, e in self.shards[1:]) >= self.cfg.window:
            self.shards.pop(0)  # the window keeps the newest examples
        self._window_changed = True
        return len(examples)

    def _ingest(self, names: list[str]) -> None:
        for name in names:
            self.seen += self._add(name)
            with open(self.ingested_path, "a") as f:
                f.write(name + "\n")
            self.ingested.append(name)

    def new_shards(self) -> list[str]:
        """Complete shards not read yet, oldest first (a data file exists only once complete)."""
        done = set(self.ingested)
        paths = sorted((self.run_dir / SHARDS).glob("shard-*.jsonl.gz"), key=lambda p: p.stat().st_mtime_ns)
        return [p.name for p in paths if p.name not in done]

    @property
    def allowed_steps(self) -> int:
        if self.seen < self.cfg.min_examples:
            return 0
        return min(self.cfg.train.steps, int(self.cfg.steps_per_example * self.seen))

    def update(self) -> dict:
        """Ingest new shards, then train one chunk if the cap allows. Returns the learner's state."""
        self._ingest(self.new_shards())
        trainer, trained = self.trainer, 0
        target = min(self.allowed_steps, trainer.step + self.cfg.chunk_steps)
        if target > trainer.step:
            if self._window_changed:
                window = ExampleSet.concat([e for _, e in self.shards])
                trainer.set_data(*window.split_by_game(self.cfg.train.test_fraction, self.cfg.train.seed), restart=True)
                self._window_changed = False
            before = trainer.step
            result = trainer.run(target)
            trained = trainer.step - before
            if result.stopped:
                raise RuntimeError(f"training stopped: {result.stopped}")
        state = {
            "time": round(time.time(), 3),
            "step": trainer.step,
            "trained": trained,
            "examples_seen": self.seen,
            "window": sum(len(e) for _, e in self.shards),
            "shards_ingested": len(self.ingested),
            "allowed_steps": self.allowed_steps,
            "loss": trainer.last_train.get("loss", float("nan")),
        }
        if trained:
            append_csv(self.run_dir / "loop.csv", state)
        return state


def run_loop(cfg: LoopConfig, run_dir: str | Path, *, executor: str = "process", progress: bool = True) -> dict:
    """Run self-play and training together until every game is played and the learner has used
    its allowance (or max_seconds pass). Resumes a run in run_dir. Returns the learner's state."""
    from tqdm.auto import tqdm

    run_dir = Path(run_dir)
    (run_dir / SHARDS).mkdir(parents=True, exist_ok=True)
    settings = run_dir / "loop.json"
    cfg_dict = json.loads(json.dumps(cfg.to_dict()))
    if settings.exists() and json.loads(settings.read_text()) != cfg_dict:
        raise ValueError(f"{settings} holds other settings; use a new run directory or the same settings")
    write_atomic(settings, json.dumps(cfg_dict, indent=1) + "\n")
    sp = cfg.selfplay
    n_shards = -(-sp.games // sp.games_per_shard)
    done = done_games(run_dir)
    todo = [k for k in range(n_shards) if not set(range(k * sp.games_per_shard, (k + 1) * sp.games_per_shard)) <= done]
    pool = _Pool(executor, cfg.actors)
    start = time.time()
    bar = tqdm(total=n_shards, initial=n_shards - len(todo), desc="loop shards", disable=not progress)
    try:
        learner = pool.learner(cfg_dict, str(run_dir))
        running: dict = {}
        while True:
            out_of_time = cfg.max_seconds is not None and time.time() - start > cfg.max_seconds
            while todo and len(running) < 2 * cfg.actors and not out_of_time:  # two in flight per actor
                k = todo.pop(0)
                running[pool.submit(cfg_dict, str(run_dir), k)] = k
            for handle in pool.finished(list(running)):
                pool.result(handle)
                del running[handle]
                bar.update(1)
            state = pool.update(learner)
            if not running and (not todo or out_of_time):
                state = pool.update(learner)  # the last shards
                if out_of_time or state["step"] >= min(state["allowed_steps"], cfg.train.steps):
                    break
            if not state["trained"]:
                time.sleep(0.05)
    finally:
        bar.close()
        pool.close()
    return state


class _Pool:
    """Shard tasks and the learner on local processes or Ray, behind one small interface."""

    def __init__(self, executor: str, actors: int) -> None:
        if executor not in ("process", "ray"):
            raise ValueError(f"executor must be 'process' or 'ray', got {executor!r}")
        self.kind = executor
        if executor == "ray":
            import ray

            if not ray.is_initialized():
                ray.init(num_cpus=max(actors + 1, 2), include_dashboard=False, log_to_driver=False)
            self.ray = ray
            self.task = ray.remote(num_cpus=1)(play_shard_task)
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self.executor = ProcessPoolExecutor(actors, mp_context=multiprocessing.get_context("spawn"))

    def learner(self, cfg_dict: dict, run_dir: str):
        if self.kind == "ray":
            return self.ray.remote(num_cpus=1)(Learner).remote(cfg_dict, run_dir)
        return Learner(cfg_dict, run_dir)

    def update(self, learner) -> dict:
        return self.ray.get(learner.update.remote()) if self.kind == "ray" else learner.update()

    def submit(self, cfg_dict: dict, run_dir: str, shard: int):
        if self.kind == "ray":
            return self.task.remote(cfg_dict, run_dir, shard)
        return self.executor.submit(play_shard_task, cfg_dict, run_dir, shard)

    def finished(self, handles: list) -> list:
        if self.kind == "ray":
            ready, _ = self.ray.wait(handles, num_returns=len(handles), timeout=0) if handles else ([], [])
            return ready
        return [h for h in handles if h.done()]

    def result(self, handle) -> dict:
        return self.ray.get(handle) if self.kind == "ray" else handle.result()

    def close(self) -> None:
        if self.kind == "process":
            self.executor.shutdown(wait=True, cancel_futures=True)


def shard_games(run_dir: str | Path) -> list[int]:
    """Every game index written in run_dir's shards, with repeats if any (for checks)."""
    out: list[int] = []
    for shard in sorted((Path(run_dir) / SHARDS).glob("shard-*.jsonl.gz")):
        out += [int(g["index"]) for g in (read_sidecar(shard) or {}).get("games", [])]
    return out


def checkpoint_steps_used(run_dir: str | Path) -> np.ndarray:
    """The checkpoint step each shard was played with (0: round-0 bootstrap)."""
    steps = [
        (read_sidecar(p) or {}).get("meta", {}).get("checkpoint_step", 0)
        for p in sorted((Path(run_dir) / SHARDS).glob("shard-*.jsonl.gz"))
    ]
    return np.array(steps, int)
