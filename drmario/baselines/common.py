"""What both baseline learners share: batched legal-move masks, game sampling, the settings checks,
and the run directory (config.json, metrics.csv, checkpoints) with its metrics window.

Moves are the 512 output slots of `drmario.encode` (flat ``r * 128 + x * 16 + y``); a same-colour
pill uses only the canonical r in {0, 1} (RULES.md), so its slots r = 2, 3 stay masked.
The 9 pills are indexed like `Pill.number`: ``3 * (left - 1) + (right - 1)``, colours red, yellow, blue.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from numba import njit

from drmario.engine import kernels as K
from drmario.engine.game import Game, Outcome
from drmario.engine.level import TRAINING_SEEDS
from drmario.files import MetricsCSV, write_atomic
from drmario.learn.checkpoint import CheckpointError, load_file, prune_steps, save_checkpoint
from drmario.progress import tqdm
from drmario.search.core import pill_probs_problems
from drmario.settings import Settings

PILLS = np.array([(a, b) for a in (1, 2, 3) for b in (1, 2, 3)], np.uint8)  # uint8[9, 2] in Pill.number order
SLOTS = 4 * K.WIDTH * K.HEIGHT  # 512


@njit(cache=True)
def legal_slots(cells, pills, out):
    """Canonical legal moves as flat slots: cells uint8[N, 8, 16], pills uint8[N, 2] -> out uint8[N, 512]."""
    moves = np.empty((K.MAX_MOVES, 3), np.int8)
    out[:] = 0
    for i in range(cells.shape[0]):
        n = K.legal_moves_into(cells[i], pills[i, 0], pills[i, 1], moves)
        for j in range(n):
            out[i, (moves[j, 0] * K.WIDTH + moves[j, 1]) * K.HEIGHT + moves[j, 2]] = 1


@njit(cache=True)
def legal_slots_all_pills(cells, out):
    """Canonical legal moves of each of the 9 pills: cells uint8[N, 8, 16] -> out uint8[N, 9, 512].

    Reachability does not depend on colours, so the resting states are searched once per board and
    only the same-colour pills (r and r + 2 merged into r) differ."""
    rest = np.empty((4, K.WIDTH, K.HEIGHT), np.uint8)
    plane = K.WIDTH * K.HEIGHT
    out[:] = 0
    for i in range(cells.shape[0]):
        if K.resting_states(cells[i], rest) == 0:
            continue
        flat = rest.ravel()
        for p in range(9):
            if p % 4 == 0:  # pills 0, 4, 8 are red-red, yellow-yellow, blue-blue
                for s in range(2 * plane):
                    out[i, p, s] = flat[s] | flat[s + 2 * plane]
            else:
                out[i, p, :] = flat


def slot_move(slot: int) -> tuple[int, int, int]:
    """Flat slot r * 128 + x * 16 + y -> (r, x, y)."""
    r, rest = divmod(int(slot), K.WIDTH * K.HEIGHT)
    return r, rest // K.HEIGHT, rest % K.HEIGHT


def draw_game(rng: np.random.Generator, levels: Sequence[int]) -> tuple[int, int]:
    """A training game (seed, level): a uniform NES seed and a uniform level from levels."""
    return int(rng.choice(TRAINING_SEEDS)), int(levels[int(rng.integers(len(levels)))])


# ------------------------------------------------------------------------------------------------
# Settings and run files


def config_problems(levels: Sequence[int], pill_probs: Sequence[float] | None) -> list[str]:
    """The checks both learners' settings share: a level to draw from, and valid pill probabilities."""
    problems = pill_probs_problems(pill_probs)
    if not levels:
        problems.append("levels = (): expected at least one level")
    return problems


def read_state(path: str | Path, kind: str) -> dict:
    """A baseline checkpoint dict (CPU tensors, weights only: no code runs). CheckpointError names
    the file if it is damaged or holds something else than a `kind` ("dqn" or "td") checkpoint."""
    state = load_file(path)
    found = state.get("kind") if isinstance(state, dict) else type(state).__name__
    if not isinstance(state, dict) or found != kind:
        raise CheckpointError(f"checkpoint {path} is not a {kind} baseline checkpoint (kind: {found!r})")
    return state


def check_resume(saved: dict, config: dict, path: Path, resumable: set[str]) -> None:
    """A run continues only with the settings it was made with, apart from `resumable` ones (the
    budget, logging, device); anything else would not give the run an uninterrupted one gives."""
    changed = sorted(k for k, v in config.items() if k not in resumable and saved.get(k) != v)
    if changed:
        diff = ", ".join(f"{k}: {saved.get(k)!r} -> {config[k]!r}" for k in changed)
        raise CheckpointError(
            f"checkpoint {path} was made with other settings ({diff}): resume it with the settings it was made with, "
            f"or train in another run directory (or delete {path.parent.parent} to train afresh there)"
        )


