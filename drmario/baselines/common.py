"""What both baseline learners share: batched legal-move masks, game sampling, metrics.csv and
checkpoint helpers.

Moves are the 512 output slots of `drmario.encode` (flat ``r * 128 + x * 16 + y``); a same-colour
pill uses only the canonical r in {0, 1} (rules.md section 3), so its slots r = 2, 3 stay masked.
The 9 pills are indexed like `Pill.index`: ``3 * (left - 1) + (right - 1)``, colours red, yellow, blue.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numba import njit

from drmario.engine import kernels as K
from drmario.engine.level import TRAINING_SEEDS
from drmario.learn.net import CheckpointError, load_file

PILLS = np.array([(a, b) for a in (1, 2, 3) for b in (1, 2, 3)], np.uint8)  # uint8[9, 2] in Pill.index order
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
    return int(rng.choice(TRAINING_SEEDS)), int(levels[rng.integers(len(levels))])


# ------------------------------------------------------------------------------------------------
# Run files


def _fmt(v) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.6g}"
    return str(v)


class MetricsCSV:
    """metrics.csv with fixed columns; the first column is the step that resumption truncates by."""

    def __init__(self, path: Path, columns: Sequence[str]) -> None:
        self.path, self.columns = Path(path), tuple(columns)

    def append(self, row: dict) -> None:
        new = not self.path.exists() or self.path.stat().st_size == 0
        with open(self.path, "a") as f:
            if new:
                f.write(",".join(self.columns) + "\n")
            f.write(",".join(_fmt(row[c]) for c in self.columns) + "\n")

    def truncate(self, step: int) -> None:
        """Drop rows logged after step (written by a run that died before its next checkpoint)."""
        if not self.path.exists():
            return
        lines = self.path.read_text().splitlines(keepends=True)
        keep = lines[:1] + [ln for ln in lines[1:] if ln.strip() and int(ln.split(",", 1)[0]) <= step]
        if len(keep) != len(lines):
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text("".join(keep))
            os.replace(tmp, self.path)


def read_state(path: str | Path, kind: str) -> dict:
    """A baseline checkpoint dict (CPU tensors, weights only: no code runs). CheckpointError names
    the file if it is damaged or holds something else than a `kind` ("dqn" or "td") checkpoint."""
    state = load_file(path)
    found = state.get("kind") if isinstance(state, dict) else type(state).__name__
    if found != kind:
        raise CheckpointError(f"checkpoint {path} is not a {kind} baseline checkpoint (kind: {found!r})")
    return state


def check_resume(saved: dict, config: dict, path: Path, resumable: set[str]) -> None:
    """A run continues only with the settings it was made with, apart from `resumable` ones (the
    budget, logging, device); anything else would not give the run an uninterrupted one gives."""
    changed = sorted(k for k, v in config.items() if k not in resumable and saved.get(k) != v)
    if changed:
        diff = ", ".join(f"{k}: {saved.get(k)!r} -> {config[k]!r}" for k in changed)
        raise CheckpointError(f"checkpoint {path} was made with other settings ({diff}); use another run_dir")


def prune(ckpt_dir: Path, keep: int) -> None:
    """Keep the newest `keep` step-*.pt files (0: all)."""
    if keep:
        for old in sorted(ckpt_dir.glob("step-*.pt"))[:-keep]:
            old.unlink()
