"""Compare runs: one leaderboard of every round's network (alone and with search) and the agents
without a network, the training curves of every round, and their pictures
(``python -m drmario compare RUN_DIR ...``).

A run directory (`drmario.run.pipeline`) holds ``analysis{k}/arena.csv`` (03: the network trained
after round k against the baselines) and ``train{k}/metrics.csv`` (02), and with 05
``baselines/arena.csv``. In the combined table a network agent is named after its round,
``net-mcts-16 r1`` (with several runs ``net-mcts-16 (demo r1)``); so are the learners trained per run
(dqn, td: ``dqn (demo)``). The agents without a network (random, greedy, expert, mcts-N) appear
once, from the first table that has them: every round plays the same evaluation games when the
evaluation settings are the same, so they would only repeat themselves. A table played with other
evaluation settings (its ``evaluation.json``: other games, seeds, pill cap) keeps its own, named
after it as a network is (``greedy r1``, ``greedy (demo r1)``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from drmario.files import atomic_file
from drmario.play.arena import ARENA_COLUMNS, all_levels
from drmario.run.agents import NETWORK_KINDS, parse_spec
from drmario.run.notebook import evaluation_games
from drmario.run.rounds import numbered
from drmario.viz.arena_plots import plot_arena, plot_leaderboard
from drmario.viz.plots import LOSS_TERMS, METRIC_COLUMNS, plot_curves, read_metrics

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PathLike = str | os.PathLike
RunDirs = PathLike | Sequence[PathLike] | Mapping[str, PathLike]
PER_RUN_KINDS = ("dqn", "td")  # trained in each run by 05: one per run, like the networks
RESULT_COLUMNS = ["agent", "run", "round", "source", "spec", *ARENA_COLUMNS[1:]]


def run_dirs_by_name(run_dirs: RunDirs) -> dict[str, Path]:
    """{name: run directory}: names given as a mapping, else each directory's name (the full path
    where two names collide). FileNotFoundError for a directory that does not exist."""
    if isinstance(run_dirs, (str, os.PathLike)):
        run_dirs = [run_dirs]
    if isinstance(run_dirs, Mapping):
        named = {str(k): Path(v) for k, v in run_dirs.items()}
    else:
        paths = [Path(p) for p in run_dirs]
        names = [p.resolve().name for p in paths]
        named = {str(p) if names.count(n) > 1 else n: p for p, n in zip(paths, names)}
    if not named:
        raise ValueError("no run directories given")
    for name, path in named.items():
        if not path.is_dir():
            raise FileNotFoundError(f"run {name}: no directory {path}")
    return named


def _kind(agent: str) -> str | None:
    try:
        return parse_spec(agent)[0]
    except ValueError:  # a name the registry does not know (e.g. an old table): not a network
        return None


def _label(agent: str, run: str, tag: str, several: bool) -> str:
    """A per-run agent's name: "<agent> <tag>", or with several runs "<agent> (<run> <tag>)"."""
    if several:
        return f"{agent} ({run} {tag})".replace(" )", ")")
    return f"{agent} {tag}".rstrip()


def arena_results(run_dirs: RunDirs) -> pd.DataFrame:
    """Every arena table of the runs in one long table, one row per (agent, level): the arena's
    columns (`ARENA_COLUMNS`, the agent renamed as in the module docstring) plus ``run``,
    ``round`` (the network's round; missing for the agents without one), ``source`` (the folder)
    and ``spec`` (the agent as the arena named it). Empty when no run has an arena table."""
    runs = run_dirs_by_name(run_dirs)
    several = len(runs) > 1
    frames: list[pd.DataFrame] = []
    shown: dict[tuple[str, int], list[Any]] = {}  # (agent, level) without a network: the evaluations shown
    for run, path in runs.items():
        tables: list[tuple[str, int | None, Path]] = [
            (f"analysis{k}", k, path / f"analysis{k}" / "arena.csv") for k in numbered(path, "analysis")
        ]
        tables.append(("baselines", None, path / "baselines" / "arena.csv"))
        for source, k, file in tables:
            if not file.is_file():
                continue
            df = pd.read_csv(file)
            if df.empty:
                continue
            games = evaluation_games(file.parent)
            tag = f"r{k}" if k is not None else "in 05"  # 05: the network given to the baselines notebook
            names, keep, rounds = [], [], []
            for agent, level in zip(df["agent"], df["level"]):
                kind = _kind(agent)
                if kind in NETWORK_KINDS or kind in PER_RUN_KINDS:  # one per run (and round)
                    names.append(_label(agent, run, tag if kind in NETWORK_KINDS else "", several))
                    keep.append(True)
                else:  # once per set of games: the first keeps its name, one of other games is named after its table
                    before = shown.setdefault((agent, level), [])
                    names.append(_label(agent, run, tag, several) if before else agent)
                    keep.append(games not in before)
                    before += [games] if games not in before else []
                rounds.append(k if kind in NETWORK_KINDS else None)
            df = df.assign(spec=df["agent"], agent=names, run=run, source=source)
            df["round"] = pd.array(rounds)
            frames.append(df[keep])
    if not frames:
        return pd.DataFrame(columns=RESULT_COLUMNS)
    out = pd.concat(frames, ignore_index=True).drop_duplicates(["agent", "level"], keep="first")
    out["round"] = out["round"].astype("Int64")
    first = [c for c in RESULT_COLUMNS if c in out.columns]  # an older table may lack a column
    return out[first + [c for c in out.columns if c not in first]]


