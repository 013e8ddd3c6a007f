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
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from drmario.engine.game import GameRecord
from drmario.files import file_sha256, holds_weights, played_network, record_network, write_atomic
from drmario.play.agents import Agent
from drmario.play.arena import EvalConfig, arena, summarize
from drmario.play.gate import GateConfig, compare, play_gate
from drmario.run.agents import make_agent, make_agents, resolve_checkpoint

GATE_FILE = "gate.json"
GATE_GAMES = "gate_games.jsonl"
ROUNDS_FILE = "rounds.csv"  # `play_rounds`'s table, written into the run by bench/rounds.py


def round_dir(run_dir: str | Path, round: int) -> Path:
    """Self-play data of a round (round 0: without a network)."""
    return Path(run_dir) / f"round{round}"


def train_dir(run_dir: str | Path, round: int) -> Path:
    """The training run after a round's data."""
    return Path(run_dir) / f"train{round}"


def analysis_dir(run_dir: str | Path, round: int) -> Path:
    return Path(run_dir) / f"analysis{round}"


def numbered(run_dir: str | Path, prefix: str) -> list[int]:
    """The k of every folder run_dir/{prefix}{k}, in order."""
    found = (re.fullmatch(rf"{prefix}(\d+)", p.name) for p in Path(run_dir).iterdir() if p.is_dir())
    return sorted(int(m[1]) for m in found if m)


def values_dir(run_dir: str | Path, round: int) -> Path:
    """The values refit of a round's network (02's value_steps), a training run of its own."""
    return train_dir(run_dir, round) / "values"


def value_games_dir(run_dir: str | Path) -> Path:
    """The value games (01's value_games): games no training of the run uses, for the values refits."""
    return Path(run_dir) / "value_games"


def trained_checkpoint(run_dir: str | Path, round: int) -> Path:
    """The checkpoint of a round's training (02)."""
    return train_dir(run_dir, round) / "checkpoints" / "latest.pt"


def refit_checkpoint(run_dir: str | Path, round: int) -> Path:
    """The checkpoint of a round's values refit (02's value_steps)."""
    return values_dir(run_dir, round) / "checkpoints" / "latest.pt"


def checkpoint_path(run_dir: str | Path, round: int) -> Path:
    """Round `round`'s network: its values refit's checkpoint when it has one, else its training's."""
    refit = refit_checkpoint(run_dir, round)
    return refit if refit.is_file() else trained_checkpoint(run_dir, round)


def clear_stale_refit(run_dir: str | Path, round: int, refitting: bool) -> bool:
    """Before 02 refits round `round`'s values: remove a refit of other weights than the training's
    checkpoint holds (the training went on after it; it is made again), record the weights the refit
    starts from (values/network.json), and return whether one was removed. Without refitting, a refit
    there would stay the round's network (`checkpoint_path`): ValueError saying so."""
    refit = values_dir(run_dir, round)
    if not refitting:
        if refit_checkpoint(run_dir, round).is_file():
            raise ValueError(
                f"{refit} holds a values refit, the round's network, but value_steps = 0: delete that folder, or refit"
            )
        return False
    removed = stale_refit(run_dir, round)
    if removed:
        shutil.rmtree(refit)
    if not refit_checkpoint(run_dir, round).is_file():  # a refit about to begin: record what it starts from
        refit.mkdir(parents=True, exist_ok=True)
        record_network(refit, trained_checkpoint(run_dir, round))
    return removed


def stale_refit(run_dir: str | Path, round: int) -> bool:
    """Whether round `round` has a values refit of other weights than its training's checkpoint holds:
    the training went on after it (02 run again with more steps), so the refit is of weights that are
    gone. Judged by the sha256 the refit recorded of its start (values/network.json; a refit begun, not
    yet checkpointed, too); a refit from before that record, by file times (which a copy may reorder)."""
    refit, trained = refit_checkpoint(run_dir, round), trained_checkpoint(run_dir, round)
    if not trained.is_file():
        return False
    record = played_network(values_dir(run_dir, round))
    if record is not None:
        return not holds_weights(trained, record)
    return refit.is_file() and refit.stat().st_mtime_ns < trained.stat().st_mtime_ns


def in_run(checkpoint: str | Path) -> str:
    """A run's checkpoint path from its train<k> folder on (train0/checkpoints/latest.pt,
    train0/values/checkpoints/latest.pt): the run directory's own path means nothing elsewhere.
    A path outside any train<k> folder keeps its last three parts."""
    parts = Path(checkpoint).parts
    starts = [i for i, part in enumerate(parts) if re.fullmatch(r"train\d+", part)]
    return "/".join(parts[starts[-1] :] if starts else parts[-3:])


