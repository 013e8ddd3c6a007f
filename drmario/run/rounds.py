"""The rounds of a run: where each round's files are, which network is the best so far, and the
gate that decides it.

After training round k (02), `gate_round` plays the gating games (`play.gate`) with round k's
network and compares it, paired, with the best network of the rounds before; it writes
``train{k}/gate.json`` (the decision and its figures) and ``train{k}/gate_games.jsonl`` (the
records, so the best network's games are played once, not every round). The next round's
self-play (04) and warm start use `best_round`: the newest promoted round.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from drmario.engine.game import GameRecord
from drmario.files import write_atomic
from drmario.play.gate import GateConfig, compare, play_gate
from drmario.run.agents import make_agent

GATE_FILE = "gate.json"
GATE_GAMES = "gate_games.jsonl"


def round_dir(run_dir: str | Path, round: int) -> Path:
    """Self-play data of a round (round 0: without a network)."""
    return Path(run_dir) / f"round{round}"


def train_dir(run_dir: str | Path, round: int) -> Path:
    """The training run after a round's data."""
    return Path(run_dir) / f"train{round}"


def analysis_dir(run_dir: str | Path, round: int) -> Path:
    return Path(run_dir) / f"analysis{round}"


def checkpoint_path(run_dir: str | Path, round: int) -> Path:
    return train_dir(run_dir, round) / "checkpoints" / "latest.pt"


def read_gate(run_dir: str | Path, round: int) -> dict | None:
    """Round `round`'s gate record, or None if it has not been gated."""
    path = train_dir(run_dir, round) / GATE_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path}: cannot read the gate's record ({e}); delete it to gate round {round} again") from e


def best_round(run_dir: str | Path, before: int) -> int | None:
    """The newest round before `before` whose network was promoted (None: no round gated yet)."""
    for k in reversed(range(before)):
        gate = read_gate(run_dir, k)
        if gate is not None and gate["promoted"]:
            return k
    return None


def best_checkpoint(run_dir: str | Path, before: int) -> Path:
    """The checkpoint of `best_round` (round before - 1's when no round has been gated: a run made
    without gates)."""
    best = best_round(run_dir, before)
    return checkpoint_path(run_dir, before - 1 if best is None else best)


def _records(path: Path) -> list[GameRecord]:
    return [GameRecord.from_json(line) for line in path.read_text().splitlines() if line.strip()]


def gate_round(
    run_dir: str | Path, round: int, cfg: GateConfig, *, device: str = "cpu", log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Gate round `round`'s network against the best before it (module docstring); returns the
    record written to train{round}/gate.json. A round already gated with the same settings is not
    played again."""
    folder = train_dir(run_dir, round)
    done = read_gate(run_dir, round)
    if done is not None and done.get("config") == cfg.to_dict():
        return done
    agent = make_agent(cfg.agent, network=checkpoint_path(run_dir, round), device=device)
    records = play_gate(agent, cfg)
    write_atomic(folder / GATE_GAMES, "".join(r.to_json() + "\n" for r in records))
    best = best_round(run_dir, round)
    entry: dict[str, Any] = {"round": round, "against": best, "config": cfg.to_dict()}
    if best is None:
        wins = sum(r.outcome == "won" for r in records)
        entry.update(promoted=True, reason="the first network: nothing to beat", wins=wins, games=len(records))
    else:
        against = read_gate(run_dir, best) or {}
        if against.get("config") != cfg.to_dict():
            raise ValueError(
                f"round {best}'s network was gated with other settings ({against.get('config')}); "
                "a paired comparison needs the same gating games: use the same gate settings in a run"
            )
        result = compare(records, _records(train_dir(run_dir, best) / GATE_GAMES), cfg.alpha)
        entry.update(result.to_dict())
    write_atomic(folder / GATE_FILE, json.dumps(entry, indent=1) + "\n")
    verdict = "promoted" if entry["promoted"] else "not promoted"
    log(f"round {round}'s network is {verdict}: {entry['reason']}")
    return entry


def gate_table(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every gated round's record, in round order (for 03, 04 and the README's figures)."""
    out, k = [], 0
    while train_dir(run_dir, k).is_dir():
        gate = read_gate(run_dir, k)
        if gate is not None:
            out.append(gate)
        k += 1
    return out