ROUNDS_COLUMNS = ["round", "agent", "level", "games", "wins", "win_rate", "ci_low", "ci_high"]


def rounds_table(run_dir: PathLike, levels: Sequence[int] | None = None) -> pd.DataFrame:
    """One run's rounds side by side: ROUNDS_COLUMNS, one row per round, agent and level, the agent
    named by its spec (``policy``, ``net-mcts-50``: the same player every round, with that round's
    network); the agents without a network once, with round -1. levels: the levels kept (None: all)."""
    results = arena_results(run_dir)
    kinds = results["spec"].map(_kind)
    results = results[results["round"].notna() | ~kinds.isin(NETWORK_KINDS)]  # 05's network: no round's table
    if levels is not None:
        results = results[results["level"].isin(levels)]
    if results.empty:
        return pd.DataFrame(columns=ROUNDS_COLUMNS)
    results = results.assign(agent=results["spec"], round=results["round"].fillna(-1).astype(int))
    results = results.drop_duplicates(["agent", "level", "round"])  # (one on other games, e.g. greedy r1, left out)
    return results[ROUNDS_COLUMNS].sort_values(["level", "agent", "round"], ignore_index=True)


def leaderboard(results: pd.DataFrame | RunDirs) -> pd.DataFrame:
    """One row per agent, best first: its run and round, the win rate at each level (columns
    ``L<level>``), and over all levels: games, wins, win_rate with its Wilson 95% interval
    (ci_low, ci_high) and the mean share of viruses cleared. Ties (e.g. every win rate 0 in a short
    run) are broken by the interval's low end, then by the viruses cleared.

    results: run directories (`arena_results` is read from them) or a table of that form.
    """
    table = results if isinstance(results, pd.DataFrame) else arena_results(results)
    columns = ["run", "round", "L*", "games", "wins", "win_rate", "ci_low", "ci_high", "cleared_fraction"]
    if table.empty:
        return pd.DataFrame(columns=[c for c in columns if c != "L*"]).rename_axis("agent")
    for name in ("run", "round"):
        if name not in table.columns:
            table = table.assign(**{name: None})
    wide = table.pivot_table(index="agent", columns="level", values="win_rate", aggfunc="first", sort=True)
    wide.columns = [f"L{c}" for c in wide.columns]
    info = table.groupby("agent", sort=False)[["run", "round"]].first()
    total = all_levels(table).set_index("agent")
    out = info.join(wide).join(total[["games", "wins", "win_rate", "ci_low", "ci_high", "cleared_fraction"]])
    out = out.sort_values(["win_rate", "ci_low", "cleared_fraction"], ascending=False, kind="stable")
    return out.rename_axis("agent")


def format_leaderboard(board: pd.DataFrame) -> str:
    """The leaderboard as text: rank, agent, the win rate at each level, then over all levels
    wins/games, the win rate with its Wilson 95% interval, and the viruses cleared."""
    if board.empty:
        return "(no arena results)"
    levels = [c for c in board.columns if re.fullmatch(r"L\d+", c)]
    rows = []
    for rank, (agent, row) in enumerate(board.iterrows(), 1):
        line = {"#": rank, "agent": agent}
        line.update({c: "-" if pd.isna(row[c]) else f"{row[c]:.0%}" for c in levels})
        line["all levels"] = f"{int(row['wins'])}/{int(row['games'])}"
        line["win rate [Wilson 95%]"] = f"{row['win_rate']:.1%} [{row['ci_low']:.1%}, {row['ci_high']:.1%}]"
        cleared = row["cleared_fraction"]
        line["cleared"] = "-" if cleared is None or math.isnan(cleared) else f"{cleared:.1%}"
        rows.append(line)
    text = pd.DataFrame(rows).to_string(index=False)
    if levels and board[levels].isna().any().any():
        text += "\nnote: not every agent played every level ('-'): compare 'all levels' only between agents that did"
    return text


def training_runs(run_dirs: RunDirs) -> dict[str, Path]:
    """{name: train{k} folder} of every training run with a metrics file: "train<k>", or with
    several runs "<run> train<k>"."""
    runs = run_dirs_by_name(run_dirs)
    several = len(runs) > 1
    out = {}
    for run, path in runs.items():
        for k in numbered(path, "train"):
            folder = path / f"train{k}"
            if (folder / "metrics.csv").is_file():
                out[f"{run} train{k}" if several else f"train{k}"] = folder
    return out


def training_curves(run_dirs: RunDirs) -> pd.DataFrame:
    """Every train{k}/metrics.csv of the runs in one table for `viz.plot_curves` (its ``run`` column
    names the training run as `training_runs` does); empty when none has a metrics file."""
    found = training_runs(run_dirs)
    if not found:
        return pd.DataFrame(columns=["run", *METRIC_COLUMNS])
    return read_metrics(found)