def round_of(checkpoint: str | Path) -> int:
    """The round whose network a run's checkpoint is (its train<k> folder); ValueError if none."""
    label = in_run(checkpoint)
    if not re.match(r"train\d+/", label):
        raise ValueError(f"{checkpoint}: not a checkpoint of a run's round (no train<k> folder)")
    return int(label.split("/")[0].removeprefix("train"))


def read_gate(run_dir: str | Path, round: int) -> dict | None:
    """Round `round`'s gate record, or None if it has not been gated."""
    path = train_dir(run_dir, round) / GATE_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path}: cannot read the gate's record ({e}); delete it to gate round {round} again") from e


def gated_as_it_is(run_dir: str | Path, round: int, gate: Mapping[str, Any]) -> bool:
    """Whether a gate record of round `round` judged the weights its network file holds now (its
    sha256; a record from before the digest was kept: yes)."""
    network = checkpoint_path(run_dir, round)
    return "sha256" not in gate or holds_weights(network, gate)


def best_round(run_dir: str | Path, before: int) -> int | None:
    """The newest round before `before` whose network, as its file holds it now, was promoted (None: no
    round gated yet). A round retrained or refitted since its gate is not a candidate until gated again."""
    for k in reversed(range(before)):
        gate = read_gate(run_dir, k)
        if gate is not None and gate["promoted"] and gated_as_it_is(run_dir, k, gate):
            return k
    return None


def best_checkpoint(run_dir: str | Path, before: int) -> Path:
    """The checkpoint of `best_round` (round before - 1's when no round has been gated: a run made
    without gates). ValueError where rounds were gated but none stands promoted (a gate record deleted,
    or every promoted network changed since its gate)."""
    best = best_round(run_dir, before)
    if best is None and any(read_gate(run_dir, k) is not None for k in range(before)):
        raise ValueError(
            f"{run_dir}: no round before {before} stands promoted by its gate as its network is now (a gate "
            "record deleted, or the network retrained since): run that round's 02 again to gate it"
        )
    return checkpoint_path(run_dir, before - 1 if best is None else best)


def best_network_before(run_dir: str | Path, round: int) -> Path | None:
    """`best_checkpoint`'s file, resolved, where the run has one (None: no such round or file yet, or no
    round stands promoted): what the pipeline's 04 of round `round` plays."""
    try:
        best = best_checkpoint(run_dir, round)
    except ValueError:
        return None
    return best.resolve() if best.is_file() else None


BEST = "best"  # 04's network parameter: the best network of the rounds before, as their gates chose


def next_round_network(run_dir: str | Path, round: int, network: str, log: Callable[[str], None] = print) -> Path:
    """The checkpoint 04 of round `round` plays: for network "best" the best of the rounds before it
    (`best_checkpoint`), else the path or shipped name given, with a warning if it is not that best one."""
    path = best_checkpoint(run_dir, round) if network == BEST else resolve_checkpoint(network)
    if not path.is_file():
        raise FileNotFoundError(f"no network checkpoint {path} (02 of round {round - 1} writes it)")
    best = best_network_before(run_dir, round)
    if best is not None and best != path.resolve():
        log(f"warning: {path} is not the best network of the rounds before {round}, {best}")
    return path


def run_best_checkpoint(run_dir: str | Path) -> Path:
    """The best network of every round the run directory holds (`best_checkpoint`): what 05 plays."""
    return best_checkpoint(run_dir, max(numbered(run_dir, "train"), default=-1) + 1)


