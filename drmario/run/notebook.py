"""What the notebooks share, so that they stay thin: training with live loss curves (in a child
process), the positions of played games with what followed them, the network's errors there, and
tables across rounds. (Their parameters: `drmario.run.profiles`; agents by name: `drmario.run.agents`.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, get_args

import numpy as np

from drmario.files import parent_death_signal, write_atomic
from drmario.run.pipeline import child_env
from drmario.run.rounds import analysis_dir, in_run, round_dir
from drmario.search.core import Leaves, Prediction

if TYPE_CHECKING:
    import pandas as pd

    from drmario.engine.game import Game, GameRecord
    from drmario.learn.player import Player
    from drmario.learn.train import TrainConfig, TrainResult
    from drmario.play.agents import Agent
    from drmario.play.arena import EvalConfig
    from drmario.play.lockstep import GameSpec

T = TypeVar("T")


def settings_table(settings: Mapping[str, Any]) -> pd.DataFrame:
    """Nested settings (a config's to_dict()) as a one-column table with dotted names; a search's
    settings of the modes it does not use are left out."""
    import pandas as pd

    from drmario.search.config import Mode

    rows: dict[str, str] = {}

    def walk(d: Mapping[str, Any], prefix: str) -> None:
        unused = set(get_args(Mode)) - {d["mode"]} if d.get("mode") in get_args(Mode) else set()
        for key, value in d.items():
            if isinstance(value, Mapping):
                if key not in unused:
                    walk(value, f"{prefix}{key}.")
            else:
                rows[f"{prefix}{key}"] = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)

    walk(settings, "")
    return pd.DataFrame({"value": rows})


def training_steps(state: Mapping[str, Any]) -> dict[str, Any]:
    """The optimiser steps behind a checkpoint's weights (read_checkpoint's state): its training's,
    and for a values refit (learn: values) the refit's too, the training's read from the network it
    started from ("-" when that file is gone)."""
    from drmario.learn.checkpoint import read_checkpoint

    config = state.get("config") or {}
    if config.get("learn") != "values":
        return {"training steps": state.get("step", "-")}
    init = config.get("init")
    trained = read_checkpoint(init).get("step", "-") if init and Path(init).is_file() else "-"
    return {"training steps": trained, "values refit steps": state.get("step", "-")}


# ------------------------------------------------------------------------------------------------
# Notebook helpers: training with live curves


def _result_from_json(d: dict) -> TrainResult:
    from drmario.learn.train import TrainResult

    d = dict(d)
    d["run_dir"] = Path(d["run_dir"])
    d["metrics"] = Path(d["metrics"])
    d["checkpoint"] = Path(d["checkpoint"]) if d.get("checkpoint") else None
    return TrainResult(**d)


def result_to_json(result: TrainResult) -> dict:
    d = dict(result.__dict__)
    for key in ("run_dir", "metrics", "checkpoint"):
        d[key] = None if d[key] is None else str(d[key])
    return d


class _LiveCurves:
    """Loss curves of a training run redrawn in place in a notebook (printed lines elsewhere)."""

    def __init__(self, run_dir: Path, steps: int, terms: Sequence[str]) -> None:
        self.run_dir, self.steps, self.terms = run_dir, steps, tuple(terms)
        self.metrics = run_dir / "metrics.csv"
        self.seen: tuple[int, int] | None = None
        self.start = time.perf_counter()
        self.status = self.figure = None
        if _in_kernel():
            from IPython.display import HTML, display

            self.status = display(HTML("starting the trainer ..."), display_id=True)
            self.figure = display(HTML(""), display_id=True)

    def update(self, force: bool = False) -> None:
        from drmario.viz.plots import plot_curves, read_metrics

        stamp = (self.metrics.stat().st_size, self.metrics.stat().st_mtime_ns) if self.metrics.exists() else None
        if stamp is None or (stamp == self.seen and not force):
            return
        try:
            df = read_metrics({self.run_dir.name: self.metrics})
        except Exception:  # a row being appended right now: try again next time
            return
        self.seen = stamp
        if df.empty:
            return
        train, test = df[df["split"] == "train"], df[df["split"] == "test"]
        if train.empty:
            return
        last = train.iloc[-1]  # training speed: a test row's samples/s is the evaluation's
        text = f"step {int(last['step']):,}/{self.steps:,} · loss {last['loss']:.4g}"
        if len(test):
            text += f" (test {test['loss'].iloc[-1]:.4g})"
        text += f" · {last['samples_per_s']:,.0f} training samples/s · {time.perf_counter() - self.start:.0f} s"
        if self.status is None or self.figure is None:
            print(text, flush=True)
            return
        from IPython.display import HTML

        self.status.update(HTML(f"<b>training</b> {text}"))
        self.figure.update(plot_curves(df, terms=self.terms))


def _in_kernel() -> bool:
    if "IPython" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def train_live(
    cfg: TrainConfig,
    run_dir: str | Path,
    *,
    refresh_s: float = 2.0,
    terms: Sequence[str] | None = None,
    threads: int = 0,
) -> TrainResult:
    """`train.train` in a child process (``python -m drmario train``), with its loss curves redrawn
    every refresh_s seconds from metrics.csv while it runs. The child's output goes to
    run_dir/train.log. Interrupting stops the child; running again resumes from its last checkpoint.
    The child dies with this process, however it ends (kill -9 included: Linux's parent-death
    signal), so no trainer outlives its kernel. terms: the curves drawn (None: the loss, moves, won,
    cleared, duration and the network's optional terms). threads: torch's CPU threads in the child (0:
    its default, every core).

    Returns the TrainResult (``stopped`` says why training stopped early, e.g. a non-finite loss).
    Raises RuntimeError, with the end of the log, if the trainer fails otherwise.
    """
    from dataclasses import replace

    from drmario.learn.train import aux_columns

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    request, result_path, log_path = (
        run_dir / "train-request.json",
        run_dir / "train_result.json",
        run_dir / "train.log",
    )
    child_cfg = replace(cfg, progress=False, data=[str(Path(p).resolve()) for p in cfg.data])
    write_atomic(request, json.dumps(child_cfg.to_dict(), indent=1) + "\n")
    result_path.unlink(missing_ok=True)
    if terms is None:
        terms = ("loss", "moves", "won", "cleared", "duration", *aux_columns(cfg.net))
    view = _LiveCurves(run_dir, cfg.steps, terms)
    cmd = [sys.executable, "-m", "drmario", "train", str(run_dir), "--config", str(request), "--threads", str(threads)]
    with open(log_path, "a") as log:
        log.write(f"\n# {datetime.now(timezone.utc).isoformat(timespec='seconds')}: {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env(), preexec_fn=parent_death_signal()
        )
        try:
            while True:
                try:
                    code = proc.wait(timeout=refresh_s)
                    break
                except subprocess.TimeoutExpired:
                    view.update()
        except BaseException:  # an interrupted cell: stop the trainer too (it resumes next time)
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    view.update(force=True)
    request.unlink(missing_ok=True)
    if result_path.exists() and code in (0, 3):
        return _result_from_json(json.loads(result_path.read_text()))
    tail = "".join(log_path.read_text().splitlines(keepends=True)[-25:])
    raise RuntimeError(f"training in {run_dir} failed (exit code {code}); the end of {log_path}:\n{tail}")


# ------------------------------------------------------------------------------------------------
# Notebook helpers: agents, outcomes, errors


def played_positions(records: Iterable[GameRecord]) -> tuple[Leaves, pd.DataFrame]:
    """Every decision of the finished games, with what really followed it, counted as the training
    targets count them: the positions (cells, pills, previews) and a table (agent, game, seed,
    level, step, won, cleared, duration, move_r, move_x, move_y)."""
    import pandas as pd

    from drmario.learn.examples import won_target

    positions, rows = [], []
    for rec in records:
        if rec.outcome is None:
            continue
        steps = list(rec.steps())
        later = np.cumsum([result.viruses_cleared for _, _, result in steps][::-1])[::-1]
        for i, (game, move, _) in enumerate(steps):
            positions.append(game)
            rows.append(
                {
                    "agent": rec.meta.get("agent", "?"),
                    "game": rec.meta.get("index", -1),
                    "seed": rec.seed,
                    "level": rec.level,
                    "step": i,
                    "won": won_target(rec.outcome),
                    "cleared": int(later[i]),
                    "duration": len(steps) - i,
                    "move_r": move.r,
                    "move_x": move.x,
                    "move_y": move.y,
                }
            )
    return _game_positions(positions), pd.DataFrame(rows)


def _game_positions(games: Sequence[Game]) -> Leaves:
    """The positions of games as arrays: cells uint8[n, 8, 16], pills and previews uint8[n, 2]."""
    return Leaves(
        np.array([g.board.cells for g in games], np.uint8).reshape(-1, 8, 16),
        np.array([(g.pill.left, g.pill.right) for g in games], np.uint8).reshape(-1, 2),
        np.array([(g.next_pill.left, g.next_pill.right) for g in games], np.uint8).reshape(-1, 2),
    )


def record_positions(record: GameRecord) -> Leaves:
    """The positions of every decision of a game, finished or not (cells, pills, previews)."""
    return _game_positions([game for game, _, _ in record.steps()])


def predict(player: Player, positions: Leaves) -> Prediction:
    """The network at these positions with its moves masked to the legal ones (`search.Prediction`)."""
    from drmario.engine import kernels as K

    cells, pills, previews = positions
    legal = np.zeros((len(cells), 4, K.WIDTH, K.HEIGHT), np.uint8)
    if len(cells):
        K.legal_masks_batch(np.ascontiguousarray(cells), np.ascontiguousarray(pills), legal)
    return player.evaluate(cells, pills, previews, legal=legal.astype(bool))


def network_errors(player: Player, positions: Leaves, table: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The network's predictions at played positions beside what followed (`played_positions`),
    with each value term of its training's loss per position (err_won, err_cleared, err_duration,
    the counts' errors scaled as its count_error says, and their sum err_value). Returns (table,
    moves float[N, 4, 8, 16] masked to legal moves)."""
    from drmario.learn.loss import COUNT_SCALE

    pred = predict(player, positions)
    out = table.copy()
    for term in ("won", "cleared", "duration"):  # float64: no float32 digits in the tables
        out[f"pred_{term}"] = getattr(pred, term).astype(np.float64)
    out["err_won"] = (out["pred_won"] - out["won"]) ** 2
    relative = player.config.count_error == "relative"
    for term in ("cleared", "duration"):
        scale = out[term].clip(lower=1) if relative else COUNT_SCALE
        out[f"err_{term}"] = ((out[f"pred_{term}"] - out[term]) / scale) ** 2
    out["err_value"] = out["err_won"] + out["err_cleared"] + out["err_duration"]
    return out, pred.moves


def replay_with_search(
    agent: Agent, spec: GameSpec, evaluation: EvalConfig
) -> tuple[GameRecord, list[np.ndarray | None]]:
    """Play one game with agent as the arena does (same protocol, same seeds, same timing and
    speed: a replay of an NES-timing game is one too) and keep each decision's search target (None
    for agents without a search)."""
    from drmario.play.lockstep import play_lockstep

    kept: dict[str, Any] = {}

    def keep(record: GameRecord, decisions: list) -> None:
        kept["record"], kept["targets"] = record, [d.target for d in decisions]

    play_lockstep(
        agent,
        [spec],
        lockstep=1,
        base_seed=evaluation.decision_seed,
        stall_limit=evaluation.stall_limit,
        max_pills=evaluation.max_pills,
        on_finish=keep,
        timing=evaluation.timing,
        speed=evaluation.speed,
    )
    return kept["record"], kept["targets"]


def selfplay_rounds_table(run_dir: str | Path) -> pd.DataFrame:
    """One row per self-play round found in run_dir: games, positions, wins, top outs, stalemates,
    viruses cleared, pills per virus, the mean share of each game's viruses cleared, the mean
    KL(target || prior) (NaN for the expert, which has no prior; no column if no round had one),
    the search that played it (and whose targets it learns, unless the expert labelled its positions)."""
    import pandas as pd

    from drmario.play.selfplay import summary
    from drmario.search.config import SearchConfig

    rows = []
    k = 0
    while (round_dir(run_dir, k) / "selfplay.json").exists():
        table = summary(round_dir(run_dir, k))
        settings = json.loads((round_dir(run_dir, k) / "selfplay.json").read_text())
        if not table.empty:
            row = table.loc["all"].to_dict()
            search = SearchConfig.from_dict(settings["search"]).summary
            row["search"] = search + ("; the expert's labels" if settings.get("labels") == "expert" else "")
            network = settings.get("network")
            row["network"] = in_run(network).removesuffix("/checkpoints/latest.pt") if network else "-"
            rows.append({"round": k, **row})
        k += 1
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows).set_index("round")
    counts = [c for c in df.columns if c not in ("pills_per_virus", "cleared_share", "search_kl", "search", "network")]
    return df.fillna({c: 0 for c in counts}).astype({c: int for c in counts})  # a round without rescues: 0


