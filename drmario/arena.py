"""The evaluation arena: agents play the same fixed (seed, level) games; results per agent and level."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .agents import Agent, GameSpec, play_lockstep
from .files import write_atomic
from .game import DEFAULT_STALL_LIMIT, Game, GameRecord
from .level import MAX_SEED, MIN_SEED

ARENA_COLUMNS = [
    "agent",
    "level",
    "games",
    "clear_rate",
    "mean_viruses_cleared",
    "pills_per_virus",
    "topout_rate",
    "stalemate_rate",
    "ms_per_move",
]


def evaluation_games(levels: Sequence[int], games_per_level: int, seed: int = 2024) -> list[GameSpec]:
    """A fixed list of games: `games_per_level` NES seeds per level, drawn from `seed`."""
    rng = np.random.default_rng(seed)
    specs = []
    for level in levels:
        for s in rng.choice(np.arange(MIN_SEED, MAX_SEED + 1), games_per_level, replace=False):
            specs.append(GameSpec(len(specs), int(s), int(level)))
    return specs


def save_games(specs: Sequence[GameSpec], path: str | Path) -> None:
    """Write the games as a JSON list of [index, seed, level] rows (atomically)."""
    write_atomic(path, json.dumps([list(s) for s in specs]) + "\n")


def load_games(path: str | Path) -> list[GameSpec]:
    try:
        return [GameSpec(*map(int, row)) for row in json.loads(Path(path).read_text())]
    except (ValueError, TypeError) as e:
        raise ValueError(f"{path}: expected a JSON list of [index, seed, level] rows: {e}") from e


AGENT_SPECS = (
    "random, greedy, mcts[:simulations], mcts-greedy[:simulations] (round 0, greedy rollouts), "
    "policy:CHECKPOINT (the network alone), net-mcts:CHECKPOINT[:simulations] (PUCT), dqn:CHECKPOINT, td:CHECKPOINT"
)


def make_agent(spec: str, device: str = "cpu") -> Agent:
    """An agent from a short spec (`AGENT_SPECS`), e.g. "mcts:200" or
    "net-mcts:runs/x/train0/checkpoints/latest.pt:100"."""
    from .agents import GreedyAgent, PolicyAgent, RandomAgent, SearchAgent
    from .search import SearchConfig

    kind, _, rest = spec.partition(":")
    path, _, sims = rest.partition(":") if kind == "net-mcts" else (rest, "", "")
    if kind in ("mcts", "mcts-greedy"):
        n = int(rest or 100)
        policy = "greedy" if kind == "mcts-greedy" else "random"
        return SearchAgent(SearchConfig(simulations=n, root_rollouts=1, rollout_policy=policy), name=f"{kind}-{n}")
    if kind in ("random", "greedy"):
        return RandomAgent() if kind == "random" else GreedyAgent()
    if not path:
        raise ValueError(f"agent {spec!r}: unknown, or a checkpoint is missing; agents: {AGENT_SPECS}")
    if kind in ("policy", "net-mcts"):
        from .net import load_player

        player = load_player(path, device)
        if kind == "policy":
            return PolicyAgent(player, name="net-policy")
        n = int(sims or 100)
        return SearchAgent(
            SearchConfig(mode="puct", simulations=n, dirichlet_fraction=0.0), player, name=f"net-mcts-{n}"
        )
    if kind == "dqn":
        from .baselines import DQNAgent

        return DQNAgent.load(path, device=device)
    if kind == "td":
        from .baselines import TDAgent

        return TDAgent.load(path)
    raise ValueError(f"agent {spec!r}: unknown kind {kind!r}; agents: {AGENT_SPECS}")


def summarize(records: Sequence[GameRecord], agent: str | None = None) -> pd.DataFrame:
    """One row per level: clear rate, viruses cleared, pills per virus, top-out and stalemate rates,
    milliseconds per move. Unfinished games (max_pills) count as neither cleared nor lost."""
    rows = []
    for r in records:
        rows.append(
            {
                "agent": agent or r.meta.get("agent", "?"),
                "level": r.level,
                "won": r.outcome == "won",
                "topped_out": r.outcome == "topped_out",
                "stalemate": r.outcome == "stalemate",
                "viruses_cleared": r.viruses_cleared,
                "pills": r.pills_used,
                "seconds": r.meta.get("seconds", np.nan),
            }
        )
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=ARENA_COLUMNS)
    grouped = df.groupby(["agent", "level"], sort=True)
    out = grouped.agg(
        games=("won", "size"),
        clear_rate=("won", "mean"),
        mean_viruses_cleared=("viruses_cleared", "mean"),
        topout_rate=("topped_out", "mean"),
        stalemate_rate=("stalemate", "mean"),
        pills=("pills", "sum"),
        viruses=("viruses_cleared", "sum"),
        seconds=("seconds", "sum"),
    ).reset_index()
    out["pills_per_virus"] = out["pills"] / out["viruses"].where(out["viruses"] > 0)
    out["ms_per_move"] = 1000 * out["seconds"] / out["pills"]
    return out[ARENA_COLUMNS]


def arena(
    agents: Sequence[Agent],
    games: Sequence[GameSpec],
    *,
    lockstep: int = 16,
    seed: int = 0,
    stall_limit: int | None = DEFAULT_STALL_LIMIT,
    max_pills: int = 1000,
    progress: bool = True,
) -> tuple[pd.DataFrame, dict[str, list[GameRecord]]]:
    """Every agent plays every game. Returns the table (`ARENA_COLUMNS`, one row per agent and
    level) and the game records per agent."""
    from tqdm.auto import tqdm

    from .search import Position

    records = {}
    for agent in tqdm(agents, desc="arena", disable=not progress):
        # One untimed decision first, so compilation and caches do not count in ms_per_move.
        first = games[0]
        agent.choose([Position.of(Game(first.seed, first.level))], [0])
        records[agent.name] = play_lockstep(
            agent, games, lockstep=lockstep, base_seed=seed, stall_limit=stall_limit, max_pills=max_pills
        )
    table = pd.concat([summarize(r, name) for name, r in records.items()], ignore_index=True)
    return table, records