def gate_round(
    run_dir: str | Path, round: int, cfg: GateConfig, *, device: str = "cpu", log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Gate round `round`'s network against the best before it (module docstring); returns the
    record written to train{round}/gate.json. A round already gated with the same settings is not
    played again (a gate record of another network of the round, e.g. before its values refit, or
    of other weights at the same path, is played again)."""
    folder = train_dir(run_dir, round)
    done, network = read_gate(run_dir, round), checkpoint_path(run_dir, round)
    digest = file_sha256(network)
    if (
        done is not None
        and done.get("config") == cfg.to_dict()
        and done.get("network", in_run(network)) == in_run(network)
        and done.get("sha256", digest) == digest  # (records from before the digest: by path)
    ):
        return done
    best = best_round(run_dir, round)
    if best is not None:
        against = (read_gate(run_dir, best) or {}).get("config") or {}
        games = cfg.games_settings()
        if {k: against.get(k) for k in games} != games:
            raise ValueError(
                f"round {best}'s network was gated with other settings ({against}); "
                "a paired comparison needs the same gating games: use the same gate settings in a run"
            )
    agent = make_agent(cfg.agent, network=network, device=device)
    records = play_gate(agent, cfg)
    (folder / GATE_FILE).unlink(missing_ok=True)  # no record beside games it was not made of
    write_atomic(folder / GATE_GAMES, "".join(r.to_json() + "\n" for r in records))
    entry: dict[str, Any] = {
        "round": round,
        "network": in_run(network),
        "sha256": digest,
        "against": best,
        "config": cfg.to_dict(),
    }
    if best is None:
        wins = sum(r.outcome == "won" for r in records)
        entry.update(promoted=True, reason="the first network: nothing to beat", wins=wins, games=len(records))
        entry["new_cleared"] = float(np.round(np.mean([r.cleared_share for r in records]), 6))
    else:
        against_games = train_dir(run_dir, best) / GATE_GAMES
        try:
            result = compare(records, GameRecord.read_file(against_games), cfg.alpha, cfg.rule)
        except ValueError as e:
            raise ValueError(f"round {round}'s gating games against {against_games}: {e}") from e
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


def trained_rounds(run_dir: str | Path) -> list[int]:
    """The rounds whose network was trained (a checkpoint exists), in order."""
    out, k = [], 0
    while train_dir(run_dir, k).is_dir():
        if checkpoint_path(run_dir, k).is_file():
            out.append(k)
        k += 1
    return out


ROUND_COLUMNS = [
    "round",
    "agent",
    "level",
    "games",
    "wins",
    "win_rate",
    "ci_low",
    "ci_high",
    "pills_per_virus",
    "ppv_low",
    "ppv_high",
    "promoted",
]


def ppv_interval(records: Sequence[GameRecord], seed: int = 0, rounds: int = 5000) -> tuple[float, float]:
    """95% percentile bootstrap interval (over games) of pills per virus cleared, sum(pills) / sum(viruses).
    A resample whose games cleared no virus has no such ratio and is left out (not counted as its pills)."""
    pills = np.array([r.pills_used for r in records], np.float64)
    viruses = np.array([r.viruses_cleared for r in records], np.float64)
    if len(records) == 0 or viruses.sum() == 0:
        return float("nan"), float("nan")
    draws = np.random.default_rng(seed).integers(0, len(records), size=(rounds, len(records)))
    cleared = viruses[draws].sum(axis=1)
    ratios = pills[draws].sum(axis=1)[cleared > 0] / cleared[cleared > 0]
    return float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def play_rounds(
    run_dir: str | Path,
    evaluation: EvalConfig,
    *,
    network_agents: Sequence[str] = ("policy",),
    references: Sequence[str] = ("greedy", "expert"),
    best_agents: Sequence[str] = (),
    device: str = "cpu",
    progress: bool = True,
) -> tuple[pd.DataFrame, dict[str, list[GameRecord]]]:
    """Every round's network on the same evaluation games (paired: same seeds, same pills).

    network_agents play with each trained round's network; references are the agents without a
    network (round -1); best_agents play with the run's best network only (the newest promoted:
    the one a user would ship), named ``AGENT (best network)``. Returns the table (ROUND_COLUMNS,
    one row per agent, round and level; ``promoted``: the round's gate decision, None when not
    gated) and the records keyed ``AGENT`` (references), ``AGENT rK`` and ``AGENT best``."""
    rounds = trained_rounds(run_dir)
    if not rounds:
        raise ValueError(f"{run_dir}: no trained round (no train*/checkpoints/latest.pt)")
    games = evaluation.games()
    # (key in the records, agent name in the table, round, agent)
    runs: list[tuple[str, str, int, Agent]] = [(s, s, -1, make_agent(s, device=device)) for s in references]
    for k in rounds:
        players = make_agents(network_agents, network=checkpoint_path(run_dir, k), device=device)
        runs += [(f"{a.name} r{k}", a.name, k, a) for a in players]
    best = best_checkpoint(run_dir, max(rounds) + 1)
    best_k = round_of(best)
    for a in make_agents(best_agents, network=best, device=device):
        runs.append((f"{a.name} best", f"{a.name} (best network)", best_k, a))
    records: dict[str, list[GameRecord]] = {}
    rows = []
    for key, name, k, agent in runs:
        agent.name = key
        records[key] = arena([agent], games, evaluation, progress=progress)[1][key]
        gate = read_gate(run_dir, k) if k >= 0 else None
        for level in sorted({g.level for g in games}):
            at = [r for r in records[key] if r.level == level]
            row = summarize(at, name).iloc[0].to_dict()
            row["ppv_low"], row["ppv_high"] = ppv_interval(at)
            rows.append({**row, "round": k, "promoted": None if gate is None else bool(gate["promoted"])})
    return pd.DataFrame(rows)[ROUND_COLUMNS], records
