"""Export a run's network with a card: the weights in the checkpoint format, and beside them a JSON
card saying what it is (network and training settings, the data it learnt from, its steps, its
arena results and the run's rounds), so a shipped network can be judged without its run directory
(``python -m drmario export RUN_DIR --out data/networks/small.pt``)."""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from drmario.files import file_sha256, holds_weights, played_network, write_atomic
from drmario.learn.checkpoint import load_net, read_checkpoint, save_net
from drmario.run.compare import rounds_table
from drmario.run.rounds import (
    ROUNDS_FILE,
    analysis_dir,
    best_round,
    checkpoint_path,
    gate_table,
    in_run,
    numbered,
    refit_checkpoint,
    train_dir,
    values_dir,
)

PathLike = str | os.PathLike


def card_path(network: PathLike) -> Path:
    """The card beside a network file: small.pt -> small.json."""
    return Path(network).with_suffix(".json")


def shipped_round(run_dir: PathLike) -> int:
    """The round whose network to ship: the newest one its gate promoted; in a run without gates,
    the analysed round whose strongest network agent (alone or with search) won the most
    evaluation games over all levels, the later round on a tie. ValueError if neither exists."""
    gated = best_round(Path(run_dir), max(numbered(Path(run_dir), "train"), default=-1) + 1)
    if gated is not None:
        return gated
    table = rounds_table(run_dir)
    wins = table[table["round"] >= 0].groupby(["round", "agent"])["wins"].sum().groupby("round").max()
    if wins.empty:
        raise ValueError(f"{run_dir}: no analysed round (analysis<k>/arena.csv, written by 03)")
    return int(wins[wins == wins.max()].index.max())


def _data_summary(folder: Path) -> dict[str, Any]:
    """What a round's example folder holds, from its selfplay.json (the generation settings)."""
    meta_file = folder.parent / "selfplay.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    keep = ("games", "seed", "levels", "search", "stall_limit", "stalemate_won", "max_pills")
    summary = {"folder": f"{folder.parent.name}/{folder.name}", **{k: meta[k] for k in keep if k in meta}}
    if meta.get("network"):  # the run's own path would mean nothing elsewhere: keep train<k>/...
        summary["network"] = in_run(meta["network"])
    return summary


def _training(folder: Path) -> dict[str, Any]:
    """A training run's settings (but its data) and its data's summary, from its config.json, with
    its steps from its train_result.json."""
    config_file, result_file = folder / "config.json", folder / "train_result.json"
    config = json.loads(config_file.read_text()) if config_file.is_file() else {}
    result = json.loads(result_file.read_text()) if result_file.is_file() else {}
    return {
        "steps": result.get("step"),
        "train": {k: in_run(v) if k == "init" and v else v for k, v in config.items() if k != "data"},
        "data": [_data_summary(Path(d)) for d in config.get("data", [])],
    }


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(df.to_json(orient="records"))


def _rounds(run_dir: Path) -> pd.DataFrame:
    """Every round's network on the same evaluation games: the table bench/rounds.py wrote into the
    run (ROUNDS_FILE), else the per-round arena tables of 03."""
    played = run_dir / ROUNDS_FILE
    return pd.read_csv(played) if played.is_file() else rounds_table(run_dir)


def export_network(run_dir: PathLike, out: PathLike, round: int | None = None) -> Path:
    """Write the network trained after `round` of run_dir (None: `shipped_round`) to out, weights
    only, and its card to `card_path(out)`; both atomically. Returns out."""
    run_dir = Path(run_dir)
    if Path(out).suffix != ".pt":  # the card goes beside it as .json: a .json network would be overwritten
        raise ValueError(f"export to {out}: expected a .pt file (its card is written beside it as .json)")
    round = shipped_round(run_dir) if round is None else round
    source = checkpoint_path(run_dir, round)
    state = read_checkpoint(source)  # checks the digest: a damaged checkpoint is never shipped
    out = save_net(load_net(source), Path(out))
    training = _training(train_dir(run_dir, round))
    refit = source == refit_checkpoint(run_dir, round)  # the round's values were refitted
    arena_file = analysis_dir(run_dir, round) / "arena.csv"
    played = played_network(arena_file.parent)  # 03's record of the network it played (None: from before it)
    of_these_weights = played is None or holds_weights(source, played)
    pipeline_file = run_dir / "pipeline.json"
    pipeline = json.loads(pipeline_file.read_text()) if pipeline_file.is_file() else {}
    card = {
        "network": out.name,
        "sha256": file_sha256(out),
        "exported": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "run": {"dir": run_dir.name, "round": round, "rounds": numbered(run_dir, "train")},
        "steps": training["steps"] if refit else state.get("step"),  # of the training
        "net": state["net_config"],
        "train": training["train"],
        "data": training["data"],
        # the refit of its value head on games the training never saw (02's value_steps), or None
        "values_refit": _training(values_dir(run_dir, round)) if refit else None,
        # 03's arena of these weights (not of another network 03 was given, nor of weights since replaced)
        "arena": _records(pd.read_csv(arena_file)) if arena_file.is_file() and of_these_weights else [],
        "rounds": _records(_rounds(run_dir)),
        "gates": [{k: v for k, v in g.items() if k != "config"} for g in gate_table(run_dir)],
        "profile": pipeline.get("profile", {}),
        "git_commit": pipeline.get("git_commit"),
    }
    write_atomic(card_path(out), json.dumps(card, indent=1) + "\n")
    return out


def read_card(network: PathLike) -> dict[str, Any]:
    """The card of an exported network (FileNotFoundError naming the missing card; ValueError where the
    card is of other weights, as after an export interrupted between the network and its card)."""
    path = card_path(network)
    if not path.is_file():
        raise FileNotFoundError(f"no card {path} beside the network {network} (python -m drmario export writes both)")
    card = json.loads(path.read_text())
    if not Path(network).is_file():
        raise FileNotFoundError(f"no network {network} beside its card {path}")
    if not holds_weights(network, card):
        raise ValueError(f"the card {path} is of other weights than {network} holds (sha256): export the network again")
    return card
