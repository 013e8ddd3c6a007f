"""Self-play: games searched move by move, written as training examples (the files: `shards`;
several processes: `workers`).

`generate` plays the run's games not yet written and writes them shard by shard (`play_shard`);
running it again skips the games already written and plays the rest, with the same seeds, so the
result is the same as an uninterrupted run. A run directory has one owner
(`drmario.files.lock_run_dir`): a second ``generate`` on it is refused at once.

Each example's moves target is the search's (``labels: search``), or the expert's choice at the
same position (``labels: expert``: DAgger, the network's own games labelled by its teacher); the
value targets (won, cleared, duration) are always what followed in the game. With ``rescue_after``
the expert plays a game's stalled stretches (`agents.RescueAgent`), so an end game the network
cannot finish still ends, and the expert's way out is in the examples; a record counts those moves
in its meta ``rescued``. A game's record keeps in its meta ``search_kl``, the mean KL(target ||
network policy) over its recorded decisions: how far the search moved from the network (near 0:
the search added nothing).

With ``full_search_share`` below 1 (playout cap randomisation, KataGo's: Wu 2019, section 3.1)
only that share of decisions is searched in full and written as examples; the rest are searched
with ``fast_simulations`` and no exploration (`agents.SearchAgent`: no root noise, no temperature,
no epsilon), and are neither labelled nor written. A game then costs fewer simulations (and, with
the expert's labels, fewer labels), so the same time plays more games, each with its own outcome
for the value targets. A record keeps in its meta ``recorded``, the number of decisions written.
The examples of a game then skip decisions: `TrainConfig.bootstrap` finds no next decision after a
skipped one and keeps the game's targets there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from drmario.engine.game import DEFAULT_STALL_LIMIT, GameRecord
from drmario.engine.level import MAX_LEVEL, SELFPLAY_SEEDS
from drmario.files import (
    NETWORK_FILE,
    file_sha256,
    lock_run_dir,
    played_network,
    record_network,
    remove_stray_temp,
    write_atomic,
)
from drmario.learn.example_files import write_examples
from drmario.learn.examples import game_examples
from drmario.play.agents import Agent, Decision, PlayDtype, RescueAgent, SearchAgent, playout_cap_problem
from drmario.play.lockstep import GameSpec, play_lockstep
from drmario.play.shards import done_games, read_records, records_path, seal, set_aside_damaged, shard_path
from drmario.play.workers import run_pool, run_with_server
from drmario.search.config import SearchConfig
from drmario.search.core import Evaluator, Position
from drmario.search.expert import ExpertSettings, expert_search
from drmario.settings import Settings, differences, setting

__all__ = ["SelfPlayConfig", "generate", "play_shard", "read_records", "summary"]


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
    dtype: PlayDtype = setting(
        "auto", "the network's number format: auto (bfloat16 on CUDA, float32 on the CPU), float32 or bfloat16"
    )
    temperature: float = setting(1.0, "moves are sampled from target ** (1 / temperature) ...", ge=0)
    temperature_moves: int = setting(
        0, "... for this many first pills of each game (full searches only), then the best move is played", ge=0
    )
    epsilon: float = setting(
        0.0,
        "share of the full searches' moves played at random (exploration; each example keeps the search's target)",
        ge=0,
        le=1,
    )
    games_per_shard: int = setting(16, "games per example file (also how many are played in lockstep)", ge=1, le=4096)
    workers: int = setting(1, "search processes", ge=1, le=1024)
    inference: Literal["local", "server"] = setting(
        "local", "local: each process runs its own network copy; server: one inference process on device serves all"
    )
    labels: Literal["search", "expert"] = setting(
        "search", "each example's moves target: the search's, or the expert's at the same position (DAgger)"
    )
    full_search_share: float = setting(
        1.0,
        "playout cap randomisation (KataGo), in (0, 1]: the share of decisions searched in full and written as "
        "examples; the others are searched with --fast-simulations, without exploration (root noise, temperature, "
        "epsilon), and not written (1: off)",
        gt=0,
        le=1,
    )
    fast_simulations: int = setting(
        2, "the fast searches' simulations with --full-search-share below 1 (fewer than --simulations)", ge=0, le=10**6
    )
    rescue_after: int | None = setting(
        None,
        "after this many pills that clear no virus the expert plays on until one is cleared, its moves the targets "
        "(end games the network cannot finish still end and teach the way out); None: never. One round from the "
        "shipped network (bench/one_round.py, rescue_after 20): no better than without it (search with 100 "
        "simulations 96 and 95 of 100 evaluation games, 3 at the pill cap each, against 97, 99, 96 over 3 trainings)",
        ge=1,
    )

    def check(self) -> list[str]:
        problems = []
        if not self.levels:
            problems.append("levels = []: expected at least one level")
        if self.search.needs_network and not self.network:
            problems.append(f"network = None: search mode {self.search.mode!r} needs a network checkpoint")
        capped = playout_cap_problem(self.search, self.full_search_share, self.fast_simulations)
        if capped:
            problems.append(capped)
        if self.inference == "server" and not self.search.needs_network:
            problems.append("inference = 'server': needs a search with a network")
        if self.rescue_after is not None and self.stall_limit is not None and self.rescue_after >= self.stall_limit:
            problems.append(
                f"rescue_after = {self.rescue_after}: expected fewer pills than stall_limit ({self.stall_limit}), "
                "or the stalemate ends the game first"
            )
        return problems

    def unread(self) -> dict[str, str]:
        """The settings this self-play never reads (`Settings.unread`): the search's that its mode does not
        read (`SearchConfig.unread`; the expert's are read for its labels and rescues too), and those of
        switches that are off. (A network given to a mode without one is still checked and loaded.)"""
        unread = super().unread()
        if self.labels == "expert" or self.rescue_after is not None:
            unread.pop("search.expert", None)
        if self.full_search_share == 1:
            unread["fast_simulations"] = "not read with full_search_share = 1 (every decision searched in full)"
        if self.temperature_moves == 0:
            unread["temperature"] = "not read with temperature_moves = 0 (no move sampled)"
        if self.stall_limit is None:
            unread["stalemate_won"] = "not read with stall_limit = None (no stalemates)"
        return unread

    def game_specs(self) -> list[GameSpec]:
        """Game i: level levels[i % len(levels)], NES seed drawn from (seed, i) among the
        self-play seeds (`level.SELFPLAY_SEEDS`: neither evaluation nor gating games). Each draw is
        independent, so a game can repeat another of the run or of another run: among the 49,151
        seeds, 6 of the CPU profile's 2,000 round-0 games repeat one of them, and 3 of round 1's 600
        are round-0 games (measured; changing the draw would change every run's games)."""
        specs = []
        for i in range(self.games):
            nes_seed = int(np.random.default_rng([self.seed, i]).choice(SELFPLAY_SEEDS))
            specs.append(GameSpec(i, nes_seed, self.levels[i % len(self.levels)]))
        return specs


def make_agent(cfg: SelfPlayConfig, evaluator: Evaluator | None = None) -> Agent:
    """The self-play agent of cfg: its search, with evaluator or else cfg's network loaded here
    (with `rescue_after`, the expert playing its stalled stretches)."""
    if evaluator is None and cfg.network:
        import torch  # only a search with a network needs it

        from drmario.learn.device import resolve_device, resolve_dtype
        from drmario.learn.player import load_player

        if cfg.workers > 1:
            torch.set_num_threads(1)  # one core per worker: oversubscribed OpenMP threads crawl
        device, dtype = resolve_device(cfg.device), resolve_dtype(cfg.dtype)
        if device.type == "cuda":  # fixed shapes, CUDA graphs, overlapped halves
            from drmario.learn.checkpoint import load_net
            from drmario.play.inference import BatchedInference

            evaluator = BatchedInference(load_net(cfg.network), str(device), dtype=dtype)
        else:
            evaluator = load_player(cfg.network, device=device, dtype=dtype)
    agent = SearchAgent(
        cfg.search,
        evaluator,
        temperature=cfg.temperature,
        temperature_moves=cfg.temperature_moves,
        epsilon=cfg.epsilon,
        full_search_share=cfg.full_search_share,
        fast_simulations=cfg.fast_simulations,
    )
    if cfg.rescue_after is None:
        return agent
    expert = SearchAgent(SearchConfig(mode="expert", expert=cfg.search.expert), name="expert")
    return RescueAgent(agent, expert, cfg.rescue_after)


def _targets(
    record: GameRecord, decisions: list[Decision], labels: str, seed: int, expert: ExpertSettings
) -> list[np.ndarray | None]:
    """The moves targets of a finished game's decisions: the search's, or the expert's (with the
    run's expert settings) at the same positions; None for a decision not recorded."""
    if labels == "search":
        return [d.target if d.recorded else None for d in decisions]
    recorded = [i for i, d in enumerate(decisions) if d.recorded]
    steps = list(record.steps())
    positions = [Position.of(steps[i][0]) for i in recorded]
    labelled = expert_search(positions, [seed + i for i in recorded], **expert.to_dict())
    targets: list[np.ndarray | None] = [None] * len(decisions)
    for i, r in zip(recorded, labelled):
        targets[i] = r.target
    return targets


def _mean_kl(decisions: list[Decision]) -> float | None:
    kls = [d.search.kl() for d in decisions if d.recorded and d.search is not None and d.search.visits.any()]
    return round(float(np.mean(kls)), 5) if kls else None


def play_shard(
    cfg_dict: dict,
    specs: list[GameSpec],
    run_dir: str,
    *,
    evaluator: Evaluator | None = None,
    agent: Agent | None = None,
    on_game: Callable[[], None] | None = None,
    meta: dict | None = None,
) -> dict:
    """Play one shard's games in lockstep and write it (`shards`). The agent is `agent`, or made
    from the settings (with `evaluator`, else the settings' network); on_game() is called as each
    game ends; meta: extra sidecar fields. Returns a small summary."""
    cfg = SelfPlayConfig.from_dict(cfg_dict)
    agent = agent or make_agent(cfg, evaluator)
    start = time.perf_counter()
    finished: dict[int, tuple[GameRecord, list]] = {}

    def keep(record: GameRecord, decisions: list[Decision]) -> None:
        kl = _mean_kl(decisions) if cfg.search.needs_network else None  # (a network's KL only)
        if kl is not None:
            record.meta["search_kl"] = kl
        if cfg.full_search_share < 1:
            record.meta["recorded"] = sum(d.recorded for d in decisions)
        if cfg.rescue_after is not None:
            record.meta["rescued"] = sum(game.stall >= cfg.rescue_after for game, _, _ in record.steps())
        examples = []
        if record.outcome:
            seed = cfg.seed * 1_000_003 + record.meta["index"]
            targets = _targets(record, decisions, cfg.labels, seed, cfg.search.expert)
            examples = game_examples(record, targets, stalemate_won=cfg.stalemate_won)
        finished[record.meta["index"]] = (record, examples)
        if on_game is not None:
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
    shard = shard_path(Path(run_dir), specs[0].number)
    records = records_path(shard)
    for folder in (shard.parent, records.parent):
        folder.mkdir(parents=True, exist_ok=True)
    write_atomic(records, "".join(r.to_json() + "\n" for r, _ in ordered))  # before the shard marks them done
    games = [
        {"seed": r.seed, "level": r.level, "index": r.meta["index"], "outcome": r.outcome, "count": len(e)}
        for r, e in ordered
    ]
    sidecar = {"selfplay": cfg.to_dict(), "seconds": round(time.perf_counter() - start, 3), **(meta or {})}
    write_examples(shard, (ex for _, e in ordered for ex in e), sidecar, games=games)
    seal(shard)
    return {"games": len(specs), "positions": sum(len(e) for _, e in ordered)}


def _check_same_settings(path: Path, cfg: SelfPlayConfig) -> None:
    """ValueError unless the run's stored settings (path) are cfg's, naming each that differs, but
    for the worker processes (how the games are shared out, not which are played: a run begun on 2
    cores may resume on 16). A setting added to the kit since the run began is absent there and counts as its default,
    so an interrupted run resumes after an upgrade."""
    try:
        stored = SelfPlayConfig.from_dict(json.loads(path.read_text(encoding="utf-8"))).to_dict()
    except (OSError, ValueError, TypeError) as e:  # unreadable, or a setting the kit no longer has or refuses
        raise ValueError(f"{path}: cannot read the run's settings ({e}); use a new run directory") from e
    changed = differences({**stored, "workers": cfg.workers}, cfg.to_dict())
    if changed:
        raise ValueError(
            f"{path} holds other settings ({'; '.join(changed)}): use a new run directory or the same settings"
        )


def _check_same_network(run_dir: Path, cfg: SelfPlayConfig) -> None:
    """Record which weights play the run's games (run_dir/network.json, `record_network`, at its
    start), and refuse to go on with other weights at the same path (a checkpoint retrained or
    refitted since), which would mix two networks' games in one round. A run begun before the record
    was kept starts it."""
    if cfg.network is None:
        return
    if not (run_dir / NETWORK_FILE).exists():
        record_network(run_dir, cfg.network)
        return
    stored = (played_network(run_dir) or {}).get("sha256")
    if not isinstance(stored, str):
        raise ValueError(f"{run_dir / NETWORK_FILE}: cannot read which network played the run's games")
    digest = file_sha256(cfg.network)
    if stored != digest:
        raise ValueError(
            f"network = {cfg.network!r} holds other weights (sha256 {digest[:12]}...) than the ones this run's "
            f"games were played with ({stored[:12]}..., {run_dir / NETWORK_FILE}): use a new run directory, or "
            "those weights"
        )


def _check_runnable(cfg: SelfPlayConfig) -> None:
    """What would fail only once the games start: a network file that is not there, a device this
    machine lacks (FileNotFoundError, ValueError)."""
    if cfg.network is None:
        return
    if not Path(cfg.network).is_file():
        what = "a directory: give its checkpoint file (.pt)" if Path(cfg.network).is_dir() else "no such file"
        raise FileNotFoundError(f"network = {cfg.network!r}: {what}")
    from drmario.learn.device import device_problem

    problem = device_problem(cfg.device)
    if problem:
        raise ValueError(f"device = {cfg.device!r}: {problem}")


def generate(
    cfg: SelfPlayConfig, run_dir: str | Path, *, progress: bool = True, log: Callable[[str], None] = print
) -> pd.DataFrame:
    """Play the run's games not yet written in run_dir and write their shards. Returns `summary`.
    Refuses a run directory that another process works in, or that holds other settings; redoes
    damaged shards (`shards.set_aside_damaged`; log reports them). Raises `RunError` naming the part
    that failed when a worker process or the inference server dies."""
    from drmario.progress import tqdm

    run_dir = Path(run_dir)
    _check_runnable(cfg)  # before selfplay.json is written: a corrected rerun must not be refused
    with lock_run_dir(run_dir, "self-play", log=log):
        remove_stray_temp(run_dir)  # files of writers killed mid-write (this run owns the folder now)
        settings = run_dir / "selfplay.json"
        if settings.exists():
            _check_same_settings(settings, cfg)
        else:
            write_atomic(settings, json.dumps(cfg.to_dict(), indent=1) + "\n")
        _check_same_network(run_dir, cfg)
        set_aside_damaged(run_dir, log)
        done = done_games(run_dir)
        todo = [s for s in cfg.game_specs() if s.number not in done]
        shards = [todo[i : i + cfg.games_per_shard] for i in range(0, len(todo), cfg.games_per_shard)]
        bar = tqdm(total=cfg.games, initial=cfg.games - len(todo), desc="self-play games", disable=not progress)
        cfg_dict = cfg.to_dict()
        if cfg.inference == "server":
            assert cfg.network is not None  # checked by SelfPlayConfig: a network search
            run_with_server(play_shard, cfg_dict, cfg.network, cfg.device, cfg.dtype, shards, run_dir, cfg.workers, bar)
        elif cfg.workers == 1:
            agent = make_agent(cfg)
            for specs in shards:
                play_shard(cfg_dict, specs, str(run_dir), agent=agent, on_game=lambda: bar.update(1))
        else:
            run_pool(play_shard, cfg_dict, shards, run_dir, cfg.workers, bar)
        bar.close()
        return summary(run_dir)


def summary(run_dir: str | Path) -> pd.DataFrame:
    """Per level and overall: games, positions (examples), wins, top outs, stalemates,
    unfinished games, viruses cleared, pills, the pills the expert played in rescues (if any), pills
    per virus, the mean share of each game's level's viruses cleared, and the mean KL(target ||
    network policy) of the searches (NaN for the games without a network; no column when none had one)."""
    rows = []
    for r in read_records(run_dir):
        rows.append(
            {
                "level": r.level,
                "games": 1,
                "positions": r.meta.get("recorded", r.pills_used) if r.outcome else 0,
                "wins": r.outcome == "won",
                "topped_out": r.outcome == "topped_out",
                "stalemates": r.outcome == "stalemate",
                "unfinished": r.outcome is None,
                "viruses_cleared": r.viruses_cleared,
                "cleared_share": r.cleared_share,
                "pills": r.pills_used,
                "rescued": r.meta.get("rescued", 0),
                "search_kl": r.meta.get("search_kl", np.nan),
            }
        )
    if not rows:
        return pd.DataFrame()
    table = pd.DataFrame(rows)
    if not table["rescued"].any():  # a run without rescues
        table = table.drop(columns="rescued")
    if table["search_kl"].isna().all():  # a run without a network
        table = table.drop(columns="search_kl")
    means = [c for c in ("cleared_share", "search_kl") if c in table]
    df = table.drop(columns=means).groupby("level").sum(numeric_only=True)
    df.loc["all"] = df.sum()
    df["pills_per_virus"] = df["pills"] / df["viruses_cleared"].where(df["viruses_cleared"] > 0)
    df = df.astype({c: int for c in df.columns if c != "pills_per_virus"})
    for column in means:  # per game, not summed
        per_level = table.groupby("level")[column].mean()
        df[column] = [*per_level.reindex(df.index[:-1]).tolist(), table[column].mean()]
    return df
