"""What the notebooks share, so that they stay thin: parameter checks, training with live loss
curves (in a child process), the arena's agents by name, the positions of played games with what
followed them, the network's errors there, and tables across rounds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .files import write_atomic
from .pipeline import analysis_dir, child_env, round_dir, train_dir

if TYPE_CHECKING:
    import pandas as pd

    from .agents import Agent, GameSpec
    from .game import GameRecord
    from .net import Player
    from .search import SearchConfig
    from .train import TrainConfig, TrainResult

T = TypeVar("T")


class ParameterError(ValueError):
    """Bad notebook parameters; the message lists every bad one."""


# ------------------------------------------------------------------------------------------------
# Notebook helpers: parameters


class ParameterCheck:
    """Checks a notebook's parameters one by one, then raises one `ParameterError` listing every
    bad one (`done`, or `config` which also builds the configuration object)."""

    def __init__(self, notebook: str) -> None:
        self.notebook = notebook
        self.problems: list[str] = []

    def _bad(self, name: str, value: Any, want: str) -> None:
        self.problems.append(f"{name} = {value!r}: {want}")

    @staticmethod
    def _range(value: float, lo: float | None, hi: float | None) -> bool:
        return (lo is None or value >= lo) and (hi is None or value <= hi)

    @staticmethod
    def _bounds(lo: float | None, hi: float | None) -> str:
        if lo is not None and hi is not None:
            return f" in {lo}..{hi}"
        return f" >= {lo}" if lo is not None else f" <= {hi}" if hi is not None else ""

    def integer(self, name: str, value: Any, lo: int | None = None, hi: int | None = None) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not self._range(value, lo, hi):
            self._bad(name, value, f"expected an integer{self._bounds(lo, hi)}")

    def number(self, name: str, value: Any, lo: float | None = None, hi: float | None = None) -> None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)
        if not ok or not self._range(value, lo, hi):
            self._bad(name, value, f"expected a number{self._bounds(lo, hi)}")

    def boolean(self, name: str, value: Any) -> None:
        if not isinstance(value, bool):
            self._bad(name, value, "expected True or False")

    def choice(self, name: str, value: Any, choices: Sequence[Any]) -> None:
        if value not in choices:
            self._bad(name, value, f"expected one of {', '.join(map(repr, choices))}")

    def choices(self, name: str, value: Any, choices: Sequence[Any], nonempty: bool = True) -> None:
        if not isinstance(value, (list, tuple)) or (nonempty and not value) or any(v not in choices for v in value):
            self._bad(name, value, f"expected a {'non-empty ' * nonempty}list of {', '.join(map(repr, choices))}")

    def integers(
        self, name: str, value: Any, lo: int | None = None, hi: int | None = None, nonempty: bool = True
    ) -> None:
        ok = isinstance(value, (list, tuple)) and (value or not nonempty)
        ok = ok and all(isinstance(v, int) and not isinstance(v, bool) and self._range(v, lo, hi) for v in value)
        if not ok:
            self._bad(name, value, f"expected a {'non-empty ' * nonempty}list of integers{self._bounds(lo, hi)}")

    def rule(self, ok: bool, name: str, value: Any, want: str) -> None:
        """Any other condition on a parameter (e.g. one that involves two of them)."""
        if not ok:
            self._bad(name, value, want)

    def text(self, name: str, value: Any) -> None:
        if not isinstance(value, str):
            self._bad(name, value, "expected a string")

    def mapping(self, name: str, value: Any) -> None:
        if not isinstance(value, dict):
            self._bad(name, value, "expected a dict")

    def path(self, name: str, value: Any, exists: bool = True, empty_ok: bool = False) -> None:
        """A path (a string); exists: it must exist now; empty_ok: "" is allowed (a default)."""
        if not isinstance(value, (str, os.PathLike)) or (not empty_ok and not str(value)):
            self._bad(name, value, "expected a path")
        elif exists and str(value) and not Path(value).exists():
            self._bad(name, value, f"no such file or folder (from {Path.cwd()})")

    def paths(self, name: str, value: Any, exists: bool = True) -> None:
        if not isinstance(value, (list, tuple)) or not value:
            self._bad(name, value, "expected a non-empty list of paths")
            return
        for i, v in enumerate(value):
            self.path(f"{name}[{i}]", v, exists)

    def done(self) -> None:
        if self.problems:
            lines = "\n  ".join(self.problems)
            raise ParameterError(f"{self.notebook}: bad parameter(s) (fix the parameters cell):\n  {lines}")

    def config(self, build: Callable[[], T]) -> T:
        """`done`, then build the configuration object; its own checks become a ParameterError too."""
        self.done()
        try:
            return build()
        except (TypeError, ValueError) as e:
            raise ParameterError(f"{self.notebook}: the parameters do not make a valid configuration: {e}") from e


def settings_table(settings: Mapping[str, Any]) -> pd.DataFrame:
    """Nested settings (a config's to_dict()) as a one-column table with dotted names."""
    import pandas as pd

    rows: dict[str, str] = {}

    def walk(d: Mapping[str, Any], prefix: str) -> None:
        for key, value in d.items():
            if isinstance(value, Mapping):
                walk(value, f"{prefix}{key}.")
            else:
                rows[f"{prefix}{key}"] = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)

    walk(settings, "")
    return pd.DataFrame({"value": rows})