EVALUATION_FILE = "evaluation.json"  # beside an analysis's arena.csv: the evaluation settings it was played with


def save_arena(
    out_dir: str | Path, table: pd.DataFrame, records: Mapping[str, Sequence[GameRecord]], evaluation: EvalConfig
) -> None:
    """Write an arena into out_dir: arena.csv, games/<agent>.jsonl and evaluation.json, the games'
    settings (`earlier_results` reuses only games played with the same), written last: a write cut
    short leaves no record vouching for another table."""
    out_dir = Path(out_dir)
    (out_dir / EVALUATION_FILE).unlink(missing_ok=True)
    (out_dir / "games").mkdir(parents=True, exist_ok=True)
    write_atomic(out_dir / "arena.csv", table.to_csv(index=False))
    for name, recs in records.items():
        write_atomic(out_dir / "games" / f"{name}.jsonl", "".join(r.to_json() + "\n" for r in recs))
    write_atomic(out_dir / EVALUATION_FILE, json.dumps(evaluation.to_dict(), indent=1) + "\n")


def games_of(evaluation: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The settings of an evaluation (`EvalConfig.to_dict`, as its evaluation.json holds them) that
    make its games and their outcomes: all but how many play at once (lockstep)."""
    return None if evaluation is None else {k: v for k, v in evaluation.items() if k != "lockstep"}


def evaluation_games(folder: str | Path) -> dict[str, Any] | None:
    """`games_of` the evaluation an arena table in folder was played with (its evaluation.json, `save_arena`),
    None where it has none (a table from before the file was written) or it cannot be read."""
    try:
        return games_of(json.loads((Path(folder) / EVALUATION_FILE).read_text()))
    except (OSError, ValueError, AttributeError):  # AttributeError: JSON that is not an object
        return None


def earlier_results(
    run_dir: str | Path, round: int, specs: Sequence[str], evaluation: EvalConfig
) -> tuple[pd.DataFrame, dict[str, list[GameRecord]], list[str]]:
    """The arena rows and game records of the agents without a network that an earlier round's
    analysis of run_dir already played with the same evaluation settings (`save_arena`), so
    the same games, and the specs still to play. Returns (rows, records by agent, remaining specs)."""
    import pandas as pd

    from drmario.engine.game import GameRecord
    from drmario.run.agents import NETWORK_KINDS, agent_name, parse_spec

    rows: list[pd.DataFrame] = []
    records: dict[str, list[GameRecord]] = {}
    wanted = games_of(json.loads(json.dumps(evaluation.to_dict())))  # as JSON compares
    for k in range(round):
        folder = analysis_dir(run_dir, k)
        same = evaluation_games(folder) == wanted  # none (made before the file existed) or damaged: play again
        if not same or not (folder / "arena.csv").exists():
            continue
        table = pd.read_csv(folder / "arena.csv")
        for spec in specs:
            name = agent_name(spec)
            games = folder / "games" / f"{name}.jsonl"
            listed = table["agent"] == name  # a games file a later save left behind has no row: not reused
            if parse_spec(spec)[0] in NETWORK_KINDS or name in records or not games.exists() or not listed.any():
                continue
            rows.append(table[listed])
            records[name] = GameRecord.read_file(games)
    remaining = [s for s in specs if agent_name(s) not in records]
    return (pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()), records, remaining