def final_losses(curves: pd.DataFrame) -> pd.DataFrame:
    """The last logged losses of each training run in `training_curves`: one row per (run, split),
    the last train row and the last test row (none without a test set), with its step and every
    loss term. A step logged twice (a resumed trainer) counts its later row."""
    if curves.empty:
        return pd.DataFrame()
    terms = [t for t in LOSS_TERMS if t in curves.columns]
    rows = []
    for run, df in curves.groupby("run", sort=False):
        for split in ("train", "test"):
            part = df[df["split"] == split].sort_values("step", kind="stable")
            if len(part):
                last = part.iloc[-1]
                rows.append(
                    {"run": run, "split": split, "step": int(last["step"])} | {t: float(last[t]) for t in terms}
                )
    return pd.DataFrame(rows).set_index(["run", "split"])


UNSET = "(unset)"  # a setting a run's profile leaves to the notebook
PATH_SETTINGS = ("data", "init")  # train*/config.json paths: they name each run's own folders


def _flat(values: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}."))
        elif key not in PATH_SETTINGS:
            out[f"{prefix}{key}"] = value
    return out


def run_settings(run_dir: PathLike) -> dict[str, Any]:
    """A run's settings, flat: its pipeline.json's profile (``profile``: its name, ``rounds``,
    ``train.filters``, ...), else (a run of ``drmario train``) every train{k}/config.json
    (``train0.net.filters``, without the data paths). Empty when the run has neither."""
    path = Path(run_dir)
    record = path / "pipeline.json"
    if record.is_file():
        data = json.loads(record.read_text(encoding="utf-8"))
        profile = dict(data.get("profile", {}))
        out = {"profile": profile.pop("name", None), "rounds": data.get("rounds")}
        return out | {f"{section}.{k}": v for section, values in profile.items() for k, v in dict(values).items()}
    out = {}
    for k in numbered(path, "train"):
        config = path / f"train{k}" / "config.json"
        if config.is_file():
            out.update(_flat(json.loads(config.read_text(encoding="utf-8")), f"train{k}."))
    return out


def settings_differences(run_dirs: RunDirs) -> pd.DataFrame:
    """The settings (`run_settings`) in which the runs differ: one row per setting, one column per
    run (named as `run_dirs_by_name` does), "(unset)" where a run does not set it. Empty when they
    agree, or with one run."""
    runs = {name: run_settings(path) for name, path in run_dirs_by_name(run_dirs).items()}
    keys = list(dict.fromkeys(k for values in runs.values() for k in values))

    def shown(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value)

    rows = {}
    for key in keys:
        values = [shown(v[key]) if key in v else UNSET for v in runs.values()]
        if len(set(values)) > 1:
            rows[key] = values
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(runs)).rename_axis("setting")


def differences_text(differences: pd.DataFrame, limit: int = 4) -> str:
    """`settings_differences` in one line for a plot's title: "runs differ in: train.filters (A: 16,
    B: 32); ..." with at most `limit` settings named; "" when there are none."""
    if differences.empty:
        return ""
    items = [
        f"{key} ({', '.join(f'{run}: {value}' for run, value in row.items())})"
        for key, row in differences.head(limit).iterrows()
    ]
    more = len(differences) - limit
    return "runs differ in: " + "; ".join(items) + (f"; and {more} more" if more > 0 else "")


def figures(run_dirs: RunDirs) -> dict[str, Figure]:
    """The pictures of a comparison, by file stem: ``leaderboard`` (win rate by level and over all
    levels, Wilson 95% intervals), ``arena`` (viruses cleared and pills per virus by level) and
    ``curves`` (train and test loss terms of every training run), each titled with the settings
    in which the runs differ. Those without data are left out."""
    out: dict[str, Figure] = {}
    results = arena_results(run_dirs)
    differ = differences_text(settings_differences(run_dirs))
    if not results.empty:
        out["leaderboard"] = plot_leaderboard(results, title="leaderboard" + (f"\n{differ}" if differ else ""))
        out["arena"] = plot_arena(results, ["cleared_fraction", "pills_per_virus"])
    curves = training_curves(run_dirs)
    if not curves.empty:
        terms = [t for t in ("loss", "moves", "won", "cleared", "duration") if t in curves.columns]
        out["curves"] = plot_curves(curves, terms=terms)
    for stem in ("arena", "curves"):
        if differ and stem in out:
            out[stem].suptitle(differ, fontsize=9, wrap=True)
    return out


def save_figures(run_dirs: RunDirs, out_dir: PathLike, dpi: int = 110) -> list[Path]:
    """`figures` saved as PNG files <stem>.png in out_dir (made if missing); returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for stem, fig in figures(run_dirs).items():
        path = out / f"{stem}.png"
        with atomic_file(path, "wb") as f:  # a killed run leaves the old picture, not half a new one
            fig.savefig(f, dpi=dpi, format="png")
        paths.append(path)
    return paths