# ------------------------------------------------------------------------------------------------
# Notebook helpers: training with live curves


def _result_from_json(d: dict) -> TrainResult:
    from .train import TrainResult

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
        from .viz_plots import plot_curves, read_metrics

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
        last = df.iloc[-1]
        test = df[df["split"] == "test"]
        text = f"step {int(last['step']):,}/{self.steps:,} · loss {df[df['split'] == 'train']['loss'].iloc[-1]:.4g}"
        if len(test):
            text += f" (test {test['loss'].iloc[-1]:.4g})"
        text += f" · {last['samples_per_s']:,.0f} samples/s · {time.perf_counter() - self.start:.0f} s"
        if self.status is None:
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
    terms: Sequence[str] = ("loss", "moves", "won", "cleared", "duration"),
    threads: int = 0,
) -> TrainResult:
    """`train.train` in a child process (``python -m drmario train``), with its loss curves redrawn
    every refresh_s seconds from metrics.csv while it runs. The child's output goes to
    run_dir/train.log. Interrupting stops the child; running again resumes from its last checkpoint.
    threads: torch's CPU threads in the child (0: its default, every core).

    Returns the TrainResult (``stopped`` says why training stopped early, e.g. a non-finite loss).
    Raises RuntimeError, with the end of the log, if the trainer fails otherwise.
    """
    from dataclasses import replace

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
    view = _LiveCurves(run_dir, cfg.steps, terms)
    cmd = [sys.executable, "-m", "drmario", "train", str(run_dir), "--config", str(request), "--threads", str(threads)]
    with open(log_path, "a") as log:
        log.write(f"\n# {datetime.now(timezone.utc).isoformat(timespec='seconds')}: {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env())
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

AGENTS = ("random", "greedy", "mcts-round0", "net-policy", "net+mcts")


def make_agents(
    names: Sequence[str], player: Player | None, round0: SearchConfig, network_search: SearchConfig
) -> list[Agent]:
    """The arena's agents by name (`AGENTS`): random, greedy, round-0 MCTS (no network), the
    network's move output alone, and the network with MCTS."""
    from .agents import GreedyAgent, PolicyAgent, RandomAgent, SearchAgent

    out: list[Agent] = []
    for name in names:
        if name in ("net-policy", "net+mcts") and player is None:
            raise ValueError(f"agent {name!r} needs a network")
        if name == "random":
            out.append(RandomAgent())
        elif name == "greedy":
            out.append(GreedyAgent())
        elif name == "mcts-round0":
            out.append(SearchAgent(round0, name=name))
        elif name == "net-policy":
            out.append(PolicyAgent(player, name=name))
        elif name == "net+mcts":
            out.append(SearchAgent(network_search, player, name=name))
        else:
            raise ValueError(f"unknown agent {name!r}: use {', '.join(AGENTS)}")
    return out


def played_positions(records: Iterable[GameRecord]) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """Every decision of the finished games, with what really followed it, counted as the training
    targets count them: cells uint8[N, 8, 16], pills uint8[N, 2], and a table (agent, game, seed,
    level, step, won, cleared, duration, move_r, move_x, move_y)."""
    import pandas as pd

    from .examples import won_target

    cells, pills, rows = [], [], []
    for rec in records:
        if rec.outcome is None:
            continue
        steps = list(rec.steps())
        later = np.cumsum([result.viruses_cleared for _, _, result in steps][::-1])[::-1]
        for i, (game, move, _) in enumerate(steps):
            cells.append(game.board.cells)
            pills.append((int(game.pill.left), int(game.pill.right)))
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
    if not rows:
        return np.zeros((0, 8, 16), np.uint8), np.zeros((0, 2), np.uint8), pd.DataFrame(rows)
    return np.stack(cells).astype(np.uint8), np.array(pills, np.uint8), pd.DataFrame(rows)


def record_positions(record: GameRecord) -> tuple[np.ndarray, np.ndarray]:
    """The positions of every decision of a game, finished or not: cells uint8[n, 8, 16], pills uint8[n, 2]."""
    cells = [game.board.cells for game, _, _ in record.steps()]
    pills = [(int(game.pill.left), int(game.pill.right)) for game, _, _ in record.steps()]
    return np.array(cells, np.uint8).reshape(-1, 8, 16), np.array(pills, np.uint8).reshape(-1, 2)


def predict(player: Player, cells: np.ndarray, pills: np.ndarray):
    """The network at these positions with its moves masked to the legal ones (`net.NetPrediction`)."""
    from . import kernels as K

    legal = np.zeros((len(cells), 4, K.WIDTH, K.HEIGHT), np.uint8)
    if len(cells):
        K.legal_masks_batch(np.ascontiguousarray(cells), np.ascontiguousarray(pills), legal)
    return player.evaluate(cells, pills, legal.astype(bool))


def network_errors(
    player: Player, cells: np.ndarray, pills: np.ndarray, table: pd.DataFrame
) -> tuple[pd.DataFrame, np.ndarray]:
    """The network's predictions at played positions beside what followed (`played_positions`),
    with each value term of the loss per position (err_won, err_cleared, err_duration and their
    sum err_value). Returns (table, moves float[N, 4, 8, 16] masked to legal moves)."""
    pred = predict(player, cells, pills)
    out = table.copy()
    out["pred_won"], out["pred_cleared"], out["pred_duration"] = pred.won, pred.cleared, pred.duration
    out["err_won"] = (out["pred_won"] - out["won"]) ** 2
    for term in ("cleared", "duration"):
        out[f"err_{term}"] = ((out[f"pred_{term}"] - out[term]) / out[term].clip(lower=1)) ** 2
    out["err_value"] = out["err_won"] + out["err_cleared"] + out["err_duration"]
    return out, pred.moves


def pick_games(games: Sequence[GameSpec], levels: Sequence[int] = (), per_level: int = 0) -> list[GameSpec]:
    """The games at levels (all if empty), at most per_level of each (all if 0), in file order."""
    kept: list[GameSpec] = []
    count: dict[int, int] = {}
    for g in games:
        if (not levels or g.level in levels) and (not per_level or count.get(g.level, 0) < per_level):
            kept.append(g)
            count[g.level] = count.get(g.level, 0) + 1
    return kept


def replay_with_search(
    agent: Agent, spec: GameSpec, *, base_seed: int = 0, stall_limit: int | None = 20, max_pills: int = 1000
) -> tuple[GameRecord, list[np.ndarray | None]]:
    """Play one game with agent (as the arena does, same seeds) and keep each decision's search
    target (None for agents without a search)."""
    from .agents import play_lockstep

    kept: dict[str, Any] = {}

    def keep(record: GameRecord, decisions: list) -> None:
        kept["record"], kept["targets"] = record, [d.target for d in decisions]

    play_lockstep(
        agent, [spec], lockstep=1, base_seed=base_seed, stall_limit=stall_limit, max_pills=max_pills, on_finish=keep
    )
    return kept["record"], kept["targets"]


def rounds_table(run_dir: str | Path) -> pd.DataFrame:
    """One row per self-play round found in run_dir: games, positions, wins, top outs, stalemates,
    viruses cleared, pills per virus, and the search that made it."""
    import pandas as pd

    from .selfplay import summary

    rows = []
    k = 0
    while (round_dir(run_dir, k) / "selfplay.json").exists():
        table = summary(round_dir(run_dir, k))
        settings = json.loads((round_dir(run_dir, k) / "selfplay.json").read_text())
        if not table.empty:
            row = table.loc["all"].to_dict()
            search = settings["search"]
            row["search"] = f"{search['mode']}, {search['simulations']} simulations"
            row["network"] = Path(settings["network"]).parent.parent.name if settings.get("network") else "-"
            rows.append({"round": k, **row})
        k += 1
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows).set_index("round")
    counts = [c for c in df.columns if c not in ("pills_per_virus", "search", "network")]
    return df.astype({c: int for c in counts})


def arena_by_round(run_dir: str | Path, agents: Sequence[str] = ("net-policy", "net+mcts")) -> pd.DataFrame:
    """The arena tables of every analysed round: the network agents once per round (named
    "<agent> r<k>"), the agents without a network from the first table that has them."""
    import pandas as pd

    frames, seen = [], set()
    k = 0
    while train_dir(run_dir, k).exists():
        path = analysis_dir(run_dir, k) / "arena.csv"
        if path.exists():
            df = pd.read_csv(path)
            mine = df["agent"].isin(agents)
            rounds = df[mine].assign(agent=df.loc[mine, "agent"] + f" r{k}")
            others = df[~mine & ~df["agent"].isin(seen)]
            seen.update(others["agent"])
            frames += [others, rounds]
        k += 1
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
