"""The evaluation arena: agents play the same fixed (seed, level) games; results per agent and level.

The protocol (`EvalConfig`): NES rules (no stalemate rule), games drawn
from the evaluation seeds only (`engine.level.EVALUATION_SEEDS`, never used for training or tuning),
a pill cap (2,000 by default) at which a game still running counts as a failure, and a win rate
(every virus cleared) with its Wilson 95% interval. The timing (`EvalConfig.timing`) is "free" by
default: an agent may put a pill anywhere the controls can reach at slow speed (rules section 4),
not only where a human could at the level's real drop speed; under "nes" only where a player can at
the speed setting's real speed (`Game`), and the games count their frames, so the table also gives
the median and 90th percentile of the frames a won game took to clear (NaN under free timing).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from drmario.engine.game import Game, GameRecord
from drmario.engine.level import EVALUATION_SEEDS, MAX_LEVEL
from drmario.engine.nes_timing import Speed, Timing
from drmario.files import write_atomic
from drmario.play.agents import Agent
from drmario.play.lockstep import GameSpec, play_lockstep
from drmario.settings import Settings, setting

ARENA_COLUMNS = [
    "agent",
    "level",
    "games",
    "wins",
    "win_rate",
    "ci_low",
    "ci_high",
    "cleared_fraction",
    "pills_per_virus",
    "frames_median",
    "frames_p90",
    "topout_rate",
    "capped_rate",
    "stalemate_rate",
    "ms_per_move",
]
LADDER = [0, 5, 10, 15, 20]


SPEED_WITHOUT_TIMING = "not read with timing = 'free' (the speed is for timing 'nes')"


@dataclass(frozen=True)
class EvalConfig(Settings):
    """The evaluation protocol: which games, under which rules."""

    levels: list[int] = setting(LADDER, "the levels played (the ladder)", ge=0, le=MAX_LEVEL)
    # at most one game per evaluation seed (8,191) at a level: the games are drawn without repeats
    games_per_level: int = setting(40, "games at each level but the highest", ge=1, le=len(EVALUATION_SEEDS))
    top_level_games: int = setting(
        100, "games at the highest level, where agents differ most", ge=1, le=len(EVALUATION_SEEDS)
    )
    seed: int = setting(2024, "fixes the evaluation games (drawn from the evaluation seeds)", ge=0)
    max_pills: int = setting(2000, "pill cap: a game still running after this many pills is a failure", ge=1, le=10**5)
    stall_limit: int | None = setting(None, "None: NES rules; N: a stalemate after N pills that clear no virus", ge=1)
    lockstep: int = setting(16, "games each agent plays at once (one batched decision for all)", ge=1, le=4096)
    decision_seed: int = setting(0, "seeds the agents' decisions (ties, sampling)", ge=0)
    timing: Timing = setting(
        "free",
        "free: a pill goes wherever the controls reach at slow speed (time to spare); nes: only where reached in time",
    )
    speed: Speed = setting("med", "the NES speed setting (low, med, hi) under timing nes")

    def check(self) -> list[str]:
        return [] if self.levels else ["levels = []: expected at least one level"]

    def unread(self) -> dict[str, str]:
        """`Settings.unread`: the speed under free timing."""
        return super().unread() | ({"speed": SPEED_WITHOUT_TIMING} if self.timing == "free" else {})

    def games(self) -> list[GameSpec]:
        """The fixed games of this protocol (`evaluation_games`)."""
        top = max(self.levels)
        counts = [self.top_level_games if lv == top else self.games_per_level for lv in self.levels]
        return evaluation_games(self.levels, counts, seed=self.seed)


def evaluation_games(levels: Sequence[int], games_per_level: int | Sequence[int], seed: int = 2024) -> list[GameSpec]:
    """A fixed list of games: for each level (in order), that many distinct NES seeds drawn from
    the evaluation seeds by a generator seeded with `seed`."""
    counts = [games_per_level] * len(levels) if isinstance(games_per_level, int) else list(games_per_level)
    if len(counts) != len(levels):
        raise ValueError(f"{len(counts)} game counts for {len(levels)} levels")
    rng = np.random.default_rng(seed)
    specs: list[GameSpec] = []
    for level, n in zip(levels, counts):
        for s in rng.choice(EVALUATION_SEEDS, n, replace=False):
            specs.append(GameSpec(len(specs), int(s), int(level)))
    return specs


def save_games(specs: Sequence[GameSpec], path: str | Path) -> None:
    """Write the games as a JSON list of [index, seed, level] rows (atomically)."""
    write_atomic(path, json.dumps([list(s) for s in specs]) + "\n")


def load_games(path: str | Path) -> list[GameSpec]:
    """The games `save_games` wrote; ValueError naming the file when it holds anything else."""
    try:
        return [GameSpec(*map(int, row)) for row in json.loads(Path(path).read_text())]
    except (ValueError, TypeError) as e:
        raise ValueError(f"{path}: expected a JSON list of [index, seed, level] rows: {e}") from e


def wilson(wins: int | np.ndarray, games: int | np.ndarray, z: float = 1.96) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval of a win rate (95% for z = 1.96): (low, high), each in [0, 1].

    It stays inside [0, 1] and keeps a sensible width at 0 or n wins, where the normal
    approximation collapses to a point."""
    k, n = np.asarray(wins, np.float64), np.asarray(games, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # the interval holds the win rate: at 0 or n wins the end is exactly 0 or 1, not a rounding error short of it
    return np.clip(np.minimum(centre - half, p), 0, 1), np.clip(np.maximum(centre + half, p), 0, 1)


def summarize(records: Sequence[GameRecord], agent: str | None = None) -> pd.DataFrame:
    """One row per agent and level (`ARENA_COLUMNS`): games, wins, the win rate and its Wilson 95%
    interval, the mean fraction of the level's viruses cleared, pills per virus cleared, the median
    and 90th percentile of the frames the won games took to clear (NaN without NES timing's frame
    counts, `GameRecord.frames`), and the shares of games that topped out, hit the pill cap (still
    running: a failure) or stalemated."""
    rows = []
    for r in records:
        rows.append(
            {
                "agent": agent or r.meta.get("agent", "?"),
                "level": r.level,
                "won": r.outcome == "won",
                "topped_out": r.outcome == "topped_out",
                "capped": r.outcome is None,
                "stalemate": r.outcome == "stalemate",
                "cleared_fraction": r.cleared_share,
                "viruses_cleared": r.viruses_cleared,
                "pills": r.pills_used,
                "seconds": r.meta.get("seconds", np.nan),
                "won_frames": r.frames if r.outcome == "won" and r.frames is not None else np.nan,
            }
        )
    if not rows:
        return pd.DataFrame(columns=ARENA_COLUMNS)
    out = (
        pd.DataFrame(rows)
        .groupby(["agent", "level"], sort=True)
        .agg(
            games=("won", "size"),
            wins=("won", "sum"),
            cleared_fraction=("cleared_fraction", "mean"),
            topout_rate=("topped_out", "mean"),
            capped_rate=("capped", "mean"),
            stalemate_rate=("stalemate", "mean"),
            pills=("pills", "sum"),
            viruses=("viruses_cleared", "sum"),
            seconds=("seconds", "sum"),
            frames_median=("won_frames", "median"),
            frames_p90=("won_frames", lambda f: f.quantile(0.9) if f.notna().any() else np.nan),
        )
        .reset_index()
    )
    out["wins"] = out["wins"].astype(int)
    out["win_rate"] = out["wins"] / out["games"]
    out["ci_low"], out["ci_high"] = wilson(out["wins"].to_numpy(), out["games"].to_numpy())
    out["pills_per_virus"] = out["pills"] / out["viruses"].where(out["viruses"] > 0)
    out["ms_per_move"] = 1000 * out["seconds"] / out["pills"]
    return out[ARENA_COLUMNS]


def all_levels(table: pd.DataFrame) -> pd.DataFrame:
    """One row per agent over every level of an arena table: games, wins, the win rate with its
    Wilson interval, and the mean cleared fraction (weighted by games)."""
    t = table.assign(weighted=table["cleared_fraction"] * table["games"])
    out = t.groupby("agent", sort=False).agg(games=("games", "sum"), wins=("wins", "sum"), weighted=("weighted", "sum"))
    out["win_rate"] = out["wins"] / out["games"]
    out["ci_low"], out["ci_high"] = wilson(out["wins"].to_numpy(), out["games"].to_numpy())
    out["cleared_fraction"] = out.pop("weighted") / out["games"]
    return out.reset_index()


def arena(
    agents: Sequence[Agent],
    games: Sequence[GameSpec] | None = None,
    config: EvalConfig | None = None,
    *,
    progress: bool = True,
) -> tuple[pd.DataFrame, dict[str, list[GameRecord]]]:
    """Every agent plays every game (default: the protocol's, `EvalConfig.games`) under the
    protocol's rules. Returns the table (`ARENA_COLUMNS`, one row per agent and level) and the game
    records per agent (a game stopped at the pill cap has no outcome and ``meta["unfinished"]``)."""
    from drmario.search.core import Position

    cfg = config or EvalConfig()
    games = list(cfg.games() if games is None else games)
    if not games:
        raise ValueError("arena: no games to play")
    names = [agent.name for agent in agents]
    if len(set(names)) < len(names):  # the records are kept by name: one would replace the other
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"arena: agents share the names {twice}; give each a name of its own")
    records = {}
    for agent in agents:
        # One untimed decision first, so compilation and caches do not count in ms_per_move.
        first = Game(games[0].seed, games[0].level, stall_limit=cfg.stall_limit, timing=cfg.timing, speed=cfg.speed)
        agent.choose([Position.of(first)], [0])
        records[agent.name] = play_lockstep(
            agent,
            games,
            lockstep=cfg.lockstep,
            base_seed=cfg.decision_seed,
            stall_limit=cfg.stall_limit,
            max_pills=cfg.max_pills,
            progress=f"arena: {agent.name}" if progress else None,
            timing=cfg.timing,
            speed=cfg.speed,
        )
    table = pd.concat([summarize(r, name) for name, r in records.items()], ignore_index=True)
    return table, records