class RunFiles:
    """A baseline run directory: config.json, metrics.csv (floats to 6 digits) and
    checkpoints/{latest,step-N}.pt, with `kind` ("dqn" or "td") written into every checkpoint."""

    def __init__(
        self, run_dir: str | Path, kind: str, config: Settings, columns: Sequence[str], resumable: set[str]
    ) -> None:
        self.run_dir, self.kind, self.config, self.resumable = Path(run_dir), kind, config, resumable
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        self.latest = self.ckpt_dir / "latest.pt"
        self.metrics = MetricsCSV(self.run_dir / "metrics.csv", columns, digits=6)

    def resume(self) -> dict | None:
        """The state of latest.pt (made with the same settings but `resumable` ones), or None for a
        new run."""
        if not self.latest.exists():
            return None
        state = read_state(self.latest, self.kind)
        check_resume(state["config"], self.config.to_dict(), self.latest, self.resumable)
        return state

    def start(self, step: int) -> None:
        """Begin (or continue from `step`): drop the rows logged after it, write config.json."""
        self.metrics.truncate(step)
        write_atomic(self.run_dir / "config.json", json.dumps(self.config.to_dict(), indent=2) + "\n")

    def checkpoint(self, agent: dict, more: dict, keep: int) -> Path:
        """Write step-N.pt (agent: what playing needs, with its "step") and latest.pt (agent and
        more: what resuming needs), keeping `keep` step files (0: all). Returns latest.pt."""
        agent = {"kind": self.kind, **agent}
        save_checkpoint(self.ckpt_dir / f"step-{agent['step']:08d}.pt", agent)
        prune_steps(self.ckpt_dir, keep)
        return save_checkpoint(self.latest, agent | more)

    def existing(self) -> Path | None:
        """latest.pt if there is one."""
        return self.latest if self.latest.exists() else None


N = TypeVar("N", bound=torch.nn.Module)
C = TypeVar("C", bound=Settings)


def load_baseline_net(
    path: str | Path, kind: str, config_type: type[C], make: Callable[[C], N], key: str
) -> tuple[N, C]:
    """The network of a baseline checkpoint: its settings (config_type), the network make(settings)
    builds for them, and the weights at `key`. CheckpointError if the weights do not fit."""
    state = read_state(path, kind)
    cfg = config_type.from_dict(state["config"])
    net = make(cfg)
    try:
        net.load_state_dict(state[key])
    except RuntimeError as e:
        raise CheckpointError(f"checkpoint {path}: weights do not fit its configuration: {e}") from e
    return net, cfg


class TrainingRun:
    """What a DQN or a TD run in progress shares: its run files, the seeded RNGs (torch's global one
    and `rng`) and its clock. Subclasses add the networks, restore them from `files.resume()`, then
    call `start`."""

    def __init__(
        self, run_dir: str | Path, kind: str, config: Settings, seed: int, columns: Sequence[str], resumable: set[str]
    ) -> None:
        self.files = RunFiles(run_dir, kind, config, columns, resumable)
        torch.manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        self.t0 = time.perf_counter()
        self.step = self.games = 0  # (transitions or decisions), games finished

    def start(self, step: int, elapsed: float) -> None:
        """Begin at `step` with `elapsed` seconds already spent (a resumed run's)."""
        self.files.start(step)
        self.t0 = time.perf_counter() - elapsed

    def time_s(self) -> float:
        return time.perf_counter() - self.t0

    def write_row(self, win: Window, **columns: Any) -> dict:
        """Write the metrics.csv row about the window since the last one, with the columns both
        learners log (step, games, time_s, split, viruses_per_game, cleared_share, clear_rate) and
        `columns`. Returns it, in the file's column order."""
        _, viruses, share, clear_rate = win.game_means()
        shared: dict[str, Any] = {"step": self.step, "games": self.games, "time_s": round(self.time_s(), 3)}
        shared |= {"split": "train", "viruses_per_game": viruses, "cleared_share": share, "clear_rate": clear_rate}
        values = shared | columns
        row = {c: values[c] for c in self.files.metrics.columns}
        self.files.metrics.append(row)
        return row

    @staticmethod
    def finish(bar: tqdm, stopped: str | None) -> None:
        bar.close()
        if stopped:
            tqdm.write(stopped)


@dataclass
class RunResult:
    """What a baseline training run did (`train_dqn`, `train_td`)."""

    step: int  # transitions (DQN) or decisions (TD)
    games: int
    run_dir: Path
    metrics: Path
    checkpoint: Path | None  # latest.pt
    time_s: float
    stopped: str | None = None  # why training stopped early (a non-finite loss or value), or None
    last: dict = field(default_factory=dict)  # the last metrics.csv row


@dataclass
class Window:
    """What happened since the last metrics.csv row."""

    step: int  # the step at its start
    updates: int = 0  # the updates done at its start (DQN)
    t: float = field(default_factory=time.perf_counter)
    losses: list = field(default_factory=list)  # per update: its loss (DQN: a tensor; TD: the squared error)
    q: list = field(default_factory=list)  # per update: the mean Q(s, a) of its batch (DQN)
    games: list[tuple[float, int, float, bool]] = field(default_factory=list)  # per game: reward, viruses, share, won
    positions: int = 0  # boards valued (TD)

    def seconds(self) -> float:
        return max(time.perf_counter() - self.t, 1e-9)

    def add_game(self, reward: float, game: Game) -> None:
        """Count a finished (or cut) game: its reward or outcome, viruses cleared, the share of its
        level's viruses they are (which, unlike the count, does not follow the level drawn), and won."""
        self.games.append((reward, game.viruses_cleared, game.cleared_share, game.outcome == Outcome.WON))

    def game_means(self) -> tuple[float, float, float, float]:
        """Over the games finished in the window: (mean reward or outcome, over the finite ones;
        viruses per game; share of the level's viruses cleared; share of wins), nan where there are
        none."""
        done = np.array(self.games, np.float64).reshape(-1, 4)
        nan = float("nan")
        reward = float(np.nanmean(done[:, 0])) if np.isfinite(done[:, 0]).any() else nan
        if not len(done):
            return reward, nan, nan, nan
        viruses, share, won = done[:, 1:].mean(axis=0)
        return reward, float(viruses), float(share), float(won)


def progress_bar(total: int, initial: int, desc: str, enabled: bool) -> tqdm:
    return tqdm(total=total, initial=initial, desc=desc, disable=not enabled, dynamic_ncols=True)


def next_multiple(step: int, every: int) -> int:
    """The first multiple of every after step."""
    return (step // every + 1) * every
